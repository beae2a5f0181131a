// bertscope explorer: plain JS, inline SVG and <canvas>; every number comes from this server's endpoints.
"use strict";

const $ = (sel) => document.querySelector(sel);
const state = { layers: null, info: null, attention: null, source: null, running: Promise.resolve() };
const PALETTE = ["#2563eb", "#dc2626", "#059669", "#d97706", "#7c3aed", "#db2777", "#0891b2", "#65a30d",
  "#9333ea", "#ea580c", "#0d9488", "#4f46e5"];
const SVGNS = "http://www.w3.org/2000/svg";

// ---------- talking to the service ----------
const KEY = "bertscope-key";
// The prompt for a refused key, shared by the calls it answers: the page sends several calls at once
// (exploreNow's four), and each 401 prompting for itself asked once per call and dropped a key that
// another call had just been given. `turn` counts prompts, so a call knows whether one came after it left.
const keyPrompt = { turn: 0, answer: Promise.resolve(null) };

// `retried`: this call was sent again with a key given after its 401 (a refused key is not asked for twice).
async function api(path, body, retried = false) {
  const headers = { "Content-Type": "application/json" };
  const key = sessionStorage.getItem(KEY);
  const turn = keyPrompt.turn;
  if (key) headers["X-API-Key"] = key;
  // "." + path: the page's own folder, so a service mounted under a prefix is asked there, not at the root
  const res = await fetch("." + path, body === undefined ? { headers } : { method: "POST", headers, body: JSON.stringify(body) });
  if (res.status === 401) {
    const stored = sessionStorage.getItem(KEY);
    // Only the key this call sent is dropped: a key stored since was never tried, so it is tried now.
    if (stored === key) sessionStorage.removeItem(KEY);
    else if (stored && !retried) return api(path, body, true);
    if (!retried) {
      // A prompt made after this call left answers it too; else this call asks, and later 401s wait on it.
      if (turn === keyPrompt.turn) {
        keyPrompt.turn += 1;
        const given = window.prompt(key ? "That API key was refused; this server's key:" : "This server needs an API key:");
        if (given) sessionStorage.setItem(KEY, given);
        keyPrompt.answer = Promise.resolve(given);
      }
      if (await keyPrompt.answer) return api(path, body, true);
      throw new Error(`${path}: this server wants the key it was started with (its --api-key); the next request asks for it again`);
    }
  }
  const data = await res.json().catch(() => ({}));
  if (!res.ok) {
    const msg = (data.error && data.error.message) || data.detail || res.statusText;
    throw new Error(`${path}: ${typeof msg === "string" ? msg : JSON.stringify(msg)}`);
  }
  return data;
}

function showError(err) {
  const box = $("#error");
  box.hidden = !err;
  box.textContent = err ? String(err.message || err) : "";
}

// ---------- small helpers ----------
function el(tag, attrs = {}, ...children) {
  const node = tag.startsWith("svg:") ? document.createElementNS(SVGNS, tag.slice(4)) : document.createElement(tag);
  for (const [k, v] of Object.entries(attrs)) {
    if (k === "text") node.textContent = v;
    else if (k.startsWith("on")) node.addEventListener(k.slice(2), v);
    else node.setAttribute(k, v);
  }
  for (const c of children) node.append(c);
  return node;
}
const svgEl = (tag, attrs, ...children) => el("svg:" + tag, attrs, ...children);

function diverging(v, scale) {
  // blue (negative) - white - red (positive), v in [-scale, scale]
  const t = Math.max(-1, Math.min(1, v / (scale || 1)));
  const a = Math.abs(t);
  const [r, g, b] = t >= 0 ? [220, 38, 38] : [37, 99, 235];
  const mix = (c) => Math.round(255 + (c - 255) * a);
  return `rgb(${mix(r)},${mix(g)},${mix(b)})`;
}

