"""One corpus job per output at a time: a job holds a lock beside its output while it runs.

A second job on the same output (a `--resume` while the first still runs, an `--overwrite` that would
delete its parts) is refused with one line naming the running job: its process id, when it started
and its command, which the running job writes into the lock file. The lock is the operating system's
(filelock: `flock` on Unix), so a killed job holds none; the file is removed when the job ends.
"""

from __future__ import annotations

import hashlib
import json
import os
import re
import shlex
import sys
from collections.abc import Iterator
from contextlib import contextmanager
from datetime import datetime
from pathlib import Path

from ..core.writable import cannot_create
from ..errors import CorpusError

__all__ = ["job_lock", "lock_path", "running_job", "unwritable_output"]

_PLAIN = re.compile(r"[A-Za-z0-9_.-]{1,64}")


def lock_path(output: str | Path, collection: str | None = None) -> Path:
    """The lock file of an output (`news.parquet.lock`), or of one collection of an SQLite store."""
    output = Path(output)
    if collection is None:
        return output.with_name(output.name + ".lock")
    # A collection may be named anything; a name that is no plain file name is locked by its hash.
    key = collection if _PLAIN.fullmatch(collection) else hashlib.sha256(collection.encode()).hexdigest()[:16]
    return output.with_name(f"{output.name}.{key}.lock")


@contextmanager
def job_lock(output: str | Path, *, collection: str | None = None) -> Iterator[None]:
    """Hold the output's lock while the block runs; CorpusError naming the holder when another job has it."""
    from filelock import FileLock, Timeout

    output = Path(output)
    path = lock_path(output, collection)
    if not path.parent.is_dir():
        yield  # nothing can be written there: the sink says so
        return
    what = str(output) if collection is None else f"collection {collection!r} in {output}"
    lock = FileLock(path, timeout=0)
    try:
        lock.acquire()
    except Timeout:
        # filelock also times out where the lock file cannot be created at all (/proc): no job holds it
        why = cannot_create(path.parent)
        if why is not None:
            raise unwritable_output(output, path, why) from None
        raise CorpusError(
            f"{what} is being written by another job right now ({_holder(path)}); wait for it to end, "
            "or stop it and run again with resume=True (--resume)"
        ) from None
    except OSError as exc:
        raise unwritable_output(output, path, exc.strerror or str(exc)) from None
    try:
        started = datetime.now().astimezone().isoformat(timespec="seconds")
        command = shlex.join([Path(sys.argv[0]).name, *sys.argv[1:]]) if sys.argv else "python"
        path.write_text(json.dumps({"pid": os.getpid(), "started": started, "command": command}))
        yield
    finally:
        # Removed while still held: a job waiting on the old file sees it gone and takes a new one.
        path.unlink(missing_ok=True)
        lock.release()


def unwritable_output(output: Path, path: Path, why: str) -> CorpusError:
    """The refusal of an output in a folder where its lock file `path` cannot be made (`why`)."""
    return CorpusError(
        f"cannot write {output}: its lock file {path.name} cannot be created in {path.parent} ({why}); "
        "write the output to a folder you can create files in"
    )


def running_job(output: str | Path, *, collection: str | None = None) -> str | None:
    """The job writing `output` (one `collection` of an SQLite store) now, as its lock file describes it;
    None where none runs. A killed job holds no lock but may leave the file: its process being gone says
    so. Read only: a reader never takes the lock, so a job starting meanwhile is never refused for it."""
    path = lock_path(output, collection)
    try:
        pid = int(json.loads(path.read_text())["pid"])
    except FileNotFoundError:
        return None
    except (OSError, ValueError, KeyError, TypeError):
        return _holder(path)  # a lock file written otherwise: a job may hold it
    try:
        os.kill(pid, 0)
    except ProcessLookupError:
        return None
    except PermissionError:
        pass  # another user's process: alive
    return _holder(path)


def _holder(path: Path) -> str:
    """The running job as its lock file describes it."""
    try:
        about = json.loads(path.read_text())
        return f"pid {about['pid']}, started {about['started']}: {about['command']}"
    except (OSError, ValueError, KeyError, TypeError):
        return f"its lock is {path}"
