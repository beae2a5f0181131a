"""int8 schemes against float32 by CPU time, not wall time: a comparison that holds on a shared machine.

Also the float32 graph fused offline by ONNX Runtime's transformer optimizer (`float32 fused`), to tell
the fusion's own effect from int8's.

    python bench/int8_cpu_time.py [--texts 300] [--threads 2] [--rounds 3]

Every ONNX graph of the bundled model (float32 and each int8 scheme of backends/quantize.py) runs the
same padded batches of Lee news sentences (32 per batch, sorted by length, as the engine batches) in
ONNX Runtime sessions whose threads do not spin while they wait, so the process's CPU seconds count work,
not waiting; on a machine others load, wall-clock ratios move with their load and these do not (much).
Prints, per graph, CPU seconds (median of alternating rounds), sentences per CPU-second, the ratio to
float32, and the min cosine of its mean-pooled sentence vectors to float32's.
"""

from __future__ import annotations

import argparse
import statistics
import tempfile
import time
from pathlib import Path

import numpy as np
import onnxruntime as ort
from bench_engine import lee_documents, split_sentences

import bertscope
from bertscope.backends.quantize import SCHEMES, fuse
from bertscope.backends.runtimes import use_onnxruntime


def session(path: Path, threads: int) -> ort.InferenceSession:
    """A session as bertscope opens one, but with threads that sleep instead of spinning."""
    options = ort.SessionOptions()
    options.intra_op_num_threads = threads
    options.inter_op_num_threads = 1
    options.add_session_config_entry("session.intra_op.allow_spinning", "0")
    options.graph_optimization_level = ort.GraphOptimizationLevel.ORT_ENABLE_ALL
    options.log_severity_level = 3
    return ort.InferenceSession(str(path), options, providers=["CPUExecutionProvider"])


def sentences(sess: ort.InferenceSession, batches: list, last: str) -> np.ndarray:
    """Mean-pooled, unit-length sentence vectors of the last layer, (texts, hidden)."""
    names = {i.name for i in sess.get_inputs()}
    out = []
    for ids, type_ids, mask in batches:
        feed = {"input_ids": ids, "attention_mask": mask, "token_type_ids": type_ids}
        hidden = sess.run([last], {k: v.astype(np.int64) for k, v in feed.items() if k in names})[0]
        weights = mask[..., None].astype(np.float32)
        out.append((hidden * weights).sum(1) / weights.sum(1))
    vectors = np.concatenate(out)
    return vectors / np.linalg.norm(vectors, axis=1, keepdims=True)


def main() -> None:
    """Export (or reuse) every graph, then time them in alternating rounds by CPU time."""
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--texts", type=int, default=300)
    parser.add_argument("--threads", type=int, default=2)
    parser.add_argument("--rounds", type=int, default=3)
    args = parser.parse_args()
    texts = sorted(split_sentences(lee_documents())[: args.texts], key=len)
    model = bertscope.load(backend="torch", device="cpu")
    batches = [b for i in range(0, len(texts), 32) for b in model.calibration_batches(texts[i : i + 32])]
    model.use_onnxruntime()
    paths = {"float32": model.engine.runner.path}  # type: ignore[union-attr]
    fused = Path(tempfile.mkdtemp(prefix="bertscope-fused-")) / "float32-fused.onnx"
    heads, width = model.config.num_attention_heads, model.config.hidden_size
    if fuse(paths["float32"], fused, num_heads=heads, hidden_size=width):
        paths["float32 fused"] = fused
    for scheme in SCHEMES:
        model.use_torch()
        use_onnxruntime(model, quantize="int8" if scheme == "dynamic" else f"int8_{scheme}")
        paths[f"int8 {scheme}"] = model.engine.runner.path  # type: ignore[union-attr]
    last = f"hidden_{model.n_layers}"
    sessions = {name: session(path, args.threads) for name, path in paths.items()}
    vectors = {name: sentences(s, batches[:1], last) for name, s in sessions.items()}  # warm-up
    cpu: dict[str, list[float]] = {name: [] for name in sessions}
    for _ in range(args.rounds):
        for name, sess in sessions.items():
            start = time.process_time()
            vectors[name] = sentences(sess, batches, last)
            cpu[name].append(time.process_time() - start)
    base = statistics.median(cpu["float32"])
    print(f"{len(texts)} sentences, {args.threads} threads, median of {args.rounds} rounds")
    for name in sessions:
        seconds = statistics.median(cpu[name])
        cos = (vectors[name] * vectors["float32"]).sum(1).min()
        print(f"{name:<14} {seconds:6.2f} CPU s {len(texts) / seconds:7.1f} sentences/CPU-s "
              f"{base / seconds:5.2f}x float32  min cos {cos:.5f}")  # fmt: skip


if __name__ == "__main__":
    main()