// A text past the model's limit is cut (the answer's n_dropped): the tab that shows it says so.
// `parts`: [what, tokens dropped] for each text the answer holds.
function noteCut(id, parts) {
  const cut = parts.filter(([, n]) => n > 0);
  const box = $(id);
  box.hidden = cut.length === 0;
  box.dataset.dropped = cut.reduce((sum, [, n]) => sum + n, 0);
  const limit = state.info ? ` of ${state.info.max_tokens} tokens` : "";
  const said = cut.map(([what, n]) => `${n} token${n === 1 ? "" : "s"} at the end of ${what}`).join(", ");
  box.textContent = cut.length ? `Cut at the model's limit${limit}, leaving out ${said}.` : "";
}

function fmt(x, digits = 4) { return x === null || x === undefined ? "–" : Number(x).toFixed(digits); }

// ---------- 1 · tokens ----------
async function showTokens(text, text2, pair) {
  const data = await api("/v2/tokenize", { inputs: [pair ? [text, text2] : text] });
  const toks = data.items[0].tokens;
  noteCut("#tokens-cut", [[pair ? "the pair" : "the text", data.items[0].n_dropped]]);
  const spans = $("#spans");
  spans.replaceChildren();
  const marks = [];
  let at = 0;
  // The service's offsets count code points (Python's str), JS strings UTF-16 units: an emoji or any
  // character past U+FFFF is two units, so slicing the string itself shifted every span after it.
  const chars = Array.from(text);
  const slice = (from, to) => chars.slice(from, to).join("");
  const content = toks.filter((t) => !t.special && t.sequence !== 1);
  content.forEach((t) => {
    if (t.start > at) spans.append(slice(at, t.start));
    const m = el("mark", { "data-word": t.word, class: `w${t.word % 2}`, text: slice(t.start, t.end) });
    spans.append(m);
    marks.push(m);
    at = Math.max(at, t.end);
  });
  if (at < chars.length) spans.append(slice(at));
  const body = $("#tokens tbody");
  body.replaceChildren();
  toks.forEach((t, i) => {
    const row = el("tr", { class: t.special ? "special" : "", title: "click: nearest static neighbours" },
      el("td", { text: i }), el("td", { class: "piece", text: t.token }), el("td", { class: "id", text: t.id }),
      el("td", { text: t.word === null ? "–" : t.word }),
      el("td", { text: t.special ? "–" : `${t.start}–${t.end}` }), el("td", { text: t.special ? "yes" : "" }),
      el("td", { class: "segment", text: t.token_type_id === undefined ? 0 : t.token_type_id }));
    const mark = t.special ? null : marks[content.indexOf(t)];
    row.addEventListener("mouseenter", () => mark && mark.classList.add("hot"));
    row.addEventListener("mouseleave", () => mark && mark.classList.remove("hot"));
    row.addEventListener("click", () => { $("#piece").value = t.token; switchTab("vocab"); neighbours(); });
    body.append(row);
  });
  const box = $("#batch-box");
  box.hidden = !text2 || pair;
  if (text2 && !pair) showBatch(await api("/explore/batch", { inputs: [text, text2] }));
}

function showBatch(b) {
  noteCut("#batch-cut", b.n_dropped.map((n, i) => [`text ${i + 1}`, n]));
  const table = $("#batch");
  table.replaceChildren();
  const ids = b.input_ids;
  const width = ids[0].length;
  const head = el("tr", {}, el("th", { text: "" }));
  for (let j = 0; j < width; j++) head.append(el("th", { text: j }));
  table.append(el("thead", {}, head));
  const body = el("tbody");
  ids.forEach((row, i) => {
    const pieces = el("tr", {}, el("th", { text: `text ${i + 1}` }));
    const mask = el("tr", { class: "mask" }, el("th", { text: "mask" }));
    row.forEach((id, j) => {
      const pad = b.attention_mask[i][j] === 0;
      pieces.append(el("td", { class: pad ? "pad" : "" }, el("div", { class: "piece", text: b.tokens[i][j] }),
        el("div", { class: "id", text: id })));
      mask.append(el("td", { class: pad ? "pad zero" : "one", text: b.attention_mask[i][j] }));
    });
    body.append(pieces, mask);
  });
  table.append(body);
}

