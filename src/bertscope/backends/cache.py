"""What bertscope keeps in its cache ($BERTSCOPE_CACHE): ONNX exports, OpenVINO models and runtime
measurements, each named by its model's content digest, listed and removed for `bertscope cache`."""

from __future__ import annotations

import contextlib
import errno
import os
import re
import shutil
import time
from collections.abc import Iterator
from dataclasses import dataclass
from pathlib import Path

from ..core.folder import read_json_object
from ..errors import BertscopeError
from .int8_gate import DRIFT_RECORD, INT8_MIN_COSINE, INT8_SHORT_MIN_COSINE
from .onnx import EXPORT_FORMAT, WRITE_PROBE, cache_dir, known_folders
from .openvino import IR_FORMAT
from .quantize import GRAPH_FORMAT, SCHEMES

__all__ = ["STAGED_AGE_S", "CachedFile", "CachedModel", "by_model", "cached_files", "clear_cache"]

# The cache's folders of files that belong to one model (their names begin <family>-<digest>-).
_KINDS = {"onnx": "ONNX export", "openvino": "OpenVINO model", "fast": "runtime measurement"}
# The files whose record (size and SHA-256, a .json of the same name) sits beside them: an ONNX export, and
# an OpenVINO model's weights (backends/onnx.py `cached_export`)
_RECORDED = (".onnx", ".bin")
# An OpenVINO model is its graph (.xml) and its weights (.bin, with their record): one model, one row
_IR_PARTS = (".bin", ".json")
# What a killed export or write leaves behind: the temporary folders an export (.export-), an OpenVINO
# model (.quantize-) and a static int8 graph (.static-, inside an .export- folder) are made in, and the
# staged files (.tmp) a record or measurement is written to before its rename
UNFINISHED_FOLDER, UNFINISHED_FILE = "unfinished export", "unfinished file"
_TEMP_PREFIXES = (".export-", ".quantize-", ".static-")
# A staged .tmp file is written and renamed in one call, some outside any lock (the digests, a missed
# proof's record): one untouched this long was left by a killed process
STAGED_AGE_S = 600.0


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


@dataclass(frozen=True)
class CachedModel:
    """The cached files of one model content (`digest`; None for files whose names carry none), the
    family its file names give, and the model folders seen with that content."""

    digest: str | None
    family: str
    files: tuple[CachedFile, ...]
    folders: tuple[str, ...]

    @property
    def bytes(self) -> int:
        """The size of every file, records included."""
        return sum(f.bytes for f in self.files)

    def holds(self) -> str:
        """What the files are, counted by kind: `3 ONNX exports, 1 OpenVINO model, 2 runtime measurements`."""
        counts: dict[str, int] = {}
        for cached in self.files:
            counts[cached.kind] = counts.get(cached.kind, 0) + 1
        return ", ".join(_counted(kind, n) for kind, n in sorted(counts.items(), key=_kind_order))

    def to_dict(self) -> dict[str, object]:
        """JSON-able: the content, family, size, what it holds, its files' paths and the folders seen."""
        return {
            "digest": self.digest, "family": self.family, "bytes": self.bytes, "holds": self.holds(),
            "files": [str(f.path) for f in self.files], "folders": list(self.folders),
        }  # fmt: skip


def by_model(files: list[CachedFile]) -> list[CachedModel]:
    """`files` grouped by model content, the largest first (files in a group too); folders once each."""
    groups: dict[str | None, list[CachedFile]] = {}
    for cached in files:
        groups.setdefault(cached.digest, []).append(cached)
    found = []
    for digest, group in groups.items():
        group.sort(key=lambda f: (-f.bytes, f.path.name))
        families = {_family_of(f.path) for f in group} if digest else set()
        folders = sorted({folder for f in group for folder in f.folders})
        found.append(CachedModel(digest, ", ".join(sorted(families)), tuple(group), tuple(folders)))
    return sorted(found, key=lambda m: (-m.bytes, m.digest or ""))


