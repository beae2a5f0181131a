"""The explorer page end to end: a real uvicorn on loopback, driven by Debian's Chromium via Playwright."""

from __future__ import annotations

import os
import shutil
import subprocess
import tempfile
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import httpx
import numpy as np
import pytest

import bertscope
from bertscope.server.explorer import layer_cosines
from test_server import serving

CHROMIUM = "/usr/bin/chromium"
FLAGS = [
    "--headless",
    "--no-sandbox",
    "--disable-gpu",
    "--disable-quic",
    "--no-first-run",
    "--disable-background-networking",
    "--disable-component-update",
    "--disable-sync",
]
TEXT = "I like eating bread"
PAIR = ["I like eating bread", "The banana bread was horrible"]


def _chromium() -> str | None:
    """Debian's Chromium, installed with apt when missing and we are root; None where it cannot be had."""
    if Path(CHROMIUM).exists():
        return CHROMIUM
    if os.geteuid() == 0 and shutil.which("apt-get"):
        for cmd in (["apt-get", "update", "-q"], ["apt-get", "install", "-y", "-q", "chromium"]):
            subprocess.run(cmd, capture_output=True, timeout=600, check=False)
    return CHROMIUM if Path(CHROMIUM).exists() else None


@pytest.fixture(scope="module")
def page(bundled: bertscope.Model) -> Iterator[tuple[Any, str]]:
    """A headless Chromium page and the base URL of the service on the bundled model."""
    playwright = pytest.importorskip("playwright.sync_api", reason="the dev extra installs playwright")
    exe = _chromium()
    if exe is None:
        pytest.skip(f"{CHROMIUM} is absent and could not be installed (apt-get install chromium needs root)")
    with (
        serving(bundled) as base,
        playwright.sync_playwright() as p,
        tempfile.TemporaryDirectory() as profile,
    ):
        context = p.chromium.launch_persistent_context(
            profile, executable_path=exe, args=FLAGS, viewport={"width": 1200, "height": 900}
        )
        # Generous: a wait only ends early when the page is wrong; a loaded CI machine is slow, not wrong.
        context.set_default_timeout(120_000)
        try:
            yield context.new_page(), base
        finally:
            context.close()


CKA_TEXTS = ["I like eating bread", "The bank raised its rates", "A storm hits the coast", "We sat by it"]


@pytest.mark.timeout(400)  # the module's server and browser start count too
def test_page_shows_tokens_layers_and_sentence_cosines(
    page: tuple[Any, str], bundled: bertscope.Model, tmp_path: Path
) -> None:
    pg, base = page
    errors: list[str] = []
    pg.on("pageerror", lambda e: errors.append(str(e)))
    pg.goto(base + "/")
    pg.fill("#text", TEXT)
    pg.fill("#text2", PAIR[1])
    pg.click("#go")
    # The page marks itself ready with both inputs once every panel of this run is drawn.
    pg.wait_for_selector(f"body[data-ready='{TEXT} | {PAIR[1]}']")

    # Tokens: "bread" is row 7852 of the vocabulary; the batch pads the shorter text with mask 0.
    row = pg.locator("#tokens tbody tr", has=pg.locator("td.piece", has_text="bread"))
    assert row.locator("td.id").inner_text() == "7852"
    assert pg.locator("#spans mark").count() == 4
    assert pg.locator("#batch tr.mask td.zero").count() == 1
    pg.screenshot(path=str(tmp_path / "tokens.png"), full_page=True)

    # Anatomy: one row per token and the proof's error, tiny.
    pg.click("[data-tab=anatomy]")
    assert pg.locator("#anatomy tbody tr").count() == 6
    assert float(pg.inner_text("#rebuild-error")) < 1e-4
    pg.screenshot(path=str(tmp_path / "anatomy.png"), full_page=True)

    # Layers: moving the slider redraws the heatmap with that layer's cosines.
    pg.click("[data-tab=layers]")
    before = pg.inner_html("#heatmap")
    pg.fill("#layer", "4")
    pg.wait_for_selector("#heatmap[data-layer='4']")
    assert pg.inner_html("#heatmap") != before
    shown = [float(v) for v in pg.eval_on_selector_all("#heatmap rect", "rs => rs.map(r => r.dataset.value)")]
    expected = np.asarray(layer_cosines(bundled, TEXT)["cosines"][4]).ravel()
    np.testing.assert_allclose(shown, expected, atol=1e-4)
    pg.screenshot(path=str(tmp_path / "layers.png"), full_page=True)

    # Layers: CKA between every two layers over the Sentences tab's lines is Model.cka's, cell by cell.
    pg.click("[data-tab=sentences]")
    pg.fill("#sentences", "\n".join(CKA_TEXTS[:3]))
    pg.click("[data-tab=layers]")
    pg.click("#cka-go")
    pg.wait_for_selector("#cka-note:has-text('four or more')")
    pg.click("[data-tab=sentences]")
    pg.fill("#sentences", "\n".join(CKA_TEXTS))
    pg.click("[data-tab=layers]")
    pg.click("#cka-go")
    pg.wait_for_selector("#cka[data-rows]")
    shown = [float(v) for v in pg.eval_on_selector_all("#cka rect", "rs => rs.map(r => r.dataset.value)")]
    result = bundled.cka(CKA_TEXTS, progress=False)
    assert int(pg.get_attribute("#cka", "data-rows") or 0) == result.n_rows
    np.testing.assert_allclose(shown, result.cka.ravel(), atol=1e-6)

    # Sentences: the page's cosine is the API's /similarity score for the same layer and pooling.
    pg.click("[data-tab=sentences]")
    pg.fill("#sentences", "\n".join(PAIR))
    pg.select_option("#s-layers", "4")
    pg.select_option("#s-pooling", "mean")
    pg.click("#compare")
    cell = pg.locator("#cosines td[data-i='0'][data-j='1']")
    shown_cos = float(cell.inner_text())
    body = {"source": PAIR[0], "sentences": [PAIR[1]], "layers": "4", "pooling": "mean"}
    api = httpx.post(base + "/v2/similarity", json=body, timeout=120).json()["scores"][0]
    assert abs(shown_cos - api) < 6e-5, (shown_cos, api)
    assert abs(float(cell.get_attribute("data-value")) - api) < 1e-5
    pg.screenshot(path=str(tmp_path / "sentences.png"), full_page=True)

    # Vocabulary: nearest static neighbours of a piece.
    pg.click("[data-tab=vocab]")
    pg.fill("#piece", "bread")
    pg.click("#neighbours")
    pg.wait_for_selector("#vocab tbody tr")
    assert pg.locator("#vocab tbody tr").count() == 15
    pg.screenshot(path=str(tmp_path / "vocab.png"), full_page=True)
    assert not errors, errors
    assert all((tmp_path / f"{n}.png").stat().st_size > 5000 for n in ("tokens", "layers", "sentences"))


