"""The console entry point run in-process, as the tests that check its output and exit code use it."""

from __future__ import annotations

import contextlib
import io
import json
import sys
import warnings
from collections.abc import Iterator
from typing import Any, NamedTuple


def build_commands_once() -> None:
    """typer builds an app's click command tree anew on every run (~0.08 s, ~0.5 s on a loaded machine),
    and the suite and the docs run the console in-process some 400 times: build each app's tree once.
    The tree is the one a console run builds; click parses each run into a fresh context."""
    import typer.main
    import typer.testing

    if getattr(typer.main.get_command, "built_once", False):
        return
    original = typer.main.get_command
    built: dict[int, tuple[Any, Any]] = {}

    def get_command(typer_instance: Any) -> Any:
        found = built.get(id(typer_instance))
        if found is None or found[0] is not typer_instance:
            found = built[id(typer_instance)] = (typer_instance, original(typer_instance))
        return found[1]

    get_command.built_once = True  # type: ignore[attr-defined]
    typer.main.get_command = get_command  # Typer.__call__ looks it up here on each run
    typer.testing._get_command = get_command  # type: ignore[attr-defined]  # CliRunner.invoke's name for it


build_commands_once()


class Ran(NamedTuple):
    """What one in-process run of the console printed, and how it exited."""

    code: int
    stdout: str
    stderr: str


def run_main(*args: str) -> Ran:
    """Run `bertscope.cli.main` (its one-line errors and warnings included) in-process, as
    `bertscope ARGS...` would run: its exit code, stdout and stderr. docs/cog_run.py runs the docs'
    commands through it too.

    A subprocess pays ~8 s of imports and model loading per call; the cases that must run as the
    console runs them (a separate process: tests/test_robustness.py, `--debug` in tests/test_cli.py,
    the killed jobs) keep one.
    """
    from bertscope.cli import main

    stdout, stderr = io.StringIO(), io.StringIO()
    old_argv, old_showwarning = sys.argv, warnings.showwarning
    sys.argv = ["bertscope", *args]
    code = 0
    try:
        with contextlib.redirect_stdout(stdout), contextlib.redirect_stderr(stderr):
            main()
    except SystemExit as exit_:
        code = exit_.code if isinstance(exit_.code, int) else 1
    finally:
        sys.argv, warnings.showwarning = old_argv, old_showwarning
    return Ran(code, stdout.getvalue(), stderr.getvalue())


def json_of(*args: str) -> Any:
    """The JSON `bertscope ARGS... --json` prints, the run checked to have succeeded."""
    ran = run_main(*args, "--json")
    assert ran.code == 0, ran
    return json.loads(ran.stdout)


@contextlib.contextmanager
def no_deprecation(saying: str) -> Iterator[None]:
    """The block raises no DeprecationWarning whose message holds `saying` (a renamed name's warning)."""
    with warnings.catch_warnings(record=True) as caught:
        warnings.simplefilter("always")
        yield
    said = [str(w.message) for w in caught if issubclass(w.category, DeprecationWarning)]
    assert not [s for s in said if saying in s], said
