"""The content digest of a model folder: what names its ONNX exports and measurements in the cache.

Moved out of backends/onnx.py (issue 38: that module stays under 400 lines); onnx.py re-exports the names.
"""

from __future__ import annotations

import hashlib
import json
import os
import sys
from pathlib import Path
from typing import Any

from ..core.fingerprint_facts import file_identity
from ..core.folder import read_json_object

__all__ = ["content_digest", "installed_key", "known_folders", "runtimes_key", "settings_digest"]


def _cache_parent() -> Path:
    from .recorded import cache_root

    return cache_root()


# The files whose bytes make a model what it is: config, weights, tokenizer, and the model code a folder
# ships (`auto_map`, run with trust_remote_code): an edit to that code changes the graph an export traced.
# A folder's other files (README, sentence-transformers settings, the ONNX files some repos carry) do not.
_CONTENT_FILES = (
    "config.json", "tokenizer.json", "tokenizer_config.json", "special_tokens_map.json", "vocab.txt",
    "vocab.json", "merges.txt", "added_tokens.json", "spiece.model", "sentencepiece.bpe.model",
    "model.safetensors.index.json", "pytorch_model.bin.index.json",
)  # fmt: skip
_CONTENT_SUFFIXES = (".safetensors", ".bin", ".model", ".py")
_DIGESTS: dict[tuple[Any, ...], str] = {}


def content_digest(folder: Path) -> str:
    """20 hex digits of SHA-256 over a model folder's config, weight, tokenizer and code files (names, bytes).

    The same model in two checkouts or venvs is one digest, so one export; a changed weight or vocabulary
    is another. Remembered per file identity (`file_identity`; in this process and in the cache), so a
    fresh process does not read the weights again.
    """
    files = sorted(
        p for p in Path(folder).iterdir()
        if p.is_file() and (p.name in _CONTENT_FILES or p.suffix in _CONTENT_SUFFIXES)
    )  # fmt: skip
    stats = tuple((p.name, *file_identity(p.stat())) for p in files)
    key = (str(Path(folder).resolve()), stats)
    if (key, _digests_path()) in _DIGESTS:  # per cache: each cache knows the folders it has seen
        return _DIGESTS[key, _digests_path()]
    remembered = _read_digests().get(_digest_key(key))
    if isinstance(remembered, dict) and isinstance(remembered.get("digest"), str):
        _DIGESTS[key, _digests_path()] = remembered["digest"]
        return str(remembered["digest"])
    digest = hashlib.sha256()
    for path in files:
        digest.update(path.name.encode() + b"\0")
        with path.open("rb") as stream:
            while block := stream.read(1 << 22):
                digest.update(block)
    found = _DIGESTS[key, _digests_path()] = digest.hexdigest()[:20]
    _write_digest(_digest_key(key), {"digest": found, "folder": key[0]})
    return found


# The sentence-transformers settings that pool a model's vectors (and the modules.json that names the
# module folders, each of whose files counts too): no export reads them, but what is measured on the
# sentence vectors (mode="fast", an own calibration's drift) changes with them.
_SETTINGS_FILES = ("modules.json", "sentence_bert_config.json", "config_sentence_transformers.json")


def settings_digest(folder: Path | str | None) -> str:
    """12 hex digits of SHA-256 over a model folder's sentence-transformers settings (names, bytes):
    modules.json, sentence_bert_config.json, config_sentence_transformers.json and every file of the
    module folders modules.json names (1_Pooling/config.json, 2_Dense, ...); "none" without a folder. Small
    files, read at each call: a changed pooling is a changed digest at once."""
    if folder is None:
        return "none"
    root = Path(folder)
    files = [root / name for name in _SETTINGS_FILES if (root / name).is_file()]
    modules = _read_json_list(root / "modules.json")
    for module in modules:
        sub = str(module.get("path", "")) if isinstance(module, dict) else ""
        if sub and sub != "." and (root / sub).is_dir():
            files.extend(sorted(p for p in (root / sub).rglob("*") if p.is_file()))
    digest = hashlib.sha256()
    for path in files:
        digest.update(path.relative_to(root).as_posix().encode() + b"\0")
        try:
            digest.update(path.read_bytes())
        except OSError:
            digest.update(b"unreadable")
        digest.update(b"\0")
    return digest.hexdigest()[:12]


