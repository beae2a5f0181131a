"""OpenVINO's int8 schemes against each other, OpenVINO bfloat16 and ONNX Runtime's int8: speed and drift.

    HF_HUB_OFFLINE=1 .venv/bin/python bench/openvino_int8.py [--rounds 7] [--groups 32,64,128]

The bundled model. Speed: bench_peers' 300 news sentences in the engine's own batches, every way in one
process, alternating rounds (median), each forward fetching only the last hidden state, as `embed` does.
Drift: min and mean cosine of mean-pooled sentence vectors to ONNX Runtime float32 on the shipped
calibration sentences, the held-out ones and the news. The ways:

- `openvino int8 gN`: what `backend="openvino", quantize="int8"` runs (int8 weights, NNCF's weight
  compression) with OpenVINO quantizing each activation row per group of N channels as it runs; the
  engine's N is `DYNAMIC_GROUP`, the others are the same IR compiled with another group.
- `openvino int8 static`: what `quantize="int8_static"` runs (backends/openvino.py): NNCF's calibrated
  int8 at SmoothQuant 0.5, the feed-forward outputs with int8 weights and run-time scales.
- `old static`: what `quantize="int8"` ran before the run-time scales (NNCF's post-training int8,
  `ModelType.TRANSFORMER` with its default SmoothQuant, the feed-forward output matmuls left float),
  rebuilt here from the same recipe.
- `openvino bf16`, `onnxruntime int8`: the bfloat16 tier and ONNX Runtime's dynamic int8, as loaded.
- `openvino bf16 all`: the bfloat16 tier fetching every hidden state, as every forward did before
  `Engine.forward(layers=)`: OpenVINO kept and converted each from bfloat16.
"""

from __future__ import annotations

import argparse
import contextlib
import logging
import os
import sys
import time
import warnings
from collections.abc import Callable
from pathlib import Path

import numpy as np

sys.path.insert(0, str(Path(__file__).parent))

from batch_cuts import engine_batches
from bench_peers import corpora

import bertscope
from bertscope.backends import openvino as ov_backend
from bertscope.backends.onnx import runtime_feed
from bertscope.backends.quantize import calibration_texts, heldout_texts
from bertscope.core.tokens import pad_batch

Batch = tuple[np.ndarray, np.ndarray, np.ndarray]
Forward = Callable[[Batch], np.ndarray]

# the feed-forward output matmuls the static scheme left float (its recipe, as the engine had it)
FFN_OUTPUTS = (r".*/layer\.\d+/output/dense/MatMul", r".*/ffn/lin2/MatMul", r".*/ffn_output/MatMul")


def engine_feeds(model: bertscope.Model, texts: list[str]) -> list[Batch]:
    """(ids, type_ids, mask) of each batch the engine cuts for `texts`."""
    feeds = []
    for batch in engine_batches(model, texts):
        ids, mask = pad_batch([list(s.ids) for s in batch], model.engine.pad_id)
        type_ids, _ = pad_batch([list(s.token_type_ids) for s in batch], 0)
        feeds.append((ids, type_ids, mask))
    return feeds


def last_state(runner: Callable[..., tuple], deepest: int) -> Forward:
    """A forward through `runner` that fetches only the last hidden state."""
    return lambda batch: runner(*batch, deepest, [deepest])[deepest]


def pooled(hidden: np.ndarray, mask: np.ndarray) -> np.ndarray:
    """Unit mean-pooled sentence vectors."""
    weights = mask[..., None].astype(np.float32)
    vectors = (hidden * weights).sum(1) / weights.sum(1)
    return vectors / np.linalg.norm(vectors, axis=1, keepdims=True)


def static_int8(onnx_path: Path, calibration: list[Batch], token_types: bool) -> object:
    """The replaced scheme: NNCF's post-training int8 of the ONNX graph, calibrated on `calibration`."""
    import nncf
    import openvino as ov

    logging.getLogger("nncf").setLevel(logging.ERROR)
    feeds = [runtime_feed(ids, type_ids, mask, token_types) for ids, type_ids, mask in calibration]
    with warnings.catch_warnings(), contextlib.redirect_stdout(sys.stderr):
        warnings.simplefilter("ignore")
        return nncf.quantize(
            ov.Core().read_model(str(onnx_path)), nncf.Dataset(feeds),
            model_type=nncf.ModelType.TRANSFORMER, subset_size=len(feeds),
            ignored_scope=nncf.IgnoredScope(patterns=list(FFN_OUTPUTS), validate=False),
        )  # fmt: skip


