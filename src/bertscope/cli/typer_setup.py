"""How typer shows the command line and reads it, fitted to bertscope's rules: help tables that wrap
instead of cutting with "...", usage errors in one line on stderr, an empty value typed refused, `warn`
for every one-line message, and the `out`/`err` consoles every command prints to.

typer has no setting for any of these, so this module sets them in typer's own modules when imported
(`cli/app.py` imports it first).
"""

from __future__ import annotations

import difflib
import functools
import importlib
import json
import os
import sys
from collections.abc import Callable
from pathlib import Path
from typing import Any, NoReturn

import typer
import typer.rich_utils
from rich.columns import Columns
from rich.console import Console, ConsoleOptions, Group, RenderResult
from rich.table import Table
from rich.text import Text
from typer.core import TyperCommand

from .wording import CLICK, as_flags

__all__ = ["CLICK", "JSON_ON_USAGE_ERROR", "HiddenArgumentsUnsaid", "err", "missing_argument", "out", "warn"]

# Commands whose --json promises one JSON object on stdout on every exit, a command line click cannot read
# included (`{"ok": false, "error": ...}`, exit 2: docs/verify.md); each command declares itself here.
JSON_ON_USAGE_ERROR: set[str] = set()


class HiddenArgumentsUnsaid(TyperCommand):
    """A command whose usage line leaves out its hidden arguments, as its help rows do: typer writes every
    argument into the usage line, hidden or not (`calibrate [OPTIONS] [pairs_file]`).
    Every command with a hidden positional (an older spelling still read) uses it."""

    def collect_usage_pieces(self, ctx: Any) -> list[str]:  # ctx: the Context of typer's own click
        pieces = [self.options_metavar] if self.options_metavar else []
        for param in self.get_params(ctx):
            if not getattr(param, "hidden", False):
                pieces.extend(param.get_usage_pieces(ctx))
        return pieces


class _FoldingTable(Table):
    """typer's help tables with every column folding what does not fit, instead of cutting it with "…"."""

    def add_row(self, *renderables: Any, **options: Any) -> None:
        super().add_row(*renderables, **options)
        for column in self.columns:
            column.overflow = "fold"


class _StackedColumns(Columns):
    """An option's help and its [default: ...] one under the other, each wrapped to the column's width."""

    def __rich_console__(self, console: Console, options: ConsoleOptions) -> RenderResult:
        yield Group(*self.renderables)


# typer has no setting for this: at 80 columns its help tables cut long option names and help words
# with "…" (rich's default overflow); these two classes, in typer's own module, make them wrap.
typer.rich_utils.Table = _FoldingTable  # type: ignore[misc]
typer.rich_utils.Columns = _StackedColumns  # type: ignore[misc]
# Piped output keeps whole columns instead of wrapping to a guessed 80-character terminal.
# No markup is read in what is printed: texts, pieces and messages hold brackets ('[unused0]', '[b]').
# Output read by a pipe that closes early (`| head -1`) ends quietly, as coreutils' tools end by SIGPIPE
PIPE_CLOSED = 141  # 128 + SIGPIPE


def pipe_closed() -> NoReturn:
    """End a command whose stdout's reader went away: nothing more is written there (it points at
    /dev/null, so the interpreter's last flush raises nothing) and the exit status is `PIPE_CLOSED`."""
    try:
        target = sys.stdout.fileno()
    except (AttributeError, OSError, ValueError):  # a stream in memory (tests) has no file to point away
        raise SystemExit(PIPE_CLOSED) from None
    os.dup2(os.open(os.devnull, os.O_WRONLY), target)
    raise SystemExit(PIPE_CLOSED)


class _Console(Console):
    def on_broken_pipe(self) -> None:
        """rich's exits 1, as a failure; a closed pipe is the reader's choice (`pipe_closed`). Not made quiet
        as rich's is: stdout goes to /dev/null, and a command run in process (tests, notebooks) prints on."""
        pipe_closed()


out = _Console(width=None if sys.stdout.isatty() else 160, markup=False)
err = Console(stderr=True, soft_wrap=True, markup=False)


def warn(message: object, *, label: str = "warning:", style: str = "yellow") -> None:
    """One line on stderr: a coloured label, then the message. A str (the command line's own words) is
    printed as written; a library error or warning object is reworded into the flags the user typed
    (`dtype='bfloat16'` -> `--dtype bfloat16`, see `wording.as_flags`)."""
    text = message if isinstance(message, str) else as_flags(str(message))
    err.print(Text.assemble((label, style), " ", text), highlight=False)


def missing_argument(message: str) -> Exception:
    """click's usage error for arguments a command needs but did not get (no texts, one text where two are
    needed): `error: MESSAGE; see `bertscope CMD --help``, exit 2, as click's own missing argument."""
    context = importlib.import_module(f"{CLICK}.globals").get_current_context(silent=True)
    error: Exception = importlib.import_module(f"{CLICK}.exceptions").UsageError(message, ctx=context)
    return error


def _usage_error(exc: Any) -> None:  # click's ClickException (typer's own copy of click, or click)
    """A command line click cannot read (an unknown option or command, a missing argument or value, a value
    not of the option's type or range) as one line on stderr, as every other error: `error: ...; see
    `bertscope CMD --help``. click's exit code for it (2) stays; docs/errors.md lists the codes."""
    if type(exc).__name__ == "NoArgsIsHelpError":  # `bertscope` alone: the help was the answer
        return
    ctx = getattr(exc, "ctx", None)
    unknown = type(exc).__name__ == "NoSuchOption"
    message = _no_such_option(exc.option_name, ctx) if unknown else exc.format_message()
    fix = f"; see `{ctx.command_path} --help`" if ctx is not None else ""
    warn(f"{message.rstrip('.')}{fix}", label="error:", style="red")
    if ctx is not None and ctx.command.name in JSON_ON_USAGE_ERROR and _json_typed():
        sys.stdout.write(json.dumps({"ok": False, "error": f"{message.rstrip('.')}{fix}"}) + "\n")


