"""Whether a folder takes a new file, asked before the work whose output goes there: a read-only file
system, or /proc, exists and is "writable" to root by its permissions, yet takes no file."""

from __future__ import annotations

import errno
import os
import tempfile
from pathlib import Path

from ..errors import InvalidInput

__all__ = ["cannot_create", "refuse_unwritable"]


def cannot_create(folder: Path) -> str | None:
    """Why no new file can be made in `folder`, or None where one can (a file of its own, removed at once:
    a file already there may be another job's)."""
    try:
        fd, probe = tempfile.mkstemp(dir=folder, prefix=".bertscope-write-probe-")
    except OSError as exc:
        if exc.errno == errno.ENOENT:  # the folder is there: its file system takes no new files
            return "its file system takes no new files"
        return exc.strerror or str(exc)
    os.close(fd)
    os.unlink(probe)
    return None


def refuse_unwritable(path: Path, what: str) -> None:
    """Refuse `path` (`what`: "the picture", "--save") in one line where its folder, which exists, takes
    no new file."""
    if why := cannot_create(path.parent):
        raise InvalidInput(
            f"cannot write {what} {path}: no file can be created in {path.parent} ({why}); choose a folder "
            "you can write to"
        )
