"""OpenVINO with two batches in flight (THROUGHPUT streams) against one batch on every thread (LATENCY).

The forward alone, without bertscope's host work: the engine's own batches of the 300 news sentences,
run on the exported graph's last hidden state, alternating rounds, median. Three ways:

- `latency`: what the engine runs, one request at a time on `PERFORMANCE_HINT=LATENCY` with every thread;
- `streams`: the same batches, two requests in flight on `PERFORMANCE_HINT=THROUGHPUT` (`NUM_STREAMS` 2);
- `halves`: each batch cut into two halves (each padded to its own width), run at once on those streams.

    HF_HUB_OFFLINE=1 .venv/bin/python bench/openvino_streams.py --precision bfloat16 --rounds 9

A measurement for a possible engine change (an asynchronous runner keeping the next batch in flight), not
what the engine does.
"""

from __future__ import annotations

import argparse
import statistics
import sys
import time
from pathlib import Path
from typing import Any

import numpy as np

sys.path.insert(0, str(Path(__file__).parent))

HINTS = {"float32": "f32", "bfloat16": "bf16"}


def engine_feeds(precision: str) -> tuple[Any, list[dict[str, np.ndarray]]]:
    """The OpenVINO model bertscope exported for the bundled model, and the engine's batches as feeds."""
    from bench_peers import corpora

    import bertscope
    from bertscope.core.segments import batches, segments_of
    from bertscope.core.tokens import pad_batch

    texts = corpora(["news"], {"news": 300})["news"]
    model = bertscope.load(backend="openvino", dtype=precision)
    model.embed(texts[:8], progress=False)
    engine = model.engine
    segments = segments_of(engine.tokenizer.encode(texts), engine.tokenizer.max_tokens, None)
    feeds = []
    limits = (engine.token_budget, engine.max_batch, engine.min_rows, engine.call_tokens)
    for batch in batches(segments, *limits):
        ids, mask = pad_batch([s.ids for s in batch], engine.pad_id)
        types, _ = pad_batch([s.token_type_ids for s in batch], 0)
        feeds.append({"input_ids": ids, "attention_mask": mask, "token_type_ids": types})
    return engine.runner.ov_model, feeds


def halves(feed: dict[str, np.ndarray]) -> list[dict[str, np.ndarray]]:
    """A batch cut into two row halves, each trimmed to its own longest row."""
    n = len(feed["input_ids"])
    parts = []
    for rows in (slice(0, (n + 1) // 2), slice((n + 1) // 2, n)):
        width = int(feed["attention_mask"][rows].sum(1).max())
        parts.append({k: np.ascontiguousarray(v[rows, :width]) for k, v in feed.items()})
    return parts


def main() -> None:
    """Time the three ways and print each one's texts/s and its ratio to `latency`."""
    import openvino as ov

    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--precision", choices=sorted(HINTS), default="bfloat16")
    parser.add_argument("--rounds", type=int, default=9)
    parser.add_argument("--threads", type=int, default=2)
    args = parser.parse_args()
    ov_model, feeds = engine_feeds(args.precision)
    names = [port.get_any_name() for port in ov_model.outputs]
    last = ov_model.get_results()[names.index(max(names, key=lambda n: int(n.split("_")[-1])))]
    cut = ov.Model([last], ov_model.get_parameters(), "last_hidden_state")
    core, hint = ov.Core(), HINTS[args.precision]
    common = {"INFERENCE_NUM_THREADS": args.threads, "INFERENCE_PRECISION_HINT": hint}
    latency = core.compile_model(cut, "CPU", {"PERFORMANCE_HINT": "LATENCY", **common})
    streams = core.compile_model(cut, "CPU", {"PERFORMANCE_HINT": "THROUGHPUT", "NUM_STREAMS": 2, **common})
    request, queue = latency.create_infer_request(), ov.AsyncInferQueue(streams, 2)
    split = [halves(feed) for feed in feeds]

    def run_latency() -> None:
        for feed in feeds:
            request.infer(feed)

    def run_streams() -> None:
        for feed in feeds:
            queue.start_async(feed)
        queue.wait_all()

    def run_halves() -> None:
        for first, second in split:
            queue.start_async(first)
            queue.start_async(second)
            queue.wait_all()

    ways = {"latency": run_latency, "streams": run_streams, "halves": run_halves}
    seconds: dict[str, list[float]] = {name: [] for name in ways}
    for way in ways.values():
        way()  # warm-up
    for _ in range(args.rounds):
        for name, way in ways.items():
            start = time.perf_counter()
            way()
            seconds[name].append(time.perf_counter() - start)
    base = statistics.median(seconds["latency"])
    texts = sum(len(feed["input_ids"]) for feed in feeds)
    print(f"OpenVINO {args.precision}, {len(feeds)} engine batches, {texts} texts, median of {args.rounds}")
    for name, times in seconds.items():
        median = statistics.median(times)
        print(f"{name:<8} {texts / median:7.0f} texts/s  {base / median:.3f}x latency")


if __name__ == "__main__":
    main()