LONG = " ".join(["bread"] * 600)  # 602 tokens: the bundled model keeps its first 256


def test_explore_routes_say_how_many_tokens_were_cut(bundled: bertscope.Model) -> None:
    from fastapi.testclient import TestClient

    from bertscope.server import create_app

    dropped = bundled.tokenize(LONG).n_dropped
    assert dropped == 602 - bundled.max_tokens
    with TestClient(create_app(bundled)) as client:
        layers = client.post("/explore/layers", json={"inputs": LONG}).json()
        batch = client.post("/explore/batch", json={"inputs": [LONG, TEXT]}).json()
        short = client.post("/explore/layers", json={"inputs": TEXT}).json()
    assert layers["n_dropped"] == dropped and len(layers["tokens"]) == bundled.max_tokens
    assert np.asarray(layers["cosines"]).shape == (7, bundled.max_tokens, bundled.max_tokens)
    assert batch["n_dropped"] == [dropped, 0] and len(batch["ids"][0]) == bundled.max_tokens
    assert short["n_dropped"] == 0 and short["tokens"] == bundled.tokenize(TEXT).tokens


def test_layer_cosines_are_those_of_every_hidden_state(bundled: bertscope.Model) -> None:
    hidden = bundled.hidden_states(TEXT)  # (L+1, tokens, d)
    units = hidden / np.linalg.norm(hidden, axis=2, keepdims=True)
    static = bundled.static(bundled.tokenize(TEXT).ids)
    found = layer_cosines(bundled, TEXT)
    np.testing.assert_allclose(found["cosines"], np.einsum("ltd,lsd->lts", units, units), atol=2e-5)
    to_static = np.einsum("ltd,td->lt", units, static / np.linalg.norm(static, axis=1, keepdims=True))
    np.testing.assert_allclose(found["to_static"], to_static, atol=2e-5)
    np.testing.assert_allclose(found["norms"], np.linalg.norm(hidden, axis=2), rtol=1e-4)