// ---------- 2 · anatomy ----------
// The steps drawn, in order; `projected` is a projection before the LayerNorm, `encoder_input` what layer 0
// is compared with (the proof): ALBERT's and ELECTRA's projection (embedding_size to hidden_size) comes after
// the LayerNorm, folded in there, so it is drawn where it is not the LayerNorm's rows again.
const PARTS = [["word", "word"], ["position", "+ position"], ["token_type", "+ segment"], ["summed", "= sum"],
  ["projected", "projected"], ["normalized", "LayerNorm"], ["encoder_input", "projected (encoder input)"]];
const sameRows = (x, y) => x.length === y.length && x.every((row, i) => row.length === y[i].length
  && row.every((v, j) => v === y[i][j]));

function strip(values, scale) {
  const c = el("canvas", { width: values.length, height: 1, class: "strip" });
  const ctx = c.getContext("2d");
  values.forEach((v, i) => { ctx.fillStyle = diverging(v, scale); ctx.fillRect(i, 0, 1, 1); });
  return c;
}

async function showAnatomy(text) {
  const a = await api("/anatomy", { inputs: text });  // a string, or [A, B] for a pair
  const err = a.max_abs_error, holds = err <= a.proof_bound;  // the library's bound, not one of the page's
  noteCut("#anatomy-cut", [[Array.isArray(text) ? "the pair" : "the text", a.n_dropped]]);
  $("#proof").replaceChildren(
    el("b", { text: "Proof: " }),
    `rebuilding layer 0 from the parts gives the model's own layer 0 to within max |error| = `,
    el("code", { id: "rebuild-error", text: err.toExponential(2) }),
    el("span", { class: holds ? "ok" : "bad", text: holds ? "  ✓ equal" : "  ✗ differs" }),
    a.lacks.length ? `  (this family has no ${a.lacks.join(", ")})` : "",
    ...(a.notes || []).map((note) => el("div", { class: "note", text: note })));
  const parts = PARTS.filter(([k]) => a.steps[k]
    && !(k === "encoder_input" && a.steps.normalized && sameRows(a.steps[k], a.steps.normalized)));
  const table = $("#anatomy");
  table.replaceChildren();
  const head = el("tr", {}, el("th", { text: "piece" }), el("th", { text: "id" }), el("th", { text: "pos" }));
  parts.forEach(([, label]) => head.append(el("th", { text: label })));
  table.append(el("thead", {}, head));
  // one colour scale per part, so strips of a column compare with each other
  const scales = Object.fromEntries(parts.map(([k]) => {
    const all = a.steps[k].flat().map(Math.abs).sort((x, y) => x - y);
    return [k, all[Math.floor(all.length * 0.98)] || 1];
  }));
  const body = el("tbody");
  a.tokens.forEach((tok, i) => {
    const row = el("tr", {}, el("td", { class: "piece", text: tok }), el("td", { class: "id", text: a.ids[i] }),
      el("td", { class: "id", text: a.position_ids[i] }));
    parts.forEach(([k]) => {
      const v = a.steps[k][i];
      const norm = Math.sqrt(v.reduce((s, x) => s + x * x, 0));
      row.append(el("td", { title: `${k}: |v| = ${norm.toFixed(3)}` }, strip(v, scales[k]),
        el("div", { class: "norm", text: `|v| ${norm.toFixed(2)}` })));
    });
    body.append(row);
  });
  table.append(body);
}

// ---------- 3 · layers ----------
async function showLayers(text) {
  state.layers = await api("/explore/layers", { inputs: text });
  noteCut("#layers-cut", [["the text", state.layers.n_dropped]]);
  const slider = $("#layer");
  slider.max = state.layers.n_layers;
  if (Number(slider.value) > state.layers.n_layers) slider.value = state.layers.n_layers;
  drawLayer();
}

function drawLayer() {
  const L = state.layers;
  if (!L) return;
  const layer = Number($("#layer").value);
  $("#layer-label").textContent = layer === 0 ? "layer 0 (embedding output)" : `layer ${layer} of ${L.n_layers}`;
  drawHeatmap($("#heatmap"), L.tokens, L.cosines[layer], { "data-layer": layer });
  drawDrift(L, layer);
}

