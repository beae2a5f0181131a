"""A small text file read whole (pairs, a vocabulary): UTF-8, or one line naming the file and the fix."""

from __future__ import annotations

import re
import sys
from pathlib import Path

from ..errors import InvalidInput

__all__ = [
    "MISSING_VALUES", "STDIN", "STDIN_NAME", "closed_stdin", "is_column_name", "not_a_file", "read_utf8",
    "shown_path",
]  # fmt: skip

STDIN = "-"  # the file name that reads standard input, as `embed -i -` does
STDIN_NAME = "<stdin>"  # how a message names it


def shown_path(path: object) -> str:
    """How a message names a file given as `path`: `<stdin>` for `-`."""
    return STDIN_NAME if str(path) == STDIN else str(path)


def closed_stdin(what: str) -> str:
    """Why `-` cannot be read where stdin is closed (`<&-`, a daemon: Python sets `sys.stdin` None), and the
    fix; `what` is what the command reads ("the texts", "the lines")."""
    return (
        f"{STDIN_NAME} is closed: nothing can be read from it; pipe {what} in (or < FILE), or give the "
        "file's path instead of -"
    )


# A score or label field that names a column starts with a letter ("score", "sim (0-10)"); a missing value
# is no name, so a first pair without a score is refused by its line, never skipped as a header.
_COLUMN_NAME = re.compile(r"[^\W\d].*")
MISSING_VALUES = frozenset({"", "-", "?", "n/a", "na", "none", "null"})


def is_column_name(field: str) -> bool:
    """Whether a first line's number field reads as a column name (a header), not a value or a missing one."""
    cell = field.strip()
    return cell.lower() not in MISSING_VALUES and _COLUMN_NAME.fullmatch(cell) is not None


def not_a_file(path: str | Path) -> str:
    """Why `path`, which is no regular file, cannot be read: a folder (give the file inside it), nothing
    there, or something else there (a device such as /dev/null, a pipe, a socket: the caller names what to
    give instead)."""
    path = Path(path)
    if path.is_dir():
        return "it is a folder: give the file inside it"
    return "not a regular file (a device, pipe or socket)" if path.exists() else "no such file"


def read_utf8(path: str | Path, what: str = "") -> str:
    """The text of `path` (named in errors as `what` + the path), or InvalidInput: missing, a folder,
    not UTF-8 (named at the line of its first bad byte), unreadable."""
    path = Path(path)
    named = f"{what} {path}".strip()
    if str(path) == STDIN:  # `-i -`, as embed reads it, named as its reader names it
        stdin = getattr(sys.stdin, "buffer", None)  # a StringIO put there in a program has none
        raw = stdin.read() if stdin is not None else (sys.stdin.read() if sys.stdin else "").encode()
        return _decoded(raw, f"{what} {STDIN_NAME}".strip())
    if not path.is_file():
        fix = "; give a text file" if path.exists() and not path.is_dir() else ""
        raise InvalidInput(f"cannot read {named}: {not_a_file(path)}{fix}")
    try:
        raw = path.read_bytes()  # decoded whole below, so an error's offset is the file's, not a chunk's
    except OSError as exc:
        raise InvalidInput(
            f"cannot read {named} ({exc.strerror}); check the file and its permissions"
        ) from None
    return _decoded(raw, named)


def _decoded(raw: bytes, named: str) -> str:
    try:
        text = raw.decode("utf-8")
    except UnicodeDecodeError as exc:
        # The line of the first bad byte, as the line-by-line readers name it (probe files, corpora).
        line = raw[: exc.start].count(b"\n") + 1
        raise InvalidInput(
            f"{named}:{line}: not UTF-8 text ({exc.reason}); convert the file to UTF-8 "
            "(e.g. iconv -f latin1 -t utf-8)"
        ) from None
    return text.replace("\r\n", "\n").replace("\r", "\n")  # newlines as read_text reads them
