"""ONNX Runtime on 2 cores: one session with 2 intra-op threads running the engine's batches in turn,
against one session with 1 thread running two batches at once (from two Python threads; `run` releases
the GIL and a session may be run concurrently, so the weights are shared). Same batches, same graph,
alternating rounds, median of 5. A measurement for issue 38, not yet what the engine does.

    HF_HUB_OFFLINE=1 .venv/bin/python bench/ort_concurrency.py
"""

from __future__ import annotations

import statistics
import time
from collections.abc import Callable
from concurrent.futures import ThreadPoolExecutor
from pathlib import Path
from typing import Any

import numpy as np
import onnxruntime as ort
from bench_engine import lee_documents, split_sentences

import bertscope


def session(path: Path, threads: int) -> Any:
    """An ONNX Runtime session as the engine opens one, with `threads` intra-op threads."""
    options = ort.SessionOptions()
    options.intra_op_num_threads = threads
    options.graph_optimization_level = ort.GraphOptimizationLevel.ORT_ENABLE_ALL
    options.log_severity_level = 3
    return ort.InferenceSession(str(path), options, providers=["CPUExecutionProvider"])


def compare(quantize: str | None, texts: list[str], pool: ThreadPoolExecutor) -> str:
    """One line: the graph's batches in turn on 2 threads against two at once on 1 thread each."""
    model = bertscope.load(quantize=quantize) if quantize else bertscope.load()
    runner = model.engine.runner
    feeds = []
    for ids, type_ids, mask in model.calibration_batches(texts):
        feed = {"input_ids": ids.astype(np.int64), "attention_mask": mask.astype(np.int64)}
        if runner.uses_token_types:
            feed["token_type_ids"] = type_ids.astype(np.int64)
        feeds.append(feed)
    two, one, names = session(runner.path, 2), session(runner.path, 1), runner.output_names
    ways: dict[str, Callable[[], object]] = {
        "in turn": lambda: [two.run(names, feed) for feed in feeds],
        "at once": lambda: list(pool.map(lambda feed: one.run(names, feed), feeds)),
    }
    times: dict[str, list[float]] = {name: [] for name in ways}
    for way in ways.values():
        way()
    for _ in range(5):
        for name, way in ways.items():
            start = time.perf_counter()
            way()
            times[name].append(time.perf_counter() - start)
    turn, once = statistics.median(times["in turn"]), statistics.median(times["at once"])
    return (
        f"{quantize or 'float32':<11} {len(feeds)} batches: 2 threads in turn {turn * 1000:.0f} ms, "
        f"1 thread two at once {once * 1000:.0f} ms: {turn / once:.2f}x"
    )


def main() -> None:
    """Print the comparison for float32, the fused int8 graph and the dynamic one."""
    texts = split_sentences(lee_documents())[:300]
    with ThreadPoolExecutor(2) as pool:
        for quantize in (None, "int8_fused", "int8"):
            print(compare(quantize, texts, pool), flush=True)


if __name__ == "__main__":
    main()