def _kind_order(item: tuple[str, int]) -> tuple[int, str]:
    order = list(_KINDS.values())
    base = item[0].split(" (")[0]
    return (order.index(base) if base in order else len(order), item[0])


def _counted(kind: str, n: int) -> str:
    """`1 ONNX export`, `2 ONNX exports (older bertscope, unused)`."""
    base, _, note = kind.partition(" (")
    return f"{n} {base}{'s' if n != 1 else ''}" + (f" ({note}" if note else "")


def _files() -> Iterator[tuple[str, Path]]:
    """(kind, path) of each model file; an export's record (its .json) goes with it, not on its own. Only
    the files bertscope names (`_ours`): a user's file in these folders is neither listed nor removed."""
    root = _root()
    for folder, kind in _KINDS.items():
        if not (root / folder).is_dir():
            continue
        for path in sorted((root / folder).iterdir()):
            if path.is_dir() and path.name.startswith(_TEMP_PREFIXES):
                yield UNFINISHED_FOLDER, path
                continue
            if not path.is_file() or not _ours(path.name):
                continue
            if path.name.endswith(".tmp") or _PROBE.fullmatch(path.name):
                yield UNFINISHED_FILE, path
                continue
            if path.name.endswith(".lock") or path.name == "folders.json":
                continue
            if path.suffix == ".json" and any(path.with_suffix(s).exists() for s in _RECORDED):
                continue  # the record of an export or an OpenVINO model: counted with it
            if path.suffix == ".bin" and path.with_suffix(".xml").exists():
                continue  # an OpenVINO model's weights: counted with its graph
            unused = (
                (folder == "onnx" and not _current_export(path.name))
                or (
                    folder == "openvino"
                    and not (f"-v{EXPORT_FORMAT}-" in path.name and f"-ir{IR_FORMAT}." in path.name)
                )
                or (folder == "fast" and not _current_measurement(path))
            )
            if unused:
                yield f"{kind} (older bertscope, unused)", path
            elif (refused := _refused_at(path)) is not None:
                yield f"{kind} (refused by the drift gate, min cosine {refused:.4f})", path
            else:
                yield kind, path


def _refused_at(path: Path) -> float | None:
    """The min cosine an int8 graph fitted on a caller's own texts was refused at, as the record beside it
    keeps the drift gate's verdicts (int8_gate.check_own_calibration); None for a graph none refused."""
    if path.suffix not in (".onnx", ".xml"):
        return None
    kept = read_json_object(path.with_suffix(".json")).get(DRIFT_RECORD)
    refused = [
        figure
        for verdict in (kept.values() if isinstance(kept, dict) else ())
        if isinstance(verdict, dict)
        for figure, bound in (
            (verdict.get("cos_min"), INT8_MIN_COSINE),
            (verdict.get("short_cos_min"), INT8_SHORT_MIN_COSINE),
        )
        if isinstance(figure, float) and figure < bound
    ]
    return min(refused) if refused else None


def _current_export(name: str) -> bool:
    """Whether an export's file name is one this bertscope reads (its format, and an int8 graph's scheme)."""
    if not name.endswith(f"-v{EXPORT_FORMAT}.onnx"):
        return False
    return "-int8-" not in name or any(f"-int8-{scheme}-g{GRAPH_FORMAT}-" in name for scheme in SCHEMES)


# The files bertscope writes in its cache folders: <family>-<digest>-... (exports and their records, lock
# files and staged .tmp files; OpenVINO models; measurements and missed proofs), and the record of what
# default loads run (recorded.py: folders.json, its lock, its staged folders.<pid>.tmp)
_SUFFIXES = (".onnx", ".json", ".xml", ".bin", ".lock", ".tmp")
_RECORD = re.compile(r"folders\.json(\.lock)?|folders\.\d+\.tmp")
# The probe onnx.writable_folder touches and unlinks in onnx/, openvino/ and fast/: one is left only by a
# process killed between the two, so it is an unfinished file, removed by age as a staged .tmp is
_PROBE = re.compile(re.escape(WRITE_PROBE) + r"\d+")


