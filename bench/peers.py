"""The ways bench_peers.py times: the real peers (sentence-transformers' backends, fastembed, the notebook
loop) and every bertscope mode the checked-out branch offers, each a function texts -> (n, d) vectors.

Exports are made once into bench/.cache (git-ignored), from the model folder, with the peers' own tools:
sentence-transformers' ONNX and OpenVINO exports (`save_pretrained`), its
`export_dynamic_quantized_onnx_model` for int8, and fastembed pointed at that same ONNX file as a local
custom model. Nothing is downloaded.
"""

from __future__ import annotations

import json
import os
import shutil
import warnings
from collections.abc import Callable, Sequence
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

import numpy as np
import torch

BATCH = 32
Run = Callable[[Sequence[str]], np.ndarray]


@dataclass
class Way:
    """One row of the table: a name, peer or bertscope, the run function and notes from loading."""

    name: str
    peer: bool
    run: Run
    notes: list[str] = field(default_factory=list)
    # the share of each corpus it runs (its first texts): the notebook loop is too slow for all of them
    share: float = 1.0
    # what a bertscope mode that chooses (`mode="fast"`, the exact default) chose to run, e.g. "openvino bf16"
    chosen: str | None = None


def quantization_config() -> str:
    """sentence-transformers' int8 config for this CPU: avx512_vnni, avx512, avx2 or arm64."""
    try:
        flags = set(Path("/proc/cpuinfo").read_text().split())
    except OSError:
        flags = set()
    if os.uname().machine in ("aarch64", "arm64"):
        return "arm64"
    if "avx512_vnni" in flags or "avx512vnni" in flags:
        return "avx512_vnni"
    return "avx512" if "avx512f" in flags else "avx2"


def prepare_exports(model_path: str, folder: Path, qconfig: str) -> Path:
    """Folder with sentence-transformers' ONNX, int8 ONNX and OpenVINO exports of the model (made once)."""
    stamp = folder / f".exported-{qconfig}"
    if stamp.exists():
        return folder
    from sentence_transformers import SentenceTransformer, export_dynamic_quantized_onnx_model

    folder.mkdir(parents=True, exist_ok=True)
    onnx = SentenceTransformer(model_path, device="cpu", backend="onnx")
    onnx.save_pretrained(str(folder))
    export_dynamic_quantized_onnx_model(onnx, qconfig, str(folder))
    SentenceTransformer(model_path, device="cpu", backend="openvino").save_pretrained(str(folder))
    stamp.touch()
    return folder


def prepare_fastembed(exports: Path, folder: Path, max_tokens: int) -> Path:
    """fastembed's folder: the same ONNX file and tokenizer, truncating at the model's max_tokens.

    fastembed truncates at the smaller of tokenizer_config's model_max_length and max_length (128 for
    MiniLM, 512 for mpnet), sentence-transformers at max_seq_length (256 / 384): the copy of
    tokenizer_config.json carries the latter in both keys, so every way sees the same tokens.
    """
    folder.mkdir(parents=True, exist_ok=True)
    (folder / "onnx").mkdir(exist_ok=True)
    target = folder / "onnx" / "model.onnx"
    if not target.exists():
        target.symlink_to((exports / "onnx" / "model.onnx").resolve())
    for name in ("tokenizer.json", "config.json", "special_tokens_map.json", "vocab.txt"):
        if (exports / name).exists() and not (folder / name).exists():
            shutil.copy(exports / name, folder / name)
    config = json.loads((exports / "tokenizer_config.json").read_text())
    # fastembed takes the smaller of the two; max_length (128 in MiniLM's) is a padding hint elsewhere
    config["model_max_length"] = config["max_length"] = max_tokens
    (folder / "tokenizer_config.json").write_text(json.dumps(config, indent=2))
    return folder


def ort_options(threads: int) -> Any:
    """ONNX Runtime session options with `threads` intra-op threads (one inter-op)."""
    import onnxruntime as ort

    options = ort.SessionOptions()
    options.intra_op_num_threads = threads
    options.inter_op_num_threads = 1
    return options


def st_run(model: Any) -> Run:
    """sentence-transformers' encode, batch_size 32, as numpy."""

    def run(texts: Sequence[str]) -> np.ndarray:
        return np.asarray(model.encode(list(texts), batch_size=BATCH, show_progress_bar=False))

    return run


