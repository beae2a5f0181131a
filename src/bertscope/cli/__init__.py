"""The command line: `app` and the shared options in `app`, one module per command group.

basics    info, tokens, static, anatomy
embed     embed, similarity
corpus    similar, collections (and the corpus job behind `embed -o`)
senses    senses (a word's occurrences in a token store, clustered)
research  eval, contextuality, fit-post, vocab, plot
serve, explore, bench
"""

from __future__ import annotations

import sys

from ..errors import BertscopeError
from . import basics, bench, corpus, embed, explore, research, senses, serve  # noqa: F401  (each registers its commands)
from .app import app, err, is_debug

__all__ = ["app", "main"]


def main() -> None:
    """Entry point: run the app, turning bertscope errors into one line on stderr."""
    from ..io.job import JobInterrupted

    try:
        app()
    except JobInterrupted as exc:
        err.print(f"stopped: {exc}", highlight=False)
        sys.exit(130)
    except BertscopeError as exc:
        if is_debug():
            raise
        err.print(f"[red]error:[/] {exc}", highlight=False)
        sys.exit(1)
    except KeyboardInterrupt:
        err.print("interrupted")
        sys.exit(130)
