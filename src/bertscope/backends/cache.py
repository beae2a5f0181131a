"""What bertscope keeps in its cache ($BERTSCOPE_CACHE): ONNX exports, OpenVINO models and runtime
measurements, each named by its model's content digest, listed and removed for `bertscope cache`."""

from __future__ import annotations

from collections.abc import Iterator
from dataclasses import dataclass
from pathlib import Path

from .onnx import EXPORT_FORMAT, cache_dir, known_folders
from .openvino import IR_FORMAT
from .quantize import GRAPH_FORMAT, SCHEMES

__all__ = ["CachedFile", "cached_files", "clear_cache"]

# The cache's folders of files that belong to one model (their names begin <family>-<digest>-).
_KINDS = {"onnx": "ONNX export", "openvino": "OpenVINO model", "fast": "runtime measurement"}
# The files whose record (size and SHA-256, a .json of the same name) sits beside them: an ONNX export, and
# an OpenVINO model's weights (backends/onnx.py `cached_export`)
_RECORDED = (".onnx", ".bin")


@dataclass(frozen=True)
class CachedFile:
    """One cached file: what it is, which model content it belongs to, its size and the folders seen."""

    kind: str
    path: Path
    digest: str | None
    bytes: int
    folders: tuple[str, ...]

    def to_dict(self) -> dict[str, object]:
        """JSON-able: every field above, by its name."""
        return {**self.__dict__, "path": str(self.path), "folders": list(self.folders)}


def _files() -> Iterator[tuple[str, Path]]:
    """(kind, path) of each model file; an export's record (its .json) goes with it, not on its own."""
    root = cache_dir().parent
    for folder, kind in _KINDS.items():
        if not (root / folder).is_dir():
            continue
        for path in sorted((root / folder).iterdir()):
            if not path.is_file() or path.name.endswith((".lock", ".tmp")) or path.name == "folders.json":
                continue
            if path.suffix == ".json" and any(path.with_suffix(s).exists() for s in _RECORDED):
                continue  # the record of an export or an OpenVINO model: counted with it
            unused = (folder == "onnx" and not _current_export(path.name)) or (
                folder == "openvino"
                and not (f"-v{EXPORT_FORMAT}-" in path.name and f"-ir{IR_FORMAT}." in path.name)
            )
            yield (f"{kind} (older bertscope, unused)" if unused else kind), path


def _current_export(name: str) -> bool:
    """Whether an export's file name is one this bertscope reads (its format, and an int8 graph's scheme)."""
    if not name.endswith(f"-v{EXPORT_FORMAT}.onnx"):
        return False
    return "-int8-" not in name or any(f"-int8-{scheme}-g{GRAPH_FORMAT}-" in name for scheme in SCHEMES)


def _digest_of(path: Path) -> str | None:
    parts = path.name.split("-")
    return parts[1] if len(parts) > 2 and len(parts[1]) == 20 else None


def cached_files() -> list[CachedFile]:
    """Every file in the cache that belongs to a model (exports with their records, measurements)."""
    folders = known_folders()
    found = []
    for kind, path in _files():
        digest = _digest_of(path)
        seen = tuple(sorted(folders.get(digest, ()))) if digest else ()
        record = path.with_suffix(".json") if path.suffix in _RECORDED else None
        size = path.stat().st_size + (record.stat().st_size if record and record.exists() else 0)
        found.append(CachedFile(kind, path, digest, size, seen))
    return found


def clear_cache(digest: str | None = None) -> list[CachedFile]:
    """Remove the cached files of the model whose content is `digest` (None: of every model); the removed."""
    removed = [f for f in cached_files() if digest is None or f.digest == digest]
    for cached in removed:
        cached.path.unlink(missing_ok=True)
        if cached.path.suffix in _RECORDED:
            cached.path.with_suffix(".json").unlink(missing_ok=True)
    return removed
