"""Audit 7 of `static --corpus` and `distill`: outputs are replaced only when asked, and only what the
command wrote; a long text is aggregated a few windows at a time; the summary names the file written."""

from __future__ import annotations

from pathlib import Path
from typing import Any

import numpy as np
import pytest
from typer.testing import CliRunner

import bertscope
from bertscope.cli import app
from bertscope.errors import CorpusError, InvalidInput
from bertscope.io.readers import Record
from bertscope.research.aggregate import aggregated, export_files, reduce_tables, word_level

runner = CliRunner()
TEXTS = ["the cat sat on the mat", "a bank by the river", "the river bank was muddy"]


def _corpus(tmp_path: Path) -> Path:
    path = tmp_path / "corpus.txt"
    path.write_text("\n".join(TEXTS) + "\n")
    return path


def _static(tiny: Path, corpus: Path, out: Path, *extra: str) -> Any:
    return runner.invoke(
        app, ["static", "--corpus", str(corpus), "-m", str(tiny), "-o", str(out), "--quiet", *extra]
    )


def test_resume_over_a_finished_output_is_refused(tmp_path: Path, tiny_dirs: dict[str, Path]) -> None:
    corpus, out = _corpus(tmp_path), tmp_path / "full.npy"
    assert _static(tiny_dirs["bert"], corpus, out, "--layers", "1").exit_code == 0
    before = out.read_bytes()
    again = _static(tiny_dirs["bert"], corpus, out, "--layers", "2", "--resume")
    assert isinstance(again.exception, CorpusError), again.output
    assert "already complete: nothing to resume" in str(again.exception)
    assert out.read_bytes() == before


def test_every_layer_file_is_checked(tmp_path: Path, tiny_dirs: dict[str, Path]) -> None:
    corpus, out = _corpus(tmp_path), tmp_path / "ml.vec"
    assert _static(tiny_dirs["bert"], corpus, out, "--layers", "0,1").exit_code == 0
    assert not out.exists()
    kept = tmp_path / "ml.layer1.counts.tsv"
    kept.write_text("mine\n")
    (tmp_path / "ml.layer0.vec").unlink()
    again = _static(tiny_dirs["bert"], corpus, out, "--layers", "0,1")
    assert isinstance(again.exception, CorpusError) and "ml.layer1.counts.tsv" in str(again.exception)
    assert kept.read_text() == "mine\n" and not (tmp_path / "ml.layer0.vec").exists()


@pytest.mark.parametrize("name", ["w.vec", "w.txt", "w.npy", "w.parquet", "w.tsv"])
@pytest.mark.parametrize("layers", ["1", "0,2"])
def test_export_files_names_what_export_writes(
    tmp_path: Path, tiny_models: dict[str, bertscope.Model], name: str, layers: str
) -> None:
    result = tiny_models["bert"].static_from_corpus(TEXTS, layers=layers, progress=False)
    fmt = "projector" if name.endswith(".tsv") else None
    written = result.export(tmp_path / name, format=fmt)
    assert written == export_files(tmp_path / name, result.layers, format=fmt)
    assert sorted(p.name for p in tmp_path.iterdir()) == sorted(p.name for p in written)


def test_overwrite_never_empties_a_foreign_checkpoint_folder(
    tmp_path: Path, tiny_models: dict[str, bertscope.Model]
) -> None:
    notes = tmp_path / "mine" / "notes.txt"
    notes.parent.mkdir()
    notes.write_text("keep")
    with pytest.raises(CorpusError, match="not an aggregation's checkpoint"):
        tiny_models["bert"].static_from_corpus(TEXTS, checkpoint=notes.parent, overwrite=True, progress=False)
    assert notes.read_text() == "keep"


def test_a_long_text_is_read_in_blocks_with_the_same_sums(
    tiny_models: dict[str, bertscope.Model], monkeypatch: pytest.MonkeyPatch
) -> None:
    model = tiny_models["bert"]
    words = "sat coast rain unbelievably tokenization cat bank river".split()
    long_text = " ".join(words[i % len(words)] for i in range(700))  # many 64-token windows
    texts = [long_text, "a short text", "cat bank"]
    level, settings = word_level(model, aggregated(layers="0,2"), "first_last")
    tables = [level.embed([Record(str(i), t, i + 1)]).table for i, t in enumerate(texts)]
    reference = reduce_tables(model, level, settings, tables, min_count=1, corpus="texts")
    limit, engine = model.engine.tokenizer.max_tokens, model.engine
    whole = engine.fitted_token_matrices
    seen: list[int] = []

    def watched(tokens: Any, spec: Any, **options: Any) -> Any:
        seen.extend(len(tok) for tok in tokens)
        return whole(tokens, spec, **options)

    monkeypatch.setattr(engine, "fitted_token_matrices", watched)
    result = model.static_from_corpus(texts, layers="0,2", subword="first_last", batch_size=2, progress=False)
    assert seen and max(seen) <= limit  # the long text never went through as one matrix
    assert result.words == reference.words and (result.counts == reference.counts).all()
    np.testing.assert_allclose(result.vectors, reference.vectors, rtol=1e-5, atol=1e-6)
    assert result.summary is not None and result.summary.rows == int(reference.counts.sum())


def test_summary_names_the_file_written(tmp_path: Path, tiny_models: dict[str, bertscope.Model]) -> None:
    out = tmp_path / "s.npy"
    result = tiny_models["bert"].static_from_corpus(
        TEXTS, checkpoint=tmp_path / "s.npy.parts", export=out, progress=False
    )
    assert result.summary is not None and result.summary.line().endswith(f"-> {out}")
    assert not (tmp_path / "s.npy.parts").exists()


@pytest.fixture
def distilled(tmp_path: Path, tiny_dirs: dict[str, Path]) -> Any:
    pytest.importorskip("model2vec")
    return lambda out, *extra: runner.invoke(
        app, ["distill", "-o", str(out), "--dim", "8", "-m", str(tiny_dirs["bert"]), *extra]
    )


def test_distill_overwrite_leaves_a_foreign_folder_alone(tmp_path: Path, distilled: Any) -> None:
    victim = tmp_path / "victim"
    victim.mkdir()
    (victim / "config.json").write_text("{}")
    (victim / "thesis.tex").write_text("years of work")
    result = distilled(victim, "--overwrite")
    assert isinstance(result.exception, InvalidInput) and "remove it yourself" in str(result.exception)
    assert (victim / "thesis.tex").read_text() == "years of work"


def test_distill_overwrite_replaces_its_own_folder(tmp_path: Path, distilled: Any) -> None:
    folder = tmp_path / "static"
    assert distilled(folder).exit_code == 0
    names = sorted(p.name for p in folder.iterdir())
    again = distilled(folder, "--overwrite")
    assert again.exit_code == 0, again.output
    assert sorted(p.name for p in folder.iterdir()) == names


def test_distill_refuses_a_file_before_distilling(
    tmp_path: Path, distilled: Any, monkeypatch: pytest.MonkeyPatch
) -> None:
    from bertscope.cli import static_kinds

    def no_load(*args: Any, **kwargs: Any) -> Any:
        raise AssertionError("the model was loaded for an output that cannot be written")

    monkeypatch.setattr(static_kinds, "load_model", no_load)
    afile = tmp_path / "afile.txt"
    afile.write_text("x")
    result = distilled(afile, "--overwrite")
    assert isinstance(result.exception, InvalidInput) and "not a folder" in str(result.exception)
    assert afile.read_text() == "x"
