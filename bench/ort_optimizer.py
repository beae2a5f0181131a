"""ONNX Runtime's offline transformer optimizer on the exact default's float32 graph: is a fused graph faster?

    HF_HUB_OFFLINE=1 .venv/bin/python bench/ort_optimizer.py [--rounds 7]

The bundled model's own float32 export (every hidden state out), through
`onnxruntime.transformers.optimizer.optimize_model` twice: with every BERT fusion but the fused
Attention (SkipLayerNormalization, BiasGelu), and with it. 300 news sentences in the engine's own batches,
the three sessions opened as bertscope opens its own (`open_session`), alternating rounds; prints the
fused ops, each graph's largest difference from the plain graph's hidden states, and the median time.
"""

from __future__ import annotations

import argparse
import sys
import tempfile
import time
from pathlib import Path

import numpy as np
from onnxruntime.transformers.fusion_options import FusionOptions
from onnxruntime.transformers.optimizer import optimize_model

sys.path.insert(0, str(Path(__file__).parent))

from batch_cuts import onnx_feeds
from bench_peers import corpora

import bertscope
from bertscope.backends.onnx import OnnxRunner, open_session
from bertscope.backends.quantize import op_counts

_SHOWN = ("SkipLayerNormalization", "BiasGelu", "Attention", "LayerNormalization", "Add")


def main() -> None:
    """Time the plain float32 graph against the optimizer's fused graphs, same batches."""
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--rounds", type=int, default=7)
    args = parser.parse_args()
    texts = corpora(["news"], {"news": 300})["news"]
    model = bertscope.load()
    runner = model.engine.runner
    assert isinstance(runner, OnnxRunner), "the exact default did not choose ONNX Runtime here"
    config = model.config
    feeds = onnx_feeds(model, texts, runner.input_names)
    sessions = {"plain": open_session(str(runner.path))}
    with tempfile.TemporaryDirectory() as tmp:
        for name, attention in (("fused, no Attention", False), ("fused with Attention", True)):
            options = FusionOptions("bert")
            options.enable_attention = attention
            fused = optimize_model(
                str(runner.path), model_type="bert", num_heads=config.num_attention_heads,
                hidden_size=config.hidden_size, optimization_options=options, opt_level=0,
            )  # fmt: skip
            path = Path(tmp) / f"{len(sessions)}.onnx"
            fused.save_model_to_file(str(path))
            counts = op_counts(path)
            print(f"{name}: " + ", ".join(f"{op} {counts.get(op, 0)}" for op in _SHOWN))
            sessions[name] = open_session(str(path))
    names = runner.output_names
    plain = [sessions["plain"].run(names, feed) for feed in feeds]
    for name, session in sessions.items():
        got = [session.run(names, feed) for feed in feeds]
        pairs = zip(plain, got, strict=True)
        worst = max(float(np.max(np.abs(a - b))) for r, g in pairs for a, b in zip(r, g, strict=True))
        print(f"{name}: largest difference from the plain graph's hidden states {worst:.2e}")
    times: dict[str, list[float]] = {name: [] for name in sessions}
    for _ in range(args.rounds + 1):  # the first round warms up
        for name, session in sessions.items():
            start = time.perf_counter()
            for feed in feeds:
                session.run(names, feed)
            times[name].append(time.perf_counter() - start)
    base = float(np.median(times["plain"][1:]))
    print(f"{len(texts)} news sentences, {len(feeds)} forwards, median of {args.rounds} rounds")
    for name in sessions:
        ms = float(np.median(times[name][1:]))
        print(f"{name:22s} {ms * 1000:6.1f} ms  {base / ms:.2f}x plain")


if __name__ == "__main__":
    main()
