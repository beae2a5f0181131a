"""Audit 18h: what a killed export leaves is listed and cleared by `bertscope cache` (never a folder a
running process writes), --clear's lock files, its read-only cache and its count, `cache ./nope`'s own
message, OpenVINO's bfloat16 warning at the caller's line, and `bench --drift --json`'s seconds. Each in a
cache of the test's own (the `cache` fixture's BERTSCOPE_CACHE); the killed export is built by hand."""

from __future__ import annotations

import errno
import json
import os
import warnings
from pathlib import Path
from typing import Any

import pytest
from filelock import FileLock

from bertscope.backends import cache as cache_module
from bertscope.backends.cache import cached_files
from bertscope.backends.onnx import EXPORT_FORMAT
from console import run_main

DIGEST = "0e8e6750365ca43ab91d"
EXPORT = f"bert-{DIGEST}-float32-v{EXPORT_FORMAT}.onnx"
UNFINISHED_FOLDER, UNFINISHED_FILE = "unfinished export", "unfinished file"  # the kinds `cache` lists


def _killed_export(cache: Path) -> Path:
    """What `kill -9` leaves in the middle of an export: its temporary folder with a graph half made (a
    static int8 folder inside it), a staged record an hour old, and the export's lock file."""
    onnx = cache / "onnx"
    tmp = onnx / ".export-kr_2bh0j"
    (tmp / ".static-x1").mkdir(parents=True)
    (tmp / "float32.onnx").write_bytes(b"\0" * 200_000)
    (tmp / ".static-x1" / "typed.onnx").write_bytes(b"\0" * 1000)
    staged = onnx / f"bert-{DIGEST}-float32-v{EXPORT_FORMAT}.4242.json.tmp"
    staged.write_text("{")
    hour_ago = staged.stat().st_mtime - 3600
    os.utime(staged, (hour_ago, hour_ago))
    (onnx / f"{EXPORT}.lock").touch()
    return tmp


def test_a_killed_exports_folder_is_listed_with_its_size_and_cleared(cache: Path) -> None:
    tmp = _killed_export(cache)
    found = {f.path.name: f for f in cached_files()}
    assert found[tmp.name].kind == UNFINISHED_FOLDER and found[tmp.name].bytes == 201_000
    assert any(f.kind == UNFINISHED_FILE for f in found.values())
    listed = run_main("cache")
    assert listed.code == 0 and "1 unfinished export, 1 unfinished file" in listed.stdout, listed
    assert "0.2 MB" in listed.stdout
    cleared = run_main("cache", "--clear")
    assert cleared.code == 0 and cleared.stderr.startswith("removed 2 cached files (0.2 MB)"), cleared
    # the empty lock file stays: removed under a waiting process, two exports could hold "the" lock (review)
    assert sorted(p.name for p in (cache / "onnx").iterdir()) == [f"{EXPORT}.lock"]


def test_a_folder_whose_writer_holds_its_lock_is_never_removed(cache: Path) -> None:
    """A running export holds its lock file: --clear takes no lock it cannot take at once, and leaves the
    folder (and that lock file), saying so."""
    tmp = _killed_export(cache)
    with FileLock(cache / "onnx" / f"{EXPORT}.lock"):
        cleared = run_main("cache", "--clear")
    assert cleared.code == 0, cleared
    assert "left 1 unfinished export (0.2 MB) that a running process is writing" in cleared.stderr
    assert (tmp / "float32.onnx").is_file() and (cache / "onnx" / f"{EXPORT}.lock").is_file()


def test_a_fresh_staged_file_is_left_for_its_writer(cache: Path) -> None:
    """A staged .tmp file is written and renamed in one call (some outside any lock): only an old one goes."""
    (cache / "fast").mkdir(parents=True)
    fresh = cache / "fast" / "folders.4242.tmp"
    fresh.write_text("{")
    assert run_main("cache", "--clear").code == 0
    assert fresh.is_file()


