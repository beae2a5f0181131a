"""mode="fast": a measurement file whose rows have the wrong fields or value types is measured again (one
line on stderr), as a missing, stale or implausible one is, never a traceback nor a row chosen from it.

The speeds are fixed (as tests/test_fast.py fakes them): only the choice and the call count are asserted.
"""

from __future__ import annotations

import json
from collections.abc import Callable
from pathlib import Path
from typing import Any, cast

import numpy as np
import pytest

import bertscope
from bertscope.backends import fast
from bertscope.backends.fast import Measured, read_measured, write_measured
from bertscope.backends.modes import MODES

pytestmark = [
    pytest.mark.usefixtures("cache"),  # a fresh BERTSCOPE_CACHE per test
    # the calibration rows the fake embeds run past the tiny model's 64 tokens: not what is checked
    pytest.mark.filterwarnings("ignore::bertscope.errors.TruncatedTextsWarning"),
]

Row = dict[str, Any]


def _rows() -> list[Measured]:
    """Figures as `_measure_all` writes them: torch float32 at 1.0x, two faster ways."""
    return [
        Measured("torch float32", {}, 100.0, 1.0, 1.0, 1.0),
        Measured("onnxruntime float32", {"backend": "onnxruntime"}, 150.0, 1.5, 0.99999, 0.999995),
        Measured("torch bfloat16", {"dtype": "bfloat16"}, 200.0, 2.0, 0.9991, 0.9995),
    ]


def _written(path: Path, edit: Callable[[list[Row]], None]) -> Path:
    """The measurement file of `_rows()` with `edit` applied to its rows as JSON."""
    write_measured(path, _rows())
    data = json.loads(path.read_text(encoding="utf-8"))
    edit(data["measured"])
    path.write_text(json.dumps(data), encoding="utf-8")
    return path


def _set(field: str, value: Any, row: int = 2) -> Callable[[list[Row]], None]:
    return lambda rows: rows[row].__setitem__(field, value)


DAMAGED: dict[str, Callable[[list[Row]], None]] = {
    "cos_min null": _set("cos_min", None),
    "cos_min a string": _set("cos_min", "0.999"),
    "cos_mean a bool": _set("cos_mean", True),
    "cos_min past 1": _set("cos_min", 5.0),
    "texts_per_s a string": _set("texts_per_s", "fast"),
    "texts_per_s NaN": _set("texts_per_s", float("nan")),
    "texts_per_s past float": _set("texts_per_s", 10**400),
    "vs_float32 a list": _set("vs_float32", [2.0]),
    "options a string": _set("options", "x"),
    "mode a number": _set("mode", 5),
    "max_abs negative": _set("max_abs", -1.0),
    "a field missing": lambda rows: rows[1].pop("cos_mean"),
    "a field more": _set("chosen", True),
    "a row of other fields": lambda rows: rows.__setitem__(1, {"row": "torch bfloat16"}),
    "a row not an object": lambda rows: cast(list[Any], rows).__setitem__(1, "torch bfloat16"),
    "measured not a list": lambda rows: rows.clear(),  # replaced below by an object
}


