"""What decides a model's vectors, and the fingerprint every store carries of it (no forward, no torch).

    vector_settings(model)    precision, stored weight dtype, attention mask, truncation, default pooling,
                              prompts, tokenizer: the same on every machine, runtime and thread count
    file_hashes(folder)       SHA-256 of each file that makes the model (remembered per file size and
                              modification time in this process: a job and its check read gigabytes once)
    store_fingerprint(model)  {"id", "settings", "files"}: what `stored_settings` writes beside every
                              store's vectors, `/v2/info` and `bertscope info` report, and `verify` checks

Down here (not in verify/) because corpus jobs record it through core/spec.py's `stored_settings`; the
canary vectors and the comparisons, which run the model, are verify/fingerprint.py's.
"""

from __future__ import annotations

import hashlib
import json
import os
from dataclasses import asdict, fields
from pathlib import Path
from typing import Any

from .safetensors_header import safetensors_header

__all__ = [
    "file_hashes", "file_identity", "file_sha256", "fingerprint_id", "flatten", "store_fingerprint",
    "tokenizer_json", "text_sha", "vector_settings", "weights_dtype",
]  # fmt: skip

# Files whose bytes make the model: config, weights, tokenizer, sentence-transformers pipeline.
_MODEL_FILES = (
    "config.json", "tokenizer.json", "tokenizer_config.json", "special_tokens_map.json", "added_tokens.json",
    "vocab.txt", "vocab.json", "merges.txt", "spiece.model", "sentencepiece.bpe.model", "modules.json",
    "sentence_bert_config.json", "config_sentence_transformers.json", "model.safetensors.index.json",
    "pytorch_model.bin.index.json",
)  # fmt: skip
_WEIGHT_SUFFIXES = (".safetensors", ".bin")
_SAFETENSORS_DTYPES = {"F32": "float32", "F16": "float16", "BF16": "bfloat16", "F64": "float64"}
# (resolved path, *file_identity) -> digest: a rewritten file has another identity, so another key.
_FILE_DIGESTS: dict[tuple[Any, ...], str] = {}
_TOKENIZER_FACTS: dict[str, dict[str, Any]] = {}


def vector_settings(model: Any) -> dict[str, Any]:
    """The settings that decide `model`'s vectors, as plain JSON values (compared by fingerprints)."""
    info = model.info()
    spec, pooling = _default_spec(model)
    # read only where the family's layers read it (BertLayer's copies): DistilBERT and ModernBERT ignore it
    family = getattr(model, "family", None)
    reads = bool(getattr(family, "decoder_settings", True))
    is_decoder = reads and bool(getattr(model.config, "is_decoder", False))
    return {
        "model_type": info.model_type,
        "family": info.family,
        "layers": info.n_layers,  # stored under its old key: stores written before compare the same
        "hidden_size": info.hidden_size,
        "vocab_size": info.vocab_size,
        "precision": {"dtype": info.dtype, "quantize": info.quantize},
        "weights_dtype": weights_dtype(model.loaded.path),
        "attention": {"mask": "causal" if is_decoder else "bidirectional", "is_decoder": is_decoder},
        "truncation": {"max_tokens": model.max_tokens, "side": "right", "long": spec.long.value},
        "pooling": pooling,
        "prompts": _compared(model.prompts),
        "tokenizer": _tokenizer_facts(model),
        "special_tokens": dict(sorted(info.special_tokens.items())),
    }


def _compared(prompts: Any) -> dict[str, Any]:
    """The prompts' fields that decide vectors (those its equality compares): a field kept for
    sentence-transformers' attribute behaviour alone (`st_roles`) would change every store's id."""
    whole = asdict(prompts)
    return {f.name: whole[f.name] for f in fields(prompts) if f.compare}


def store_fingerprint(model: Any) -> dict[str, Any]:
    """What a store's settings carry: the fingerprint's id, settings and file hashes (no canaries, and
    nothing of the machine: a job resumed elsewhere compares its settings equal)."""
    settings = vector_settings(model)
    files = file_hashes(model.loaded.path)
    made = {"id": fingerprint_id(settings, files), "settings": settings, "files": files}
    return json.loads(json.dumps(made))  # type: ignore[no-any-return]


def fingerprint_id(settings: dict[str, Any], files: dict[str, str]) -> str:
    """16 hex digits over the settings and file hashes (not the canaries, which are compared within a
    tolerance): one model set up alike has one id on every machine and runtime."""
    canonical = json.dumps({"settings": settings, "files": files}, sort_keys=True)
    return hashlib.sha256(canonical.encode("utf-8")).hexdigest()[:16]


def file_hashes(folder: str | Path | None) -> dict[str, str]:
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
                names.append(Path(sub, "config.json").as_posix())  # "." (model2vec's) is the folder's own
    return {name: _file_sha(folder / name) for name in sorted(set(names))}


