"""Corpus levels: token and word rows against plain Hugging Face, offsets, npy, resume, bad input."""

from __future__ import annotations

import json
from pathlib import Path

import numpy as np
import pyarrow.parquet as pq
import pytest
import torch
from transformers import AutoModel, AutoTokenizer

import bertscope
from bertscope.core.spec import EmbedOptions
from bertscope.errors import CorpusError, InvalidSpec
from bertscope.io.level_table import CorpusOptions, make_level
from bertscope.io.levels import LevelOptions
from test_io import LIGHT, _embed_in_process, stop_and_resume, write_txt

TEXTS = [
    "We sat on the bank of the river.",
    "The bank raised its interest rates; tokenization happens.",
    "Ünïcode café — naïve résumé, 3.14 and e-mail!",
    "short",
]


def _hf_states(folder: Path, text: str) -> tuple[list[torch.Tensor], list[tuple[int, int]]]:
    """Every hidden state (tokens, d) of one text from plain transformers, and its offsets."""
    tokenizer = AutoTokenizer.from_pretrained(str(folder))
    model = AutoModel.from_pretrained(str(folder)).eval()
    batch = tokenizer(text, return_tensors="pt", return_offsets_mapping=True)
    offsets = [tuple(o) for o in batch.pop("offset_mapping")[0].tolist()]
    with torch.inference_mode():
        states = model(**batch, output_hidden_states=True).hidden_states
    return [s[0] for s in states], offsets  # type: ignore[misc]


def _column(table: object, name: str) -> np.ndarray:
    return np.array(table.column(name).to_pylist(), dtype=np.float32)  # type: ignore[attr-defined]


@pytest.mark.parametrize("precision, tolerance", [("float32", 1e-5), ("float16", 1e-3)])
def test_token_rows_equal_hugging_face_hidden_states(
    tmp_path: Path, bundled: bertscope.Model, bundled_path: Path, precision: str, tolerance: float
) -> None:
    source = write_txt(tmp_path, TEXTS)
    out = tmp_path / "tokens.parquet"
    summary = bertscope.embed_corpus(
        source, out, model=bundled, level="tokens", layers="2,-1", combine="stack", precision=precision
    )
    table = pq.read_table(out)
    assert table.column_names[-2:] == ["layer_2", "layer_6"]
    settings = json.loads(table.schema.metadata[b"bertscope"])
    assert settings["level"] == "tokens" and settings["layers"] == [2, 6] and settings["combine"] == "stack"
    assert settings["precision"] == precision and "pooling" not in settings
    stored = "halffloat" if precision == "float16" else "float"
    assert str(table.schema.field("layer_2").type.value_type) == stored
    assert summary.embedded == len(TEXTS) and summary.tokens == table.num_rows
    rows = table.drop_columns(["layer_2", "layer_6"]).to_pylist()
    layer2, layer6 = _column(table, "layer_2"), _column(table, "layer_6")
    row = 0
    for number, text in enumerate(TEXTS, 1):
        states, offsets = _hf_states(bundled_path, text)
        for position, (start, end) in enumerate(offsets):
            record = rows[row]
            assert record["id"] == str(number) and record["position"] == position
            assert (record["start"], record["end"]) == (start, end)
            assert (record["text"] == text) == (position == 0)
            np.testing.assert_allclose(
                layer2[row], states[2][position].numpy(), atol=tolerance, rtol=tolerance
            )
            np.testing.assert_allclose(
                layer6[row], states[6][position].numpy(), atol=tolerance, rtol=tolerance
            )
            row += 1
    assert row == table.num_rows


def test_offsets_point_at_the_pieces(tmp_path: Path, bundled: bertscope.Model) -> None:
    source = write_txt(tmp_path, TEXTS)
    out = tmp_path / "tokens.parquet"
    bertscope.embed_corpus(source, out, model=bundled, level="tokens", keep_text=False)
    rows = pq.read_table(out).drop_columns(["embedding"]).to_pylist()
    assert "text" not in rows[0]
    for record in rows:
        text = TEXTS[int(record["id"]) - 1]
        if record["special"]:
            assert record["token"] in ("[CLS]", "[SEP]") and record["word_index"] is None
            continue
        piece = record["token"].removeprefix("##")
        span = text[record["start"] : record["end"]]
        assert span.lower() == piece or piece == "[UNK]" or len(span) == len(piece), (span, piece)
        assert record["token_id"] == bundled.vocab[record["token"]]