def st_ways(model_path: str, exports: Path, qconfig: str, threads: int) -> dict[str, Callable[[], Run]]:
    """Loaders of sentence-transformers torch, ONNX, ONNX int8 and OpenVINO on the same threads."""
    from sentence_transformers import SentenceTransformer

    def load(path: str | Path, **kwargs: Any) -> Run:
        return st_run(SentenceTransformer(str(path), device="cpu", **kwargs))

    def onnx(file_name: str) -> Run:
        kwargs = {"file_name": file_name, "provider": "CPUExecutionProvider"}
        return load(exports, backend="onnx", model_kwargs={**kwargs, "session_options": ort_options(threads)})

    ov_config = {"INFERENCE_NUM_THREADS": str(threads), "PERFORMANCE_HINT": "LATENCY"}
    # avx2 writes model_quint8_avx2.onnx, the others model_qint8_<config>.onnx
    int8 = sorted((exports / "onnx").glob(f"model_*int8_{qconfig}.onnx"))
    int8_name = f"onnx/{int8[0].name}" if int8 else f"onnx/model_qint8_{qconfig}.onnx"
    return {
        "ST torch": lambda: load(model_path),
        "ST onnx": lambda: onnx("onnx/model.onnx"),
        f"ST onnx int8 {qconfig}": lambda: onnx(int8_name),
        "ST openvino": lambda: load(exports, backend="openvino", model_kwargs={"ov_config": ov_config}),
    }


def fastembed_way(folder: Path, dim: int, threads: int) -> Run:
    """fastembed on the local ONNX export as a custom model (mean pooling, normalized), default batch."""
    from fastembed import TextEmbedding
    from fastembed.common.model_description import ModelSource, PoolingType

    name = f"bench/{folder.name}"
    if name.lower() not in {d["model"].lower() for d in TextEmbedding.list_supported_models()}:
        TextEmbedding.add_custom_model(
            model=name,
            pooling=PoolingType.MEAN,
            normalization=True,
            sources=ModelSource(hf=name),
            dim=dim,
            model_file="onnx/model.onnx",
        )
    model = TextEmbedding(model_name=name, specific_model_path=str(folder), threads=threads)

    def run(texts: Sequence[str]) -> np.ndarray:
        return np.stack(list(model.embed(list(texts))))

    return run


def notebook_way(model_path: str, max_tokens: int) -> Run:
    """The notebook loop: one text at a time through AutoModel, mean pool, normalize."""
    from transformers import AutoModel, AutoTokenizer

    tokenizer = AutoTokenizer.from_pretrained(model_path)
    model = AutoModel.from_pretrained(model_path).eval()

    def run(texts: Sequence[str]) -> np.ndarray:
        out = []
        with torch.inference_mode():
            for text in texts:
                enc = tokenizer(text, truncation=True, max_length=max_tokens, return_tensors="pt")
                pooled = model(**enc).last_hidden_state.mean(dim=1)
                out.append(torch.nn.functional.normalize(pooled, dim=1)[0].numpy())
        return np.stack(out)

    return run


# bertscope's modes: name -> load() options. The OpenVINO and fast ones exist only once that branch
# has landed; a load that fails (an unknown option, a missing extra, a refusal) skips its row.
BERTSCOPE_MODES: dict[str, dict[str, Any]] = {
    "bertscope float32": {"backend": "torch"},
    # the exact default: load() with no options, the fastest runtime equal to torch within 1e-5
    "bertscope default": {},
    "bertscope bfloat16": {"dtype": "bfloat16"},
    "bertscope onnxruntime": {"backend": "onnxruntime"},
    "bertscope int8": {"quantize": "int8"},
    # the other int8 schemes mode="fast" measures (backends/quantize.py)
    "bertscope int8 fused": {"quantize": "int8_fused"},
    "bertscope int8 static": {"quantize": "int8_static"},
    "bertscope openvino": {"backend": "openvino"},
    "bertscope openvino bf16": {"backend": "openvino", "dtype": "bfloat16"},
    "bertscope openvino int8": {"backend": "openvino", "quantize": "int8"},
    "bertscope openvino int8 static": {"backend": "openvino", "quantize": "int8_static"},
    "bertscope fast": {"mode": "fast"},
}


def bertscope_way(
    model_path: str, options: dict[str, Any], threads: int
) -> tuple[Run, list[str], str | None]:
    """bertscope.load(path, **options).embed with its defaults; notes: warnings and the fast choice;
    and the runtime it chose, where it chooses one."""
    import bertscope

    with warnings.catch_warnings(record=True) as caught:
        warnings.simplefilter("always")
        model = bertscope.load(model_path, device="cpu", threads=threads, **options)
    notes = [str(w.message).splitlines()[0] for w in caught if issubclass(w.category, UserWarning)]
    chosen = None
    choice = getattr(model, "fast_choice", None)
    if choice:
        notes.append(f"fast chose {choice}")
        chosen = choice["chosen"]
    exact = getattr(model, "exact_choice", None)
    if exact and not options:
        notes.append(f"default chose {exact['chosen']}")
        chosen = exact["chosen"]

    def run(texts: Sequence[str]) -> np.ndarray:
        return np.asarray(model.embed(list(texts), progress=False).vectors, dtype=np.float32)

    return run, notes, chosen