// A labelled square matrix of values in [-1, 1] (null: undefined, drawn grey); `marks` are set on the svg.
function drawHeatmap(svg, tokens, m, marks) {
  const n = tokens.length, cell = Math.max(30, Math.min(52, Math.floor(420 / n))), left = 80, top = 80;
  const size = left + n * cell + 10;
  svg.setAttribute("viewBox", `0 0 ${size} ${top + n * cell + 10}`);
  svg.setAttribute("width", size);
  svg.setAttribute("height", top + n * cell + 10);
  for (const [k, v] of Object.entries(marks)) svg.setAttribute(k, v);
  svg.replaceChildren();
  tokens.forEach((t, i) => {
    svg.append(svgEl("text", { x: left - 6, y: top + i * cell + cell / 2 + 4, "text-anchor": "end", class: "lbl", text: t }));
    svg.append(svgEl("text", { x: 0, y: 0, class: "lbl", "text-anchor": "start",
      transform: `translate(${left + i * cell + cell / 2 + 4},${top - 6}) rotate(-60)`, text: t }));
    m[i].forEach((v, j) => {
      const g = svgEl("g", {});
      g.append(svgEl("rect", { x: left + j * cell, y: top + i * cell, width: cell - 1, height: cell - 1,
        fill: v === null ? "#ddd" : diverging(v, 1), "data-value": v ?? "" },
        svgEl("title", { text: `${tokens[i]} · ${tokens[j]}: ${fmt(v)}` })));
      if (cell >= 30) g.append(svgEl("text", { x: left + j * cell + cell / 2, y: top + i * cell + cell / 2 + 4,
        "text-anchor": "middle", class: v > 0.6 ? "val light" : "val", text: v === null ? "–" : v.toFixed(2) }));
      svg.append(g);
    });
  });
}

async function showCka() {
  showError(null);
  const texts = sentenceLines();
  const note = $("#cka-note");
  if (texts.length < 4) { note.textContent = "CKA needs four or more sentences: write them in tab 4, one per line"; return; }
  note.textContent = "computing…";
  try {
    const r = await api("/v2/cka", { inputs: texts, level: "tokens" });
    drawHeatmap($("#cka"), r.layers_a.map(String), r.cka, { "data-rows": r.n_rows });
    note.textContent = `${r.n_rows} token rows from ${texts.length} sentences`;
  } catch (err) { note.textContent = ""; showError(err); }
}

function drawDrift(L, layer) {
  const svg = $("#drift");
  const W = 500, H = 340, left = 44, right = 110, top = 14, bottom = 36;
  svg.setAttribute("viewBox", `0 0 ${W} ${H}`);
  svg.setAttribute("width", W);
  svg.setAttribute("height", H);
  svg.replaceChildren();
  if (!L.to_static) {
    svg.append(svgEl("text", { x: 20, y: 40, text: "this family's static rows are narrower than its layers" }));
    return;
  }
  const x = (l) => left + (l / L.n_layers) * (W - left - right);
  const lo = Math.min(0, ...L.to_static.flat());
  const y = (v) => top + (1 - (v - lo) / (1 - lo)) * (H - top - bottom);
  for (let t = lo; t <= 1.0001; t += 0.25) {
    svg.append(svgEl("line", { x1: left, x2: W - right, y1: y(t), y2: y(t), class: "gridline" }));
    svg.append(svgEl("text", { x: left - 6, y: y(t) + 4, "text-anchor": "end", class: "tick", text: t.toFixed(2) }));
  }
  for (let l = 0; l <= L.n_layers; l++) {
    svg.append(svgEl("text", { x: x(l), y: H - bottom + 16, "text-anchor": "middle", class: "tick", text: l }));
  }
  svg.append(svgEl("text", { x: (left + W - right) / 2, y: H - 4, "text-anchor": "middle", class: "tick", text: "layer" }));
  svg.append(svgEl("line", { x1: x(layer), x2: x(layer), y1: top, y2: H - bottom, class: "marker" }));
  const ends = [];
  L.tokens.forEach((tok, i) => {
    const color = PALETTE[i % PALETTE.length];
    const pts = L.to_static.map((row, l) => `${x(l)},${y(row[i])}`).join(" ");
    svg.append(svgEl("polyline", { points: pts, fill: "none", stroke: color, "stroke-width": L.special[i] ? 1.2 : 2.2,
      "stroke-dasharray": L.special[i] ? "4 3" : "" }, svgEl("title", { text: tok })));
    svg.append(svgEl("circle", { cx: x(layer), cy: y(L.to_static[layer][i]), r: 3, fill: color }));
    ends.push({ tok, color, y: y(L.to_static[L.n_layers][i]) });
  });
  ends.sort((a, b) => a.y - b.y);
  let last = -Infinity;
  for (const e of ends) {  // keep end labels apart
    const yy = Math.max(e.y, last + 12);
    last = yy;
    svg.append(svgEl("text", { x: W - right + 6, y: yy + 4, class: "lbl", style: `fill:${e.color}`, text: e.tok }));
  }
}

