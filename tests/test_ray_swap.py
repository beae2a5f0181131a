"""A Ray job that replaces an old job's output (--overwrite) swaps the new one in with renames: a process
stopped between any two of them loses neither output nor the user's files, and the next run finishes it."""

from __future__ import annotations

import os
from pathlib import Path

import pytest

from bertscope.distributed.shards import MANIFEST, RESUME, beside, finish_swap, swap_in


def _job(folder: Path, tag: str, *, finished: bool = True) -> Path:
    folder.mkdir()
    (folder / "part-00000.parquet").write_text(tag)
    (folder / RESUME).mkdir()
    if finished:
        (folder / MANIFEST).write_text(tag)
    return folder


def _state(out: Path) -> dict[str, str]:
    return {p.name: p.read_text() for p in sorted(out.iterdir()) if p.is_file()}


def _hidden(tmp_path: Path) -> list[str]:
    return sorted(p.name for p in tmp_path.iterdir() if p.name.startswith("."))


@pytest.mark.parametrize("stopped_at", [1, 2, 3])
def test_a_swap_stopped_at_any_rename_is_finished_by_the_next_run(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch, stopped_at: int
) -> None:
    out = _job(tmp_path / "out", "old")
    (out / "notes.md").write_text("mine")
    _job(beside(out), "new")
    real, calls = os.replace, []

    def replace(source: object, target: object) -> None:
        calls.append(1)
        if len(calls) == stopped_at:
            raise KeyboardInterrupt
        real(source, target)  # type: ignore[arg-type]

    with monkeypatch.context() as patched:
        patched.setattr(os, "replace", replace)
        with pytest.raises(KeyboardInterrupt):
            swap_in(beside(out), out)
    said = finish_swap(out)
    assert said is not None and str(out) in said
    # the finished replacement is in place, the user's file with it, nothing hidden left beside
    assert _state(out) == {"_bertscope.json": "new", "notes.md": "mine", "part-00000.parquet": "new"}
    assert _hidden(tmp_path) == []
    assert finish_swap(out) is None


def test_a_replacement_stopped_before_its_manifest_leaves_the_old_output_whole(tmp_path: Path) -> None:
    out = _job(tmp_path / "out", "old")
    (out / "notes.md").write_text("mine")
    _job(beside(out), "new", finished=False)
    assert finish_swap(out) is None  # left for --overwrite to drop
    assert _state(out) == {"_bertscope.json": "old", "notes.md": "mine", "part-00000.parquet": "old"}


def test_a_swap_that_ran_whole_keeps_the_users_files(tmp_path: Path) -> None:
    out = _job(tmp_path / "out", "old")
    (out / "notes.md").write_text("mine")
    (out / "plots").mkdir()
    (out / "plots" / "a.png").write_text("png")
    swap_in(_job(beside(out), "new"), out)
    assert _state(out) == {"_bertscope.json": "new", "notes.md": "mine", "part-00000.parquet": "new"}
    assert (out / "plots" / "a.png").read_text() == "png" and _hidden(tmp_path) == []
