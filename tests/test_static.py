"""Static word-piece vectors: rows of the input embedding matrix, neighbours, unknown tokens, export."""

from __future__ import annotations

import re
from pathlib import Path

import numpy as np
import pyarrow.parquet as pq
import pytest

import bertscope
from bertscope.core.exports import EXPORTS, ExportFormat, export_format, write_vectors
from console import run_main

BREAD_ID = 7852


def _weight(model: bertscope.Model) -> np.ndarray:
    """The model's input embedding matrix (vocab, d) as float32, read straight from the HF module."""
    return model.hf_model.get_input_embeddings().weight.detach().float().cpu().numpy()


def _vocab_list(model: bertscope.Model) -> list[str]:
    """Token strings in id order, from the HF tokenizer."""
    vocab = model.loaded.tokenizer.get_vocab()
    names = [""] * len(vocab)
    for token, index in vocab.items():
        names[index] = token
    return names


def test_static_bread_is_row_7852(bundled: bertscope.Model) -> None:
    row = bundled.static("bread")
    assert row.shape == (1, 384) and row.dtype == np.float32
    np.testing.assert_array_equal(row[0], _weight(bundled)[BREAD_ID])


def test_static_is_independent_of_context(bundled: bertscope.Model) -> None:
    by_piece = bundled.static("bread")[0]
    np.testing.assert_array_equal(bundled.static([BREAD_ID])[0], by_piece)
    np.testing.assert_array_equal(bundled.static(BREAD_ID)[0], by_piece)
    pair = bundled.static(["[CLS]", "bread"])
    assert pair.shape == (2, 384)
    np.testing.assert_array_equal(pair[1], by_piece)
    np.testing.assert_array_equal(pair[0], _weight(bundled)[bundled.vocab["[CLS]"]])


def test_static_word_is_mean_of_its_pieces(bundled: bertscope.Model) -> None:
    word = bundled.static_word("tokenization")
    assert isinstance(word, bertscope.StaticWord)
    assert word.pieces == ["token", "##ization"]
    assert word.ids == [bundled.vocab["token"], bundled.vocab["##ization"]]
    weight = _weight(bundled)
    expected = (weight[word.ids[0]] + weight[word.ids[1]]) / 2
    np.testing.assert_allclose(word.vector, expected, rtol=0, atol=1e-7)
    assert not np.allclose(word.vector, weight[word.ids[0]])


def test_static_word_of_a_single_piece_is_its_row(bundled: bertscope.Model) -> None:
    word = bundled.static_word("bread")
    assert word.pieces == ["bread"] and word.ids == [BREAD_ID]
    np.testing.assert_array_equal(word.vector, _weight(bundled)[BREAD_ID])


def test_static_neighbors_are_the_true_nearest(bundled: bertscope.Model) -> None:
    found = bundled.static_neighbors("bread", k=10)
    assert len(found) == 10
    cosines = [n.score for n in found]
    assert cosines == sorted(cosines, reverse=True)
    special = set(bundled.loaded.tokenizer.all_special_ids)
    weight = _weight(bundled).astype(np.float64)
    query = weight[BREAD_ID]
    for neighbor in found:
        assert neighbor.token != "bread" and neighbor.id != BREAD_ID
        assert neighbor.id not in special
        assert not re.fullmatch(r"\[unused\d+\]", neighbor.token)
        assert bundled.vocab[neighbor.token] == neighbor.id
        row = weight[neighbor.id]
        direct = float(row @ query / (np.linalg.norm(row) * np.linalg.norm(query)))
        assert neighbor.score == pytest.approx(direct, abs=1e-5)
    # The ten are the best ten among the eligible entries, computed here without bertscope.
    all_cos = weight @ query / (np.linalg.norm(weight, axis=1) * np.linalg.norm(query))
    names = _vocab_list(bundled)
    excluded = [i for i, t in enumerate(names) if i in special or re.fullmatch(r"\[unused\d+\]", t)]
    all_cos[excluded + [BREAD_ID]] = -np.inf
    assert [n.id for n in found] == list(np.argsort(-all_cos)[:10])


def test_static_neighbors_of_a_vector_leave_specials_out_unless_asked(bundled: bertscope.Model) -> None:
    mask_id = bundled.vocab["[MASK]"]
    query = _weight(bundled)[mask_id]
    plain = bundled.static_neighbors(query, k=5)
    assert all(n.id not in bundled.loaded.tokenizer.all_special_ids for n in plain)
    with_special = bundled.static_neighbors(query, k=5, include_special=True)
    assert (with_special[0].token, with_special[0].id) == ("[MASK]", mask_id)
    assert with_special[0].score == pytest.approx(1.0, abs=1e-6)


def test_unknown_piece_points_to_static_word(bundled: bertscope.Model) -> None:
    with pytest.raises(bertscope.UnknownToken, match="static_word") as info:
        bundled.static("tokenization")
    assert "##ization" in str(info.value)
    assert isinstance(info.value, bertscope.InvalidInput)


