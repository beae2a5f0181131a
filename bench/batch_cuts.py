"""The engine's batch cuts (least padding plus a forward's fixed cost, core/segments.py) against greedy
filling (each batch as full as the token budget lets it be, what the engine did before), on one runtime.

    HF_HUB_OFFLINE=1 .venv/bin/python bench/batch_cuts.py [--ways default,int8_fused] [--rounds 9]

Both plans batch the same tokenized news sentences (bench_peers' news corpus, 300 sentences) and run
through the same session, alternating rounds in one process; it prints padding, forwards and time.
"""

from __future__ import annotations

import argparse
import os
import sys
import time
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import numpy as np

sys.path.insert(0, str(Path(__file__).parent))

from bench_peers import corpora

import bertscope
from bertscope.backends.onnx import OnnxRunner
from bertscope.core.segments import _cuts
from bertscope.core.tokens import pad_batch


def greedy(lengths: list[int], budget: int) -> list[tuple[int, int]]:
    """What the engine did before (its code until 2026-11-26): longest first, each batch filled while rows
    x the longest length stays within the budget, closed early when the next row would be padded by more
    than max(16, 15% of the width) tokens."""
    cuts, start = [], 0
    for i in range(1, len(lengths) + 1):
        width = lengths[start]
        if (
            i == len(lengths)
            or (i - start + 1) * width > budget
            or width - lengths[i] > max(16, 0.15 * width)
        ):
            cuts.append((start, i))
            start = i
    return cuts


def engine_batches(model: bertscope.Model, texts: list[str]) -> list[list[Any]]:
    """The engine's own rows and cuts for `texts`: its batches, recorded as it embeds them."""
    original = bertscope.core.segments.batches
    plan: list[list[Any]] = []

    def spy(*args: Any, **kwargs: Any) -> Iterator[list[Any]]:
        for batch in original(*args, **kwargs):
            plan.append(batch)
            yield batch

    bertscope.core.engine.batches = spy  # type: ignore[attr-defined]
    try:
        model.embed(texts)
    finally:
        bertscope.core.engine.batches = original  # type: ignore[attr-defined]
    return plan


def onnx_feeds(model: bertscope.Model, texts: list[str], input_names: list[str]) -> list[dict[str, Any]]:
    """ONNX Runtime feeds (int64, the graph's inputs only) of the engine's own batches for `texts`."""
    feeds = []
    for batch in engine_batches(model, texts):
        ids, mask = pad_batch([s.ids for s in batch], model.engine.pad_id)
        type_ids, _ = pad_batch([s.token_type_ids for s in batch], 0)
        feed = {"input_ids": ids, "attention_mask": mask, "token_type_ids": type_ids}
        feeds.append({k: v.astype(np.int64) for k, v in feed.items() if k in input_names})
    return feeds


def main() -> None:
    """Time both plans on each way and print one line per way and plan."""
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument(
        "--ways", default="default,int8_fused", help="comma list of: default, int8, int8_fused"
    )
    parser.add_argument("--rounds", type=int, default=9)
    parser.add_argument(
        "--call-costs", type=lambda v: v.split(","), default=[],
        help="also cut with these fixed costs per forward, in tokens (comma list; the engine's: budget / 16)",
    )  # fmt: skip
    args = parser.parse_args()
    texts = corpora(["news"], {"news": 300})["news"]
    print(f"CPU: {os.cpu_count()} threads; {len(texts)} news sentences; median of {args.rounds} rounds")
    for way in args.ways.split(","):
        model = bertscope.load(**({} if way == "default" else {"quantize": way}))
        runner = model.engine.runner
        assert isinstance(runner, OnnxRunner), f"{way} did not run on ONNX Runtime"
        engine_plan = engine_batches(model, texts)
        seen = [(s.ids, s.token_type_ids) for batch in engine_plan for s in batch]
        lengths = [len(r[0]) for r in seen]
        starts = np.cumsum([0, *[len(b) for b in engine_plan]])
        plans = {"engine": list(zip(starts[:-1], starts[1:], strict=True))}
        plans["greedy"] = greedy(lengths, model.engine.token_budget)
        budget = model.engine.token_budget
        for tokens in args.call_costs:  # the engine's cuts with other fixed costs per forward
            plans[f"cost {tokens}"] = _cuts(np.array(lengths), budget, model.engine.max_batch, 1, int(tokens))
        feeds = {}
        for name, cuts in plans.items():
            feeds[name] = []
            for a, b in cuts:
                ids, mask = pad_batch([list(r[0]) for r in seen[a:b]], model.engine.pad_id)
                type_ids, _ = pad_batch([list(r[1]) for r in seen[a:b]], 0)
                feeds[name].append((ids, type_ids, mask))
        deepest = model.n_layers
        times: dict[str, list[float]] = {name: [] for name in feeds}
        for _ in range(args.rounds + 1):  # the first round warms up
            for name, batches in feeds.items():
                start = time.perf_counter()
                for batch in batches:
                    runner(*batch, deepest)
                times[name].append(time.perf_counter() - start)
        real = sum(lengths)
        for name, batches in feeds.items():
            padded = sum(b[0].size for b in batches)
            ms = float(np.median(times[name][1:])) * 1000
            print(
                f"{way:11s} {name:9s} {len(batches):3d} forwards, {padded} tokens ({padded / real - 1:5.1%} "
                f"padding): {ms:6.1f} ms, {len(texts) / ms * 1000:6.1f} texts/s in the runtime"
            )
        ratio = np.median(times["greedy"][1:]) / np.median(times["engine"][1:])
        print(f"{way:11s} engine cuts / greedy: {ratio:.3f}x")


if __name__ == "__main__":
    main()
