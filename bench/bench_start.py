"""A fresh process embedding one sentence: wall time and peak RSS, each way as its own process.

    .venv/bin/python bench/bench_start.py [--rounds 3] [--text "I like eating bread"] [--model FOLDER]

Ways (alternating rounds, median of each; the bundled model; every way reads the same ONNX export):
  floor        ONNX Runtime + tokenizers on bertscope's cached export, nothing else (fastembed's recipe)
  cli          `bertscope embed TEXT --json`
  library      `import bertscope; bertscope.load().embed([TEXT])`
  torch        `bertscope.load(backend="torch")`: the PyTorch module itself (what every load cost before)
  st           sentence-transformers on the same folder (torch)
  fastembed    fastembed on the same export (--fastembed-python: a Python that has it; bench/.venv has)
Each prints its vector; the table gives the max abs difference to the library's. The first load of the
model (export, measurement) is made before timing, as a user's second command would find it.
"""

from __future__ import annotations

import argparse
import json
import os
import platform
import statistics
import subprocess
import sys
import tempfile
from importlib.util import find_spec
from pathlib import Path

import numpy as np

_FLOOR = """
import json, sys
import numpy as np, onnxruntime as ort
from tokenizers import Tokenizer
folder, export, text = sys.argv[1:4]
tok = Tokenizer.from_file(folder + "/tokenizer.json")
tok.no_truncation(); tok.no_padding()
enc = tok.encode(text)
ids = np.array([enc.ids], dtype=np.int64)
feed = {"input_ids": ids, "attention_mask": np.ones_like(ids), "token_type_ids": np.zeros_like(ids)}
session = ort.InferenceSession(export, providers=["CPUExecutionProvider"])
feed = {i.name: feed[i.name] for i in session.get_inputs()}
last = session.run([o.name for o in session.get_outputs()][-1:], feed)[0][0]
v = last.mean(0); v /= np.linalg.norm(v)
print(json.dumps(v.tolist()))
"""
_LIBRARY = """
import json, sys, bertscope
print(json.dumps(bertscope.load(sys.argv[5] or None, {options}).embed([sys.argv[3]]).vectors[0].tolist()))
"""
_ST = """
import json, sys
from sentence_transformers import SentenceTransformer
print(json.dumps(SentenceTransformer(sys.argv[1], device="cpu").encode([sys.argv[3]])[0].tolist()))
"""
_FASTEMBED = """
import json, sys
from fastembed import TextEmbedding
from fastembed.common.model_description import ModelSource, PoolingType
TextEmbedding.add_custom_model("bertscope/bench", pooling=PoolingType.MEAN, normalization=True,
    sources=ModelSource(hf="bertscope/bench"), dim=int(sys.argv[6]), model_file="model.onnx")
model = TextEmbedding("bertscope/bench", specific_model_path=sys.argv[4])
print(json.dumps(list(map(float, next(iter(model.embed([sys.argv[3]])))))))
"""


def _run(command: list[str]) -> tuple[float, float, list[float]]:
    """(wall s, peak RSS MB, vector) of one fresh process, measured by GNU time."""
    with tempfile.NamedTemporaryFile("r", suffix=".time") as timing:
        done = subprocess.run(
            ["/usr/bin/time", "-f", "%e %M", "-o", timing.name, *command],
            capture_output=True, text=True, check=True, env={**os.environ, "HF_HUB_OFFLINE": "1"},
        )  # fmt: skip
        wall, kb = timing.read().split()[-2:]
    text = done.stdout.strip().splitlines()[-1]
    vector = json.loads(text)["vectors"][0] if text.startswith("{") else json.loads(text)
    return float(wall), int(kb) / 1024, vector


