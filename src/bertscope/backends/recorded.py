"""The runtime each `load()` of a folder chose on this machine, kept so that `bertscope info` can say it
without torch.

`load()` with the exact default records, per model folder, the `ModelInfo` fields the choice sets
(backend, dtype, exact) with what they hold for: the folder's files (sizes and times), this CPU, the
threads its runtimes use and bertscope's version, and the figures it was read from (a digest of the
measurement file: measured again or forgotten since, the record no longer holds). A load with `threads=`
asked records nothing (the choice holds for that thread count only). Reading it back imports no torch;
anything changed, and `info` loads.
"""

from __future__ import annotations

import hashlib
import importlib.util
import json
import os
from pathlib import Path
from typing import Any

from ..core.cpu import cpu_flags, cpu_name, cpu_threads
from ..core.folder import FolderView, read_json_object

__all__ = ["cache_root", "folder_info", "measurement_stamp", "recall", "remember"]


def cache_root() -> Path:
    """bertscope's cache: $BERTSCOPE_CACHE, else $XDG_CACHE_HOME/bertscope, else ~/.cache/bertscope."""
    root = os.environ.get("BERTSCOPE_CACHE")
    if root:
        # a ~ the shell did not expand (quoted, or set by Docker's ENV or systemd) means the home folder,
        # as in HF_HOME, not a folder named ~ in whatever folder the process runs in
        return Path(root).expanduser()
    return Path(os.environ.get("XDG_CACHE_HOME") or str(Path.home() / ".cache")).expanduser() / "bertscope"


def remember(folder: Path, runtime: dict[str, Any], device: str, *, measurement: str | None = None) -> None:
    """Keep `runtime` ({"backend", "dtype", "exact"}) as what a default load of `folder` runs here;
    `measurement`: `measurement_stamp` of the file its figures were read from, taken when they were read
    (None where none was read), so that the record holds only while that file holds the same figures."""
    from filelock import FileLock

    path = _path()
    entry = {"holds_for": _holds_for(folder, device), "runtime": runtime, "measurement": measurement}
    try:
        path.parent.mkdir(parents=True, exist_ok=True)
        # read, add, write under a lock: two processes loading at once must not drop each other's entry
        with FileLock(f"{path}.lock"):
            known = {name: seen for name, seen in _read().items() if Path(name).is_dir()}  # gone: dropped
            known[str(folder)] = entry
            staged = path.with_suffix(f".{os.getpid()}.tmp")
            staged.write_text(json.dumps(known), encoding="utf-8")
            os.replace(staged, path)
    except OSError:
        pass  # only `info`'s shortcut is lost: it loads the model instead


def recall(folder: Path, device: str) -> dict[str, Any] | None:
    """What a default load of `folder` would run here, if recorded and still true; else None."""
    entry = _read().get(str(folder))
    if not isinstance(entry, dict) or entry.get("holds_for") != _holds_for(folder, device):
        return None
    runtime = entry.get("runtime")
    backend = (runtime or {}).get("backend")
    if backend not in (None, "torch") and importlib.util.find_spec(backend) is None:
        return None  # uninstalled since: a load chooses again among what is here
    if not isinstance(runtime, dict):
        return None
    measured = (runtime.get("exact") or {}).get("measured")
    if measured is not None and entry.get("measurement") != measurement_stamp(Path(measured)):
        return None  # measured again since, or forgotten (--remeasure): a load reads the figures now
    return runtime


def folder_info(view: FolderView) -> dict[str, Any] | None:
    """`load(folder).info().to_dict()` from the folder and the recorded choice; None if a load must tell."""
    light = view.info()
    runtime = recall(view.path, light["device"]) if light is not None else None
    return None if light is None or runtime is None else {**light, **runtime}


# What `bertscope info` says of the runtime before any load on this machine has chosen one.
UNCHOSEN = (
    "not chosen on this machine yet: the first load that runs the model chooses its exact runtime (timing "
    "each, up to a minute, for a model of 5,000,000 weights or more) and records it, which info then shows"
)


def unchosen_info(view: FolderView) -> dict[str, Any] | None:
    """The folder's facts where no load here has recorded its runtime yet, the runtime left unsaid
    (`backend` None, `exact` saying why): `bertscope info` stays light (no torch, no export, no timing)
    on a machine that has not run the model; None where only a load can tell the facts."""
    light = view.info()
    if light is None:
        return None
    return {**light, "backend": None, "exact": {"chosen": None, "why": UNCHOSEN}}


def _holds_for(folder: Path, device: str) -> str:
    from ..core.version import __version__

    files = sorted([p.name, p.stat().st_size, p.stat().st_mtime_ns] for p in folder.iterdir() if p.is_file())
    about = [files, cpu_name(), sorted(cpu_flags()), cpu_threads(), __version__, device]
    return hashlib.sha256(json.dumps(about).encode()).hexdigest()[:24]


def measurement_stamp(measured: Path) -> str | None:
    """A digest of a measurement file's figures (None where it is gone): what a record was read from."""
    try:
        return hashlib.sha256(measured.read_bytes()).hexdigest()[:24]
    except OSError:
        return None


def _path() -> Path:
    return cache_root() / "fast" / "folders.json"


def _read() -> dict[str, Any]:
    return read_json_object(_path())
