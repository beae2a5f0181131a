"""Equivalence checks that need a GPU, for a session lent one: bertscope on CUDA against the plain
Hugging Face forward (`bertscope verify`'s reference, run on the CPU), and sentence vectors pooled on
the device against the same vectors pooled on the host (what `Engine.pools_on_device` replaced).

    PYTHONPATH=src python3 bench/gpu_checks.py bench/gpu              # on the GPU machine
    PYTHONPATH=src python3 bench/gpu_checks.py bench/gpu --device cpu # a dry run of the script here

Reads the folder `bench/bench_gpu.py --prepare` wrote. Prints one line per check (its largest absolute
difference, relative to the vectors' scale for the poolings) and exits 1 if any fails. CI has no GPU:
tests/test_device_pooling.py runs the device path on the CPU instead.
"""

from __future__ import annotations

import argparse
import sys
from pathlib import Path
from typing import Any

import numpy as np

TOLERANCE = 1e-5
LONG = " ".join(["The river bank flooded after the storm, and the town moved its market uphill."] * 40)


def hidden_states_gap(folder: Path, device: str, texts: list[str]) -> float:
    """Largest |bertscope - Hugging Face| over every hidden state of `texts`: bertscope float32 on
    `device` against `bertscope verify`'s reference (the plain Hugging Face forward, float32 on the CPU);
    infinite where verify reports a problem (a text tokenized otherwise, say)."""
    import torch

    import bertscope
    from bertscope.verify.reference import compare_to_reference

    torch.backends.cuda.matmul.allow_tf32 = False
    model = bertscope.load(str(folder / "model"), device=device, backend="torch")
    verification = compare_to_reference(model, texts)
    for problem in verification.problems:
        print(f"verify: {problem}")
    return float("inf") if verification.problems else max(layer.max_abs for layer in verification.layers)


def pooling_gaps(folder: Path, device: str, texts: list[str], dtype: str) -> dict[str, float]:
    """For each recipe, the largest |device-pooled - host-pooled| over the vectors' largest |value|."""
    import bertscope

    model = bertscope.load(str(folder / "model"), device=device, backend="torch", dtype=dtype)
    recipes: dict[str, dict[str, Any]] = {
        "mean": {}, "max": {"pooling": "max"}, "cls": {"pooling": "cls"},
        "mean_sqrt_len": {"pooling": "mean_sqrt_len", "normalize": False},
        "first_last_avg": {"pooling": "first_last_avg"},
        "layers 1,-1 mean": {"layers": "1,-1", "combine": "mean", "normalize": False},
        "layers 1,-1 concat": {"layers": "1,-1", "combine": "concat"},
        "long text windowed": {"long": "window"},
    }  # fmt: skip
    gaps = {}
    for name, options in recipes.items():
        vectors = []
        for on_device in (False, True):
            model.engine.device_pooling = on_device
            vectors.append(np.asarray(model.embed([*texts, LONG], progress=False, **options).vectors))
        model.engine.device_pooling = None
        host, pooled = vectors
        gaps[name] = float(np.abs(pooled - host).max() / max(float(np.abs(host).max()), 1e-12))
    return gaps


def late_chunking_gap(folder: Path, device: str) -> float:
    """Largest |device - CPU| of late-chunked sentence vectors of a book-length document (over
    LONG_TOKENS, so its windows run a few at a time and only unpooled chunks' rows are held), float32."""
    from transformers import AutoTokenizer

    import bertscope
    from bertscope.core.engine import LONG_TOKENS

    document = " ".join([LONG] * 8)
    pieces = len(AutoTokenizer.from_pretrained(folder / "model")(document)["input_ids"])
    assert pieces > LONG_TOKENS, f"the document must be book-length: {pieces} pieces"
    chunked = []
    for where in ("cpu", device):
        model = bertscope.load(str(folder / "model"), device=where, backend="torch")
        chunked.append(np.asarray(model.embed_chunks(document, chunks="sentence", progress=False).vectors))
    host, on_device = chunked
    return float(np.abs(on_device - host).max() / max(float(np.abs(host).max()), 1e-12))


def main() -> int:
    """Run every check; print each and exit 1 when one exceeds the tolerance."""
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("folder", type=Path)
    parser.add_argument("--device", default="cuda")
    parser.add_argument("--limit", type=int, default=64)
    args = parser.parse_args()
    texts = (args.folder / "texts.txt").read_text(encoding="utf-8").splitlines()[: args.limit]
    gap = hidden_states_gap(args.folder, args.device, texts)
    results = {"hidden states, float32, against Hugging Face (verify)": gap}
    results[f"late chunking of a book-length document, float32, {args.device} vs the CPU (relative)"] = (
        late_chunking_gap(args.folder, args.device)
    )
    dtypes = ("float32", "float16", "bfloat16") if args.device.startswith("cuda") else ("float32", "bfloat16")
    for dtype in dtypes:
        for name, gap in pooling_gaps(args.folder, args.device, texts, dtype).items():
            results[f"pooled on the device vs the host, {dtype}, {name} (relative)"] = gap
    failed = 0
    for name, gap in results.items():
        ok = gap <= TOLERANCE
        failed += not ok
        print(f"{'PASS' if ok else 'FAIL'}  {gap:.2e}  {name}")
    print(f"{len(results) - failed} of {len(results)} checks within {TOLERANCE:g} on {args.device}")
    return 1 if failed else 0


if __name__ == "__main__":
    sys.exit(main())