def _json_typed() -> bool:
    """Whether --json was typed (before a `--`): click stops at the error, so its value was never read."""
    words = sys.argv[1:]
    return "--json" in (words[: words.index("--")] if "--" in words else words)


def _no_such_option(name: str, ctx: Any) -> str:
    """click's "No such option" with its suggestions drawn from the options --help shows (never a hidden,
    older spelling), and a negative number (`static --ids -1`) told how to give it as an argument."""
    path = ctx.command_path if ctx is not None else "bertscope COMMAND"
    if name[1:].replace(".", "", 1).isdigit():
        return (
            f"{name} is read as an option; to give a negative number as an argument, put -- before it "
            f"(`{path} [OPTIONS] -- {name}`)"
        )
    shown = [
        opt
        for param in (ctx.command.get_params(ctx) if ctx is not None else [])
        if not getattr(param, "hidden", False)
        for opt in (*param.opts, *param.secondary_opts)
        if opt.startswith("--") == name.startswith("--")
    ]
    close = difflib.get_close_matches(name, shown)
    if not close:
        return f"No such option: {name}"
    return f"No such option: {name} (did you mean {' or '.join(close)}?)"


# typer boxes these errors (several lines, a frame); the command line's errors are one line each.
typer.rich_utils.rich_format_error = _usage_error  # type: ignore[assignment]
# Options where an empty value means something of its own (`--prompt ""`: no prompt, not the model's).
EMPTY_MEANS_SOMETHING = frozenset({"prompt"})
# Text options and arguments that name a file (`-i` also takes `-`): an empty one is an empty path.
FILE_NAMES = frozenset({"input_path", "corpus", "from_corpus", "reference", "test", "store", "pairs_file"})


def _refuse_empty(self: Any, ctx: Any, value: Any, *, process: Callable[..., Any]) -> Any:
    """One rule for an empty value typed on the command line (`-o ''`, `--device ''`): refused in one line,
    never read as "not given" nor as the folder `.` (typer's Path('')). An option whose empty value means
    something (EMPTY_MEANS_SOMETHING) keeps it; a text argument is left to the command (the library names
    an empty text). A number option given `nan` is told it is no number (its range check would say
    "should be less than or equal to 1" of it)."""
    given = value if isinstance(value, (tuple, list)) else (value,)
    if any(isinstance(v, str) and v.strip().lower().lstrip("+-") == "nan" for v in given):
        if _reads(self, float):
            raise importlib.import_module(f"{CLICK}.exceptions").BadParameter(
                "nan is not a number: give one", ctx=ctx, param=self
            )
    typed = getattr(ctx.get_parameter_source(self.name or ""), "name", None) == "COMMANDLINE"
    is_path = self.name in FILE_NAMES or _reads(self, Path)
    is_option = self.param_type_name == "option"
    if typed and "" in given and self.name not in EMPTY_MEANS_SOMETHING and (is_option or is_path):
        what = "'' is an empty path: give a file name" if is_path else "'' is an empty value: give one"
        fix = ", or leave the option out for its default" if is_option else ""
        raise importlib.import_module(f"{CLICK}.exceptions").BadParameter(what + fix, ctx=ctx, param=self)
    return process(self, ctx, value)


def _reads(param: Any, kind: type) -> bool:
    """Whether a typer parameter reads a float (`kind` float) or a path (`kind` Path). Recent typers
    describe the annotation (`type_descriptor`) and run a click without `click.types`; older ones (from
    0.13, which the project takes) run click itself, whose `FloatParamType` and `Path` say it."""
    described = getattr(param, "type_descriptor", None)
    if described is not None:
        if kind is Path:
            return bool(getattr(described, "is_path", False))
        return getattr(described, "annotation", None) is kind
    click_types = importlib.import_module(f"{CLICK}.types")
    return isinstance(param.type, click_types.Path if kind is Path else click_types.FloatParamType)


# typer reads '' as a value (or, for a Path, as the folder '.'); every command refuses it (_refuse_empty).
# TyperOption and TyperArgument are typer's public classes in every version bertscope takes (>= 0.13),
# where the base they share is private and newer.
for _kind in (typer.core.TyperOption, typer.core.TyperArgument):
    _kind.process_value = functools.partialmethod(_refuse_empty, process=_kind.process_value)  # type: ignore[method-assign,assignment]


def _parse_args(self: Any, ctx: Any, args: list[str], *, parse: Callable[..., Any]) -> Any:
    """click's parser with two usage errors made like the rest. A group below the root typed alone
    (`bertscope index`) printed its whole help on stdout (exit 2): one line naming its commands and the
    help instead, as click's "Missing command" (`bertscope` alone still shows the help). An option typed
    without its value (`geometry --input`) came without the context that names `see ... --help`."""
    usage_error = importlib.import_module(f"{CLICK}.exceptions").UsageError
    if not args and ctx.parent is not None and hasattr(self, "list_commands") and not ctx.resilient_parsing:
        shown = [name for name in self.list_commands(ctx) if not self.get_command(ctx, name).hidden]
        raise usage_error(f"Missing command: give one of {', '.join(shown)}", ctx=ctx)
    try:
        return parse(self, ctx, args)
    except usage_error as exc:
        if exc.ctx is None:  # the parser's own errors (a missing value) carry none
            exc.ctx = ctx
        raise


for _parser in (typer.core.TyperCommand, typer.core.TyperGroup):
    _parser.parse_args = functools.partialmethod(_parse_args, parse=_parser.parse_args)  # type: ignore[method-assign,assignment]
