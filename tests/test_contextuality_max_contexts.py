"""`contextuality --max-contexts N`: the command line measures a word on its first N occurrences as the
library's `max_contexts=` does, and says the cap in its own flag's words."""

from __future__ import annotations

import json
from pathlib import Path

import numpy as np

import bertscope

SENTENCES = [f"The bank by the river {i} was closed, said the bank." for i in range(8)]


def test_the_flag_is_the_library_s_max_contexts(bundled: bertscope.Model, tmp_path: Path) -> None:
    from console import run_main

    corpus = tmp_path / "corpus.txt"
    corpus.write_text("\n".join(SENTENCES) + "\n")
    ran = run_main("contextuality", "-i", str(corpus), "--words", "bank", "--max-contexts", "3", "--json")
    assert ran.code == 0, ran.stderr
    assert "(--max-contexts 3): bank: the first 3 of 16 occurrences" in ran.stderr
    answer = json.loads(ran.stdout)
    assert answer["settings"]["max_contexts"] == 3
    library = bundled.contextuality(SENTENCES, words=["bank"], max_contexts=3)
    assert [r["layer"] for r in answer["records"]] == [r["layer"] for r in library.records]
    for key in ("self_similarity", "intra_sentence", "baseline"):
        np.testing.assert_allclose([r[key] for r in answer["records"]], [r[key] for r in library.records])
    default = bundled.contextuality(SENTENCES, words=["bank"])
    assert answer["records"][3]["self_similarity"] != default.records[3]["self_similarity"]


def test_fewer_than_two_is_refused_in_the_flag_s_words(tmp_path: Path) -> None:
    from console import run_main

    corpus = tmp_path / "corpus.txt"
    corpus.write_text("\n".join(SENTENCES) + "\n")
    ran = run_main("contextuality", "-i", str(corpus), "--words", "bank", "--max-contexts", "1")
    assert ran.code == 1
    assert ran.stderr.startswith("error: --max-contexts must be a whole number of at least 2")
