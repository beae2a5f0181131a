"""Progress on stderr for long work: a bar on a terminal, a plain line every few seconds in a log.

One helper for every long loop (embedding batches, a probe's fits, a distillation): where stderr is a
terminal a rich bar redraws in place; where it is a log (a file or a pipe: CI, nohup, `2> run.log`) a
line such as `fitting probes: 40/80 (50%), 12 s elapsed, about 12 s left` is written every `LOG_EVERY`
seconds, never a redraw, and a last line when the work ends; short work (under `LOG_EVERY` seconds)
writes nothing there. Where stderr is neither (held in memory, as the tests and the docs capture it)
nothing is shown.
"""

from __future__ import annotations

import numbers
import sys
import time
from collections.abc import Callable, Iterator
from contextlib import contextmanager
from typing import Any

from ..errors import InvalidInput

__all__ = ["LOG_EVERY", "progress_callback", "step_progress"]

_MIN_TEXTS = 256
# Seconds between two lines in a log: a 4-minute probe writes ~24 lines, not one per step.
LOG_EVERY = 10.0
# A line's note from the steps done and the seconds elapsed (an embedding's texts/s and tok/s).
Note = Callable[[int, float], str]
# The clock of the log lines (a module name, so that a test can step it by hand instead of sleeping).
_clock = time.monotonic


def _mode() -> str | None:
    """`bar` (stderr is a terminal), `lines` (stderr is a file or a pipe) or None (no stderr to show on)."""
    stream = sys.stderr
    if stream is None:
        return None
    if stream.isatty():
        return "bar"
    try:
        stream.fileno()
    except (AttributeError, OSError, ValueError):  # io.UnsupportedOperation is an OSError
        return None
    return "lines"


def _duration(seconds: float) -> str:
    seconds = int(round(seconds))
    if seconds < 60:
        return f"{seconds} s"
    if seconds < 3600:
        return f"{seconds // 60} min {seconds % 60:02d} s"
    return f"{seconds // 3600} h {seconds // 60 % 60:02d} min"


class LogLines:
    """Progress as plain lines in a log: one every `every` seconds while work goes on, and a last one
    at the end when any was written (so a log of short work stays clean)."""

    def __init__(self, what: str, total: int | None, *, unit: str = "", every: float = LOG_EVERY) -> None:
        self.what, self.total, self.unit, self.every = what, total, unit, every
        self.done = 0
        self.start = self.last = _clock()
        self.written = False  # a line written, or due from the last step: the work was long enough

    def advance(self, n: int = 1, note: Note | None = None) -> None:
        """`n` more steps done; a line if `every` seconds passed since the last one (with `note(done,
        elapsed)` after the count), but for the last step, whose line is the last one's (`close`)."""
        self.done += n
        now = _clock()
        if now - self.last >= self.every:
            self.last = now
            if self.total and self.done >= self.total:
                self.written = (
                    True  # `1/1 (100%), 14 s elapsed` then `1/1 (100%), done in 14 s`: one is enough
                )
                return
            self._write(now, note)

    def close(self, note: Note | None = None) -> None:
        """The last line (`done in ...`), only where a line was written (or due) before."""
        if self.written:
            self._write(_clock(), note, final=True)

    def _write(self, now: float, note: Note | None, *, final: bool = False) -> None:
        elapsed = now - self.start
        unit = f" {self.unit}" if self.unit else ""
        if self.total:
            line = f"{self.what}: {self.done:,}/{self.total:,}{unit} ({100 * self.done // self.total}%)"
        else:
            line = f"{self.what}: {self.done:,}{unit}"
        if note is not None:
            line += f", {note(self.done, elapsed)}"
        if final:
            line += f", done in {_duration(elapsed)}"
        else:
            line += f", {_duration(elapsed)} elapsed"
            if self.total and 0 < self.done < self.total:
                line += f", about {_duration(elapsed * (self.total - self.done) / self.done)} left"
        print(line, file=sys.stderr, flush=True)
        self.written = True


@contextmanager
def progress_callback(
    total: int | None, *, enabled: bool | None = None
) -> Iterator[Callable[[int, int], None] | None]:
    """A per-batch callback (texts, tokens) that drives the progress of an embedding, or None when none
    is shown (`enabled` False; None: only for 256 texts or more, or an unknown count). A `progress=` that is
    no bool, or a `total=` that is no count, is refused in one line."""
    if enabled is not None and not isinstance(enabled, bool):
        raise InvalidInput(f"progress={enabled!r}: give True, False or None (a bar from 256 texts)")
    if total is not None and (
        isinstance(total, bool) or not isinstance(total, numbers.Integral) or total < 0
    ):
        raise InvalidInput(f"total={total!r}: give the number of texts (0 or more), or None where unknown")
    if enabled is None:
        enabled = total is None or total >= _MIN_TEXTS
    mode = _mode() if enabled else None
    if mode is None:
        yield None
        return
    if mode == "lines":
        lines = LogLines("embedding", total, unit="texts")
        tokens_seen = 0

        def rates(texts: int, elapsed: float) -> str:
            return _rates(texts, tokens_seen, elapsed)

        def to_log(n_texts: int, n_tokens: int) -> None:
            nonlocal tokens_seen
            tokens_seen += n_tokens
            lines.advance(n_texts, rates)

        yield to_log
        lines.close(rates)
        return
    with _bar([_text("embedding"), *_bar_columns(), _text("{task.fields[rate]}"), *_time_columns()]) as bar:
        task = bar.add_task("embed", total=total, rate="")
        tokens_seen = 0

        def on_batch(n_texts: int, n_tokens: int) -> None:
            nonlocal tokens_seen
            tokens_seen += n_tokens
            elapsed = bar.tasks[task].elapsed or 1e-9
            rate = _rates(bar.tasks[task].completed + n_texts, tokens_seen, elapsed)
            bar.update(task, advance=n_texts, rate=rate)

        yield on_batch


def _rates(texts: int, tokens: int, elapsed: float) -> str:
    elapsed = max(elapsed, 1e-9)
    return f"{texts / elapsed:,.0f} texts/s, {tokens / elapsed:,.0f} tok/s"


@contextmanager
def step_progress(
    total: int, what: str, *, enabled: bool | None = None, unit: str = ""
) -> Iterator[Callable[..., None]]:
    """A callback to call as steps finish (a probe's fit, a batch of a distillation), with the number of
    steps (default 1): a bar on a terminal, lines in a log, nothing when `enabled` is False."""
    mode = None if enabled is False else _mode()
    if mode is None:
        yield lambda n=1: None
        return
    if mode == "lines":
        lines = LogLines(what, total, unit=unit)
        yield lines.advance
        lines.close()
        return
    with _bar([_text(what), *_bar_columns(), *_time_columns()]) as bar:
        task = bar.add_task(what, total=total)
        yield lambda n=1: bar.advance(task, n)


@contextmanager
def _bar(columns: list[Any]) -> Iterator[Any]:
    from rich.console import Console
    from rich.progress import Progress

    with Progress(*columns, console=Console(stderr=True), transient=True) as bar:
        yield bar


def _text(template: str) -> Any:
    from rich.progress import TextColumn

    return TextColumn(template)


def _bar_columns() -> list[Any]:
    from rich.progress import BarColumn, MofNCompleteColumn

    return [BarColumn(), MofNCompleteColumn()]


def _time_columns() -> list[Any]:
    from rich.progress import TimeElapsedColumn, TimeRemainingColumn

    return [TimeElapsedColumn(), TimeRemainingColumn()]