// ---------- 4 · sentences ----------
function unitRows(vs) {
  return vs.map((v) => { const n = Math.sqrt(v.reduce((s, x) => s + x * x, 0)) || 1; return v.map((x) => x / n); });
}

function cosineMatrix(vs) {
  const u = unitRows(vs);
  return u.map((a) => u.map((b) => a.reduce((s, x, k) => s + x * b[k], 0)));
}

function matrixTable(id, title, names, m) {
  const table = el("table", { id, class: "grid cos" });
  const head = el("tr", {}, el("th", { text: "" }));
  names.forEach((_, j) => head.append(el("th", { text: `S${j + 1}` })));
  table.append(el("thead", {}, head));
  const body = el("tbody");
  m.forEach((row, i) => {
    const tr = el("tr", {}, el("th", { text: `S${i + 1}`, title: names[i] }));
    row.forEach((v, j) => tr.append(el("td", { "data-i": i, "data-j": j, "data-value": v,
      style: `background:${diverging(v, 1)}`, class: v > 0.6 ? "light" : "", text: fmt(v) })));
    body.append(tr);
  });
  table.append(body);
  return el("figure", {}, el("h3", { text: title }), table);
}

function sentenceOptions() {
  const opts = { pooling: $("#s-pooling").value, mask_special: $("#s-mask").checked };
  const layers = $("#s-layers").value;
  if (layers !== "") opts.layers = layers;
  return opts;
}

// The Sentences tab's non-empty lines (its comparison and the Layers tab's CKA read them).
function sentenceLines() {
  return $("#sentences").value.split("\n").map((s) => s.trim()).filter(Boolean);
}

async function compare() {
  showError(null);
  const names = sentenceLines();
  const box = $("#matrices");
  box.replaceChildren();
  $("#sentences-cut").hidden = true;  // a note of the last comparison says nothing of this one
  if (names.length < 2) { showError("write two or more sentences, one per line"); return; }
  try {
    const opts = sentenceOptions();
    const res = await api("/v2/embed", { inputs: names, ...opts });
    noteCut("#sentences-cut", res.n_dropped.map((n, i) => [`S${i + 1}`, n]));
    const legend = el("ol", { class: "legend" });
    names.forEach((s, i) => legend.append(el("li", { text: `S${i + 1}: ${s}` })));
    box.append(el("div", {}, legend));
    box.append(matrixTable("cosines", `cosine · ${describe(res.spec)}`, names, cosineMatrix(res.vectors)));
    const posts = (await api("/explore/posts")).posts;
    $("#posts-note").textContent = posts.length ? "" :
      "No post-processing (whitening, …) is loaded on this server; with one loaded its cosines appear here too.";
    for (const name of posts) {
      try {
        const w = await api("/v2/embed", { inputs: names, ...opts, post: name });
        box.append(matrixTable(`cosines-${name}`, `cosine after ${name}`, names, cosineMatrix(w.vectors)));
      } catch (err) {
        box.append(el("p", { class: "error", text: String(err.message) }));
      }
    }
  } catch (err) { showError(err); }
}

