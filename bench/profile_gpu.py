"""Where bertscope's time goes when it embeds on a GPU: cProfile of one embed call after a warm-up.

    PYTHONPATH=src python3 bench/profile_gpu.py bench/gpu [--device cuda] [--dtype float16]

Reads the folder bench/bench_gpu.py --prepare wrote; prints wall time and the functions by own time.
"""

from __future__ import annotations

import argparse
import cProfile
import pstats
import time
from pathlib import Path


def main() -> None:
    """Profile one embed of the prepared texts."""
    import torch

    import bertscope

    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("folder", type=Path)
    parser.add_argument("--device", default="cuda")
    parser.add_argument("--dtype", default="float16")
    parser.add_argument("--limit", type=int, default=2400)
    args = parser.parse_args()
    texts = (args.folder / "texts.txt").read_text(encoding="utf-8").splitlines()[: args.limit]
    model = bertscope.load(str(args.folder / "model"), device=args.device, dtype=args.dtype, backend="torch")
    for _ in range(3):
        model.embed(texts, progress=False)
    sync = torch.cuda.synchronize if args.device.startswith("cuda") else (lambda: None)
    for _ in range(3):
        sync()
        start = time.perf_counter()
        model.embed(texts, progress=False)
        sync()
        print(f"embed {len(texts)} texts: {time.perf_counter() - start:.3f} s")
    profile = cProfile.Profile()
    profile.enable()
    model.embed(texts, progress=False)
    sync()
    profile.disable()
    pstats.Stats(profile).sort_stats("tottime").print_stats(22)


if __name__ == "__main__":
    main()
