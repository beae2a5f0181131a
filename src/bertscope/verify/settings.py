"""What decides a model's vectors, read from the model as it is set up and from its folder's files.

`vector_settings` holds what a fingerprint compares: the same on every machine, runtime and thread count
for one model (precision, stored weight dtype, attention mask, truncation, pooling, prompts, tokenizer).
`environment` holds what is reported but not compared (runtime, threads, attention implementation,
package versions). `file_hashes` are the SHA-256 of the files that make the model. The settings and
hashes are read in core/fingerprint_facts.py (corpus jobs store them); they are re-exported here.
"""

from __future__ import annotations

import platform
from importlib import metadata
from typing import Any

from ..core.fingerprint_facts import (
    file_hashes,
    flatten,
    text_sha,
    tokenizer_json,
    vector_settings,
    weights_dtype,
)

__all__ = [
    "LOSSY_FLOOR", "STORE_FLOORS", "environment", "file_hashes", "flatten", "is_lossy", "is_static",
    "lossy_floor", "store_floor", "vector_settings", "weights_dtype",
]  # fmt: skip

# The min cosine to float32 a lossy mode asked without `mode="fast"` is held to (fast's default bound).
LOSSY_FLOOR = 0.999
# The floor a lossy precision is held to when a store is checked (`verify --store`), the same model on
# both sides: int8's activation scales are set per batch (ONNX Runtime's dynamic and fused graphs), so a
# text's vector moves with the texts batched with it. The lowest cosine between two batchings of one text
# measured on a Zen 5 CPU was 0.9887 (int8_fused; short texts and runs of one punctuation mark among other
# texts); the floor 0.98 holds the pair to 2 * 0.98^2 - 1 = 0.9208. bfloat16 and float16 run each row alone.
STORE_FLOORS = {"int8": 0.98, "bfloat16": LOSSY_FLOOR, "float16": LOSSY_FLOOR}

_PACKAGES = ("bertscope", "torch", "transformers", "tokenizers", "onnxruntime", "openvino", "nncf", "numpy")


def environment(model: Any) -> dict[str, Any]:
    """How the model runs here: reported beside the settings, never compared (the vectors decide)."""
    from ..core.cpu import cpu_name, cpu_threads

    info = model.info()
    return {
        "source": info.source,
        "path": info.path,
        "backend": info.backend,
        "mode": info.mode,
        "device": info.device,
        "threads": cpu_threads(),
        "attention_implementation": attention_implementation(model),
        "tokenizer_json": text_sha(tokenizer_json(model)),
        "versions": {name: _version(name) for name in _PACKAGES},
        "python": platform.python_version(),
        "cpu": cpu_name(),
    }


def attention_implementation(model: Any) -> str | None:
    """transformers' attention kernel where torch runs; the exported graph's (eager) otherwise; None for a
    static model (no attention)."""
    if is_static(model):
        return None
    if model.info().backend != "torch":
        return "eager (exported graph)"
    if model.light:
        return None
    return getattr(model.hf_model.config, "_attn_implementation", None)


def is_static(model: Any) -> bool:
    """Whether `model` is a static model (a model2vec folder: rows, no layers, no forward to run).

    Read from the class's own family name, not by importing StaticModel: its `verify` reads this module."""
    return getattr(type(model), "family_name", None) == "model2vec"


def is_lossy(settings: dict[str, Any]) -> bool:
    """Whether vector settings describe a lossy mode (bfloat16, float16 or int8 arithmetic)."""
    precision = settings.get("precision") or {}
    return precision.get("dtype") not in (None, "float32") or precision.get("quantize") not in (None, "none")


def lossy_floor(model: Any) -> float:
    """The min cosine to float32 a lossy model is held to: fast mode's recorded bound, else its precision's
    floor (`STORE_FLOORS`, as `verify --store` holds it: int8 0.98, whose short texts read ~0.988 on the
    bundled model, so 0.999 called every healthy int8 drifted; bfloat16 and float16 `LOSSY_FLOOR`)."""
    info = model.info()
    fast = info.fast or {}
    if "min_cosine" in fast:
        return float(fast["min_cosine"])
    return min(store_floor(info.dtype, info.quantize), LOSSY_FLOOR)


def store_floor(dtype: str | None, quantize: str | None) -> float:
    """The floor `verify --store` holds one side to, by its precision (`STORE_FLOORS`; 1.0 for float32)."""
    if quantize not in (None, "none"):
        return STORE_FLOORS["int8"]
    return STORE_FLOORS.get(dtype or "float32", 1.0)


def _version(name: str) -> str | None:
    try:
        return metadata.version(name.replace("_", "-"))
    except metadata.PackageNotFoundError:
        return None