function describe(spec) {
  if (!spec) return "";
  const layers = Array.isArray(spec.layers) ? spec.layers.join(",") : spec.layers;
  return `layer${String(layers).match(/[,:]|all/) ? "s" : ""} ${layers}, ${spec.pooling}${spec.normalize ? ", normalised" : ""}`;
}

// ---------- 5 · vocabulary ----------
async function neighbours() {
  showError(null);
  const raw = $("#piece").value.trim();
  if (!raw) return;
  // "#2456" is an id; any other text a piece, digits too (the piece "2000" is no id 2000)
  const item = /^#\d+$/.test(raw) ? Number(raw.slice(1)) : raw;
  try {
    const r = (await api("/static", { inputs: [item], top_k: Number($("#k").value) })).items[0];
    $("#piece-info").textContent = `${r.token} · id ${r.id} · |row| = ${r.norm.toFixed(3)} · ${r.vector.length} dimensions`;
    const body = $("#vocab tbody");
    body.replaceChildren();
    r.neighbors.forEach((n, i) => body.append(el("tr", {}, el("td", { text: i + 1 }),
      el("td", { class: "piece", text: n.token }), el("td", { class: "id", text: n.id }),
      el("td", { text: fmt(n.score) }),
      el("td", {}, el("div", { class: "bar", style: `width:${Math.max(0, n.score) * 220}px` })))));
  } catch (err) { showError(err); }
}

// ---------- 6 · explain ----------
function fillLayerChoices(info) {
  const xl = $("#x-layers");
  xl.append(el("option", { value: "", text: "model default" }));
  for (let l = info.n_layers; l >= 0; l--) xl.append(el("option", { value: String(l), text: l === 0 ? "0 (embedding)" : String(l) }));
  const al = $("#a-layer");
  for (let l = info.n_layers; l >= 1; l--) al.append(el("option", { value: String(l), text: String(l) }));
}

async function explainPair() {
  showError(null);
  const a = $("#x-a").value.trim(), b = $("#x-b").value.trim();
  $("#explain-cut").hidden = true;
  if (!a || !b) { showError("write both texts"); return; }
  const body = { a, b, pooling: $("#x-pooling").value, mask_special: $("#x-mask").checked, top_k: 8 };
  if ($("#x-layers").value !== "") body.layers = $("#x-layers").value;
  try {
    const r = await api("/explain", body);
    state.explanation = r;
    noteCut("#explain-cut", [["A", r.n_dropped[0]], ["B", r.n_dropped[1]]]);
    $("#x-score").replaceChildren(el("b", { text: `cosine ${fmt(r.score)}` }), ` · ${r.method} · `,
      el("span", { id: "x-note", class: r.exact ? "ok" : "bad", text: r.note }));
    const svg = $("#x-map");
    if (r.contributions) drawContributions(svg, r); else svg.replaceChildren();
    svg.setAttribute("data-score", r.score);
    const top = $("#x-top tbody");
    top.replaceChildren();
    r.top_pairs.forEach((p) => top.append(el("tr", {}, el("td", { class: "piece", text: p.token_a }),
      el("td", { class: "piece", text: p.token_b }), el("td", { text: fmt(p.contribution) }),
      el("td", { text: r.score ? `${(100 * p.contribution / r.score).toFixed(1)}%` : "–" }))));
    const shares = $("#x-shares");
    shares.replaceChildren();
    [["A", r.tokens_a, r.share_a], ["B", r.tokens_b, r.share_b]].forEach(([name, toks, vals]) => {
      const scale = Math.max(...vals.map(Math.abs)) || 1;
      const row = el("div", { class: "share" });
      toks.forEach((t, i) => row.append(el("span", { style: `background:${diverging(vals[i], scale)}`,
        title: `${t}: ${fmt(vals[i])}`, text: t })));
      shares.append(el("figure", {}, el("h3", { text: r.exact ? `each token's share of the score · ${name}` :
        `[CLS] attention (not exact) · ${name}` }), row));
    });
    svg.closest("section").dataset.explained = `${r.score}`;
  } catch (err) { showError(err); }
}

