"""Progress on stderr: a bar on a terminal, a line every few seconds in a log, nothing in memory.

The clock is stepped by hand (no sleeps): each reading of `progress._clock` is the next value given.
"""

from __future__ import annotations

from collections.abc import Iterable

import pytest

from bertscope.core import progress
from bertscope.core.progress import LOG_EVERY, LogLines, progress_callback, step_progress


def _clock(monkeypatch: pytest.MonkeyPatch, readings: Iterable[float]) -> None:
    values = iter(readings)
    monkeypatch.setattr(progress, "_clock", lambda: float(next(values)))


def test_a_line_only_when_the_interval_has_passed(monkeypatch, capfd) -> None:
    _clock(monkeypatch, [0, 3, 6, 10, 12, 25, 26])
    lines = LogLines("fitting probes", 6)
    for _ in range(5):
        lines.advance()
    lines.close()
    assert capfd.readouterr().err.splitlines() == [
        "fitting probes: 3/6 (50%), 10 s elapsed, about 10 s left",
        "fitting probes: 5/6 (83%), 25 s elapsed, about 5 s left",
        "fitting probes: 5/6 (83%), done in 26 s",
    ]


def test_short_work_leaves_a_log_clean(monkeypatch, capfd) -> None:
    _clock(monkeypatch, [0, 1, 2, 3, 4])
    with step_progress(3, "fitting probes") as step:
        for _ in range(3):
            step()
    assert capfd.readouterr().err == ""


def test_embedding_in_a_log_writes_lines_with_rates(monkeypatch, capfd) -> None:
    _clock(monkeypatch, [i * LOG_EVERY for i in range(20)])
    with progress_callback(600) as on_batch:
        assert on_batch is not None
        for _ in range(3):
            on_batch(200, 2000)
    err = capfd.readouterr().err
    assert "embedding: 200/600 texts (33%), 20 texts/s, 200 tok/s, 10 s elapsed, about 20 s left" in err
    assert err.splitlines()[-1].startswith("embedding: 600/600 texts (100%)") and "done in" in err
    assert "\r" not in err


def test_small_or_unwanted_work_shows_nothing(monkeypatch, capfd) -> None:
    _clock(monkeypatch, [i * LOG_EVERY for i in range(20)])
    with progress_callback(10) as on_batch:  # fewer texts than a bar is worth
        assert on_batch is None
    with progress_callback(600, enabled=False) as on_batch:
        assert on_batch is None
    with step_progress(5, "fits", enabled=False) as step:
        step()
    assert capfd.readouterr().err == ""


def test_stderr_held_in_memory_gets_nothing(monkeypatch, capsys) -> None:
    """The tests' and the docs' captured stderr is not a log: no lines there, whatever the clock says."""
    _clock(monkeypatch, [i * LOG_EVERY for i in range(20)])
    with step_progress(3, "fitting probes") as step:
        step(3)
    assert capsys.readouterr().err == ""


def test_a_terminal_gets_the_bar(monkeypatch) -> None:
    monkeypatch.setattr(progress.sys.stderr, "isatty", lambda: True, raising=False)
    assert progress._mode() == "bar"


@pytest.mark.parametrize(("seconds", "shown"), [(9.4, "9 s"), (65, "1 min 05 s"), (3725, "1 h 02 min")])
def test_durations_read_as_people_say_them(seconds, shown) -> None:
    assert progress._duration(seconds) == shown