@pytest.mark.parametrize("bad_id", [10**6, -1, 30522])
def test_out_of_range_id_is_unknown_token(bundled: bertscope.Model, bad_id: int) -> None:
    with pytest.raises(bertscope.UnknownToken, match="out of range"):
        bundled.static(bad_id)
    with pytest.raises(bertscope.UnknownToken):
        bundled.static_neighbors(bad_id)


def test_last_id_is_in_range(bundled: bertscope.Model) -> None:
    np.testing.assert_array_equal(bundled.static(30521)[0], _weight(bundled)[30521])


def test_export_word2vec_loads_in_gensim(bundled: bertscope.Model, tmp_path: Path) -> None:
    from gensim.models import KeyedVectors

    path = tmp_path / "static.txt"
    assert bundled.export_static(path, format="word2vec") == [path]
    with path.open(encoding="utf-8") as handle:
        assert handle.readline().split() == ["30522", "384"]
        assert sum(1 for _ in handle) == 30522
    # Parsing all 30522 rows in gensim takes ~13 s (rows 0..7852, to "bread", 2.2 s): the rows up to the
    # last token checked here, 0..2075, hold the specials, the [unusedN] rows, every single character
    # (punctuation and non-ASCII letters among them), words and ## pieces.
    checked = ["[PAD]", "[CLS]", "[SEP]", "the", "##s", "##ing"]
    last = max(bundled.vocab[token] for token in checked)
    vectors = KeyedVectors.load_word2vec_format(str(path), binary=False, limit=last + 1)
    weight = _weight(bundled)
    for token in checked:
        np.testing.assert_allclose(vectors[token], weight[bundled.vocab[token]], rtol=0, atol=1e-6)
    assert vectors.key_to_index["##ing"] == last == 2075


def test_export_npy_round_trips(tiny_models: dict[str, bertscope.Model], tmp_path: Path) -> None:
    model = tiny_models["bert"]
    files = model.export_static(tmp_path / "static.npy", format="npy")
    assert files == [tmp_path / "static.npy", tmp_path / "static.vocab.txt"]
    np.testing.assert_array_equal(np.load(files[0]), _weight(model))
    assert files[1].read_text().splitlines() == _vocab_list(model)


def test_export_parquet_round_trips(tiny_models: dict[str, bertscope.Model], tmp_path: Path) -> None:
    model = tiny_models["bert"]
    (path,) = model.export_static(tmp_path / "static.parquet", format="parquet")
    table = pq.read_table(path)
    assert table.column_names == ["id", "token", "vector"]
    weight = _weight(model)
    assert table.column("id").to_pylist() == list(range(len(weight)))
    assert table.column("token").to_pylist() == _vocab_list(model)
    np.testing.assert_array_equal(np.array(table.column("vector").to_pylist(), dtype=np.float32), weight)


def test_export_projector_round_trips(tiny_models: dict[str, bertscope.Model], tmp_path: Path) -> None:
    model = tiny_models["bert"]
    vectors_path, meta_path = model.export_static(tmp_path / "static", format="projector")
    assert vectors_path.suffix == ".tsv" and meta_path.suffix == ".tsv" and vectors_path != meta_path
    weight = _weight(model)
    meta = meta_path.read_text(encoding="utf-8").splitlines()
    vectors = np.loadtxt(vectors_path, delimiter="\t", dtype=np.float32)
    assert len(meta) == len(vectors_path.read_text().splitlines()) == len(weight)
    assert meta == _vocab_list(model)
    np.testing.assert_allclose(vectors, weight, rtol=0, atol=1e-6)


def test_export_unknown_format_is_invalid_spec(
    tiny_models: dict[str, bertscope.Model], tmp_path: Path
) -> None:
    with pytest.raises(bertscope.InvalidSpec, match="word2vec"):
        tiny_models["bert"].export_static(tmp_path / "x", format="glove")


def test_an_export_suffix_that_names_no_format_is_refused(
    tiny_models: dict[str, bertscope.Model], tmp_path: Path
) -> None:
    """`--export o.weird` once wrote word2vec text by guess; now the suffix chooses or the format is named."""
    model = tiny_models["bert"]
    for name in ("o.weird", "vectors"):
        with pytest.raises(bertscope.InvalidInput, match="names no export format.*word2vec, npy, parquet"):
            model.export_static(tmp_path / name)
        assert not (tmp_path / name).exists()
    for name in ("o.vec", "o.txt", "o.w2v"):
        (path,) = model.export_static(tmp_path / name)
        assert (
            path.read_text(encoding="utf-8").split("\n", 1)[0]
            == f"{len(_weight(model))} {_weight(model).shape[1]}"
        )
    assert model.export_static(tmp_path / "o.weird", format="word2vec") == [tmp_path / "o.weird"]


