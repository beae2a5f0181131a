"""The CPU token budget (padded tokens per forward) against speed, for every CPU runtime.

Short texts are batched by length up to the budget (at least 16 rows, core/engine.py MIN_ROWS); long ones
are not affected. Each runtime embeds the same news sentences at each budget, in alternating rounds (best
of `--repeats` per round, median over rounds), so a budget is compared within one process and one load.

    HF_HUB_OFFLINE=1 .venv/bin/python bench/budget_sweep.py --texts 300 --rounds 2
    python3 bench/budget_sweep.py --model /tmp/gpu/model --texts-file /tmp/gpu/texts.txt --texts 600 \
        --runtimes "torch,openvino" --budgets 1024,2048,4096,8192      # a machine without gensim or the wheel
"""

from __future__ import annotations

import argparse
import os
import platform
import statistics
import time

from bench_engine import lee_documents, split_sentences

import bertscope
from bertscope.core.cpu import cpu_flags, cpu_name, cpu_threads

RUNTIMES = {
    "torch float32": {"backend": "torch"},
    "onnxruntime float32": {"backend": "onnxruntime"},
    "openvino float32": {"backend": "openvino"},
    "openvino bfloat16": {"backend": "openvino", "dtype": "bfloat16"},
    "openvino int8 static": {"backend": "openvino", "quantize": "int8_static"},
    "onnxruntime int8": {"quantize": "int8"},
}


def main() -> None:
    """Print texts/s per runtime and budget, and the best budget's ratio to 2048 (the old default)."""
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--texts", type=int, default=300)
    parser.add_argument("--rounds", type=int, default=2)
    parser.add_argument("--repeats", type=int, default=3)
    parser.add_argument("--budgets", default="512,1024,2048,4096")
    parser.add_argument("--model", default=None, help="a model folder (default: the bundled model)")
    parser.add_argument("--texts-file", default=None, help="one text per line (default: the Lee news)")
    parser.add_argument("--runtimes", default=None, help="comma list of name prefixes (default: all)")
    args = parser.parse_args()
    if args.texts_file:
        with open(args.texts_file, encoding="utf-8") as handle:
            texts = handle.read().splitlines()[: args.texts]
    else:
        texts = split_sentences(lee_documents())[: args.texts]
    prefixes = tuple(p.strip() for p in args.runtimes.split(",")) if args.runtimes else ("",)
    budgets = [int(b) for b in args.budgets.split(",")]
    flags = " ".join(f for f in sorted(cpu_flags()) if f.startswith(("avx2", "avx512", "avx_vnni", "amx")))
    print(f"# {cpu_name()} ({platform.machine()}), {os.cpu_count()} CPUs, flags: {flags}")
    load = os.getloadavg()[0]
    print(
        f"# load average {load:.2f}; {len(texts)} texts; {cpu_threads()} threads; "
        f"bertscope {bertscope.__version__}"
    )
    header = "runtime".ljust(42) + "".join(f"{b:>8}" for b in budgets) + "   best vs 2048"
    print(header)
    for name, options in RUNTIMES.items():
        if not name.startswith(prefixes):
            continue
        model = bertscope.load(args.model, device="cpu", **options)
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
