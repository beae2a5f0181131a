"""Corpus jobs and stores, as the nineteenth audit found them: an over-long text named by its place in a
batch, a parts folder a failed settings write left unresumable, a full disk said as a foreign SQLite file
or as bytes written, nothing said of the records an all-rejected job set aside, blank .jsonl lines not
counted, and changed views said as two whole dicts."""

from __future__ import annotations

from pathlib import Path

import pytest

import bertscope
from bertscope.errors import InputTooLong

RESUME_FIX = "fix the input, then run again with resume=True (--resume) to go on from them"
TEXTS = ["a storm hits the coast", "prices keep rising", "the river bank flooded", "a quiet day"]


def _long_text(model: bertscope.Model) -> str:
    return "word " * (model.info().max_tokens + 10)


# --- 1. an over-long text under long='error' named by its file and line ---------------------------------


def test_an_over_long_text_is_named_by_its_line_and_says_what_is_saved(
    tmp_path: Path, tiny_models: dict[str, bertscope.Model]
) -> None:
    model = tiny_models["bert"]
    corpus = tmp_path / "long.txt"
    corpus.write_text("\n".join([*TEXTS, "one more", _long_text(model)]) + "\n")
    with pytest.raises(InputTooLong) as caught:
        bertscope.embed_corpus(corpus, tmp_path / "out.parquet", model=model, batch_size=2, long="error")
    said = str(caught.value)
    assert said.startswith(f"{corpus}:6: the text has ")
    assert "text 1 " not in said
    assert said.endswith(f"; 4 texts are saved: {RESUME_FIX}")