def _read_back(files: list[Path], fmt: ExportFormat) -> tuple[list[str], np.ndarray]:
    """(names, vectors) of an export, read as a consumer of the format would."""
    if fmt is ExportFormat.WORD2VEC:
        lines = files[0].read_text(encoding="utf-8").splitlines()[1:]
        return [ln.split(" ")[0] for ln in lines], np.array([ln.split(" ")[1:] for ln in lines], np.float32)
    if fmt is ExportFormat.NPY:
        names = [ln.split("\t")[0] for ln in files[1].read_text(encoding="utf-8").splitlines()]
        return names, np.load(files[0])
    if fmt is ExportFormat.PARQUET:
        table = pq.read_table(files[0]).to_pydict()
        return table.get("token", table.get("word")), np.array(table["vector"], np.float32)
    lines = files[1].read_text(encoding="utf-8").splitlines()
    names = [ln.split("\t")[0] for ln in (lines[1:] if "\t" in lines[0] else lines)]
    return names, np.loadtxt(files[0], delimiter="\t", dtype=np.float32, ndmin=2)


@pytest.mark.parametrize("fmt", list(EXPORTS))
def test_static_rows_and_word_vectors_go_through_one_export_table(
    tiny_models: dict[str, bertscope.Model], tmp_path: Path, fmt: ExportFormat
) -> None:
    model = tiny_models["bert"]
    rule = EXPORTS[fmt]
    for suffix in rule.suffixes:  # each suffix chooses its format alone
        assert export_format(Path("o" + suffix), None) is fmt
    name = "o" + (rule.suffixes[0] if rule.suffixes else "")
    (tmp_path / "static").mkdir()
    (tmp_path / "words").mkdir()
    ids = [5, 6, 7]
    names, vectors = _read_back(model.export_static(tmp_path / "static" / name, format=fmt, items=ids), fmt)
    assert names == [model.id_to_token[i] for i in ids]
    np.testing.assert_allclose(vectors, model.static(ids), rtol=1e-6)
    rows = np.arange(6, dtype=np.float32).reshape(2, 3) / 7
    files = write_vectors(tmp_path / "words" / name, fmt, ["bread", "cake"], np.array([4, 2]), rows)
    names, vectors = _read_back(files, fmt)
    assert names == ["bread", "cake"]
    np.testing.assert_allclose(vectors, rows, rtol=1e-6)


@pytest.mark.parametrize("word", ["🙂", "bread🙂"])
def test_a_word_the_vocabulary_cannot_spell_is_refused_not_given_the_unknown_row(
    bundled: bertscope.Model, word: str
) -> None:
    """`static --word 🙂` printed the [UNK] row as the word's vector (and a mean over it for bread🙂)."""
    with pytest.raises(
        bertscope.InvalidInput, match=r"is not in this model's vocabulary: its pieces are .*\[UNK\]"
    ):
        bundled.static_word(word)
    ran = run_main("static", "--word", word)
    assert ran.code != 0 and "not in this model's vocabulary" in ran.stderr and "Traceback" not in ran.stderr


def test_a_word_that_spells_a_special_token_is_its_pieces(bundled: bertscope.Model) -> None:
    assert bundled.static_word("breadmaking").pieces == ["bread", "##making"]


def test_lookup_as_words_is_the_one_name_and_word_its_old_one(bundled: bertscope.Model) -> None:
    """lookup(as_words=True) as `static --as-words` and the service's "as_words": word= still reads words,
    with a DeprecationWarning pointing at the caller's line; both at once is refused in one line."""
    from bertscope.static import lookup

    by_name = lookup(bundled, "breadmaker", as_words=True, k=2)
    assert by_name["pieces"] == ["bread", "##maker"] and len(by_name["neighbors"]) == 2
    np.testing.assert_allclose(by_name["vector"], bundled.static_word("breadmaker").vector, atol=1e-6)
    with pytest.warns(
        DeprecationWarning, match=r"^lookup\(word=\.\.\.\) is deprecated; use as_words="
    ) as said:
        assert lookup(bundled, "breadmaker", word=True, k=2) == by_name
    assert said[0].filename == __file__
    with pytest.warns(DeprecationWarning):
        assert lookup(bundled, "bread", word=False) == lookup(bundled, "bread", as_words=False)
    for as_words, word in ((True, True), (False, True), (True, False), (False, False)):
        with pytest.raises(bertscope.InvalidInput) as refused:
            lookup(bundled, "bread", as_words=as_words, word=word)
        assert str(refused.value) == "word= is the old name of as_words=; give as_words= only"
    with pytest.raises(
        bertscope.InvalidInput, match=r"^7852 is not a word; with as_words=True every item is"
    ):
        lookup(bundled, 7852, as_words=True)
    with pytest.raises(bertscope.UnknownToken, match="static_word"):
        lookup(bundled, "breadmaker")  # no words unless asked: not a piece


def test_neighbors_of_a_vector_of_the_wrong_width_name_both_widths(bundled: bertscope.Model) -> None:
    with pytest.raises(bertscope.InvalidInput, match="has 10 numbers .* static rows have 384"):
        bundled.static_neighbors(np.ones(10))
    near = bundled.static_neighbors(bundled.static_word("cat").vector, k=3)
    assert len(near) == 3


def test_a_static_words_repr_is_short_and_names_its_pieces(bundled: bertscope.Model) -> None:
    word = bundled.static_word("unhappiness")
    shown = repr(word)
    assert shown.startswith("StaticWord(word='unhappiness', pieces=['un', '##ha', '##pp', '##iness']")
    assert "(384,)" in shown and len(shown) < 150
