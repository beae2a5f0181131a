"""`bench` on a static model (a model2vec folder): the static model's one-line refusal, not transformers'
"upgrade transformers" load error."""

from __future__ import annotations

from pathlib import Path

import pytest

from console import run_main


@pytest.mark.parametrize("how", ["-m", "BERTSCOPE_MODEL"])
def test_bench_refuses_a_static_model_in_its_one_line(
    m2v_folder: Path, how: str, monkeypatch: pytest.MonkeyPatch
) -> None:
    args = ["bench", "--limit", "2", "--modes", "float32"]
    if how == "-m":
        args += ["-m", str(m2v_folder)]
    else:
        monkeypatch.setenv("BERTSCOPE_MODEL", str(m2v_folder))
    ran = run_main(*args)
    assert ran.code == 1 and ran.stderr.startswith("error:") and ran.stderr.count("\n") == 1, ran.stderr
    assert "is a static model (model2vec) with no layers: bench" in ran.stderr, ran.stderr
    assert "Transformers" not in ran.stderr and "out of date" not in ran.stderr, ran.stderr


def test_compare_modes_refuses_a_static_model_in_one_line(m2v_folder: Path) -> None:
    """The library call under `bench`: a model2vec folder is named as one, not transformers' "out of date"."""
    from bertscope.backends.modes import compare_modes
    from bertscope.errors import ModelLoadError

    with pytest.raises(ModelLoadError, match=r"is a static model \(model2vec\) with no layers") as raised:
        compare_modes(["a cat"], ["float32"], model=m2v_folder)
    assert "\n" not in str(raised.value) and "out of date" not in str(raised.value)
