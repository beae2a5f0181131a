"""distill in a log: bertscope's progress lines, not model2vec's tqdm redraws."""

from __future__ import annotations

from pathlib import Path

import pytest

pytest.importorskip("model2vec")


def test_distill_writes_a_few_lines_to_a_log_not_redraws(
    tmp_path: Path, tiny_models, monkeypatch, capfd
) -> None:
    """stderr a file (not a terminal): model2vec's bar (hundreds of `\\r` redraws in a log) is replaced
    by `distilling: N/M pieces` lines, one per interval; the clock is stepped by hand."""
    from model2vec.distill import inference

    from bertscope.core import progress
    from bertscope.research.distill import distill

    original = inference.tqdm
    readings = iter(range(0, 10**6, 11))
    monkeypatch.setattr(progress, "_clock", lambda: float(next(readings)))
    distill(tiny_models["bert"], tmp_path / "static", dim=8)
    err = capfd.readouterr().err
    lines = [line for line in err.splitlines() if line.startswith("distilling: ")]
    assert lines and "pieces" in lines[0] and lines[-1].startswith("distilling: ") and "done in" in lines[-1]
    assert "\r" not in err and "Encoding tokens" not in err
    assert inference.tqdm is original  # model2vec is left as it was
