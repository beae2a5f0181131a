"""Audit 22: `bertscope cache` lists and removes only the files bertscope names (a user's file in its folders
stays), flags the measurement files a load would not read, refuses a BERTSCOPE_CACHE that is a file, says
what --clear left and why, and counts models only. Each in a cache of the test's own (the `cache`
fixture's BERTSCOPE_CACHE), the files written by hand."""

from __future__ import annotations

import json
import os
from pathlib import Path

import pytest

from bertscope.backends.cache import by_model, cached_files
from bertscope.backends.exact import EXACT_FORMAT
from bertscope.backends.fast import FAST_FORMAT, Measured, graphs_key, write_measured
from bertscope.backends.onnx import EXPORT_FORMAT
from console import run_main

DIGEST = "0e8e6750365ca43ab91d"
EXPORT = f"bert-{DIGEST}-float32-v{EXPORT_FORMAT}.onnx"
MEASURED, UNUSED = "runtime measurement", "runtime measurement (older bertscope, unused)"


def _export(cache: Path) -> Path:
    export = cache / "onnx" / EXPORT
    export.parent.mkdir(parents=True, exist_ok=True)
    export.write_bytes(b"\0" * 1000)
    export.with_suffix(".json").write_text("{}")
    return export


def test_a_users_files_in_the_cache_folders_are_neither_listed_nor_removed(cache: Path) -> None:
    export = _export(cache)
    mine = [cache / folder / "my-notes.txt" for folder in ("onnx", "openvino", "fast")]
    for path in mine:
        path.parent.mkdir(parents=True, exist_ok=True)
        path.write_text("mine")
    (cache / "fast" / "draft.tmp").write_text("mine")  # a .tmp of no bertscope name
    os.utime(cache / "fast" / "draft.tmp", (0, 0))  # old: bertscope's own would be removed
    assert [f.path for f in cached_files()] == [export]
    listed = run_main("cache", "--all")
    assert listed.code == 0 and "my-notes.txt" not in listed.stdout and "draft.tmp" not in listed.stdout
    cleared = run_main("cache", "--clear")
    assert cleared.code == 0 and cleared.stderr.startswith("removed 1 cached file ("), cleared
    assert not export.exists() and all(path.is_file() for path in mine)
    assert (cache / "fast" / "draft.tmp").is_file()


def _measurement(cache: Path, tail: str, *, version: str | None = None, ratio: float = 1.5) -> Path:
    """A measurement file named `bert-<DIGEST>-...-<tail>`: torch float32 and one way at `ratio`;
    `version`: the bertscope it says it was measured with (this one's where None)."""
    path = cache / "fast" / f"bert-{DIGEST}-a4e7276895b3-dbd0e5dd-rfc5205b3-c745dffd245-t64b1024r16-{tail}"
    rows = [
        Measured("torch float32", {}, 100.0, 1.0, 1.0, 1.0),
        Measured("onnxruntime float32", {"backend": "onnxruntime"}, 100.0 * ratio, ratio, 0.99999, 0.99999),
    ]
    write_measured(path, rows)
    if version is not None:
        data = json.loads(path.read_text(encoding="utf-8"))
        path.write_text(json.dumps({**data, "bertscope": version}), encoding="utf-8")
    return path


@pytest.mark.parametrize(
    ("tail", "version", "ratio", "kind"),
    [
        (f"f{FAST_FORMAT}-{graphs_key()}.json", None, 1.5, MEASURED),
        (f"exact-f{EXACT_FORMAT}-{graphs_key()}.json", None, 1.5, MEASURED),
        (f"f{FAST_FORMAT - 1}-{graphs_key()}.json", None, 1.5, UNUSED),  # an older format's name
        (f"exact-f{EXACT_FORMAT - 1}-{graphs_key()}.json", None, 1.5, UNUSED),
        (f"f{FAST_FORMAT}-{graphs_key()}.json", "0.0.9", 1.5, UNUSED),  # an older bertscope's figures
        (f"f{FAST_FORMAT}-{graphs_key()}.json", None, 1000.0, UNUSED),  # implausible: mode="fast" re-measures
    ],
)
def test_a_measurement_a_load_would_not_read_is_flagged_unused(
    cache: Path, tail: str, version: str | None, ratio: float, kind: str
) -> None:
    path = _measurement(cache, tail, version=version, ratio=ratio)
    assert [(f.kind, f.path) for f in cached_files()] == [(kind, path)]


def test_a_bertscope_cache_that_is_a_file_is_refused_in_one_line(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    afile = tmp_path / "afile"
    afile.write_text("mine")
    monkeypatch.setenv("BERTSCOPE_CACHE", str(afile))
    for args in (("cache",), ("cache", "--clear"), ("cache", "--json")):
        ran = run_main(*args)
        assert ran.code == 1, ran
        assert f"BERTSCOPE_CACHE={afile} points at a file, not a folder" in ran.stderr
        assert len(ran.stderr.strip().splitlines()) == 1 and ran.stdout == ""
    assert afile.read_text() == "mine"


def test_clear_says_it_left_a_recent_staged_file_and_why(cache: Path) -> None:
    _export(cache)
    staged = cache / "fast" / "folders.123.tmp"  # recorded.remember's, staged before its rename
    staged.parent.mkdir(parents=True)
    staged.write_text("{")
    listed = run_main("cache")
    assert listed.code == 0 and "2 files of 1 model," in listed.stderr, listed  # "(none)" is no model
    cleared = run_main("cache", "--clear")
    assert cleared.code == 0, cleared
    assert cleared.stderr.splitlines() == [
        "removed 1 cached file (1.0 kB)",
        "left 1 unfinished file (0.0 kB) staged less than 10 minutes ago, that a running process may be "
        "writing",
    ]
    assert staged.is_file()
    assert [m.digest for m in by_model(cached_files())] == [None]  # only the staged file is left


def test_a_killed_processs_write_probe_is_cleared_when_old_and_said_when_fresh(cache: Path) -> None:
    # onnx.writable_folder touches .write-test-<pid> and unlinks it: a process killed between leaves one
    old = [cache / folder / ".write-test-4242" for folder in ("onnx", "openvino", "fast")]
    for path in old:
        path.parent.mkdir(parents=True, exist_ok=True)
        path.touch()
        os.utime(path, (0, 0))
    fresh = cache / "fast" / ".write-test-99"
    fresh.touch()
    assert {f.path for f in cached_files()} == {*old, fresh}
    cleared = run_main("cache", "--clear")
    assert cleared.code == 0, cleared
    assert cleared.stderr.splitlines() == [
        "removed 3 cached files (0.0 kB)",
        "left 1 unfinished file (0.0 kB) staged less than 10 minutes ago, that a running process may be "
        "writing",
    ]
    assert not any(path.exists() for path in old) and fresh.is_file()