def test_explore_layers_of_a_model_with_a_default_prompt(bundled_path: Path, tmp_path: Path) -> None:
    """The rows follow the prompt (as the model's token vectors do); the tokens and static rows did not,
    and the cosines to the static rows failed on the shapes (a 500)."""
    from fastapi.testclient import TestClient

    from bertscope.server import create_app
    from prompted import with_prompts

    folder = with_prompts(bundled_path, tmp_path / "p", include_prompt=True, default="query")
    model = bertscope.load(folder, device="cpu")
    with TestClient(create_app(model)) as client:
        answer = client.post("/explore/layers", json={"inputs": TEXT})
    assert answer.status_code == 200, answer.text[:300]
    tokens = answer.json()["tokens"]
    assert tokens[:3] == ["[CLS]", "query", ":"] and len(answer.json()["cosines"][0]) == len(tokens)
    assert tokens == [t.tokens for t in model.embed_tokens(TEXT)][0]


@pytest.mark.timeout(400)
def test_page_says_where_a_text_was_cut(page: tuple[Any, str]) -> None:
    pg, _ = page
    errors: list[str] = []
    pg.on("pageerror", lambda e: errors.append(str(e)))
    # The bundled model cut at 24 tokens: the page draws every kept token in every panel, and at the
    # bundled 256 those drawings cost seconds; the cut is said by the same code at any limit.
    short = bertscope.load(device="cpu", max_tokens=24)
    cut = " ".join(["bread"] * 40)  # 42 tokens
    dropped = str(short.tokenize(cut).n_dropped)
    assert dropped == "18"
    with serving(short) as base:
        pg.goto(base + "/")
        pg.wait_for_selector(f"body[data-ready='{TEXT}']")
        _say_where_the_text_was_cut(pg, cut, dropped)
    assert not errors, errors


def _say_where_the_text_was_cut(pg: Any, cut: str, dropped: str) -> None:
    """The page's cut notes after a text of `dropped` tokens too many, then after one within the limit."""
    pg.fill("#text", cut)
    pg.fill("#text2", TEXT)
    pg.uncheck("#as-pair")
    pg.click("#go")
    pg.wait_for_selector(f"body[data-ready='{cut} | {TEXT}']")
    for box in ("#tokens-cut", "#batch-cut", "#anatomy-cut", "#layers-cut", "#attention-cut"):
        assert pg.get_attribute(box, "data-dropped") == dropped, box
        assert f"{dropped} tokens at the end of" in pg.text_content(box), box
    assert "text 1" in pg.text_content("#batch-cut") and "text 2" not in pg.text_content("#batch-cut")
    pg.fill("#text", TEXT)
    pg.fill("#text2", "")
    pg.click("#go")
    pg.wait_for_selector(f"body[data-ready='{TEXT}']")
    for box in ("#tokens-cut", "#anatomy-cut", "#layers-cut", "#attention-cut"):
        assert pg.get_attribute(box, "data-dropped") == "0" and pg.locator(box).is_hidden(), box


def test_explore_command_is_registered() -> None:
    from typer.testing import CliRunner

    from bertscope.cli import app
    from bertscope.cli.explore import free_port

    result = CliRunner().invoke(app, ["explore", "--help"])
    assert result.exit_code == 0 and "--no-open" in result.output
    assert 0 < free_port() < 65536


