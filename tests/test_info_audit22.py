"""`info` and its names (audit 22a): the exact default's speed ratio named as `info().fast`, ModeReport and
`bench --json` name it, a damaged config.json named with its fix, the model's path absolute, and the note of
a PyTorch load that an export needed saying what computes the vectors."""

from __future__ import annotations

import json
import logging
import shutil
import warnings
from pathlib import Path

import pytest

import bertscope
from bertscope.backends import exact
from bertscope.backends.fast import Measured
from bertscope.core.loading import say_torch_loaded
from bertscope.errors import ModelLoadError
from console import json_of, run_main
from tiny_models import measure_like_a_real_model


def _one_error_line(stderr: str) -> str:
    """The single `error: ...` line a refusal prints (no traceback), its wrapping undone."""
    assert "Traceback" not in stderr, stderr
    said = " ".join(stderr.split())
    assert said.startswith("error: ") and said.count("error: ") == 1, stderr
    return said


# 1: one name for the speed against torch float32 ------------------------------------------------------------


def test_the_exact_choice_names_its_ratio_vs_float32_and_still_reads_vs_torch(tmp_path: Path) -> None:
    """info().exact called it `vs_torch` where info().fast, ModeReport and `bench --json` say `vs_float32`
    (the same ratio: a way's speed over torch float32's, exact._measure)."""
    from bertscope.core.model_info import ExactChoice

    way = Measured("onnxruntime float32", {"backend": "onnxruntime"}, 40.0, 4.3127, 1.0, 1.0, max_abs=2e-6)
    chosen = exact._recorded(way, tmp_path / "m.json")
    assert json.loads(json.dumps(chosen)) == {
        "chosen": "onnxruntime float32",
        "vs_float32": 4.313,
        "max_abs": 2e-6,
        "measured": str(tmp_path / "m.json"),
    }
    with pytest.warns(DeprecationWarning, match=r'info\(\)\.exact\["vs_torch"\] is deprecated') as said:
        assert chosen["vs_torch"] == 4.313
    assert said[0].filename == __file__  # the line that read it
    with pytest.warns(DeprecationWarning):
        assert chosen.get("vs_torch") == 4.313
    with pytest.raises(KeyError):
        ExactChoice(chosen="torch float32", why="...")["vs_torch"]  # no ratio: nothing to read under it
    with warnings.catch_warnings():
        warnings.simplefilter("error")
        assert chosen["vs_float32"] == 4.313 and chosen.get("missing", 0) == 0


def test_a_load_and_info_json_say_vs_float32(
    tiny_dirs: dict[str, Path], cache: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    measure_like_a_real_model(monkeypatch)
    m = bertscope.load(tiny_dirs["bert"], device="cpu")
    chosen = m.info().exact
    assert chosen is not None and "vs_float32" in chosen and "vs_torch" not in chosen, chosen
    said = json_of("info", "-m", str(tiny_dirs["bert"]))["exact"]  # the recorded choice
    assert said == json.loads(json.dumps(chosen)) and "vs_torch" not in said, said


# 2: a damaged config.json -----------------------------------------------------------------------------------


def test_a_config_json_that_is_not_json_is_named_with_its_fix(
    tiny_dirs: dict[str, Path], tmp_path: Path, cache: Path
) -> None:
    """It said "... is not a valid JSON file." and no fix, where a damaged config_sentence_transformers.json
    says "fix it, or copy it again from the model's source"."""
    folder = tmp_path / "bad"
    shutil.copytree(tiny_dirs["bert"], folder)
    (folder / "config.json").write_text("{\n", encoding="utf-8")
    fix = "fix it, or copy it again from the model's source"
    with pytest.raises(ModelLoadError, match=r"its config\.json is not valid JSON \(") as refused:
        bertscope.load(folder, device="cpu")
    assert str(refused.value).endswith(fix), refused.value
    ran = run_main("info", "-m", str(folder))
    assert ran.code == 1 and _one_error_line(ran.stderr).endswith(fix), ran


# 3: the path, absolute --------------------------------------------------------------------------------------


def test_info_says_the_absolute_path_of_a_folder_named_relative(
    tiny_dirs: dict[str, Path], cache: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    """BERTSCOPE_MODEL=m/distilbert gave `path m/distilbert`, where the bundled model's path is absolute."""
    folder = tiny_dirs["distilbert"]
    monkeypatch.chdir(folder.parent)
    monkeypatch.setenv("BERTSCOPE_MODEL", folder.name)
    absolute = str(folder.resolve())
    assert json_of("info")["path"] == absolute  # light: read from the folder
    assert absolute in run_main("info").stdout
    light = bertscope.load(folder.name, device="cpu")
    loaded = bertscope.load(folder.name, device="cpu", backend="torch")  # the PyTorch module's info
    assert isinstance(light, bertscope.Model) and isinstance(loaded, bertscope.Model)
    assert light.light and not loaded.light, (light.light, loaded.light)
    assert light.info().path == loaded.info().path == absolute


# 4: the note of a PyTorch load ----------------------------------------------------------------------------


def test_the_torch_load_note_says_an_export_leaves_the_vectors_to_the_graph(
    caplog: pytest.LogCaptureFixture,
) -> None:
    """After a first export, `embed --backend onnxruntime` said "what was asked runs on the PyTorch module
    here", which read as if ONNX Runtime had not run."""
    with caplog.at_level(logging.INFO, logger="bertscope.core.loading"):
        say_torch_loaded(2.6)
    (said,) = [r.getMessage() for r in caplog.records]
    assert "what was asked runs on the PyTorch module" not in said, said
    assert said.startswith("loaded PyTorch and the model in 2.6 s: for a first export, made once"), said
    assert "the exported graph then computes the vectors" in said, said
