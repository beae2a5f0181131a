"""Audit 22's fast-mode and bench findings: what a fast load writes reads back (a small model's ratios
too), why figures are measured again is said, a full disk is one line naming the folder, a read-only
cache that holds the figures is read, mode names in either spelling, and bench's drift-only figures."""

from __future__ import annotations

import errno
import json
from pathlib import Path
from typing import Any

import numpy as np
import pytest

import bertscope
from bertscope.backends import fast, modes
from bertscope.errors import ModelLoadError
from console import run_main

TEXTS = ["a small test sentence", "another one, a little longer than the first", "rain again", "ok"]

pytestmark = pytest.mark.usefixtures("cache")  # a fresh BERTSCOPE_CACHE per test


def _timed_at(monkeypatch: pytest.MonkeyPatch, speeds: dict[str, float]) -> list[str]:
    """Only torch and ONNX Runtime float32 are candidates, timed at `speeds` (vectors real); the modes
    measured are listed in the list returned."""
    pytest.importorskip("onnxruntime")
    few = {k: w for k, w in fast.candidates("cpu").items() if k in ("torch float32", "onnxruntime float32")}
    monkeypatch.setattr(fast, "candidates", lambda device: dict(few))
    calls: list[str] = []

    def fake(ways: dict[str, Any], texts: list[str], *, rounds: int) -> dict[str, tuple[float, np.ndarray]]:
        calls.extend(ways)
        rows = list(dict.fromkeys(texts))[:8]
        return {name: (speeds[name], embed(rows)) for name, embed in ways.items()}

    monkeypatch.setattr(fast, "measure", fake)
    return calls


def _load(path: Path) -> Any:
    return bertscope.load(path, device="cpu", mode="fast", calibration=TEXTS)


def test_a_small_models_figures_are_read_back_so_replicas_choose_alike(
    tiny_dirs: dict[str, Path], monkeypatch: pytest.MonkeyPatch, cache: Path
) -> None:
    """OpenVINO ran a 2-layer BERT 18.6-34.4x its torch (overhead-bound): figures written are figures read."""
    calls = _timed_at(monkeypatch, {"torch float32": 100.0, "onnxruntime float32": 2670.0})
    first = _load(tiny_dirs["bert"])
    count = len(calls)
    path = next((cache / "fast").glob("*.json"))
    assert fast.read_measured(path) is not None
    second = _load(tiny_dirs["bert"])
    assert len(calls) == count  # read, not measured again
    assert second.info().fast == first.info().fast


def test_figures_implausible_twice_are_recorded_so_and_float32_runs(
    tiny_dirs: dict[str, Path], monkeypatch: pytest.MonkeyPatch, cache: Path, capsys: pytest.CaptureFixture
) -> None:
    calls = _timed_at(monkeypatch, {"torch float32": 1.0, "onnxruntime float32": 5000.0})
    m = _load(tiny_dirs["bert"])
    assert len(calls) == 2 * 2 * 2  # both ways measured twice, each time timed and then drift only
    (path,) = (cache / "fast").glob("*.json")
    assert json.loads(path.read_text())["implausible"].startswith("onnxruntime float32 at 5e+03x")
    assert [row.mode for row in fast.read_measured(path) or []] == ["torch float32"]
    chosen = m.info().fast
    assert chosen is not None and chosen["chosen"] == "torch float32"
    said = capsys.readouterr().err
    assert "were implausible twice (onnxruntime float32 at 5e+03x torch float32" in said, said
    assert "nothing on this machine" not in said
    count = len(calls)
    assert _load(tiny_dirs["bert"]).info().fast == chosen
    assert len(calls) == count  # the record is read: float32 again, not measured again


def test_replicas_after_figures_implausible_twice_choose_alike(
    tiny_dirs: dict[str, Path], monkeypatch: pytest.MonkeyPatch
) -> None:
    """A replica loading after figures were implausible twice reads that record, never measures anew."""
    speeds = {"torch float32": 1.0, "onnxruntime float32": 5000.0}
    _timed_at(monkeypatch, speeds)
    first = _load(tiny_dirs["bert"])
    speeds.update({"torch float32": 100.0, "onnxruntime float32": 2670.0})  # plausible if measured now
    assert _load(tiny_dirs["bert"]).info().fast["chosen"] == first.info().fast["chosen"] == "torch float32"


def test_remeasure_implausible_twice_replaces_the_old_record(
    tiny_dirs: dict[str, Path], monkeypatch: pytest.MonkeyPatch
) -> None:
    """remeasure=True whose figures are implausible twice replaces the valid file: later loads run alike."""
    speeds = {"torch float32": 100.0, "onnxruntime float32": 2670.0}
    _timed_at(monkeypatch, speeds)
    assert _load(tiny_dirs["bert"]).info().fast["chosen"] == "onnxruntime float32"
    speeds.update({"torch float32": 1.0, "onnxruntime float32": 5000.0})
    again = bertscope.load(tiny_dirs["bert"], device="cpu", mode="fast", calibration=TEXTS, remeasure=True)
    assert again.info().fast["chosen"] == "torch float32"
    assert _load(tiny_dirs["bert"]).info().fast["chosen"] == "torch float32"
    speeds.update({"torch float32": 100.0, "onnxruntime float32": 2670.0})  # remeasure ends the record
    renewed = bertscope.load(tiny_dirs["bert"], device="cpu", mode="fast", calibration=TEXTS, remeasure=True)
    assert renewed.info().fast["chosen"] == "onnxruntime float32"
    assert _load(tiny_dirs["bert"]).info().fast["chosen"] == "onnxruntime float32"