@pytest.mark.timeout(400)
def test_explain_and_attention_tabs_and_pairs(
    page: tuple[Any, str], bundled: bertscope.Model, tmp_path: Path
) -> None:
    pg, base = page
    errors: list[str] = []
    pg.on("pageerror", lambda e: errors.append(str(e)))
    pg.goto(base + "/")
    pg.wait_for_selector(f"body[data-ready='{TEXT}']")

    # Explain: the heatmap's cells are the library's contributions and add up to /similarity's score.
    a, b = "The cat sat on the mat.", "A dog lay on the rug."
    pg.click("[data-tab=explain]")
    pg.select_option("#x-pooling", "mean")
    pg.click("#explain")
    pg.wait_for_selector("#tab-explain[data-explained]")
    cells = [float(v) for v in pg.eval_on_selector_all("#x-map rect", "rs => rs.map(r => r.dataset.value)")]
    np.testing.assert_allclose(cells, bundled.explain(a, b, pooling="mean").contributions.ravel(), atol=1e-5)
    body = {"source": a, "sentences": [b], "pooling": "mean"}
    api = httpx.post(base + "/v2/similarity", json=body, timeout=120).json()["scores"][0]
    assert abs(sum(cells) - api) < 1e-5
    assert pg.locator("#x-top tbody tr").count() == 8
    pg.screenshot(path=str(tmp_path / "explain.png"), full_page=True)
    pg.select_option("#x-pooling", "cls")
    pg.click("#explain")
    pg.wait_for_function("() => document.querySelector('#x-note')?.textContent.includes('not an exact')")
    assert pg.locator("#x-map rect").count() == 0

    # Attention: the head view draws the chosen layer and head, equal to output_attentions.
    pg.click("[data-tab=attention]")
    pg.select_option("#a-layer", "3")
    pg.wait_for_selector("#attention[data-layer='3'][data-head='mean']")
    pg.select_option("#a-head", "2")
    pg.wait_for_selector("#attention[data-layer='3'][data-head='2']")
    shown = np.asarray(pg.evaluate("state.attention.weights"))
    np.testing.assert_allclose(shown, bundled.attentions(TEXT)[2, 2], atol=1e-5)
    assert int(pg.get_attribute("#attention", "data-lines")) > 0
    pg.screenshot(path=str(tmp_path / "attention.png"), full_page=True)

    # A few hundred tokens: the head view draws them all (the model keeps its first max_tokens).
    long_text = " ".join(["the storm hit the coast and the rain kept falling"] * 30)
    pg.evaluate("(t) => { state.source = t; return showAttention(); }", long_text)
    pg.wait_for_selector(f"#attention[data-tokens='{bundled.max_tokens}']")
    assert int(pg.get_attribute("#attention", "data-lines")) >= bundled.max_tokens

    # A pair: segment 1 on B in the tokens table, and the anatomy of the pair.
    pg.fill("#text", "How are you?")
    pg.fill("#text2", "Fine, thanks.")
    pg.check("#as-pair")
    pg.click("#go")
    pg.wait_for_selector("body[data-ready='How are you? | Fine, thanks.']")
    segments = pg.eval_on_selector_all("#tokens td.segment", "ts => ts.map(t => t.textContent)")
    expected = bundled.tokenize([("How are you?", "Fine, thanks.")])[0]
    assert segments == [str(t) for t in expected.token_type_ids] and "1" in segments
    assert pg.locator("#anatomy tbody tr").count() == len(expected)
    assert pg.get_attribute("#attention", "data-tokens") == str(len(expected))
    assert not errors, errors


def test_explore_layers_refuses_inputs_beside_text(bundled: bertscope.Model) -> None:
    from fastapi.testclient import TestClient

    from bertscope.server import create_app

    with TestClient(create_app(bundled)) as client:
        both = client.post("/explore/layers", json={"inputs": TEXT, "text": TEXT})
        assert both.status_code == 422 and both.json()["detail"].startswith('"inputs" and "text" both given')
        assert client.post("/explore/layers", json={"text": TEXT}).status_code == 200


@pytest.mark.timeout(400)
def test_the_page_reads_a_clicked_piece_its_errors_and_the_proof_bound(
    page: tuple[Any, str], bundled: bertscope.Model
) -> None:
    """Audit 17f: a clicked piece of digits ("2000") showed the neighbours of id 2000 ("to"); an error of a
    changed attention head was an uncaught page error; the anatomy's check used its own bound (1e-4)."""
    import json

    pg, base = page
    errors: list[str] = []
    pg.on("pageerror", lambda e: errors.append(str(e)))
    pg.goto(base + "/")
    text = "born in 2000"
    pg.fill("#text", text)
    pg.fill("#text2", "")
    pg.click("#go")
    pg.wait_for_selector(f"body[data-ready='{text}']")
    piece = bundled.tokenize(text)
    clicked = piece.ids[piece.tokens.index("2000")]
    assert clicked != 2000
    pg.locator("#tokens tbody tr", has=pg.locator("td.piece", has_text="2000")).click()
    pg.wait_for_function("() => document.querySelector('#piece-info').textContent.startsWith('2000 ')")
    assert f"id {clicked} " in pg.text_content("#piece-info")
    pg.fill("#piece", f"#{clicked}")  # an id typed as #id
    pg.click("#neighbours")
    pg.wait_for_selector(f"#piece-info:has-text('id {clicked} ')")

    def busy(route: Any) -> None:
        route.fulfill(status=503, content_type="application/json", body=json.dumps({"detail": "server busy"}))

    pg.route("**/attention", busy)
    pg.click("[data-tab=attention]")
    pg.select_option("#a-head", "1")
    pg.wait_for_selector("#error:has-text('server busy')")
    pg.unroute("**/attention")

    def near_miss(route: Any) -> None:
        answer = route.fetch().json()
        answer.update(max_abs_error=5e-5, proof_bound=1e-5)  # within the old 1e-4, past the library's bound
        route.fulfill(status=200, content_type="application/json", body=json.dumps(answer))

    pg.route("**/anatomy", near_miss)
    pg.click("#go")
    pg.wait_for_selector(f"body[data-ready='{text}']")
    pg.click("[data-tab=anatomy]")
    assert "differs" in pg.text_content("#proof")
    pg.unroute("**/anatomy")
    assert not errors, errors
