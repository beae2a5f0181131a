"""The syntax bench: structural probes and geometry on the full UD English EWT treebank.

Run from the repository root, with the treebank's files in bench/data/ (git-ignored; see
docs/layers-hold.md) and all-mpnet-base-v2 fetched by bench/get_mpnet.py:

    python bench/bench_syntax.py [--only NAME ...] [--epochs 3]

Each run is one `bertscope` command, printed before it runs; its table goes to stdout, and after it a
line with its wall time, its peak memory (the largest child's maximum RSS) and the load average before
and after: other processes on the machine slow the figures, so the load is recorded beside each.
"""

from __future__ import annotations

import argparse
import os
import resource
import shlex
import subprocess
import sys
import time
from pathlib import Path

DATA = Path("bench/data")
TRAIN, DEV = DATA / "en_ewt-ud-train.conllu", DATA / "en_ewt-ud-dev.conllu"
DEV_TEXTS = DATA / "en_ewt-ud-dev.txt"
MPNET = "bench/.cache/models/all-mpnet-base-v2/all-mpnet-base-v2"


def runs(epochs: int) -> dict[str, list[str]]:
    """Name -> bertscope arguments, in the order they run."""
    held = ["-i", str(TRAIN), "--test", str(DEV), "--epochs", str(epochs)]
    return {
        "dev-speed": ["probe", "-i", str(DEV), "--task", "distance"],
        "minilm-distance": ["probe", *held, "--task", "distance"],
        "mpnet-distance": ["probe", *held, "--task", "distance", "-m", MPNET],
        "minilm-depth": ["probe", *held, "--task", "depth"],
        "mpnet-depth": ["probe", *held, "--task", "depth", "-m", MPNET],
        "minilm-geometry": ["geometry", "-i", str(DEV_TEXTS)],
        "mpnet-geometry": ["geometry", "-i", str(DEV_TEXTS), "-m", MPNET],
    }


def dev_texts() -> None:
    """bench/data/en_ewt-ud-dev.txt: the dev sentences' texts, one a line (geometry reads lines)."""
    marker = "# text = "
    lines = DEV.read_text(encoding="utf-8").splitlines()
    texts = [line[len(marker) :] for line in lines if line.startswith(marker)]
    DEV_TEXTS.write_text("\n".join(texts) + "\n", encoding="utf-8")


def main() -> None:
    """Run the asked runs (every run by default) and print each one's output and cost."""
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--only", nargs="*", help="run these only: " + ", ".join(runs(3)))
    parser.add_argument("--epochs", type=int, default=3)
    args = parser.parse_args()
    missing = [str(p) for p in (TRAIN, DEV) if not p.exists()]
    if missing:
        sys.exit(
            f"missing {', '.join(missing)}: put UD English EWT's files in bench/data/ (docs/layers-hold.md)"
        )
    dev_texts()
    env = {**os.environ, "HF_HUB_OFFLINE": "1", "COLUMNS": "100"}
    bertscope = str(Path(sys.executable).parent / "bertscope")
    for name, command in runs(args.epochs).items():
        if args.only and name not in args.only:
            continue
        print(f"$ bertscope {shlex.join(command)}", flush=True)
        before = os.getloadavg()
        start = time.perf_counter()
        subprocess.run([bertscope, *command], env=env, check=True, stderr=subprocess.DEVNULL)
        wall = time.perf_counter() - start
        peak = resource.getrusage(resource.RUSAGE_CHILDREN).ru_maxrss
        after = os.getloadavg()
        print(
            f"{name}: {wall:.1f} s wall, peak {peak / 1024:.0f} MB (largest child so far), "
            f"load {before[0]:.2f} -> {after[0]:.2f}",
            flush=True,
        )


if __name__ == "__main__":
    main()
