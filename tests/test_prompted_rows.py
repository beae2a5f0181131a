"""Token and word stores of a model with a default prompt hold the rows of each text as given: no prompt
is put before it (a default prompt is its sentence vectors'), so the stored spans index the stored text, the
prompt's pieces are no words of it, and an occurrence's context is embedded as the rows were."""

from __future__ import annotations

import json
from pathlib import Path

import numpy as np
import pyarrow.parquet as pq
import pytest

import bertscope
from prompted import with_prompts

TEXTS = ["We sat on the bank of the river.", "She paid the bank."]


@pytest.fixture(scope="module")
def prompted(bundled_path: Path, tmp_path_factory: pytest.TempPathFactory) -> bertscope.Model:
    folder = tmp_path_factory.mktemp("prompted") / "model"
    with_prompts(bundled_path, folder, include_prompt=True, default="passage")
    return bertscope.load(folder, device="cpu", backend="torch")


@pytest.mark.parametrize("level", ["tokens", "words"])
def test_rows_index_the_text_as_given(prompted: bertscope.Model, tmp_path: Path, level: str) -> None:
    out = tmp_path / f"{level}.parquet"
    bertscope.embed_corpus(TEXTS, out, model=prompted, level=level, progress=False)
    table = pq.read_table(out).to_pylist()
    words = {"tokens": "token", "words": "word"}[level]
    for row in table:
        text = TEXTS[int(row["id"]) - 1] if row.get("text") is None else row["text"]
        if row["end"] > row["start"]:  # special tokens have no span
            assert text[row["start"] : row["end"]].lower() == row[words].replace("##", "").lower(), row
    assert not {r[words] for r in table} & {"passage", ":"}
    if level == "tokens":  # the rows are the text's own: a plain transformers forward of the text alone
        import torch
        import transformers

        folder = prompted.loaded.path
        batch = transformers.AutoTokenizer.from_pretrained(folder)(TEXTS[1], return_tensors="pt")
        with torch.inference_mode():
            plain = transformers.AutoModel.from_pretrained(folder)(**batch).last_hidden_state[0].numpy()
        rows = np.asarray([r["embedding"] for r in table if r["id"] == table[-1]["id"]], dtype=np.float32)
        np.testing.assert_allclose(rows, plain, atol=1e-5)


def test_an_occurrence_found_in_context(prompted: bertscope.Model, tmp_path: Path) -> None:
    out = tmp_path / "words.parquet"
    bertscope.embed_corpus(TEXTS, out, model=prompted, level="words", progress=False)
    found = bertscope.search_occurrences(out, word="bank", context=TEXTS[0], model=prompted, top_k=2)
    assert [(h.id, h.start, h.end) for h in found.hits] == [("1", 14, 18), ("2", 13, 17)]
    assert found.hits[0].score == pytest.approx(1.0, abs=1e-5)  # the context is the first text itself


@pytest.mark.parametrize(("flag", "level"), [("--tokens", "tokens"), ("--level", "words")])
def test_printed_rows_are_the_stored_rows(
    prompted: bertscope.Model, tmp_path: Path, flag: str, level: str
) -> None:
    """`embed --tokens --json` printed the prompted text's rows ('passage', ':' first; the bank vector at
    cosine 0.984 to the stored one) where `-o` stored the text's own: one command, other vectors."""
    from console import run_main

    folder = str(prompted.loaded.source)
    args = [flag] if flag == "--tokens" else [flag, "words"]
    printed = run_main("embed", TEXTS[0], *args, "--json", "--model", folder, "--backend", "torch")
    assert printed.code == 0, printed.stderr
    (item,) = json.loads(printed.stdout)["items"]
    out = tmp_path / f"{level}.parquet"
    bertscope.embed_corpus([TEXTS[0]], out, model=prompted, level=level, progress=False)
    stored = pq.read_table(out).to_pylist()
    words = {"tokens": "tokens", "words": "words"}[level]
    assert item[words] == [row[words[:-1]] for row in stored] and "passage" not in item[words]
    np.testing.assert_allclose(
        np.array(item["vectors"]), np.array([row["embedding"] for row in stored]), rtol=0, atol=1e-5
    )
    # The library's rows are the prompted text's, as TEI's /embed_all; prompt="" asks for the text as given.
    assert prompted.embed_tokens(TEXTS[0])[0].tokens[1:3] == ["passage", ":"]
    if level == "tokens":
        assert prompted.embed_tokens(TEXTS[0], prompt="")[0].tokens == item["tokens"]