def _ours(name: str) -> bool:
    """Whether bertscope names files so: anything else in the cache folders is a user's, left alone."""
    return (
        (bool(_NAMED.match(name)) and name.endswith(_SUFFIXES))
        or bool(_RECORD.fullmatch(name))
        or bool(_PROBE.fullmatch(name))
    )


def _current_measurement(path: Path) -> bool:
    """Whether a load reads the measurement file `path`: this format's name (mode="fast"'s or the exact
    default's) and figures it takes (fast.read_measured: this bertscope's, and for mode="fast" plausible).
    A missed proof's record (.refused.json) is read as it is."""
    from .exact import EXACT_FORMAT
    from .fast import FAST_FORMAT, graphs_key, read_measured

    if path.name.endswith(".refused.json"):
        return True
    if path.name.endswith(f"-exact-f{EXACT_FORMAT}-{graphs_key()}.json"):
        return read_measured(path, check_plausible=False, quiet=True) is not None
    if not path.name.endswith(f"-f{FAST_FORMAT}-{graphs_key()}.json") or "-exact-f" in path.name:
        return False
    return read_measured(path, quiet=True) is not None


def _root() -> Path:
    """The cache folder; InvalidSpec where it is a file (BERTSCOPE_CACHE naming a file: `onnx.cache_dir`)."""
    return cache_dir().parent


# <family>-<digest>-...: a family's name may hold hyphens itself (xlm-roberta, deberta-v2), the content
# digest is the first part of 20 hex digits after it
_NAMED = re.compile(r"^(?P<family>.+?)-(?P<digest>[0-9a-f]{20})(?=[-.])")


def _digest_of(path: Path) -> str | None:
    named = _NAMED.match(path.name)
    return named["digest"] if named else None


def _family_of(path: Path) -> str:
    named = _NAMED.match(path.name)
    return named["family"] if named else ""


def cached_files() -> list[CachedFile]:
    """Every file in the cache that belongs to a model (exports with their records, OpenVINO models with
    their weights, measurements), and what killed exports and writes left (`UNFINISHED_FOLDER` and
    `UNFINISHED_FILE`, of no model: their digest is None)."""
    folders = known_folders()
    found = []
    for kind, path in _files():
        digest = _digest_of(path) if kind not in (UNFINISHED_FOLDER, UNFINISHED_FILE) else None
        seen = tuple(sorted(folders.get(digest, ()))) if digest else ()
        found.append(CachedFile(kind, path, digest, _bytes(path), seen))
    return found


def _bytes(path: Path) -> int:
    """The size of `path` and the files counted with it; of every file inside, for a folder."""
    if path.is_symlink() and path.is_dir():
        return 0  # a link named as an unfinished export: what it points at is not the cache's
    if path.is_dir():
        return sum(f.stat().st_size for f in path.rglob("*") if f.is_file() and not f.is_symlink())
    return sum(part.stat().st_size for part in (path, *_parts(path)) if part.exists())


def clear_cache(digest: str | None = None) -> list[CachedFile]:
    """Remove the cached files of the model whose content is `digest` (None: of every model, with what
    killed exports left where no process is writing); the removed. A cache that takes no change raises a
    BertscopeError that says so."""
    wanted = [f for f in cached_files() if digest is None or f.digest == digest]
    removed: list[CachedFile] = []
    folders = {f.path.parent for f in wanted}
    try:
        _check_writable(folders)
        for cached in wanted:
            if cached.kind in (UNFINISHED_FOLDER, UNFINISHED_FILE):
                continue  # removed below, only where no process is writing them
            for part in (cached.path, *_parts(cached.path)):
                part.unlink(missing_ok=True)
            removed.append(cached)
        for folder in sorted(folders):
            # into `removed` as each goes: a later folder's error keeps the count of those already gone
            _sweep(folder, [f for f in wanted if f.path.parent == folder], removed)
    except OSError as exc:
        if exc.errno not in (errno.EROFS, errno.EACCES, errno.EPERM):
            raise
        where = Path(exc.filename) if exc.filename else cache_dir().parent
        where = where if where.is_dir() else where.parent  # the folder, not the file it met
        files = f"{len(removed)} cached file{'' if len(removed) == 1 else 's'}"
        done = f"{files} removed before it" if removed else "nothing was removed"
        raise BertscopeError(
            f"cannot clear the cache: {where} is read-only ({exc.strerror}); {done}"
        ) from None
    return removed


