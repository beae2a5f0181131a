"""Two processes embedding at once on one machine, with ONNX Runtime's idle threads spinning (its default)
and sleeping (`OMP_WAIT_POLICY=PASSIVE`, which bertscope's sessions read as torch's OpenMP does), and one
process alone each way. Each process loads the exact default and embeds the same news sentences in
batches of 8 and of 1, `--rounds` times; the figure is each process's seconds for that loop.

    HF_HUB_OFFLINE=1 .venv/bin/python bench/idle_threads.py
"""

from __future__ import annotations

import argparse
import os
import platform
import subprocess
import sys
import time

import onnxruntime

from bertscope.core.cpu import cpu_flags, cpu_name

_ONE = r"""
import sys, time
import bertscope
from bench_engine import lee_documents, split_sentences
texts = split_sentences(lee_documents())[:72]
m = bertscope.load()
m.embed(texts[:8], progress=False)
start = time.perf_counter()
for _ in range(int(sys.argv[1])):
    for i in range(0, 64, 8):
        m.embed(texts[i : i + 8], progress=False)
    m.embed(texts[64:65], progress=False)
print(f"{time.perf_counter() - start:.2f}")
"""


def run(policy: str, processes: int, rounds: int) -> list[float]:
    """Each of `processes` processes' loop seconds, started together under `OMP_WAIT_POLICY=policy`."""
    env = {**os.environ, "OMP_WAIT_POLICY": policy, "HF_HUB_OFFLINE": "1"}
    here = os.path.dirname(os.path.abspath(__file__))
    started = [
        subprocess.Popen(
            [sys.executable, "-c", _ONE, str(rounds)], env=env, cwd=here, stdout=subprocess.PIPE, text=True
        )
        for _ in range(processes)
    ]
    return [float(p.communicate()[0].strip().splitlines()[-1]) for p in started]


def main() -> None:
    """Print one line per (policy, processes)."""
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--rounds", type=int, default=10, help="loops of 9 embeds per process")
    args = parser.parse_args()
    flags = " ".join(sorted(f for f in cpu_flags() if f.startswith(("avx", "amx"))))
    print(f"# {cpu_name()} ({platform.machine()}), {os.cpu_count()} CPUs; flags: {flags}")
    print(
        f"# {time.strftime('%Y-%m-%d %H:%M UTC', time.gmtime())}; load {os.getloadavg()[0]:.2f}; "
        f"onnxruntime {onnxruntime.__version__}; {args.rounds} rounds of 9 embeds (72 news sentences)"
    )
    for processes in (2, 1):
        for policy in ("ACTIVE", "PASSIVE"):
            seconds = run(policy, processes, args.rounds)
            shown = ", ".join(f"{s:.2f}" for s in seconds)
            at_once = "2 processes at once" if processes > 1 else "1 process alone"
            print(f"{at_once}, OMP_WAIT_POLICY={policy}: {shown} s")


if __name__ == "__main__":
    main()