def test_clear_leaves_the_lock_files_and_counts_one_file_as_one(cache: Path, tmp_path: Path) -> None:
    folder = tmp_path / "model"
    folder.mkdir()
    (folder / "config.json").write_text(json.dumps({"model_type": "bert"}))
    from bertscope.backends.digest import content_digest

    digest = content_digest(folder)
    onnx = cache / "onnx"
    onnx.mkdir(parents=True)
    mine, other = onnx / f"bert-{digest}-float32-v{EXPORT_FORMAT}.onnx", onnx / f"{EXPORT}.lock"
    mine.write_bytes(b"\0" * 10)
    Path(f"{mine}.lock").touch()
    other.touch()
    cleared = run_main("cache", "--clear", str(folder))
    assert cleared.code == 0 and cleared.stderr.startswith("removed 1 cached file ("), cleared
    assert not mine.exists() and Path(f"{mine}.lock").is_file() and other.is_file()


def test_clear_on_a_read_only_cache_says_so_in_one_line(cache: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    """The tests run as root, who may write anywhere: the folder reads as not writable, as a read-only
    mount does."""
    (cache / "onnx").mkdir(parents=True)
    (cache / "onnx" / EXPORT).write_bytes(b"\0" * 10)
    monkeypatch.setattr(cache_module.os, "access", lambda path, mode: False)
    cleared = run_main("cache", "--clear")
    assert cleared.code == 1 and "\n" not in cleared.stderr.strip(), cleared
    assert cleared.stderr.startswith(f"error: cannot clear the cache: {cache / 'onnx'} is read-only")
    assert "nothing was removed" in cleared.stderr and (cache / "onnx" / EXPORT).is_file()


def test_a_removal_refused_midway_names_the_folder(cache: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    (cache / "onnx").mkdir(parents=True)
    (cache / "onnx" / EXPORT).write_bytes(b"\0" * 10)

    def refused(self: Path, missing_ok: bool = False) -> None:
        raise OSError(errno.EROFS, os.strerror(errno.EROFS), str(self))

    monkeypatch.setattr(Path, "unlink", refused)
    cleared = run_main("cache", "--clear")
    assert cleared.code == 1 and "Read-only file system (" not in cleared.stderr, cleared
    assert f"cannot clear the cache: {cache / 'onnx'} is read-only" in cleared.stderr


@pytest.mark.parametrize("args", [("cache", "./nope"), ("cache", "--clear", "./nope")])
def test_a_missing_model_folder_says_what_leaving_model_out_means_here(
    cache: Path, args: tuple[str, ...]
) -> None:
    ran = run_main(*args)
    assert ran.code != 0 and "no MODEL for every model's files" in ran.stderr, ran
    assert "bundled all-MiniLM" not in ran.stderr


def test_openvino_bfloat16_fallback_warns_at_the_callers_line(monkeypatch: pytest.MonkeyPatch) -> None:
    from bertscope.backends import openvino

    monkeypatch.setattr(openvino, "has_native_bf16", lambda: False)
    with warnings.catch_warnings(record=True) as seen:
        warnings.simplefilter("always")
        assert openvino.resolve_precision("bfloat16", None, "cpu") == "float32"
    (warning,) = [w for w in seen if "no native bfloat16" in str(w.message)]
    assert warning.filename == __file__


def test_bench_drift_json_has_no_seconds_where_it_timed_nothing(
    monkeypatch: pytest.MonkeyPatch, tiny_dirs: dict[str, Path]
) -> None:
    from bertscope.backends import modes

    def compare(texts: Any, names: list[str], **kwargs: Any) -> list[Any]:
        # as compare_modes(time_it=False) gives them: no seconds, NaN speeds (null in the JSON)
        nan = float("nan")
        untimed: dict[str, Any] = {"n_texts": 8, "seconds": None, "texts_per_s": nan, "vs_float32": nan}
        return [modes.ModeReport(n, **untimed, cos_min=0.99, cos_mean=0.999, max_abs=0.1) for n in names]

    monkeypatch.setattr(modes, "compare_modes", compare)
    ran = run_main("bench", "-m", str(tiny_dirs["bert"]), "--drift", "--modes", "int8", "--json")
    assert ran.code == 0, ran
    (row,) = json.loads(ran.stdout)
    assert row["seconds"] is None and row["texts_per_s"] is None and row["cos_min"] == 0.99
