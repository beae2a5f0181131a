"""Early stop on ONNX Runtime: the layer before the last on the whole graph against the graph cut there, in
one process, and a service-like process's memory as it is asked for other depths.

`whole`: the process has the whole graph open (a `layers=-1` call opened it) and runs `layers=-2` on it, as
`OnnxRunner.whole_serves` has it do; `cut`: the same forward on the graph cut after that layer (cached
beside the export, `backends/cut_cache.py`). Rounds alternate the two. `--memory` instead embeds 16 texts
at each depth in `--depths` in turn in this process and prints its resident memory after each.

    HF_HUB_OFFLINE=1 .venv/bin/python bench/cut_graph.py --texts 600 --rounds 3
    HF_HUB_OFFLINE=1 .venv/bin/python bench/cut_graph.py --memory --depths=-1,-2,1,3

Both load the bundled model on ONNX Runtime float32 (`backend="onnxruntime"`), whichever runtime the exact
default would choose on this CPU.
"""

from __future__ import annotations

import argparse
import os
import platform
import time
from datetime import datetime, timezone
from pathlib import Path

import onnxruntime

import bertscope
from bertscope.backends.quantize import calibration_texts
from bertscope.core.cpu import cpu_flags, cpu_name


def rss_mb() -> int:
    """This process's resident memory now, in MB (VmRSS)."""
    for line in Path("/proc/self/status").read_text().splitlines():
        if line.startswith("VmRSS:"):
            return int(line.split()[1]) // 1024
    raise RuntimeError("no VmRSS in /proc/self/status (Linux only)")


def header() -> None:
    """The machine, its load and the versions, as every BENCHMARKS block starts."""
    flags = " ".join(sorted(f for f in cpu_flags() if f.startswith(("avx", "amx"))))
    print(f"# {cpu_name()} ({platform.machine()}), {os.cpu_count()} CPUs; flags: {flags}")
    when = datetime.now(timezone.utc).strftime("%Y-%m-%d %H:%M UTC")
    print(f"# {when}; load {os.getloadavg()[0]:.2f}; onnxruntime {onnxruntime.__version__}")


def whole_against_cut(n_texts: int, rounds: int) -> None:
    """Time `layers=-2` over `n_texts` calibration-length texts on the whole graph and on the cut one."""
    m = bertscope.load(backend="onnxruntime")  # the exact default's choice differs by CPU (OpenVINO on AMX)
    runner = m.engine.runner
    texts = (calibration_texts() * n_texts)[:n_texts]
    deepest = len(runner.output_names) - 2
    m.embed(texts[:8], layers="-1", progress=False)
    m.embed(texts[:8], layers="-2", progress=False)
    print(f"whole graph open, -1 and -2 run on it: {rss_mb()} MB")
    cut = runner._cut_session(deepest)
    runner._cut[deepest] = cut
    m.embed(texts[:8], layers="-2", progress=False)
    print(f"cut graph after hidden_{deepest} open too, run once: {rss_mb()} MB")
    for i in range(rounds):
        for way in ("whole", "cut"):
            if way == "whole":
                runner._cut.pop(deepest, None)  # whole_serves: the whole graph is open and no cut there is
            else:
                runner._cut[deepest] = cut
            start = time.perf_counter()
            m.embed(texts, layers="-2", progress=False)
            print(f"{i} {way} {time.perf_counter() - start:.2f} s")


def memory_by_depth(depths: list[str], n_texts: int) -> None:
    """Embed `n_texts` texts at each depth in turn and print the resident memory after each."""
    m = bertscope.load(backend="onnxruntime")
    texts = (calibration_texts() * n_texts)[:n_texts]
    print(f"loaded: {rss_mb()} MB")
    for depth in depths:
        m.embed(texts, layers=depth, progress=False)
        print(f"layers={depth}: {rss_mb()} MB")


def main() -> None:
    """Parse the arguments and run one of the two measurements."""
    raw = argparse.RawDescriptionHelpFormatter
    parser = argparse.ArgumentParser(description=__doc__, formatter_class=raw)
    parser.add_argument("--texts", type=int, default=600, help="texts per timed embed (default 600)")
    parser.add_argument("--rounds", type=int, default=3, help="alternating rounds (default 3)")
    parser.add_argument("--memory", action="store_true", help="memory by depth in one process instead")
    parser.add_argument("--depths", default="-1,-2,1,3", help="--memory's depths in turn (default -1,-2,1,3)")
    args = parser.parse_args()
    header()
    if args.memory:
        memory_by_depth(args.depths.split(","), 16)
    else:
        whole_against_cut(args.texts, args.rounds)


if __name__ == "__main__":
    main()