def _read_json_list(path: Path) -> list[Any]:
    """A JSON file's top-level list, or [] when the file is missing, unreadable or holds no list."""
    try:
        data = json.loads(path.read_text(encoding="utf-8"))
    except (OSError, ValueError):
        return []
    return data if isinstance(data, list) else []


def known_folders() -> dict[str, set[str]]:
    """Digest -> the model folders seen with that content (for `bertscope cache`)."""
    found: dict[str, set[str]] = {}
    for entry in _read_digests().values():
        if isinstance(entry, dict) and isinstance(entry.get("digest"), str):
            found.setdefault(entry["digest"], set()).add(str(entry.get("folder")))
    return found


def _digest_key(key: tuple[Any, ...]) -> str:
    return hashlib.sha256(json.dumps(key).encode()).hexdigest()[:24]


def _digests_path() -> Path:
    return _cache_parent() / "digests.json"


def _read_digests() -> dict[str, Any]:
    return read_json_object(_digests_path())


def _write_digest(key: str, digest: dict[str, str]) -> None:
    """Remember one folder's digest; a cache that cannot be written only costs a re-read next time."""
    path = _digests_path()
    try:
        path.parent.mkdir(parents=True, exist_ok=True)
        known = _read_digests()
        known[key] = digest
        staged = path.with_suffix(f".{os.getpid()}.tmp")
        staged.write_text(json.dumps(dict(list(known.items())[-512:])), encoding="utf-8")
        os.replace(staged, path)
    except OSError:
        pass


def installed_key() -> str:
    """A short key for the installed torch, transformers and runtimes (their files' times and sizes and
    their dist-info versions, read without importing them or their metadata): an upgrade changes the
    reference or a runtime's kernels, so whether each way is exact is measured again."""
    return _stamps_key(("torch", "transformers", "onnxruntime", "openvino"))


def runtimes_key() -> str:
    """A short key for the installed ONNX Runtime and OpenVINO alone (as `installed_key` stamps them): the
    exact default's and mode="fast"'s measurements carry it too, so an install without torch finds the
    one a run with torch made over these same runtimes (the exports were proven against torch then)."""
    return _stamps_key(("onnxruntime", "openvino"))


def _stamps_key(names: tuple[str, ...]) -> str:
    stamps = [f"{name}:{_stamp(_installed_origin(name))}" for name in names]
    return hashlib.sha256("|".join(stamps).encode()).hexdigest()[:8]


def _stamp(origin: str | None) -> str:
    """One install's stamp: its file's time and size, and the versions its site folder's dist-info names
    give (one listing, no metadata import): where installs share one file time (Nix sets every file's to
    1, some images normalise them), an upgrade still changes the stamp."""
    if origin is None:
        return "-"
    path = Path(origin)
    found = path.stat()
    package = path.parent if path.name == "__init__.py" else path
    site = package.parent
    stem = package.name.split(".")[0].replace("-", "_").lower()
    try:
        versions = sorted(
            entry.name
            for entry in site.iterdir()
            if entry.name.lower().startswith(stem) and entry.suffix == ".dist-info"
        )
    except OSError:
        versions = []
    return f"{found.st_mtime_ns}:{found.st_size}:{','.join(versions)}"


def _installed_origin(name: str) -> str | None:
    """The file a top-level package is installed as, found by the import finders themselves, not through
    sys.modules: a process that blocks an import (sys.modules["torch"] = None, as a slimmed install is
    tried) or imported it with no spec stamps the same install, so it finds what was recorded there."""
    for finder in sys.meta_path:
        find_spec = getattr(finder, "find_spec", None)
        if find_spec is None:
            continue
        try:
            spec = find_spec(name, None)
        except (ImportError, ValueError):  # a finder that refuses the name: the next may know it
            continue
        if spec is not None:
            return spec.origin if isinstance(spec.origin, str) and os.path.exists(spec.origin) else None
    return None