def main() -> None:
    """Print drift and speed per way."""
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--rounds", type=int, default=7)
    parser.add_argument("--groups", default="32,64,128", help="comma list of activation group sizes")
    args = parser.parse_args()
    exact = bertscope.load(backend="onnxruntime")  # the float32 reference, whatever the exact default picks
    deepest = exact.n_layers
    sets = {
        "calibration": engine_feeds(exact, calibration_texts()),
        "held-out": engine_feeds(exact, heldout_texts()),
        "news": engine_feeds(exact, corpora(["news"], {"news": 300})["news"]),
    }
    reference = last_state(exact.engine.runner, deepest)  # type: ignore[arg-type]
    expected = {name: [pooled(reference(b), b[2]) for b in feeds] for name, feeds in sets.items()}

    ways: dict[str, Forward] = {}
    ov8 = bertscope.load(backend="openvino", quantize="int8")
    engine_runner = ov8.engine.runner
    assert isinstance(engine_runner, ov_backend.OpenVinoRunner)
    for group in [int(g) for g in args.groups.split(",")]:
        if group == ov_backend.DYNAMIC_GROUP:
            runner = engine_runner
        else:
            runner = ov_backend.OpenVinoRunner(
                engine_runner.ov_model,
                engine_runner.uses_token_types,
                "int8",
                threads=engine_runner.config["INFERENCE_NUM_THREADS"],
            )
            runner.config["DYNAMIC_QUANTIZATION_GROUP_SIZE"] = group
        ways[f"openvino int8 g{group}"] = last_state(runner, deepest)
    onnx_path = exact.engine.runner.path  # type: ignore[union-attr]
    token_types = engine_runner.uses_token_types
    static_model = static_int8(onnx_path, exact.calibration_batches(calibration_texts()), token_types)
    static = ov_backend.OpenVinoRunner(
        static_model, token_types, "int8", threads=engine_runner.config["INFERENCE_NUM_THREADS"]
    )
    static.config.pop("DYNAMIC_QUANTIZATION_GROUP_SIZE")
    ways["old static"] = last_state(static, deepest)
    static_runner = bertscope.load(backend="openvino", quantize="int8_static").engine.runner
    assert static_runner is not None
    ways["openvino int8 static"] = last_state(static_runner, deepest)
    bf16_runner = bertscope.load(backend="openvino", dtype="bfloat16").engine.runner
    assert bf16_runner is not None
    ways["openvino bf16"] = last_state(bf16_runner, deepest)
    ways["openvino bf16 all"] = lambda batch: bf16_runner(*batch, deepest)[deepest]
    ways["onnxruntime int8"] = last_state(bertscope.load(quantize="int8").engine.runner, deepest)  # type: ignore[arg-type]

    print(f"CPU: {os.cpu_count()} threads; engine's activation group: {ov_backend.DYNAMIC_GROUP}")
    print(f"{'way':22s}" + "".join(f"{name + ' min / mean':>26s}" for name in sets))
    for way, forward in ways.items():
        cells = []
        for name, feeds in sets.items():
            cos = np.concatenate(
                [(pooled(forward(b), b[2]) * e).sum(1) for b, e in zip(feeds, expected[name], strict=True)]
            )
            cells.append(f"{cos.min():.4f} / {cos.mean():.4f}")
        print(f"{way:22s}" + "".join(f"{c:>26s}" for c in cells))
    news = sets["news"]
    times: dict[str, list[float]] = {way: [] for way in ways}
    for _ in range(args.rounds + 1):  # the first round warms up
        for way, forward in ways.items():
            start = time.perf_counter()
            for batch in news:
                forward(batch)
            times[way].append(time.perf_counter() - start)
    texts = sum(len(b[0]) for b in news)
    bf16 = float(np.median(times["openvino bf16"][1:]))
    print(f"\nspeed on {texts} news sentences, median of {args.rounds} rounds")
    for way, seconds in times.items():
        median = float(np.median(seconds[1:]))
        print(
            f"{way:22s} {median * 1000:7.1f} ms  {texts / median:7.1f} texts/s  "
            f"{bf16 / median:5.2f}x openvino bf16"
        )


if __name__ == "__main__":
    main()