function drawContributions(svg, r) {
  const n = r.tokens_a.length, m = r.tokens_b.length;
  const cell = Math.max(18, Math.min(44, Math.floor(460 / Math.max(n, m)))), left = 90, top = 80;
  const W = left + m * cell + 10, H = top + n * cell + 10;
  svg.setAttribute("viewBox", `0 0 ${W} ${H}`);
  svg.setAttribute("width", W);
  svg.setAttribute("height", H);
  svg.replaceChildren();
  const scale = Math.max(...r.contributions.flat().map(Math.abs)) || 1;
  r.tokens_a.forEach((t, i) => svg.append(svgEl("text", { x: left - 6, y: top + i * cell + cell / 2 + 4,
    "text-anchor": "end", class: "lbl", text: t })));
  r.tokens_b.forEach((t, j) => svg.append(svgEl("text", { x: 0, y: 0, class: "lbl",
    transform: `translate(${left + j * cell + cell / 2 + 4},${top - 6}) rotate(-60)`, text: t })));
  r.contributions.forEach((row, i) => row.forEach((v, j) => svg.append(svgEl("rect", { x: left + j * cell,
    y: top + i * cell, width: cell - 1, height: cell - 1, fill: diverging(v, scale), "data-value": v },
    svgEl("title", { text: `${r.tokens_a[i]} · ${r.tokens_b[j]}: ${v.toFixed(5)}` })))));
}

// ---------- 7 · attention (head view) ----------
function fillHeads(n) {
  const sel = $("#a-head");
  if (sel.options.length === n + 1) return;
  const keep = sel.value;
  sel.replaceChildren(el("option", { value: "mean", text: "mean of heads" }));
  for (let h = 0; h < n; h++) sel.append(el("option", { value: String(h), text: String(h) }));
  if (keep) sel.value = keep;
}

async function showAttention() {
  if (!state.source) return;
  const layer = Number($("#a-layer").value || -1), head = $("#a-head").value || "mean";
  const body = { inputs: state.source, layer };
  if (head === "mean") body.mean_heads = true; else body.head = Number(head);
  const r = await api("/attention", body);
  fillHeads(r.n_heads);
  noteCut("#attention-cut", [[Array.isArray(state.source) ? "the pair" : "the text", r.n_dropped]]);
  state.attention = { tokens: r.tokens, weights: r.attention, layer: r.layer, head, special: r.special };
  $("#a-label").textContent = `layer ${r.layer} of ${r.n_layers} · ${head === "mean" ? "mean of " + r.n_heads + " heads" : "head " + head} · ${r.tokens.length} tokens`;
  drawHeadView(null);
}

function drawHeadView(focus) {
  const A = state.attention;
  if (!A) return;
  const canvas = $("#attention");
  const n = A.tokens.length, row = 18, top = 10, colW = 150, gap = 260;
  const ratio = window.devicePixelRatio || 1;
  const W = colW * 2 + gap, H = top * 2 + n * row;
  canvas.width = W * ratio; canvas.height = H * ratio;
  canvas.style.width = `${W}px`; canvas.style.height = `${H}px`;
  const ctx = canvas.getContext("2d");
  ctx.scale(ratio, ratio);
  ctx.clearRect(0, 0, W, H);
  ctx.font = "13px ui-monospace, Menlo, Consolas, monospace";
  ctx.textBaseline = "middle";
  const y = (i) => top + i * row + row / 2;
  let lines = 0;
  ctx.lineWidth = 1.6;
  for (let i = 0; i < n; i++) {
    if (focus !== null && i !== focus) continue;
    for (let j = 0; j < n; j++) {
      const w = A.weights[i][j];
      if (w < 0.01) continue;  // invisible anyway; keeps a few hundred tokens fast
      ctx.strokeStyle = `rgba(37,99,235,${Math.min(1, w).toFixed(3)})`;
      ctx.beginPath();
      ctx.moveTo(colW, y(i));
      ctx.lineTo(colW + gap, y(j));
      ctx.stroke();
      lines++;
    }
  }
  A.tokens.forEach((t, i) => {
    ctx.fillStyle = A.special[i] ? "#7c3aed" : (focus === i ? "#2563eb" : "#1f2937");
    ctx.textAlign = "right";
    ctx.fillText(t, colW - 8, y(i));
    ctx.textAlign = "left";
    ctx.fillText(t, colW + gap + 8, y(i));
  });
  canvas.dataset.layer = A.layer;
  canvas.dataset.head = A.head;
  canvas.dataset.tokens = n;
  canvas.dataset.lines = lines;
  canvas.dataset.focus = focus === null ? "" : focus;
}

