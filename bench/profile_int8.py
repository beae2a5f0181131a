"""Where int8's time goes: ONNX Runtime's per-op profile of the float32 export and each int8 scheme's.

    python bench/profile_int8.py [--texts 64] [--threads 2]

Runs the calibration sentences through the float32 export and the int8 graph of each scheme
(backends/quantize.py: dynamic, fused, static) of the bundled model (the engine's padded batches) with
ONNX Runtime's profiler on, and prints each op type's share of the run time and its total. The profiler
times kernels by the wall clock: on a loaded machine a kernel's time includes the time its threads
waited for a core, so read the shares on a quiet one.
"""

from __future__ import annotations

import argparse
import json
import os
import tempfile
from collections import defaultdict
from pathlib import Path
from typing import Any

import numpy as np
import onnxruntime as ort
import torch

import bertscope
from bertscope.backends.onnx import DISABLED_FUSIONS
from bertscope.backends.quantize import SCHEMES, calibration_texts
from bertscope.backends.runtimes import use_onnxruntime


def kernel_events(
    path: Path, batches: list, outputs: list[str] | None, threads: int, passes: int = 1
) -> list[dict[str, Any]]:
    """ONNX Runtime's kernel events of `passes` passes over `batches` ((ids, type_ids, mask) each, asking
    `outputs`, None: the last), after one uncounted pass that warms the session (buffers, packed weights)."""
    options = ort.SessionOptions()
    options.enable_profiling = True
    options.profile_file_prefix = str(Path(tempfile.mkdtemp(prefix="bertscope-profile-")) / "ort")
    options.intra_op_num_threads = threads
    options.graph_optimization_level = ort.GraphOptimizationLevel.ORT_ENABLE_ALL
    # as bertscope opens its sessions (backends.onnx.open_session): all fusions but DISABLED_FUSIONS
    session = ort.InferenceSession(
        str(path), options, providers=["CPUExecutionProvider"], disabled_optimizers=list(DISABLED_FUSIONS)
    )
    names = {i.name for i in session.get_inputs()}
    feeds = []
    for ids, type_ids, mask in batches:
        feed = {"input_ids": ids, "attention_mask": mask, "token_type_ids": type_ids}
        feeds.append({k: v.astype(np.int64, copy=False) for k, v in feed.items() if k in names})
    outputs = outputs or [session.get_outputs()[-1].name]
    for _ in range(1 + passes):
        for feed in feeds:
            session.run(outputs, feed)
    events = json.loads(Path(session.end_profiling()).read_text())
    runs = sorted(e["ts"] for e in events if e.get("name") == "model_run")
    first = runs[-passes * len(feeds)]  # the counted passes' runs, after the warm one's
    return [
        e
        for e in events
        if e.get("cat") == "Node" and e["name"].endswith("_kernel_time") and e["ts"] >= first
    ]


def profile(path: Path, batches: list, threads: int) -> dict[str, float]:
    """op type -> microseconds over all batches (ONNX Runtime's profiler, node events only)."""
    by_op: dict[str, float] = defaultdict(float)
    for event in kernel_events(path, batches, None, threads):
        by_op[event["args"]["op_name"]] += event["dur"]
    return dict(by_op)


def main() -> None:
    """Profile float32 and int8; print per-op totals."""
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--texts", type=int, default=64)
    parser.add_argument("--threads", type=int, default=os.cpu_count() or 1)
    args = parser.parse_args()
    torch.set_num_threads(args.threads)
    texts = calibration_texts()[: args.texts]
    model = bertscope.load(backend="torch")
    batches = model.calibration_batches(texts)
    model.use_onnxruntime()
    paths = {"float32": model.engine.runner.path}  # type: ignore[union-attr]
    for scheme in SCHEMES:
        model.use_torch()
        use_onnxruntime(model, quantize="int8" if scheme == "dynamic" else f"int8_{scheme}")
        paths[f"int8 {scheme}"] = model.engine.runner.path  # type: ignore[union-attr]
    results = {name: profile(path, batches, args.threads) for name, path in paths.items()}
    for name, ops in results.items():
        total = sum(ops.values())
        print(f"\n{name}: {total / 1e3:.0f} ms in kernels over {len(texts)} texts")
        for op, us in sorted(ops.items(), key=lambda kv: -kv[1])[:12]:
            print(f"  {op:<28}{us / 1e3:9.1f} ms {us / total:6.1%}")


if __name__ == "__main__":
    main()
