"""How the exact default's timing workload ranks its runtimes, against a corpus: torch, ONNX Runtime and
OpenVINO float32 timed (bertscope.backends.modes.measure, 3 alternating rounds) on the calibration
sentences alone (8), on `fast.timing_texts` rows of several sizes, and on news sentences, each twice;
then what a first `load()` chooses now, from an empty cache, and how long its measurement took (in this
process, which has imported torch and both runtimes already: less than a new user's first load).

    HF_HUB_OFFLINE=1 PYTHONPATH=src .venv/bin/python bench/exact_rank.py --model bench/gpu/model \\
        --texts-file bench/gpu/texts.txt [--rows 28,56,200,400] [--news 600]

A ranking is right where its OpenVINO/ONNX Runtime and OpenVINO/torch ratios sit on the same side of 1
as the news rows' ratios. CPU only (the exact default keeps torch on CUDA).
"""

from __future__ import annotations

import argparse
import os
import tempfile
import time

import bertscope
from bertscope.backends.fast import runtime_embedder, timing_texts
from bertscope.backends.modes import measure
from bertscope.backends.quantize import calibration_texts
from bertscope.core.cpu import cpu_flags, cpu_name


def main() -> None:
    """Print each workload's ranking, then a fresh exact default's choice."""
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--model", required=True)
    parser.add_argument("--texts-file", required=True, help="one news sentence per line")
    parser.add_argument("--rows", default="28,56,200,400", help="timing_texts sizes to rank on")
    parser.add_argument("--news", type=int, default=600, help="news sentences, the corpus to rank against")
    args = parser.parse_args()
    calibration = calibration_texts()
    with open(args.texts_file, encoding="utf-8") as handle:
        news = handle.read().splitlines()[: args.news]
    flags = sorted(f for f in cpu_flags() if f.startswith(("avx", "amx")))
    print(f"# {cpu_name()}, {os.cpu_count()} CPUs; flags: {' '.join(flags)}")
    print(f"# {time.strftime('%Y-%m-%d %H:%M UTC', time.gmtime())}; load {os.getloadavg()[0]:.2f}")
    backends = ("torch", "onnxruntime", "openvino")
    loaded = {b: bertscope.load(args.model, backend=b, device="cpu") for b in backends}
    ways = {b: runtime_embedder(m, m.engine.runner if b != "torch" else None) for b, m in loaded.items()}
    workloads = [("calibration 8", calibration[:8])]
    sizes = [int(n) for n in args.rows.split(",")]
    workloads += [(f"timing rows {n}", timing_texts(calibration[:8], rows=n)) for n in sizes]
    workloads += [(f"news {len(news)}", news)]
    for name, texts in workloads * 2:
        speed = {b: s for b, (s, _) in measure(ways, texts, rounds=3).items()}
        ov, ort, pt = speed["openvino"], speed["onnxruntime"], speed["torch"]
        print(
            f"{name:16s} torch {pt:7.1f}  onnxruntime {ort:7.1f}  openvino {ov:7.1f} texts/s;  "
            f"openvino / onnxruntime {ov / ort:.2f}, openvino / torch {ov / pt:.2f}",
            flush=True,
        )
    with tempfile.TemporaryDirectory() as cache:  # the exports too: a first load, as a new user has it
        os.environ["BERTSCOPE_CACHE"] = cache
        start = time.perf_counter()
        model = bertscope.load(args.model, device="cpu")
        took = time.perf_counter() - start
        print(f"first load() from an empty cache: {took:.1f} s; exact default: {model.info().exact}")
        measured = (model.info().exact or {}).get("measured")  # absent where torch stays without timing
        if measured:
            with open(measured, encoding="utf-8") as handle:
                print(f"its measurement: {handle.read()}")


if __name__ == "__main__":
    main()
