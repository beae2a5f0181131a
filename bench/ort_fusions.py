"""ONNX Runtime's own fusions left out of bertscope's sessions (`backends.onnx.DISABLED_FUSIONS`): each
graph opened with every fusion ONNX Runtime has against opened as bertscope opens it, same batches.

    HF_HUB_OFFLINE=1 .venv/bin/python bench/ort_fusions.py [--ways default,int8,int8_fused] [--rounds 9]

For each way the bundled model's own export (the default's float32 graph, each int8 scheme's graph),
300 news sentences in the engine's own batches, both sessions in one process, alternating rounds; it
prints the median time of each and how many SkipLayerNormalization nodes each session runs.
"""

from __future__ import annotations

import argparse
import sys
import tempfile
import time
from pathlib import Path

import numpy as np
import onnxruntime as ort

sys.path.insert(0, str(Path(__file__).parent))

from batch_cuts import onnx_feeds
from bench_peers import corpora

import bertscope
from bertscope.backends.onnx import DISABLED_FUSIONS, OnnxRunner, open_session
from bertscope.backends.quantize import op_counts
from bertscope.core.cpu import cpu_threads


def main() -> None:
    """Time each way's graph with and without ONNX Runtime's fusions that bertscope leaves out."""
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument(
        "--ways", default="default,int8,int8_fused", help="comma list: default, int8, int8_fused"
    )
    parser.add_argument("--rounds", type=int, default=9)
    args = parser.parse_args()
    texts = corpora(["news"], {"news": 300})["news"]
    left_out = ", ".join(DISABLED_FUSIONS)
    print(f"left out: {left_out}; {len(texts)} news sentences; median of {args.rounds} rounds")
    for way in args.ways.split(","):
        model = bertscope.load(**({} if way == "default" else {"quantize": way}))
        runner = model.engine.runner
        assert isinstance(runner, OnnxRunner), f"{way} did not run on ONNX Runtime"
        feeds = onnx_feeds(model, texts, runner.input_names)
        with tempfile.TemporaryDirectory() as tmp:
            theirs, ours = Path(tmp) / "theirs.onnx", Path(tmp) / "ours.onnx"
            options = ort.SessionOptions()
            options.intra_op_num_threads = cpu_threads()
            options.graph_optimization_level = ort.GraphOptimizationLevel.ORT_ENABLE_ALL
            options.optimized_model_filepath = str(theirs)
            options.log_severity_level = 3
            sessions = {
                "every fusion": ort.InferenceSession(
                    str(runner.path), options, providers=["CPUExecutionProvider"]
                ),
                "bertscope's": open_session(str(runner.path), optimized_to=ours),
            }
            skip = {"every fusion": op_counts(theirs), "bertscope's": op_counts(ours)}
        times: dict[str, list[float]] = {name: [] for name in sessions}
        for _ in range(args.rounds + 1):  # the first round warms up
            for name, session in sessions.items():
                start = time.perf_counter()
                for feed in feeds:
                    session.run(runner.output_names, feed)
                times[name].append(time.perf_counter() - start)
        for name in sessions:
            ms = float(np.median(times[name][1:])) * 1000
            fused = skip[name]["SkipLayerNormalization"]
            print(f"{way:11s} {name:13s} {ms:6.1f} ms  ({fused} SkipLayerNormalization)")
        gain = np.median(times["every fusion"][1:]) / np.median(times["bertscope's"][1:])
        print(f"{way:11s} bertscope's sessions / every fusion: {gain:.2f}x")


if __name__ == "__main__":
    main()
