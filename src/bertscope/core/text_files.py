"""A small text file read whole (pairs, a vocabulary): UTF-8, or one line naming the file and the fix."""

from __future__ import annotations

from pathlib import Path

from ..errors import InvalidInput

__all__ = ["read_utf8"]


def read_utf8(path: str | Path, what: str = "") -> str:
    """The text of `path` (named in errors as `what` + the path), or InvalidInput: missing, a folder,
    not UTF-8, unreadable."""
    path = Path(path)
    named = f"{what} {path}".strip()
    if not path.is_file():
        where = "it is a folder: give the file inside it" if path.is_dir() else "no such file"
        raise InvalidInput(f"cannot read {named}: {where}")
    try:
        return path.read_text(encoding="utf-8")
    except UnicodeDecodeError as exc:
        raise InvalidInput(
            f"{named}: not UTF-8 text ({exc.reason}); convert the file to UTF-8 "
            "(e.g. iconv -f latin1 -t utf-8)"
        ) from None
    except OSError as exc:
        raise InvalidInput(
            f"cannot read {named} ({exc.strerror}); check the file and its permissions"
        ) from None