def test_word_rows_equal_embed_words_and_npy_streams_the_same(
    tmp_path: Path, bundled: bertscope.Model
) -> None:
    source = write_txt(tmp_path, TEXTS)
    out = tmp_path / "words.parquet"
    bertscope.embed_corpus(source, out, model=bundled, level="words", layers="-2", subword="first")
    table = pq.read_table(out)
    expected = bundled.embed_words(TEXTS, layers="-2", subword="first")
    assert table.column("word").to_pylist() == [w for e in expected for w in e.words]
    assert table.column("pieces").to_pylist() == [p for e in expected for p in e.pieces]
    np.testing.assert_allclose(
        _column(table, "embedding"), np.concatenate([e.vectors for e in expected]), atol=1e-6
    )
    npy = tmp_path / "words.npy"
    bertscope.embed_corpus(
        source, npy, model=bundled, level="words", layers="-2", subword="first", batch_size=2
    )
    np.testing.assert_allclose(np.load(npy), _column(table, "embedding"), atol=1e-5)  # other batches
    labels = [json.loads(line) for line in npy.with_suffix(".rows.jsonl").read_text().splitlines()]
    assert [r["word"] for r in labels] == table.column("word").to_pylist()
    assert json.loads(npy.with_suffix(".settings.json").read_text())["level"] == "words"


def test_stacked_npy_is_rows_by_layers_by_width(tmp_path: Path, bundled: bertscope.Model) -> None:
    source = write_txt(tmp_path, TEXTS[:2])
    npy = tmp_path / "tokens.npy"
    bertscope.embed_corpus(
        source, npy, model=bundled, level="tokens", layers="0,3,6", combine="stack", precision="float16"
    )
    matrix = np.load(npy)
    expected = bundled.embed_tokens(TEXTS[:2], layers="0,3,6", combine="concat")
    flat = np.concatenate([e.vectors for e in expected])
    assert matrix.shape == (len(flat), 3, 384) and matrix.dtype == np.float16
    np.testing.assert_allclose(matrix.reshape(len(flat), -1).astype(np.float32), flat, atol=1e-2, rtol=1e-3)


def test_long_texts_are_windowed_as_embed_tokens_does(tmp_path: Path, bundled: bertscope.Model) -> None:
    long_text = " ".join(f"word{i} bank river money" for i in range(200))
    source = write_txt(tmp_path, [long_text, "a short one"])
    out = tmp_path / "tokens.parquet"
    summary = bertscope.embed_corpus(source, out, model=bundled, level="tokens", long="window", stride=64)
    table = pq.read_table(out)
    expected = bundled.embed_tokens([long_text, "a short one"], long="window", stride=64)
    assert len(expected[0].tokens) > bundled.max_tokens and summary.n_truncated == 0
    assert table.column("token").to_pylist() == expected[0].tokens + expected[1].tokens
    np.testing.assert_allclose(
        _column(table, "embedding"), np.concatenate([e.vectors for e in expected]), atol=1e-5
    )
    cut = tmp_path / "cut.parquet"
    summary = bertscope.embed_corpus(source, cut, model=bundled, level="tokens")
    first = pq.read_table(cut).to_pylist()[0]
    assert summary.n_truncated == 1 and first["truncated"] == len(expected[0].tokens) - bundled.max_tokens


def test_bad_level_options_are_refused(tmp_path: Path, bundled: bertscope.Model) -> None:
    source = write_txt(tmp_path, TEXTS)
    with pytest.raises(InvalidSpec, match="stack"):
        bertscope.embed_corpus(source, tmp_path / "s.parquet", model=bundled, layers="1,2", combine="stack")
    with pytest.raises(InvalidSpec, match="not pooled, so pooling would be ignored"):
        bertscope.embed_corpus(source, tmp_path / "t.parquet", model=bundled, level="tokens", pooling="cls")
    with pytest.raises(CorpusError, match="SQLite.*parquet"):
        bertscope.embed_corpus(source, tmp_path / "t.db", model=bundled, level="tokens")
    with pytest.raises(InvalidSpec, match="level.*sentence, tokens, words"):
        bertscope.embed_corpus(source, tmp_path / "t.parquet", model=bundled, level="pages")
    with pytest.raises(InvalidSpec, match="precision"):
        bertscope.embed_corpus(
            source, tmp_path / "t.parquet", model=bundled, level="tokens", precision="int4"
        )