def main() -> None:
    """Measure every way that is installed here and print the table."""
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--rounds", type=int, default=3)
    parser.add_argument("--text", default="I like eating bread")
    parser.add_argument("--fastembed-python", help="a Python with fastembed installed (default: this one)")
    parser.add_argument("--model", default="", help="a model folder (default: the bundled model)")
    args = parser.parse_args()
    import bertscope

    model = bertscope.load(args.model or None)  # the first load: measures and exports, untimed
    folder = str(model.loaded.path)
    # the floor and fastembed read the ONNX export whatever runtime the default chose (OpenVINO reads its own)
    on_onnx = (
        model if model.info().backend == "onnxruntime" else bertscope.load(folder, backend="onnxruntime")
    )
    export = str(getattr(on_onnx.engine.runner, "path", ""))
    dim = str(model.info().hidden_size)
    py = sys.executable
    bin_dir = Path(py).parent
    ways = {
        "floor: ONNX Runtime + tokenizers": [py, "-c", _FLOOR],
        "bertscope embed --json (CLI)": [
            str(bin_dir / "bertscope"),
            "embed",
            args.text,
            "--json",
            *(["-m", args.model] if args.model else []),
        ],
        "bertscope.load().embed (library)": [py, "-c", _LIBRARY.format(options="")],
        "bertscope.load(backend='torch')": [py, "-c", _LIBRARY.format(options="backend='torch'")],
    }
    if find_spec("sentence_transformers"):
        ways["sentence-transformers (torch)"] = [py, "-c", _ST]
    if args.fastembed_python or find_spec("fastembed"):
        ways["fastembed (same export)"] = [args.fastembed_python or py, "-c", _FASTEMBED]
    if not export:
        ways.pop("floor: ONNX Runtime + tokenizers")  # the default chose torch here: no export to read
    fastembed_dir = tempfile.mkdtemp()
    if export:
        # fastembed pools its graph's first output: the same export with the last hidden state alone
        from bertscope.backends.onnx import cut_graph

        runner = on_onnx.engine.runner
        last = cut_graph(Path(export), runner.input_names, [runner.output_names[-1]])
        (Path(fastembed_dir) / "model.onnx").write_bytes(last.SerializeToString())
        for name in ("tokenizer.json", "tokenizer_config.json", "config.json", "special_tokens_map.json"):
            if (Path(folder) / name).exists():
                os.symlink(Path(folder) / name, Path(fastembed_dir) / name)
    results: dict[str, list[tuple[float, float, list[float]]]] = {name: [] for name in ways}
    for _ in range(args.rounds):
        for name, command in ways.items():
            extra = [] if "CLI" in name else [folder, export, args.text, fastembed_dir, args.model, dim]
            results[name].append(_run(command + extra))
    reference = np.array(results["bertscope.load().embed (library)"][0][2])
    floor = results.get("floor: ONNX Runtime + tokenizers")
    floor_wall = statistics.median(r[0] for r in floor) if floor else None
    floor_rss = statistics.median(r[1] for r in floor) if floor else None
    first = _first_load(folder, export, args.text, args.model)
    print(f"machine: {platform.processor() or platform.machine()}, {os.cpu_count()} CPUs; "
          f"model: {args.model or 'bundled'}; chosen runtime: {model.info().backend}; "
          f"rounds: {args.rounds}")  # fmt: skip
    print("| way | wall (median) | peak RSS | x floor wall | x floor RSS | max abs diff to bertscope |")
    print("|---|---:|---:|---:|---:|---:|")
    for name, runs in results.items():
        wall = statistics.median(r[0] for r in runs)
        rss = statistics.median(r[1] for r in runs)
        gap = float(np.abs(np.array(runs[0][2]) - reference).max())
        ratio_wall = f"{wall / floor_wall:.2f}x" if floor_wall else "-"
        ratio_rss = f"{rss / floor_rss:.2f}x" if floor_rss else "-"
        print(f"| {name} | {wall:.2f} s | {rss:.0f} MB | {ratio_wall} | {ratio_rss} | {gap:.1e} |")
    torch_wall = statistics.median(r[0] for r in results["bertscope.load(backend='torch')"])
    print(
        f"\nfirst load of the model on this machine (empty cache: export + runtime choice), one process: "
        f"{first:.2f} s, {first / torch_wall:.2f}x a torch load's process ({torch_wall:.2f} s)"
    )


def _first_load(folder: str, export: str, text: str, named: str) -> float:
    """Wall time of the default load + one embed in a fresh process with an empty cache."""
    with tempfile.TemporaryDirectory() as cache:
        os.environ["BERTSCOPE_CACHE"] = cache
        try:
            return _run([sys.executable, "-c", _LIBRARY.format(options=""), folder, export, text, "", named])[
                0
            ]
        finally:
            os.environ.pop("BERTSCOPE_CACHE")


if __name__ == "__main__":
    main()