def model_files(model: Any) -> str | None:
    """16 hex digits over the hashes of the files that make `model` (`files_digest`), or None for a model
    with no folder: what a threshold or a post-processing was fitted with, whatever the path or runtime."""
    path = getattr(getattr(model, "loaded", None), "path", None)
    return files_digest(file_hashes(path)) if path is not None else None


def files_digest(files: dict[str, str]) -> str | None:
    """16 hex digits over a fingerprint's file hashes (a store records them), or None where there are none."""
    if not files:
        return None
    return hashlib.sha256(json.dumps(files, sort_keys=True).encode("utf-8")).hexdigest()[:16]


def weights_dtype(folder: str | Path | None) -> str | None:
    """The dtype the weights are stored in (safetensors headers; "float16+float32" when mixed), or None
    where the folder holds no safetensors (a pytorch_model.bin is not read: that would need torch)."""
    if folder is None:
        return None
    files = sorted(Path(folder).glob("*.safetensors"))
    kinds: set[str] = set()
    for file in files:
        _, header = safetensors_header(file)
        # integer buffers (position ids) are not weights
        stored = [entry.get("dtype") for name, entry in header.items() if name != "__metadata__"]
        kinds |= {_SAFETENSORS_DTYPES[kind] for kind in stored if kind in _SAFETENSORS_DTYPES}
    return "+".join(sorted(kinds)) or None


def flatten(value: Any, prefix: str = "") -> dict[str, Any]:
    """Nested dicts as one level of dotted keys ({"a": {"b": 1}} -> {"a.b": 1}); other values as they are."""
    if not isinstance(value, dict) or not value:
        return {prefix: value}
    flat: dict[str, Any] = {}
    for key, inner in value.items():
        flat.update(flatten(inner, f"{prefix}.{key}" if prefix else str(key)))
    return flat


def tokenizer_json(model: Any) -> str:
    """tokenizer.json as the runtime reads it (truncation and padding off: bertscope sets them itself)."""
    return str(model.tokenizer.backend.to_str())


def _default_spec(model: Any) -> tuple[Any, dict[str, Any]]:
    """The spec bertscope resolves with no options, and its pooling as plain values; a model whose
    sentence-transformers pipeline bertscope cannot reproduce records "auto": "unsupported" (and mean)."""
    unsupported = bool(getattr(model.loaded, "st_unsupported", None))
    spec = model.spec(pooling="mean") if unsupported else model.spec()
    pooling = {
        "pooling": spec.pooling.value,
        "layers": list(spec.layers),
        "combine": spec.combine.value,
        "mask_special": spec.mask_special,
        "normalize": spec.normalize,
    }
    if unsupported:
        pooling["auto"] = "unsupported"
    return spec, pooling


def _tokenizer_facts(model: Any) -> dict[str, Any]:
    """Whether it lowercases, and a hash of its vocabulary (the ids it reads are in the canaries);
    remembered per tokenizer.json (which holds the vocabulary), as reading them takes a few tenths."""
    text = tokenizer_json(model)
    key = text_sha(text)
    if key not in _TOKENIZER_FACTS:
        lowercase = _lowercases(json.loads(text).get("normalizer"))
        vocab = text_sha(json.dumps(sorted(model.vocab.items())))
        _TOKENIZER_FACTS[key] = {"lowercase": lowercase, "vocab": vocab}
    return dict(_TOKENIZER_FACTS[key])


def _lowercases(normalizer: Any) -> bool:
    """Whether a tokenizers normalizer (possibly a Sequence of them) lowercases its input."""
    if not isinstance(normalizer, dict):
        return False
    if normalizer.get("type") == "Lowercase" or normalizer.get("lowercase") is True:
        return True
    return any(_lowercases(inner) for inner in normalizer.get("normalizers") or [])


def _makes_model(name: str) -> bool:
    return name in _MODEL_FILES or name.endswith(_WEIGHT_SUFFIXES) or name.endswith(".model")


def file_sha256(path: Path) -> str:
    """SHA-256 of a file (64 hex digits), read in blocks."""
    digest = hashlib.sha256()
    with path.open("rb") as stream:
        while block := stream.read(1 << 22):
            digest.update(block)
    return digest.hexdigest()


def file_identity(stat: os.stat_result) -> tuple[int, ...]:
    """What says a file's bytes are the ones hashed before: size, modification and change times, inode.

    The change time too: `touch -r`, `tar -x` and `cp -p` set a rewritten file's modification time back,
    but no tool sets its change time, which moves with every write."""
    return (stat.st_size, stat.st_mtime_ns, stat.st_ctime_ns, stat.st_ino)


def _file_sha(path: Path) -> str:
    key = (str(path.resolve()), *file_identity(path.stat()))
    if key not in _FILE_DIGESTS:
        _FILE_DIGESTS[key] = file_sha256(path)[:32]
    return _FILE_DIGESTS[key]


def text_sha(text: str) -> str:
    """SHA-256 of a text's UTF-8 bytes, 32 hex digits (as the fingerprint writes hashes)."""
    return hashlib.sha256(text.encode("utf-8")).hexdigest()[:32]