TOKEN_TEXTS = 1000


@pytest.fixture(scope="module")
def token_corpus(tmp_path_factory: pytest.TempPathFactory) -> Path:
    """A corpus of 10 parts of 100 texts: 7 are still to come when the job is killed after 3."""
    rng = np.random.default_rng(1)
    words = "we sat on the bank of a river money interest rates tokenization rocks".split()
    lines = [" ".join(rng.choice(words, size=rng.integers(2, 25))) for _ in range(TOKEN_TEXTS)]
    return write_txt(tmp_path_factory.mktemp("tokens"), lines, "corpus.txt")


def test_token_job_killed_with_sigkill_resumes_exactly(
    tmp_path: Path, token_corpus: Path, tiny_dirs: dict[str, Path]
) -> None:
    common = [
        "-i",
        str(token_corpus),
        "--model",
        str(tiny_dirs["bert"]),
        "--batch-size",
        "100",
        "-q",
        "--tokens",
    ]
    common += ["--layers", "1,2", "--combine", "stack", "--precision", "float16", *LIGHT]
    whole = tmp_path / "whole.parquet"
    _embed_in_process([*common, "-o", str(whole)])  # only the job that is killed needs its own process
    target = tmp_path / "resumed.parquet"
    stop_and_resume(common, target)
    assert pq.read_table(target).equals(pq.read_table(whole))
    assert pq.read_table(whole).column("position").to_pylist().count(0) == TOKEN_TEXTS


def test_every_level_enum_reads_a_level_in_either_number() -> None:
    """One reading of a level name (core._enums.level_named) for the corpus levels, the probe's and
    CKA's, and the command line's --level: singular and plural are one name; anything else is one line
    listing the levels."""
    from bertscope.cli.app import level_option
    from bertscope.core._enums import level_named
    from bertscope.io.level_table import level_of
    from bertscope.research.cka import CkaLevel
    from bertscope.research.probe_features import Level as ProbeLevel

    assert [bertscope.Level.parse(n, what="level") for n in ("word", "Tokens", "chunk", "sentences")] == [
        bertscope.Level.WORDS, bertscope.Level.TOKENS, bertscope.Level.CHUNKS, bertscope.Level.SENTENCE
    ]  # fmt: skip
    assert bertscope.Level("token") is bertscope.Level.TOKENS
    assert ProbeLevel.parse("word", what="level") is ProbeLevel.WORDS
    assert CkaLevel.parse("token", what="level") is CkaLevel.TOKENS
    assert level_named(" Words ", ["words", "sentence"]) == "words" and level_named("x", ["words"]) is None
    assert level_option("token", ["tokens", "sentence"]) == "tokens"
    with pytest.raises(
        InvalidSpec, match=r"^unknown level 'pages'; choose one of: sentence, tokens, words, chunks$"
    ):
        bertscope.Level.parse("pages", what="level")
    # a keyword in the singular, as --level word: its level's own options apply
    assert level_of(CorpusOptions.of(level="word", subword="first").level).name is bertscope.Level.WORDS


def test_each_level_declares_its_facts_in_the_table() -> None:
    """The runners read pooled, searchable and the level's own options from the table (issue 37)."""
    from bertscope.io.level_table import LEVELS, level_of

    assert set(LEVELS) == set(bertscope.Level)
    for name, row in LEVELS.items():
        assert row.name is name and level_of(name.value) is row
        assert set(row.options) <= set(LevelOptions.__dataclass_fields__)
    assert {n.value for n, row in LEVELS.items() if row.pooled} == {"sentence", "chunks"}
    assert {n.value for n, row in LEVELS.items() if row.searchable} == {"sentence", "chunks"}
    assert {n.value for n, row in LEVELS.items() if row.spans} == {"chunks"}
    assert LEVELS[bertscope.Level.WORDS].options == ("subword",)
    assert "late" in LEVELS[bertscope.Level.CHUNKS].options


