"""Chunks' edges found by audit 20: a corpus job's `late` of the wrong type is refused as embed_chunks
refuses it (late="no" ran late chunking and stored "no"); an empty chunk past the first group of 64
documents is named by its own document."""

from __future__ import annotations

import json
from pathlib import Path
from typing import Any

import numpy as np
import pyarrow.parquet as pq
import pytest

import bertscope
from bertscope.errors import InvalidSpec
from bertscope.io.level_table import CorpusOptions, make_level
from bertscope.io.levels import LevelOptions

TEXTS = ["Berlin is big. It has parks.", "Tokyo has trains. Many of them."]


@pytest.mark.parametrize("late", ["no", "false", 0, None])
def test_a_corpus_job_refuses_late_of_the_wrong_type_before_any_work(
    bundled: bertscope.Model, tmp_path: Path, late: Any
) -> None:
    """late="no" ran late chunking and stored late: "no"; 0 and None ran naive and stored 0 and None."""
    out = tmp_path / "chunks.parquet"
    with pytest.raises(InvalidSpec, match=rf"^late must be True or False, got {late!r}$"):
        bertscope.embed_corpus(TEXTS, out, model=bundled, level="chunks", late=late, progress=False)
    assert not out.exists()
    with pytest.raises(InvalidSpec, match=r"^late must be True or False"):
        CorpusOptions.of(level="chunks", late=late)
    # options built directly, as the command line and the Ray runner build them
    with pytest.raises(InvalidSpec, match=r"^late must be True or False"):
        make_level(bundled, CorpusOptions(level=LevelOptions(level="chunks", late=late)))


def test_a_corpus_job_stores_late_as_a_bool(bundled: bertscope.Model, tmp_path: Path) -> None:
    out = tmp_path / "chunks.parquet"
    bertscope.embed_corpus(TEXTS, out, model=bundled, level="chunks", late=np.bool_(False), progress=False)
    stored = json.loads(pq.read_schema(out).metadata[b"bertscope"])
    assert stored["late"] is False and stored["long"] == "truncate"
