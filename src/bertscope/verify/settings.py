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
    "LOSSY_FLOOR", "environment", "file_hashes", "flatten", "is_lossy", "lossy_floor", "vector_settings",
    "weights_dtype",
]  # fmt: skip

# The min cosine to float32 a lossy mode asked without `mode="fast"` is held to (fast's default bound).
LOSSY_FLOOR = 0.999

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
    """transformers' attention kernel where torch runs; the exported graph's (eager) otherwise."""
    if model.info().backend != "torch":
        return "eager (exported graph)"
    if model.light:
        return None
    return getattr(model.hf_model.config, "_attn_implementation", None)


def is_lossy(settings: dict[str, Any]) -> bool:
    """Whether vector settings describe a lossy mode (bfloat16, float16 or int8 arithmetic)."""
    precision = settings.get("precision") or {}
    return precision.get("dtype") not in (None, "float32") or precision.get("quantize") not in (None, "none")


def lossy_floor(model: Any) -> float:
    """The min cosine to float32 a lossy model is held to: fast mode's recorded bound, else `LOSSY_FLOOR`."""
    fast = model.info().fast or {}
    return float(fast.get("min_cosine", LOSSY_FLOOR))


def _version(name: str) -> str | None:
    try:
        return metadata.version(name.replace("_", "-"))
    except metadata.PackageNotFoundError:
        return None
