"""Could torch.compile (inductor) make the exact float32 path faster than the runtime the default picks?

The forward alone, without bertscope's host work: the engine's own batches of the 300 news sentences
(`openvino_streams.engine_feeds`), the last hidden state, in one process, rounds alternating between
OpenVINO float32 (the graph the exact default runs on this kind of CPU), torch eager (transformers'
AutoModel, sdpa attention) and the same module under `torch.compile` (inductor, `freezing`, dynamic
shapes). Prints each way's texts/s (median), the compiled module's max abs difference from eager on the
real tokens, and how long compiling took.

    HF_HUB_OFFLINE=1 .venv/bin/python bench/torch_compile.py --rounds 7

A measurement for a possible engine change, not what the engine does.
"""

from __future__ import annotations

import argparse
import os
import platform
import statistics
import sys
import time
from collections.abc import Callable
from pathlib import Path

import numpy as np

sys.path.insert(0, str(Path(__file__).parent))


def main() -> None:
    """Time the three ways on the engine's batches and print texts/s, the compiled drift and compile time."""
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--rounds", type=int, default=7)
    parser.add_argument("--threads", type=int, default=2)
    args = parser.parse_args()

    import openvino as ov
    import torch
    import torch._inductor.config as inductor
    from openvino_streams import engine_feeds
    from transformers import AutoModel

    from bertscope.core.cpu import cpu_flags, cpu_name
    from bertscope.core.folder import bundled_path

    torch.set_num_threads(args.threads)
    ov_model, feeds = engine_feeds("float32")
    names = [port.get_any_name() for port in ov_model.outputs]
    last = ov_model.get_results()[names.index(max(names, key=lambda n: int(n.split("_")[-1])))]
    cut = ov.Model([last], ov_model.get_parameters(), "last_hidden_state")
    config = {
        "PERFORMANCE_HINT": "LATENCY",
        "INFERENCE_NUM_THREADS": args.threads,
        "INFERENCE_PRECISION_HINT": "f32",
    }
    request = ov.Core().compile_model(cut, "CPU", config).create_infer_request()
    eager = AutoModel.from_pretrained(bundled_path(), attn_implementation="sdpa").eval()
    inductor.freezing = True
    compiled = torch.compile(eager, dynamic=True)
    batches = [{k: torch.from_numpy(v.astype(np.int64)) for k, v in feed.items()} for feed in feeds]
    started = time.perf_counter()
    with torch.inference_mode():
        for batch in batches[:3]:
            compiled(**batch)
    compile_s = time.perf_counter() - started
    worst = 0.0
    with torch.inference_mode():
        for feed, batch in zip(feeds, batches, strict=True):
            real = feed["attention_mask"].astype(bool)
            a, b = eager(**batch).last_hidden_state.numpy(), compiled(**batch).last_hidden_state.numpy()
            worst = max(worst, float(np.abs(a - b)[real].max()))

    def run_torch(module: Callable[..., object]) -> Callable[[], None]:
        def run() -> None:
            with torch.inference_mode():
                for batch in batches:
                    module(**batch)

        return run

    def run_openvino() -> None:
        for feed in feeds:
            request.infer(feed)

    ways = {
        "openvino float32": run_openvino,
        "torch eager": run_torch(eager),
        "torch.compile": run_torch(compiled),
    }
    times: dict[str, list[float]] = {name: [] for name in ways}
    for _ in range(args.rounds):
        for name, run in ways.items():
            start = time.perf_counter()
            run()
            times[name].append(time.perf_counter() - start)
    flags = " ".join(sorted(f for f in cpu_flags() if f.startswith(("avx", "amx"))))
    cpus = f"{os.cpu_count()} CPUs, {args.threads} threads"
    print(f"# {cpu_name()} ({platform.machine()}), {cpus}; flags: {flags}")
    n = sum(len(feed["input_ids"]) for feed in feeds)
    when = time.strftime("%Y-%m-%d %H:%M UTC", time.gmtime())
    print(f"# {when}; load {os.getloadavg()[0]:.2f}; torch {torch.__version__}")
    print(f"# {len(feeds)} engine batches, {n} texts; median of {args.rounds}")
    base = n / statistics.median(times["openvino float32"])
    for name, measured in times.items():
        rate = n / statistics.median(measured)
        print(f"{name:17s} {rate:7.0f} texts/s  {rate / base:.2f}x openvino float32")
    print(f"torch.compile: max abs {worst:.2e} from eager on the real tokens; compiled in {compile_s:.1f} s")


if __name__ == "__main__":
    main()
