"""ONNX Runtime's CPU arena after one big batch: resident memory and small-batch speed, four ways.

The exact default on the bundled model runs an ONNX Runtime session whose CPU arena grows to the largest
batch it has run and, by default, keeps that peak for the life of the process. Each way below runs in a
fresh process: load, small batches (8 news sentences), one big call (64 texts of about 250 tokens, which
the engine runs as its biggest batches, 16 rows x 256 tokens), small batches again; RSS after each step.

    default     ONNX Runtime's default: every run without run options (the arena never shrinks)
    shrink      every run shrinks the arena at its end (`memory.enable_memory_arena_shrinkage` = "cpu:0")
    bertscope   the runner as bertscope ships it (backends/onnx.py `OnnxRunner`), its own run options
    no-arena    the session opened with `SessionOptions.enable_cpu_mem_arena = False`

Then one process times the four, each on its own session, in alternating rounds: small rounds alone, then
the big call followed by a small round; the median of each.

    HF_HUB_OFFLINE=1 .venv/bin/python bench/ort_arena.py
"""

from __future__ import annotations

import argparse
import importlib.util
import os
import platform
import resource
import statistics
import subprocess
import sys
import time
import warnings
from collections.abc import Callable
from pathlib import Path
from typing import Any

WAYS = ("default", "shrink", "bertscope", "no-arena")
SHRINK = ("memory.enable_memory_arena_shrinkage", "cpu:0")


def lee_documents() -> list[str]:
    """gensim's bundled lee_background.cor, read without importing gensim."""
    spec = importlib.util.find_spec("gensim")
    assert spec is not None and spec.origin is not None, "gensim (its bundled corpus) is needed"
    path = Path(spec.origin).parent / "test" / "test_data" / "lee_background.cor"
    return [
        line.strip()
        for line in path.read_text(encoding="utf-8", errors="replace").splitlines()
        if line.strip()
    ]


def texts() -> tuple[list[str], list[str]]:
    """(72 short sentences, 64 long texts of about 230 to 256 tokens: a document's first 200 words)."""
    docs = lee_documents()
    short = [s.strip() for d in docs for s in d.split(". ") if 6 <= len(s.split()) <= 30][:72]
    long = [" ".join(d.split()[:200]) for d in docs if len(d.split()) >= 200][:64]
    return short, long


def rss_mib() -> float:
    """This process's resident set size in MiB (/proc/self/statm)."""
    with open("/proc/self/statm") as f:
        return int(f.read().split()[1]) * os.sysconf("SC_PAGE_SIZE") / 2**20


class _Session:
    """An ONNX Runtime session whose runs all get `options` (None: ONNX Runtime's default)."""

    def __init__(self, session: Any, options: Any) -> None:
        self.session = session
        self.options = options

    def run(self, names: Any, feed: Any, run_options: Any = None) -> Any:
        return self.session.run(names, feed, self.options)

    def __getattr__(self, name: str) -> Any:
        return getattr(self.session, name)


def no_arena_session(path: Path) -> Any:
    """`open_session(path)` with the CPU arena disabled (ONNX Runtime's InferenceSession patched)."""
    import onnxruntime

    from bertscope.backends.onnx import open_session

    real = onnxruntime.InferenceSession

    def opened(model: Any, options: Any, **kwargs: Any) -> Any:
        options.enable_cpu_mem_arena = False
        return real(model, options, **kwargs)

    onnxruntime.InferenceSession = opened  # type: ignore[misc]
    try:
        return open_session(str(path))
    finally:
        onnxruntime.InferenceSession = real  # type: ignore[misc]


def set_way(model: Any, way: str, sessions: dict[str, Any]) -> None:
    """Make `model`'s runner run `way`, each way on its own session (and arena), made once into `sessions`."""
    import onnxruntime

    from bertscope.backends.onnx import open_session

    runner = model.engine.runner
    if not sessions:
        sessions["bertscope"] = runner.session
    if way not in sessions:
        if way == "no-arena":  # no run options: shrinking an arena that is not there is an error
            sessions[way] = _Session(no_arena_session(runner.path), None)
        elif way == "shrink":
            options = onnxruntime.RunOptions()
            options.add_run_config_entry(*SHRINK)
            sessions[way] = _Session(open_session(str(runner.path)), options)
        else:
            sessions[way] = _Session(open_session(str(runner.path)), None)
    runner.session = sessions[way]
    runner._grew = False  # the runner's own record of a big run belongs to the way that ran it


def small_round(model: Any, short: list[str]) -> None:
    """Eight embeds of 8 sentences and one of 1 (the idle_threads bench's loop)."""
    for i in range(0, 64, 8):
        model.embed(short[i : i + 8], progress=False)
    model.embed(short[64:65], progress=False)