function attentionHover(event) {
  const A = state.attention;
  if (!A) return;
  const rect = event.target.getBoundingClientRect();
  const x = event.clientX - rect.left, i = Math.floor((event.clientY - rect.top - 10) / 18);
  const focus = x < 150 && i >= 0 && i < A.tokens.length ? i : null;
  if (String(focus === null ? "" : focus) !== event.target.dataset.focus) drawHeadView(focus);
}

// ---------- wiring ----------
function switchTab(name) {
  document.querySelectorAll("#tabs button").forEach((b) => b.classList.toggle("active", b.dataset.tab === name));
  document.querySelectorAll(".tab").forEach((s) => { s.hidden = s.id !== `tab-${name}`; });
}

// Runs one after another: a slower earlier run (the one at page load) never draws over a later one,
// and `data-ready` names exactly the inputs whose panels are all drawn.
function explore(event) {
  if (event) event.preventDefault();
  const text = $("#text").value.trim(), text2 = $("#text2").value.trim();
  const pair = $("#as-pair").checked && Boolean(text2);
  state.running = state.running.then(() => exploreNow(text, text2, pair));
  return state.running;
}

async function exploreNow(text, text2, pair) {
  delete document.body.dataset.ready;
  if (!text) { showError("write a sentence first"); return; }
  state.source = pair ? [text, text2] : text;
  showError(null);
  document.body.classList.add("busy");
  try {
    await Promise.all([showTokens(text, text2, pair), showAnatomy(state.source), showLayers(text), showAttention()]);
    document.body.dataset.ready = text2 ? `${text} | ${text2}` : text;
  } catch (err) { showError(err); }
  document.body.classList.remove("busy");
}

async function init() {
  document.querySelectorAll("#tabs button").forEach((b) => b.addEventListener("click", () => switchTab(b.dataset.tab)));
  $("#input").addEventListener("submit", explore);
  $("#layer").addEventListener("input", drawLayer);
  $("#compare").addEventListener("click", compare);
  $("#cka-go").addEventListener("click", showCka);
  $("#neighbours").addEventListener("click", neighbours);
  $("#piece").addEventListener("keydown", (e) => { if (e.key === "Enter") neighbours(); });
  $("#explain").addEventListener("click", explainPair);
  // a change of layer or head shows its error as every tab does, not as an uncaught page error
  const attentionChosen = async () => { showError(null); try { await showAttention(); } catch (err) { showError(err); } };
  $("#a-layer").addEventListener("change", attentionChosen);
  $("#a-head").addEventListener("change", attentionChosen);
  $("#attention").addEventListener("mousemove", attentionHover);
  $("#attention").addEventListener("mouseleave", () => drawHeadView(null));
  try {
    const info = await api("/v2/info");
    state.info = info;
    $("#model").textContent = `${info.model} · ${info.family || ""} · ${info.n_layers} layers · ` +
      `${info.hidden_size} wide · ${info.vocab_size ? info.vocab_size + " pieces" : ""}`;
    const sel = $("#s-layers");
    sel.append(el("option", { value: "", text: "model default" }));
    for (let l = info.n_layers; l >= 0; l--) sel.append(el("option", { value: String(l), text: l === 0 ? "0 (embedding)" : String(l) }));
    sel.append(el("option", { value: "all", text: "all (mean)" }));
    fillLayerChoices(info);
  } catch (err) { showError(err); }
  await Promise.all([explore(), neighbours()]);
}

init();
