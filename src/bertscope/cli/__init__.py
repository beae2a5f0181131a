"""The command line: `app` and the shared options in `app`, one module per command group.

basics    info, tokens, static, anatomy
embed     embed (`--level NAME`: any level of the corpus-level table), similarity
chunks    the chunk options of `embed` and how chunk vectors print
explain   explain, calibrate, attention, plot static
corpus    similar, collections (and the corpus job behind `embed -o`)
index     index build, index info (the ANN index beside a store)
senses    senses (a word's occurrences in a token store, clustered)
research  contextuality, fit-post; registers the eval, vocab and plot groups
evaluate  eval pairs, eval words, eval docsim (which layer, pooling and post-processing match judgements)
pictures  vocab add, plot words, plot layers
layers    probe, cka, compare (what each layer holds)
syntax    probe --task distance|depth (the structural probes' run, table and picture)
geometry  geometry (IsoScore, rogue dimensions, intrinsic dimension per layer)
static_kinds  distill (and the aggregation behind `static --corpus`)
serve, explore, bench
cache     cache (the exports and measurements bertscope keeps)
verify    verify (the model against the reference, a fingerprint, or a store)
wording   the library's messages in flag form (`dtype='bfloat16'` -> `--dtype bfloat16`), for `warn`
"""

from __future__ import annotations

import signal
import sqlite3
import sys
import threading
import warnings
from pathlib import Path
from typing import Any

from ..errors import BertscopeError, JobInterrupted, Terminated

try:
    from . import (  # noqa: F401  (each registers its commands)
        basics,
        bench,
        cache,
        corpus,
        embed,
        explain,
        explore,
        geometry,
        index,
        layers,
        research,
        senses,
        serve,
        static_kinds,
        verify,
    )
    from .app import app, err, is_debug, warn
except KeyboardInterrupt:
    # Ctrl-C while the commands load: the console script imports this module before main() can catch it,
    # and printed a traceback (exit -2). The command exits as main() does; an import in Python re-raises.
    _main = sys.modules.get("__main__")
    _spec = getattr(_main, "__spec__", None)
    if getattr(_spec, "name", None) != "bertscope.__main__" and Path(sys.argv[0]).stem != "bertscope":
        raise
    sys.stderr.write("interrupted\n")
    raise SystemExit(130) from None

__all__ = ["Terminated", "app", "debug_first", "main"]

# uvicorn handles SIGTERM itself while these serve (a graceful shutdown, then the signal's default end)
SERVING = ("serve", "explore")


def main() -> None:
    """Entry point: run the app, turning bertscope errors into one line on stderr."""

    def one_line(message: Warning | str, *args: object, **kwargs: object) -> None:
        warn(message)

    # Library warnings (a word missing from a plot, bfloat16 on a CPU without it) as one line each.
    warnings.showwarning = one_line  # type: ignore[assignment]
    args = debug_first(sys.argv[1:])
    terminated: list[int] = []

    def on_sigterm(signum: int, frame: Any) -> None:
        terminated.append(signum)
        raise Terminated

    previous = _handle_sigterm(args, on_sigterm)
    try:
        # click names the program `python -m X` where __main__ is a package's (pytest's): it is bertscope
        app(args=args, prog_name="bertscope")
    except JobInterrupted as exc:
        warn(exc, label="stopped:", style="yellow")  # in the flags typed: --resume
        sys.exit(143 if terminated else 130)
    except SystemExit as exc:
        # typer ends a command's KeyboardInterrupt, Terminated too, in exit 130 (Ctrl-C's) and says nothing
        if terminated and exc.code == 130:
            err.print("terminated")
            sys.exit(143)  # 128 + SIGTERM, as a shell reports a process the signal ended
        # the line a SIGTERM's `terminated` is: a run that just stops is unclear; serve and explore end in
        # uvicorn's own shutdown lines
        if exc.code == 130 and _command(args) not in SERVING:
            err.print("interrupted")
        raise
    except Terminated:  # before typer runs the command
        err.print("terminated")
        sys.exit(143)
    except BertscopeError as exc:
        if is_debug():
            raise
        warn(exc, label="error:", style="red")
        sys.exit(1)
    except KeyboardInterrupt:
        err.print("interrupted")
        sys.exit(130)
    except ModuleNotFoundError as exc:
        # An install without torch answers from exported graphs; a feature that needs the PyTorch module
        # imports it where the library has no one-line error of its own (core/loading.py's has the words).
        if is_debug() or exc.name not in ("torch", "transformers"):
            raise
        from ..core.loading import torch_missing

        warn(torch_missing(exc.name, "this command"), label="error:", style="red")
        sys.exit(1)
    except MemoryError:
        # An allocation past the machine's memory (numpy's _ArrayMemoryError is one): one line, never a
        # traceback; what to do is ask for less.
        if is_debug():
            raise
        warn(
            "out of memory: this machine cannot hold what the command asked for; ask for less (fewer "
            "texts or rows, a smaller --batch-size) or run it where there is more memory",
            label="error:", style="red",
        )  # fmt: skip
        sys.exit(1)
    except (OSError, sqlite3.Error) as exc:
        # The disk, permissions and other processes are outside bertscope: say what failed, in one line.
        if is_debug():
            raise
        filename = getattr(exc, "filename", None)
        if isinstance(exc, NotADirectoryError) and (blocking := _file_in_the_way(filename)) is not None:
            warn(
                f"{blocking} is a file, not a folder: give a path inside a folder",
                label="error:",
                style="red",
            )
            sys.exit(1)
        if isinstance(exc, IsADirectoryError) and filename:
            warn(
                f"{filename} is a folder, not a file: give a file name (inside it, or beside it); "
                "nothing already saved is lost",
                label="error:",
                style="red",
            )
            sys.exit(1)
        where = f" ({filename})" if filename else ""
        what = exc.strerror if isinstance(exc, OSError) and exc.strerror else str(exc)
        warn(f"{what}{where}; nothing already saved is lost", label="error:", style="red")
        sys.exit(1)
    finally:
        if previous is not None:
            signal.signal(signal.SIGTERM, previous)


def _handle_sigterm(args: list[str], handler: Any) -> Any:
    """Install `handler` for SIGTERM and return the handler it replaced; None (nothing installed) off the
    main thread, where signals cannot be handled, and for `serve` and `explore`, whose uvicorn handles it."""
    command = _command(args)
    if command in SERVING or threading.current_thread() is not threading.main_thread():
        return None
    return signal.signal(signal.SIGTERM, handler)


def _command(args: list[str]) -> str | None:
    """The command typed (`serve`), the first argument that is no option."""
    return next((a for a in args if not a.startswith("-")), None)


def debug_first(args: list[str]) -> list[str]:
    """`args` with a --debug typed anywhere before a `--` moved to the front, where the app's option is
    read: errors say "add --debug", and a user adds it at the end (`embed "a" --pooling foo --debug`).
    After `--` it is a text, left as typed."""
    end = args.index("--") if "--" in args else len(args)
    if "--debug" not in args[:end]:
        return args
    return ["--debug", *(a for a in args[:end] if a != "--debug"), *args[end:]]


def _file_in_the_way(filename: object) -> Path | None:
    """The file that stands where a path needs a folder (`-o afile/x.parquet`), named as the user gave it
    rather than the internal path that met it (`x.parquet.parts`); None where there is none."""
    if not isinstance(filename, (str, Path)):
        return None
    for parent in Path(filename).parents:
        if parent.is_file():
            return parent
    return None
