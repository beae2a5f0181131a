"""Progress on stderr for long runs, shown only when a person is watching (a terminal)."""

from __future__ import annotations

import sys
from collections.abc import Callable, Iterator
from contextlib import contextmanager

__all__ = ["progress_callback", "step_progress"]

_MIN_TEXTS = 256


@contextmanager
def progress_callback(
    total: int | None, *, enabled: bool | None = None
) -> Iterator[Callable[[int, int], None] | None]:
    """A per-batch callback (texts, tokens) that drives a rich progress bar, or None when not shown."""
    if enabled is None:
        enabled = sys.stderr.isatty() and (total is None or total >= _MIN_TEXTS)
    if not enabled:
        yield None
        return
    from rich.console import Console
    from rich.progress import (
        BarColumn,
        MofNCompleteColumn,
        Progress,
        TextColumn,
        TimeElapsedColumn,
        TimeRemainingColumn,
    )

    columns = [
        TextColumn("embedding"),
        BarColumn(),
        MofNCompleteColumn(),
        TextColumn("{task.fields[rate]}"),
        TimeElapsedColumn(),
        TimeRemainingColumn(),
    ]
    with Progress(*columns, console=Console(stderr=True), transient=True) as bar:
        task = bar.add_task("embed", total=total, rate="")
        tokens_seen = 0

        def on_batch(n_texts: int, n_tokens: int) -> None:
            nonlocal tokens_seen
            tokens_seen += n_tokens
            elapsed = bar.tasks[task].elapsed or 1e-9
            texts_seen = bar.tasks[task].completed + n_texts
            rate = f"{texts_seen / elapsed:,.0f} texts/s, {tokens_seen / elapsed:,.0f} tok/s"
            bar.update(task, advance=n_texts, rate=rate)

        yield on_batch


@contextmanager
def step_progress(total: int, what: str, *, enabled: bool | None = None) -> Iterator[Callable[[], None]]:
    """A callback to call once per finished step (a probe's fit, ...): a rich bar on stderr when shown."""
    if enabled is None:
        enabled = sys.stderr.isatty()
    if not enabled:
        yield lambda: None
        return
    from rich.console import Console
    from rich.progress import BarColumn, MofNCompleteColumn, Progress, TextColumn, TimeElapsedColumn

    columns = [TextColumn(what), BarColumn(), MofNCompleteColumn(), TimeElapsedColumn()]
    with Progress(*columns, console=Console(stderr=True), transient=True) as bar:
        task = bar.add_task(what, total=total)
        yield lambda: bar.advance(task)