def test_corpus_options_split_keywords_and_narrow_to_the_level() -> None:
    """Keywords split into the recipe and the level options; an unpooled level keeps only its own."""
    asked = CorpusOptions.of(level="tokens", layers="0,6", pooling="cls", precision="float16", prompt="q: ")
    assert asked.recipe == EmbedOptions(layers="0,6", pooling="cls", prompt="q: ")
    assert asked.level == LevelOptions(level="tokens", precision="float16")
    with pytest.raises(bertscope.InvalidSpec, match="tokens rows are not pooled, so pooling, prompt"):
        asked.for_level()  # given to token rows, they would be ignored: refused, as make_level refuses them
    defaults = CorpusOptions.of(level="tokens", layers="0,6", long="window", precision="float16")
    narrowed = defaults.for_level()
    assert narrowed.recipe == EmbedOptions(layers="0,6", long="window") and narrowed.level == defaults.level
    sentence = CorpusOptions.of(pooling="cls", normalize=True)
    assert sentence.for_level() is sentence
    with pytest.raises(TypeError):
        CorpusOptions.of(pooling="cls", unknown=1)  # type: ignore[call-arg]


@pytest.mark.parametrize(
    "option",
    [{"pooling": "cls"}, {"normalize": True}, {"mask_special": True}, {"prompt": "query: "}, {"post": "pca"}],
)
def test_token_and_word_vectors_refuse_the_options_their_levels_refuse(
    bundled: bertscope.Model, option: dict[str, object]
) -> None:
    """embed_tokens and embed_words took pooled options, ignored them and recorded normalize and
    mask_special as applied (pooling was a TypeError): they follow the tokens and words levels' rule."""
    (name,) = option
    calls = (("tokens", bundled.embed_tokens, "token"), ("words", bundled.embed_words, "word"))
    for level, embed, rows in calls:
        with pytest.raises(InvalidSpec, match=f"{level} rows are not pooled, so {name} would be ignored"):
            CorpusOptions.of(level=level, **option).for_level()  # type: ignore[arg-type]
        if name == "prompt":  # the library's rows are the prompted text's (prompt_name's too), as TEI's
            assert bundled.embed_tokens("a big cat", prompt="query: ")[0].tokens[1:3] == ["query", ":"]
            continue
        with pytest.raises(InvalidSpec, match=f"^{rows} vectors are not pooled, so {name} would be ignored"):
            embed("a big cat", **option)
    plain = bundled.embed_tokens("a big cat", pooling="auto", normalize=None, mask_special=False)[0]
    assert plain.tokens[0] == "[CLS]" and plain.spec["normalize"] is False  # defaults are not asks


def test_level_options_from_settings_rebuild_the_stored_level(
    tmp_path: Path, bundled: bertscope.Model
) -> None:
    """A store's settings give back the options that made it: the same level records the same settings."""
    out = tmp_path / "words.parquet"
    bertscope.embed_corpus(TEXTS[:2], out, model=bundled, level="words", layers="-2", subword="first")
    settings = json.loads(pq.read_table(out).schema.metadata[b"bertscope"])
    again = CorpusOptions(EmbedOptions.from_settings(settings), LevelOptions.from_settings(settings))
    recorded = json.loads(json.dumps(make_level(bundled, again.for_level()).recorded()))
    assert recorded == {key: settings[key] for key in recorded}


def test_options_as_one_object_equal_the_keywords(tmp_path: Path, bundled: bertscope.Model) -> None:
    """embed_corpus(options=CorpusOptions(...)), as the CLI passes it, writes what the keywords write."""
    by_words = tmp_path / "keywords.parquet"
    by_object = tmp_path / "object.parquet"
    bertscope.embed_corpus(TEXTS, by_words, model=bundled, level="words", layers="-2", keep_text=False)
    asked = CorpusOptions(EmbedOptions(layers="-2"), LevelOptions(level="words", keep_text=False))
    bertscope.embed_corpus(TEXTS, by_object, model=bundled, options=asked)
    assert pq.read_table(by_words).equals(pq.read_table(by_object))
    assert "text" not in pq.read_table(by_object).column_names
    with pytest.raises(InvalidSpec, match="not both"):
        bertscope.embed_corpus(TEXTS, tmp_path / "both.parquet", model=bundled, options=asked, layers="-1")