def test_a_record_whose_implausible_flag_is_no_reason_is_damaged(
    tmp_path: Path, capsys: pytest.CaptureFixture
) -> None:
    path = tmp_path / "m.json"
    fast.write_measured(path, [fast.Measured("torch float32", {}, 100.0, 1.0, 1.0, 1.0)], implausible="x")
    assert fast.read_measured(path) is not None
    path.write_text(json.dumps({**json.loads(path.read_text()), "implausible": 3}))
    assert fast.read_measured(path) is None
    assert "cannot be used (implausible is 3, not a reason)" in capsys.readouterr().err


def test_the_line_measuring_again_says_which_test_failed(
    tmp_path: Path, capsys: pytest.CaptureFixture
) -> None:
    rows = [
        fast.Measured("torch float32", {}, 100.0, 1.0, 1.0, 1.0),
        fast.Measured("onnxruntime float32", {"backend": "onnxruntime"}, 15000.0, 150.0, 0.99, 0.99),
    ]
    path = tmp_path / "m.json"
    fast.write_measured(path, rows)
    assert fast.read_measured(path) is None
    said = capsys.readouterr().err
    assert "are implausible: onnxruntime float32 at 150x torch float32, past 100x" in said, said
    data = json.loads(path.read_text())
    path.write_text(json.dumps({**data, "bertscope": "0.0.1"}))
    assert fast.read_measured(path) is None
    assert "are stale: written by bertscope 0.0.1, this is" in capsys.readouterr().err


def test_a_full_disk_names_the_folder_and_leaves_no_staged_file(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    def full(*args: Any) -> None:
        raise OSError(errno.ENOSPC, "No space left on device")

    monkeypatch.setattr(fast.os, "replace", full)
    rows = [fast.Measured("torch float32", {}, 100.0, 1.0, 1.0, 1.0)]
    with pytest.raises(ModelLoadError) as raised:
        fast.write_measured(tmp_path / "m.json", rows)
    said = str(raised.value)
    assert f"written to {tmp_path} (No space left on device)" in said and "\n" not in said
    assert "set BERTSCOPE_CACHE to another folder" in said
    assert list(tmp_path.iterdir()) == []


def test_a_read_only_cache_holding_the_figures_is_read(
    tiny_dirs: dict[str, Path], monkeypatch: pytest.MonkeyPatch
) -> None:
    # torch float32 chosen: the load runs load_fast (a runtime chosen is opened light, from the record)
    calls = _timed_at(monkeypatch, {"torch float32": 100.0, "onnxruntime float32": 50.0})
    first = _load(tiny_dirs["bert"])
    assert first.info().fast["chosen"] == "torch float32"

    def read_only(folder: Path) -> None:
        raise ModelLoadError(f"{folder} cannot be written")

    monkeypatch.setattr(fast, "writable_folder", read_only)
    count = len(calls)
    assert _load(tiny_dirs["bert"]).info().fast == first.info().fast
    assert len(calls) == count


def test_mode_names_read_either_spelling() -> None:
    assert modes.mode_name("int8-static") == "int8_static"
    assert modes.mode_options("openvino-int8_static") == {"backend": "openvino", "quantize": "int8_static"}
    with pytest.raises(bertscope.errors.InvalidSpec, match="unknown mode 'int8_nope'"):
        modes.mode_options("int8_nope")


def test_compare_modes_drift_only_has_no_seconds_and_cosines_in_range(
    tiny_dirs: dict[str, Path], monkeypatch: pytest.MonkeyPatch
) -> None:
    # float32 rounding: a vector against itself can read 1.0000001; here every cosine reads past 1
    monkeypatch.setattr(
        modes, "unit", lambda vectors: vectors / np.linalg.norm(vectors, axis=1)[:, None] * 1.001
    )
    (report,) = modes.compare_modes(TEXTS, ["float32"], model=tiny_dirs["bert"], device="cpu", time_it=False)
    assert report.seconds is None and np.isnan(report.texts_per_s)
    assert report.cos_min <= 1.0 and report.cos_mean <= 1.0


def test_bench_drift_json_has_null_seconds_and_takes_threads(
    tiny_dirs: dict[str, Path], monkeypatch: pytest.MonkeyPatch
) -> None:
    from bertscope.core import cpu

    asked: list[int] = []
    monkeypatch.setattr(cpu, "ask_threads", asked.append)  # the count, not this test worker's threads
    ran = run_main(
        "bench", "--drift", "--json", "--modes", "float32", "--limit", "3", "--threads", "1",
        "-m", str(tiny_dirs["bert"]),
    )  # fmt: skip
    assert ran.code == 0, ran.stderr
    (row,) = json.loads(ran.stdout)
    assert row["seconds"] is None and row["texts_per_s"] is None
    assert asked == [1]
