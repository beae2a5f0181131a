"""ONNX Runtime's CPU arena is shrunk after big batches, and only then (backends/onnx.OnnxRunner._options)."""

from __future__ import annotations

from typing import Any

import numpy as np
import pytest

import bertscope
from bertscope.backends.onnx import OnnxRunner
from bertscope.core.cpu import cpu_threads
from bertscope.core.encoder import cpu_token_budget

SHRINK_KEY = "memory.enable_memory_arena_shrinkage"
SHORT = ["a cat", "the dog ran"]  # a batch of a few padded tokens
LONG = [" ".join(["word"] * 40)] * 2  # 2 rows of 42 tokens


class Spy:
    """A session that records each run's padded tokens and shrink entry ("" without one), then runs it."""

    def __init__(self, session: Any) -> None:
        self.session = session
        self.runs: list[tuple[int, str]] = []

    def run(self, names: list[str], feed: dict[str, np.ndarray], options: Any = None) -> Any:
        entry = "" if options is None else options.get_run_config_entry(SHRINK_KEY)
        self.runs.append((int(feed["input_ids"].size), entry))
        return self.session.run(names, feed, options)

    def __getattr__(self, name: str) -> Any:
        return getattr(self.session, name)


@pytest.fixture(scope="module")
def bundled() -> bertscope.Model:
    """The bundled model on ONNX Runtime by name: the session fixture's exact default is whichever runtime
    this machine measured fastest (OpenVINO on some CPUs and loads), and these tests read ONNX Runtime's
    arena."""
    return bertscope.load(device="cpu", backend="onnxruntime")


@pytest.fixture
def spied(bundled: bertscope.Model, monkeypatch: pytest.MonkeyPatch) -> tuple[bertscope.Model, Spy]:
    """The bundled model with its session spied on, runs over 32 padded tokens counted as big."""
    runner = bundled.engine.runner
    assert isinstance(runner, OnnxRunner)
    spy = Spy(runner.session)
    monkeypatch.setattr(runner, "session", spy)
    monkeypatch.setattr(runner, "arena_tokens", 32, raising=False)
    monkeypatch.setattr(runner, "_grew", set(), raising=False)
    return bundled, spy


def test_the_first_ordinary_run_after_big_ones_shrinks_the_arena(spied: tuple[bertscope.Model, Spy]) -> None:
    model, spy = spied
    before = model.embed(SHORT).vectors
    model.embed(LONG)
    model.embed(LONG)
    after = model.embed(SHORT).vectors  # shrinks the arena at its end (the real session took the entry)
    model.embed(SHORT)
    shrinks = [entry for _, entry in spy.runs]
    assert [tokens > 32 for tokens, _ in spy.runs] == [False, True, True, False, False]
    assert shrinks == ["", "", "", "cpu:0", ""]
    np.testing.assert_array_equal(before, after)


def test_ordinary_runs_never_shrink_the_arena(spied: tuple[bertscope.Model, Spy]) -> None:
    model, spy = spied
    for _ in range(3):
        model.embed(SHORT)
    assert spy.runs and all(entry == "" for _, entry in spy.runs)


def test_big_means_over_the_cpus_default_token_budget(bundled: bertscope.Model) -> None:
    runner = bundled.engine.runner
    assert isinstance(runner, OnnxRunner)
    assert runner.arena_tokens == cpu_token_budget(cpu_threads())


def test_each_session_shrinks_its_own_arena(
    bundled: bertscope.Model, monkeypatch: pytest.MonkeyPatch
) -> None:
    """The full graph and each cut graph (early stop) have an arena each: a small run on a cut graph
    after a big one on the full graph leaves the full graph's shrink for its own next small run."""
    runner = bundled.engine.runner
    assert isinstance(runner, OnnxRunner)
    monkeypatch.setattr(runner, "_grew", set(), raising=False)
    full, cut = object(), object()
    big, small = runner.arena_tokens + 1, 8
    assert runner._options(full, big) is None
    assert runner._options(cut, small) is None  # the cut graph never grew
    assert runner._options(full, small) is runner._shrink
    assert runner._options(full, small) is None  # once
