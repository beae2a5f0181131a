"""What decides a model's vectors, read from the model as it is set up and from its folder's files.

`vector_settings` holds what a fingerprint compares: the same on every machine, runtime and thread count
for one model (precision, stored weight dtype, attention mask, truncation, pooling, prompts, tokenizer).
`environment` holds what is reported but not compared (runtime, threads, attention implementation,
package versions). `file_hashes` are the SHA-256 of the files that make the model.
"""

from __future__ import annotations

import hashlib
import json
import platform
import struct
from dataclasses import asdict
from importlib import metadata
from pathlib import Path
from typing import Any

__all__ = [
    "LOSSY_FLOOR", "environment", "file_hashes", "flatten", "is_lossy", "lossy_floor", "vector_settings",
    "weights_dtype",
]  # fmt: skip

# The min cosine to float32 a lossy mode asked without `mode="fast"` is held to (fast's default bound).
LOSSY_FLOOR = 0.999

# Files whose bytes make the model: config, weights, tokenizer, sentence-transformers pipeline.
_MODEL_FILES = (
    "config.json", "tokenizer.json", "tokenizer_config.json", "special_tokens_map.json", "added_tokens.json",
    "vocab.txt", "vocab.json", "merges.txt", "spiece.model", "sentencepiece.bpe.model", "modules.json",
    "sentence_bert_config.json", "config_sentence_transformers.json", "model.safetensors.index.json",
    "pytorch_model.bin.index.json",
)  # fmt: skip
_WEIGHT_SUFFIXES = (".safetensors", ".bin")
_SAFETENSORS_DTYPES = {"F32": "float32", "F16": "float16", "BF16": "bfloat16", "F64": "float64"}
_PACKAGES = ("bertscope", "torch", "transformers", "tokenizers", "onnxruntime", "openvino", "numpy")


def vector_settings(model: Any) -> dict[str, Any]:
    """The settings that decide `model`'s vectors, as plain JSON values (compared by fingerprints)."""
    info = model.info()
    spec = model.spec()
    is_decoder = bool(getattr(model.config, "is_decoder", False))
    return {
        "model_type": info.model_type,
        "family": info.family,
        "layers": info.layers,
        "hidden_size": info.hidden_size,
        "vocab_size": info.vocab_size,
        "precision": {"dtype": info.dtype, "quantize": info.quantize},
        "weights_dtype": weights_dtype(model.loaded.path),
        "attention": {"mask": "causal" if is_decoder else "bidirectional", "is_decoder": is_decoder},
        "truncation": {"max_tokens": model.max_tokens, "side": "right", "long": spec.long.value},
        "pooling": {
            "pooling": spec.pooling.value,
            "layers": list(spec.layers),
            "combine": spec.combine.value,
            "mask_special": spec.mask_special,
            "normalize": spec.normalize,
        },
        "prompts": asdict(model.prompts),
        "tokenizer": _tokenizer_facts(model),
        "special_tokens": dict(sorted(info.special_tokens.items())),
    }