def _check_writable(folders: set[Path]) -> None:
    """Raise the OSError of the first of `folders` whose files cannot be removed, before any is."""
    for folder in sorted(folders):
        if not os.access(folder, os.W_OK):
            read_only = hasattr(os, "statvfs") and os.statvfs(folder).f_flag & os.ST_RDONLY
            code = errno.EROFS if read_only else errno.EACCES
            raise OSError(code, os.strerror(code), str(folder))


def _sweep(folder: Path, wanted: list[CachedFile], removed: list[CachedFile]) -> None:
    """Remove, when every lock file in `folder` is free, the unfinished exports among `wanted`, each added
    to `removed` as it goes. Lock files stay (empty files): one removed while a process waits on it would let
    that process and a newcomer, which makes the file again, both hold "the" lock (with a filelock that
    does not look again at a lock file that went away; the dependency's floor is 3.12).

    Safe by the lock files: every export, OpenVINO model and cut graph is made in its temporary folder
    while its writer holds a lock file in the same folder (`{target}.lock`), and removes that folder before
    it lets go. So with every lock file there taken here (without waiting), and no new one made since the
    folder was read, no process is writing any of them: they are a killed writer's. A writer that comes
    now waits on its lock. Staged .tmp files are removed by age, as some are written outside any lock."""
    from filelock import FileLock, Timeout

    locks = sorted(folder.glob("*.lock"))
    with contextlib.ExitStack() as held:
        taken = set()
        for lock in locks:
            try:
                held.enter_context(FileLock(lock, timeout=0))
                taken.add(lock)
            except Timeout:
                continue  # a process is writing: its lock file stays
        unfinished = [f for f in wanted if f.kind in (UNFINISHED_FOLDER, UNFINISHED_FILE)]
        every_free = len(taken) == len(locks) and set(folder.glob("*.lock")) <= taken
        now = time.time()
        for cached in unfinished:
            if cached.kind == UNFINISHED_FOLDER and every_free:
                _remove_folder(cached.path)
            elif cached.kind == UNFINISHED_FILE and now - _mtime(cached.path) > STAGED_AGE_S:
                cached.path.unlink(missing_ok=True)
            else:
                continue
            removed.append(cached)


def _remove_folder(path: Path) -> None:
    """Remove an unfinished export's folder; a link of that name is unlinked, never followed (rmtree
    refuses one). An OSError is raised, not ignored: what stays is not counted removed, and the read-only
    case is said by clear_cache. A folder another clear removed meanwhile (FileNotFoundError, on it or on
    a file in it) is gone, as asked: no error."""
    if path.is_symlink():
        path.unlink(missing_ok=True)
        return
    for _ in range(3):  # the other clear may still be removing it: go on until it is gone
        try:
            shutil.rmtree(path)
            return
        except FileNotFoundError:
            if not os.path.lexists(path):
                return
    shutil.rmtree(path)


def _mtime(path: Path) -> float:
    try:
        return path.stat().st_mtime
    except FileNotFoundError:
        return time.time()  # gone meanwhile: not removed here


def _parts(path: Path) -> list[Path]:
    """The files counted and removed with `path`: an export's record; an OpenVINO graph's weights and
    their record (where they are there: a weights file without its graph is a row of its own)."""
    if path.suffix == ".xml":
        return [path.with_suffix(suffix) for suffix in _IR_PARTS]
    return [path.with_suffix(".json")] if path.suffix in _RECORDED else []