def memory(way: str, rounds: int) -> None:
    """In this (fresh) process: RSS after each step of the way, one line."""
    import bertscope

    short, long = texts()
    model = bertscope.load()
    set_way(model, way, {})
    steps: list[tuple[str, float]] = []
    model.embed(short[:8], progress=False)
    steps.append(("loaded", rss_mib()))
    for _ in range(rounds):
        small_round(model, short)
    steps.append(("small", rss_mib()))
    model.embed(long, progress=False)
    steps.append(("big", rss_mib()))
    for _ in range(rounds):
        small_round(model, short)
    steps.append(("small again", rss_mib()))
    model.embed(long, progress=False)
    for _ in range(rounds):
        small_round(model, short)
    steps.append(("big + small", rss_mib()))
    shown = ", ".join(f"{name} {mib:.0f}" for name, mib in steps)
    print(f"{way:>9}: RSS MiB {shown}")


def timed(run: Callable[[], Any]) -> tuple[float, float, float]:
    """(wall seconds, this process's CPU seconds, minor page faults) of `run()`. CPU time shows less of
    other load on the machine; the page faults count the memory a shrunk arena takes back from the system."""
    wall, cpu, faults = time.perf_counter(), time.process_time(), resource.getrusage(resource.RUSAGE_SELF)
    run()
    after = resource.getrusage(resource.RUSAGE_SELF)
    return time.perf_counter() - wall, time.process_time() - cpu, after.ru_minflt - faults.ru_minflt


def speed(rounds: int) -> None:
    """In this process: each way's small rounds, then its big call followed by a small round (where the
    arena shrinks and grows back), in alternating rounds; the median of each."""
    import bertscope

    short, long = texts()
    model = bertscope.load()
    sessions: dict[str, Any] = {}
    small: dict[str, list[tuple[float, float, float]]] = {way: [] for way in WAYS}
    mixed: dict[str, list[tuple[float, float, float]]] = {way: [] for way in WAYS}
    for way in WAYS:  # warm every session
        set_way(model, way, sessions)
        small_round(model, short)
    for r in range(rounds):
        for way in WAYS[r % len(WAYS) :] + WAYS[: r % len(WAYS)]:  # each way first in turn
            set_way(model, way, sessions)
            small[way].append(timed(lambda: small_round(model, short)))
    for r in range(max(3, rounds // 3)):
        for way in WAYS[r % len(WAYS) :] + WAYS[: r % len(WAYS)]:
            set_way(model, way, sessions)
            mixed[way].append(timed(lambda: (model.embed(long, progress=False), small_round(model, short))))
    print(
        f"# medians of {rounds} small rounds and {len(mixed['default'])} big calls + small round: "
        "wall / CPU seconds, minor page faults"
    )
    for way in WAYS:
        shown = []
        for name, found in (("small round", small), ("big call + small round", mixed)):
            wall, cpu = (statistics.median(x[i] for x in found[way]) for i in (0, 1))
            base_wall, base_cpu = (statistics.median(x[i] for x in found["default"]) for i in (0, 1))
            faults = statistics.median(x[2] for x in found[way])
            shown.append(
                f"{name} {wall:.3f} s ({(wall / base_wall - 1) * 100:+.1f}%) / "
                f"{cpu:.3f} s ({(cpu / base_cpu - 1) * 100:+.1f}%), {faults / 1000:.1f}k faults"
            )
        print(f"{way:>9}: {'; '.join(shown)}")


def main() -> None:
    """Print the machine, each way's RSS line (a fresh process each) and the speed lines."""
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument(
        "--rounds", type=int, default=24, help="alternating small rounds (a third as many big ones)"
    )
    parser.add_argument("--small-rounds", type=int, default=3, help="small rounds between RSS readings")
    parser.add_argument("--memory", choices=WAYS, help=argparse.SUPPRESS)  # one way's child process
    parser.add_argument("--speed", action="store_true", help=argparse.SUPPRESS)
    args = parser.parse_args()
    warnings.simplefilter("ignore")  # the few long texts past 256 tokens are truncated, as meant
    if args.memory:
        memory(args.memory, args.small_rounds)
        return
    if args.speed:
        speed(args.rounds)
        return
    import onnxruntime

    from bertscope.core.cpu import cpu_flags, cpu_name

    short, long = texts()
    flags = " ".join(sorted(f for f in cpu_flags() if f.startswith(("avx512f", "avx512_vnni", "amx"))))
    print(f"# {cpu_name()} ({platform.machine()}), {os.cpu_count()} CPUs; flags: {flags or 'no avx512'}")
    print(
        f"# {time.strftime('%Y-%m-%d %H:%M UTC', time.gmtime())}; load {os.getloadavg()[0]:.2f}; "
        f"onnxruntime {onnxruntime.__version__}; small: {len(short)} sentences in rounds of 9 embeds; "
        f"big: {len(long)} texts of ~250 tokens"
    )
    env = {**os.environ, "HF_HUB_OFFLINE": "1"}
    me = [sys.executable, os.path.abspath(__file__)]
    for way in WAYS:
        subprocess.run([*me, "--memory", way, "--small-rounds", str(args.small_rounds)], env=env, check=True)
    subprocess.run([*me, "--speed", "--rounds", str(args.rounds)], env=env, check=True)
    print(f"# load {os.getloadavg()[0]:.2f} at the end")


if __name__ == "__main__":
    main()