@pytest.mark.parametrize("damage", list(DAMAGED))
def test_a_damaged_row_is_read_as_no_measurement(
    damage: str, tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    path = _written(tmp_path / "m.json", DAMAGED[damage])
    if damage == "measured not a list":
        data = json.loads(path.read_text(encoding="utf-8"))
        path.write_text(json.dumps({**data, "measured": {"torch float32": 1}}), encoding="utf-8")
    assert read_measured(path) is None
    assert read_measured(path, check_plausible=False) is None  # the exact default's read
    assert f"the measurements in {path} cannot be used (" in capsys.readouterr().err
    assert read_measured(path, quiet=True) is None
    assert capsys.readouterr().err == ""


def test_rows_as_written_are_read(tmp_path: Path, capsys: pytest.CaptureFixture[str]) -> None:
    """What a measurement legitimately holds is kept: integer speeds, no max_abs (older files), a NaN
    cosine (a way whose vectors went NaN: never within a bound), an infinite gap (exact's ways that did
    not apply), float32's own cosine a rounding past 1."""

    def legit(rows: list[Row]) -> None:
        rows[0].update(texts_per_s=100, cos_min=1.0000001)
        rows[1].pop("max_abs")
        rows[2].update(cos_min=float("nan"), max_abs=float("inf"))

    read = read_measured(_written(tmp_path / "m.json", legit))
    assert read is not None and [m.mode for m in read] == [m.mode for m in _rows()]
    assert fast.choose(read, 0.999).mode == "onnxruntime float32"  # the NaN row is not within the bound
    assert capsys.readouterr().err == ""


def test_a_missing_file_is_measured_without_a_word(
    tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    assert read_measured(tmp_path / "none.json") is None
    assert capsys.readouterr().err == ""
    (tmp_path / "bad.json").write_text("{not json", encoding="utf-8")
    assert read_measured(tmp_path / "bad.json") is None
    assert "cannot be used (not JSON)" in capsys.readouterr().err


# The loads below: torch float32 and torch bfloat16 (no export, no runtime to install), bfloat16 the faster.
SPEEDS = {"torch float32": 100.0, "torch bfloat16": 300.0}


@pytest.fixture
def measured(monkeypatch: pytest.MonkeyPatch) -> list[str]:
    """Candidates torch float32 and bfloat16, timed at SPEEDS (vectors real); the modes measured."""
    calls: list[str] = []

    def fake(ways: dict[str, Any], texts: list[str], *, rounds: int) -> dict[str, tuple[float, np.ndarray]]:
        calls.extend(ways)
        rows = list(dict.fromkeys(texts))[:4]  # real vectors on a few rows: nothing reads how many
        return {name: (SPEEDS[name], embed(rows)) for name, embed in ways.items()}

    ways = {MODES[key].label: MODES[key] for key in ("float32", "bfloat16")}
    monkeypatch.setattr(fast, "candidates", lambda device: dict(ways))
    monkeypatch.setattr(fast, "measure", fake)
    return calls


# The damages that raised a TypeError in the choice, or chose the damaged row (options "x"), before.
LOAD_DAMAGES = {
    "cos_min null": ("cos_min", None),
    "cos_min a string": ("cos_min", "0.999"),
    "texts_per_s a string": ("texts_per_s", "fast"),
    "options a string": ("options", "x"),
}


def _damage_bfloat16(cache: Path, field: str, value: Any) -> Path:
    """The one measurement file in `cache`, its torch bfloat16 row's `field` set to `value`."""
    path = next((cache / "fast").glob("*.json"))
    data = json.loads(path.read_text(encoding="utf-8"))
    for row in data["measured"]:
        if row["mode"] == "torch bfloat16":
            row[field] = value
    path.write_text(json.dumps(data), encoding="utf-8")
    return path


@pytest.mark.parametrize("damage", list(LOAD_DAMAGES))
def test_a_load_over_a_damaged_row_measures_again(
    damage: str,
    tiny_dirs: dict[str, Path],
    measured: list[str],
    cache: Path,
    capsys: pytest.CaptureFixture[str],
) -> None:
    def load() -> Any:
        return bertscope.load(tiny_dirs["bert"], device="cpu", mode="fast", fast_min_cosine=0.5)

    load()
    count = len(measured)
    path = _damage_bfloat16(cache, *LOAD_DAMAGES[damage])
    capsys.readouterr()
    again = load()
    assert len(measured) == 2 * count  # measured again, not read
    assert f"the measurements in {path} cannot be used" in capsys.readouterr().err
    fast_info = again.info().fast
    assert fast_info is not None and fast_info["chosen"] == "torch bfloat16"
    assert read_measured(path) is not None  # the fresh figures replaced the damaged ones


def test_cli_embed_fast_over_a_damaged_row_answers(
    tiny_dirs: dict[str, Path], measured: list[str], cache: Path
) -> None:
    from console import run_main

    args = ["embed", "hello", "-m", str(tiny_dirs["bert"]), "--device", "cpu", "--fast", "--json"]
    assert run_main(*args).code == 0
    _damage_bfloat16(cache, "cos_min", None)
    ran = run_main(*args)
    assert ran.code == 0, ran.stderr
    assert "cannot be used" in ran.stderr and "Traceback" not in ran.stderr
