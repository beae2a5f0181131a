"""Corpus jobs and stores, as the eleventh audit found them: --overwrite deleting the old output before
the new one was written, --resume with --overwrite, stale side files of a rewritten .npy, the threshold file
with views, job options beside --view, CR line endings, options similar ignores, and names."""

from __future__ import annotations

import json
from collections.abc import Iterator
from pathlib import Path

import numpy as np
import pyarrow.parquet as pq
import pytest

import bertscope
from bertscope.errors import CorpusError, InvalidSpec
from console import run_main

TEXTS = ["a storm hits the coast", "prices keep rising", "the river bank flooded", "a quiet day"]


def _ids(out: Path) -> list[str]:
    """The ids a store holds, in stored order (a collection's by id)."""
    if out.suffix == ".parquet":
        return [str(i) for i in pq.read_table(out).column("id").to_pylist()]
    if out.suffix == ".npy":
        return out.with_suffix(".ids.txt").read_text().split()
    import sqlite3

    db = sqlite3.connect(out)
    try:
        return [r[0] for r in db.execute("SELECT id FROM embeddings WHERE collection = 'default' ORDER BY id")]
    finally:
        db.close()


@pytest.mark.parametrize("suffix", [".parquet", ".npy", ".db"])
def test_overwrite_keeps_the_old_output_when_the_new_job_fails(
    tmp_path: Path, bundled: bertscope.Model, suffix: str
) -> None:
    out = tmp_path / f"keep{suffix}"
    bertscope.embed_corpus(TEXTS, out, model=bundled)
    bad = tmp_path / "bad.jsonl"
    bad.write_text('{"text": "ok one"}\n{"text": 5}\n')
    with pytest.raises(CorpusError, match="bad.jsonl:2"):
        bertscope.embed_corpus(bad, out, model=bundled, overwrite=True)
    assert _ids(out) == ["1", "2", "3", "4"]
    assert [h.id for h in bertscope.search("storm", out, model=bundled, top_k=1)] == ["1"]


def _interrupted(texts: list[str], at: int) -> Iterator[str]:
    for number, text in enumerate(texts):
        if number == at:
            raise KeyboardInterrupt
        yield text


@pytest.mark.parametrize("suffix", [".parquet", ".npy", ".db"])
def test_an_interrupted_overwrite_keeps_the_old_output_and_resumes(
    tmp_path: Path, bundled: bertscope.Model, suffix: str
) -> None:
    out = tmp_path / f"swap{suffix}"
    bertscope.embed_corpus(TEXTS, out, model=bundled)
    new = [f"new text {i}" for i in range(6)]
    with pytest.raises(KeyboardInterrupt):
        bertscope.embed_corpus(_interrupted(new, 4), out, model=bundled, batch_size=2, overwrite=True)
    assert _ids(out) == ["1", "2", "3", "4"]  # the old output, whole and searchable
    assert bertscope.search("storm", out, model=bundled, top_k=1)[0].id == "1"
    with pytest.raises(CorpusError, match="unfinished"):  # neither flag: the replacement is not lost
        bertscope.embed_corpus(new, out, model=bundled, batch_size=2)
    summary = bertscope.embed_corpus(new, out, model=bundled, batch_size=2, resume=True)
    assert summary.resumed_from == 4 or suffix == ".db"
    assert sorted(_ids(out)) == ["1", "2", "3", "4", "5", "6"]
    assert bertscope.search("new text 5", out, model=bundled, top_k=1)[0].id == "6"
    if suffix == ".db":  # the rows' checksums, bound to the collection's name anew, hold
        assert [c["name"] for c in bertscope.list_collections(out)] == ["default"]
        assert run_main("verify", "--store", str(out), "--backend", "torch").code == 0


def test_resume_with_overwrite_is_refused(tmp_path: Path, bundled: bertscope.Model) -> None:
    out = tmp_path / "ro.parquet"
    with pytest.raises(KeyboardInterrupt):
        bertscope.embed_corpus(_interrupted(TEXTS, 2), out, model=bundled, batch_size=1)
    with pytest.raises(InvalidSpec, match="resume=True .* overwrite=True"):
        bertscope.embed_corpus(TEXTS, out, model=bundled, resume=True, overwrite=True)
    assert len(list((tmp_path / "ro.parquet.parts").glob("*.done"))) == 2  # the saved parts stay
    ran = run_main("embed", "-i", "-", "-o", str(out), "--resume", "--overwrite", "--backend", "torch")
    assert ran.code != 0 and "--resume" in ran.stderr and "--overwrite" in ran.stderr
    assert len(ran.stderr.strip().splitlines()) == 1


def test_a_npy_rewritten_at_another_level_keeps_no_stale_labels(
    tmp_path: Path, bundled: bertscope.Model
) -> None:
    out = tmp_path / "sw.npy"
    bertscope.embed_corpus(TEXTS, out, model=bundled)
    bertscope.embed_corpus(TEXTS, out, model=bundled, level="chunks", overwrite=True)
    assert not out.with_suffix(".ids.txt").exists()
    assert bertscope.search("storm", out, model=bundled, top_k=1)[0].id == "1"
    bertscope.embed_corpus(TEXTS, out, model=bundled, overwrite=True)  # and back
    assert not out.with_suffix(".rows.jsonl").exists()
    assert bertscope.search("storm", out, model=bundled, top_k=1)[0].id == "1"


def test_a_stale_ids_file_beside_a_chunk_npy_is_not_read(tmp_path: Path, bundled: bertscope.Model) -> None:
    out = tmp_path / "st.npy"
    bertscope.embed_corpus(TEXTS, out, model=bundled, level="chunks")
    out.with_suffix(".ids.txt").write_text("9\n8\n7\n6\n")  # as an older bertscope's --overwrite left it
    assert bertscope.search("storm", out, model=bundled, top_k=1)[0].id == "1"
    assert np.isfinite(np.load(out)).all()
