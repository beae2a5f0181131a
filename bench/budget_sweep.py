"""The CPU token budget (padded tokens per forward) against speed, for every CPU runtime.

Short texts are batched by length up to the budget (at least 16 rows, core/engine.py MIN_ROWS); long ones
are not affected. Each runtime embeds the same news sentences at each budget, in alternating rounds (best
of `--repeats` per round, median over rounds), so a budget is compared within one process and one load.

    HF_HUB_OFFLINE=1 .venv/bin/python bench/budget_sweep.py --texts 300 --rounds 2
"""

from __future__ import annotations

import argparse
import os
import platform
import statistics
import time

from bench_engine import lee_documents, split_sentences

import bertscope
from bertscope.backends.cpu import cpu_flags, cpu_name

RUNTIMES = {
    "torch float32": {"backend": "torch"},
    "onnxruntime float32 (exact default here)": {"backend": "onnxruntime"},
    "openvino float32": {"backend": "openvino"},
    "openvino bfloat16": {"backend": "openvino", "dtype": "bfloat16"},
    "onnxruntime int8": {"quantize": "int8"},
}


def main() -> None:
    """Print texts/s per runtime and budget, and the best budget's ratio to 2048 (the old default)."""
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--texts", type=int, default=300)
    parser.add_argument("--rounds", type=int, default=2)
    parser.add_argument("--repeats", type=int, default=3)
    parser.add_argument("--budgets", default="512,1024,2048,4096")
    args = parser.parse_args()
    texts = split_sentences(lee_documents())[: args.texts]
    budgets = [int(b) for b in args.budgets.split(",")]
    flags = " ".join(f for f in sorted(cpu_flags()) if f.startswith(("avx2", "avx512", "avx_vnni", "amx")))
    print(f"# {cpu_name()} ({platform.machine()}), {os.cpu_count()} CPUs, flags: {flags}")
    load = os.getloadavg()[0]
    print(f"# load average {load:.2f}; {len(texts)} news sentences; bertscope {bertscope.__version__}")
    header = "runtime".ljust(42) + "".join(f"{b:>8}" for b in budgets) + "   best vs 2048"
    print(header)
    for name, options in RUNTIMES.items():
        model = bertscope.load(device="cpu", **options)
        speeds: dict[int, list[float]] = {b: [] for b in budgets}
        for _ in range(args.rounds):
            for budget in budgets:
                model.engine.token_budget = budget
                model.embed(texts[:32])
                best = min(_timed(model, texts) for _ in range(args.repeats))
                speeds[budget].append(len(texts) / best)
        median = {b: statistics.median(v) for b, v in speeds.items()}
        top = max(median, key=median.__getitem__)
        ratio = median[top] / median[2048] if 2048 in median else float("nan")
        print(name.ljust(42) + "".join(f"{median[b]:8.0f}" for b in budgets) + f"   {top}: {ratio:.2f}x")


def _timed(model: bertscope.Model, texts: list[str]) -> float:
    start = time.perf_counter()
    model.embed(texts)
    return time.perf_counter() - start


if __name__ == "__main__":
    main()