def environment(model: Any) -> dict[str, Any]:
    """How the model runs here: reported beside the settings, never compared (the vectors decide)."""
    from ..backends.cpu import cpu_name, cpu_threads

    info = model.info()
    return {
        "source": info.source,
        "path": info.path,
        "backend": info.backend,
        "mode": info.mode,
        "device": info.device,
        "threads": cpu_threads(),
        "attention_implementation": attention_implementation(model),
        "tokenizer_json": _sha(_tokenizer_json(model)),
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


def file_hashes(folder: Path | None) -> dict[str, str]:
    """SHA-256 (32 hex digits) of each file that makes the model in `folder`, by its path in the folder."""
    if folder is None:
        return {}
    folder = Path(folder)
    names = [p.name for p in folder.iterdir() if p.is_file() and _makes_model(p.name)]
    modules = folder / "modules.json"
    if modules.is_file():
        try:
            listed = json.loads(modules.read_text(encoding="utf-8"))
        except ValueError:
            listed = []
        for module in listed if isinstance(listed, list) else []:
            sub = str(module.get("path", "")) if isinstance(module, dict) else ""
            if sub and (folder / sub / "config.json").is_file():
                names.append(f"{sub}/config.json")
    return {name: _file_sha(folder / name) for name in sorted(names)}


def weights_dtype(folder: Path | None) -> str | None:
    """The dtype the weights are stored in (safetensors headers; "float16+float32" when mixed), or None
    where the folder holds no safetensors (a pytorch_model.bin is not read: that would need torch)."""
    if folder is None:
        return None
    files = sorted(Path(folder).glob("*.safetensors"))
    kinds: set[str] = set()
    for file in files:
        with file.open("rb") as stream:
            (size,) = struct.unpack("<Q", stream.read(8))
            header = json.loads(stream.read(size))
        # integer buffers (position ids) are not weights
        stored = [entry.get("dtype") for name, entry in header.items() if name != "__metadata__"]
        kinds |= {_SAFETENSORS_DTYPES[kind] for kind in stored if kind in _SAFETENSORS_DTYPES}
    return "+".join(sorted(kinds)) or None


def is_lossy(settings: dict[str, Any]) -> bool:
    """Whether vector settings describe a lossy mode (bfloat16, float16 or int8 arithmetic)."""
    precision = settings.get("precision") or {}
    return precision.get("dtype") not in (None, "float32") or precision.get("quantize") not in (None, "none")


def lossy_floor(model: Any) -> float:
    """The min cosine to float32 a lossy model is held to: fast mode's recorded bound, else `LOSSY_FLOOR`."""
    fast = model.info().fast or {}
    return float(fast.get("min_cosine", LOSSY_FLOOR))


def flatten(value: Any, prefix: str = "") -> dict[str, Any]:
    """Nested dicts as one level of dotted keys ({"a": {"b": 1}} -> {"a.b": 1}); other values as they are."""
    if not isinstance(value, dict) or not value:
        return {prefix: value}
    flat: dict[str, Any] = {}
    for key, inner in value.items():
        flat.update(flatten(inner, f"{prefix}.{key}" if prefix else str(key)))
    return flat


def _tokenizer_facts(model: Any) -> dict[str, Any]:
    """Whether it lowercases, and a hash of its vocabulary (the ids it reads are in the canaries)."""
    config = json.loads(_tokenizer_json(model))
    vocab = sorted(model.vocab.items())
    return {"lowercase": _lowercases(config.get("normalizer")), "vocab": _sha(json.dumps(vocab))}


def _tokenizer_json(model: Any) -> str:
    """tokenizer.json as the runtime reads it (truncation and padding off: bertscope sets them itself)."""
    return str(model.tokenizer.backend.to_str())


def _lowercases(normalizer: Any) -> bool:
    """Whether a tokenizers normalizer (possibly a Sequence of them) lowercases its input."""
    if not isinstance(normalizer, dict):
        return False
    if normalizer.get("type") == "Lowercase" or normalizer.get("lowercase") is True:
        return True
    return any(_lowercases(inner) for inner in normalizer.get("normalizers") or [])


def _makes_model(name: str) -> bool:
    return name in _MODEL_FILES or name.endswith(_WEIGHT_SUFFIXES) or name.endswith(".model")


def _file_sha(path: Path) -> str:
    digest = hashlib.sha256()
    with path.open("rb") as stream:
        while block := stream.read(1 << 22):
            digest.update(block)
    return digest.hexdigest()[:32]


def _sha(text: str) -> str:
    return hashlib.sha256(text.encode("utf-8")).hexdigest()[:32]


def _version(name: str) -> str | None:
    try:
        return metadata.version(name.replace("_", "-"))
    except metadata.PackageNotFoundError:
        return None
