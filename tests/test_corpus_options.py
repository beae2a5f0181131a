"""The library's corpus job refuses the options that would have no effect (or, float16 into SQLite, a false
setting), as the command line does: one line naming the option and where it applies, before any model
loads and with nothing written; the same options still work where they apply. The Ray job shares the
checks (tested without starting Ray: they run before it is imported)."""

from __future__ import annotations

import json
from pathlib import Path
from typing import Any

import numpy as np
import pyarrow.parquet as pq
import pytest

import bertscope
from bertscope.cli.wording import as_flags
from bertscope.core._enums import Level
from bertscope.errors import InvalidSpec
from bertscope.io.level_table import LEVELS, CorpusOptions, refuse_idle_level_options
from bertscope.io.levels import LevelOptions
from bertscope.io.stores import open_store

TEXTS = ["a storm hits the coast", "the cat sleeps", "fresh bread"]


@pytest.fixture
def no_load(monkeypatch: pytest.MonkeyPatch) -> None:
    """Loading a model fails loudly: a refusal that came after the load would be another error."""

    def called(*args: Any, **kwargs: Any) -> Any:
        raise AssertionError("a model was loaded before the options were checked")

    import bertscope.distributed
    import bertscope.io.job

    for module, name in [
        (bertscope.io.job, "open_encoder"),
        (bertscope.io.job, "load_static"),
        (bertscope.distributed, "load_model"),
        (bertscope.distributed, "import_ray"),
    ]:
        monkeypatch.setattr(module, name, called)


# (input: "texts", "txt" or "jsonl"; output file name; options; what the one line says)
REFUSED = [
    (
        "texts",
        "out.db",
        {"precision": "float16"},
        "precision='float16' applies to .parquet and .npy stores; SQLite stores (out.db) keep float32 "
        "vectors: drop precision= or write to a .parquet or .npy file",
    ),
    (
        "texts",
        "out.parquet",
        {"subword": "first"},
        "subword='first' pools each word's pieces into one vector: it applies with level='words' (sentence "
        "rows here); add level='words' or drop subword=",
    ),
    ("texts", "out.parquet", {"level": "tokens", "subword": "mean"}, "(tokens rows here)"),
    ("texts", "out.npy", {"level": "chunks", "subword": "last"}, "(chunks rows here)"),
    (
        "texts",
        "out.parquet",
        {"chunk_size": 64},
        "chunk_size=64: it applies with level='chunks', chunks='tokens' (sentence rows here); add "
        "level='chunks', chunks='tokens' or drop chunk_size=",
    ),
    (
        "texts",
        "out.parquet",
        {"level": "chunks", "chunk_size": 64},
        "chunk_size=64: it applies with chunks='tokens' (chunks='sentence' here); add chunks='tokens' or "
        "drop chunk_size=",
    ),
    (
        "texts",
        "out.parquet",
        {"level": "chunks", "chunks": "paragraph", "chunk_overlap": 2},
        "chunk_overlap=2: it applies with chunks='tokens' (chunks='paragraph' here)",
    ),
    (
        "texts",
        "out.parquet",
        {"text_field": "body"},
        "text_field='body' names a field of records (.jsonl, .csv, .tsv, .parquet); the texts given are not "
        "records: drop text_field=",
    ),
    ("texts", "out.db", {"id_field": "id"}, "id_field='id' names a field of records"),
    (
        "txt",
        "out.parquet",
        {"text_field": "body", "id_field": "id"},
        "text_field='body' and id_field='id' name fields of records (.jsonl, .csv, .tsv, .parquet); ",
    ),
    (
        "texts",
        "out.parquet",
        {"collection": "news"},
        "collection='news' names a collection in an SQLite store (.db); out.parquet holds one set of rows: "
        "drop collection= or write to a .db file",
    ),
    ("jsonl", "out.npy", {"collection": "news"}, "out.npy holds one set of rows"),
]


def _source(kind: str, folder: Path) -> Any:
    if kind == "texts":
        return list(TEXTS)
    path = folder / f"corpus.{kind}"
    if kind == "txt":
        path.write_text("".join(text + "\n" for text in TEXTS))
    else:
        path.write_text("".join(json.dumps({"id": f"d{i}", "body": t}) + "\n" for i, t in enumerate(TEXTS)))
    return path


@pytest.mark.usefixtures("no_load")
@pytest.mark.parametrize(("source", "output", "options", "said"), REFUSED, ids=lambda v: str(v)[:40])
def test_an_option_without_effect_is_refused_before_anything_runs(
    source: str, output: str, options: dict[str, Any], said: str, tmp_path: Path
) -> None:
    corpus, out = tmp_path / "in", tmp_path / "out"
    corpus.mkdir()
    out.mkdir()
    with pytest.raises(InvalidSpec) as raised:
        bertscope.embed_corpus(_source(source, corpus), out / output, progress=False, **options)
    assert said in str(raised.value) and "\n" not in str(raised.value)
    assert list(out.iterdir()) == []  # nothing written, not even a lock


@pytest.mark.usefixtures("no_load")
def test_the_same_refusals_come_with_options_as_one_object(tmp_path: Path) -> None:
    """`options=` (as the command line passes them) is checked as the keywords are."""
    for level, path in [
        (LevelOptions(subword="first"), tmp_path / "a.parquet"),
        (LevelOptions(precision="float16"), tmp_path / "a.db"),
    ]:
        with pytest.raises(InvalidSpec, match="subword='first'|precision='float16'"):
            bertscope.embed_corpus(TEXTS, path, options=CorpusOptions(level=level), progress=False)
    assert list(tmp_path.iterdir()) == []


def test_a_level_option_refusal_reads_as_the_command_lines() -> None:
    """The CLI's own refusal says the same; through its wording the library's message gives the flags."""
    with pytest.raises(InvalidSpec) as raised:
        CorpusOptions.of(level="tokens", subword="first")
    assert as_flags(str(raised.value)) == (
        "--subword first pools each word's pieces into one vector: it applies with --level words (tokens "
        "rows here); add --level words or drop --subword"
    )


def test_chunk_sizes_apply_to_token_chunks_only() -> None:
    """chunk_size/chunk_overlap with chunks='sentence' or 'paragraph' would be ignored: refused, given or
    off their defaults (the command line calls this check for --chunk-size/--chunk-overlap); read in
    flags, the line names --chunks tokens."""
    for chunks in ("sentence", "paragraph", None):
        level = {} if chunks is None else {"chunks": chunks}
        with pytest.raises(InvalidSpec, match=r"^chunk_size=128: it applies with chunks='tokens'"):
            CorpusOptions.of(level="chunks", **level, chunk_size=128)  # named, even at its default
        with pytest.raises(InvalidSpec, match=r"^chunk_overlap=3: it applies with chunks='tokens'"):
            refuse_idle_level_options(LevelOptions(level="chunks", **level, chunk_overlap=3))
    refuse_idle_level_options(LevelOptions(level="chunks", chunk_size=128), given=["level"])
    CorpusOptions.of(level="chunks", chunks="tokens", chunk_size=8, chunk_overlap=2)
    with pytest.raises(InvalidSpec) as raised:
        CorpusOptions.of(level="chunks", chunks="paragraph", chunk_overlap=2)
    assert as_flags(str(raised.value)) == (
        "--chunk-overlap 2: it applies with --chunks tokens (--chunks paragraph here); add --chunks tokens "
        "or drop --chunk-overlap"
    )


def test_a_switch_off_its_level_is_dropped_by_the_value_given() -> None:
    """late=False off the chunk level: drop late=False (the CLI's --naive, not --late)."""
    for late, flag in ((False, "--naive"), (True, "--late")):
        with pytest.raises(InvalidSpec) as raised:
            CorpusOptions.of(level="words", late=late)
        said = str(raised.value)
        assert said.endswith(f"add level='chunks' or drop late={late}"), said
        assert as_flags(said) == (
            f"{flag}: it applies with --level chunks (words rows here); add --level chunks or drop {flag}"
        )


def test_a_keyword_given_at_its_default_is_still_refused_but_defaults_are_not() -> None:
    """subword='mean' named for sentence rows is refused (as --subword mean is); an object whose level
    options sit at their defaults passes for every level (what the command line builds)."""
    with pytest.raises(InvalidSpec, match="subword='mean'"):
        CorpusOptions.of(subword="mean")
    for level in LEVELS:
        refuse_idle_level_options(LevelOptions(level=level))
        CorpusOptions.of(level=level.value)
    refuse_idle_level_options(LevelOptions(level=Level.WORDS, subword="first_last"))
    refuse_idle_level_options(LevelOptions(level=Level.CHUNKS, chunks="tokens", late=False, chunk_size=8))


@pytest.mark.usefixtures("no_load")
def test_the_ray_job_refuses_the_same_before_loading_or_starting_ray(tmp_path: Path) -> None:
    from bertscope.distributed import embed_dataset, run_ray_job

    out = tmp_path / "shards"
    with pytest.raises(InvalidSpec, match=r"subword='first'.*\(sentence rows here\)"):
        run_ray_job(TEXTS, out, subword="first", progress=False)
    with pytest.raises(InvalidSpec, match="text_field='body' names a field of records"):
        run_ray_job(TEXTS, out, text_field="body", progress=False)
    txt = _source("txt", tmp_path)
    with pytest.raises(InvalidSpec, match=r"id_field='id'.*corpus\.txt is read a line a text"):
        run_ray_job(str(txt), out, id_field="id", progress=False)
    with pytest.raises(InvalidSpec, match=r"chunks='tokens'.*\(words rows here\)"):
        embed_dataset(None, options=CorpusOptions(level=LevelOptions(level="words", chunks="tokens")))
    assert not out.exists()


def test_the_options_still_work_where_they_apply(tmp_path: Path, bundled: bertscope.Model) -> None:
    """subword on word rows, float16 into Parquet, fields of a .jsonl, a collection of an SQLite store."""
    first = tmp_path / "first.parquet"
    words = ["good tokenization", "a cat"]  # token ##ization: first and mean differ
    bertscope.embed_corpus(words, first, model=bundled, level="words", subword="first", progress=False)
    stored = np.stack(pq.read_table(first).column("embedding").to_numpy(zero_copy_only=False))
    expected = np.concatenate([w.vectors for w in bundled.embed_words(words, subword="first")])
    mean = np.concatenate([w.vectors for w in bundled.embed_words(words, subword="mean")])
    np.testing.assert_allclose(stored, expected, atol=1e-5)
    assert not np.allclose(stored, mean, atol=1e-3)

    half = tmp_path / "half.parquet"
    bertscope.embed_corpus(TEXTS, half, model=bundled, precision="float16", progress=False)
    assert str(pq.read_schema(half).field("embedding").type.value_type) == "halffloat"

    db = tmp_path / "store.db"
    source = _source("jsonl", tmp_path)
    bertscope.embed_corpus(
        source, db, model=bundled, text_field="body", id_field="id", collection="news", precision="float32",
        progress=False,
    )  # fmt: skip
    opened = open_store(db, collection="news")
    assert opened.collection == "news" and opened.settings.get("precision", "float32") == "float32"
    assert sorted(i for ids, _, _ in opened.chunks(10) for i in ids) == ["d0", "d1", "d2"]


def test_search_refuses_a_collection_of_a_store_that_has_none(
    tmp_path: Path, bundled: bertscope.Model
) -> None:
    stores = {}
    for name in ("s.parquet", "s.npy", "s.db"):
        stores[name] = tmp_path / name
        bertscope.embed_corpus(TEXTS, stores[name], model=bundled, progress=False)
    for name in ("s.parquet", "s.npy"):
        with pytest.raises(InvalidSpec) as raised:
            bertscope.search("storm", stores[name], collection="news", model=bundled)
        assert str(raised.value) == (
            f"collection='news' names a collection in an SQLite store (.db); {name} holds one set of rows: "
            "drop collection="
        )
        with pytest.raises(InvalidSpec, match="holds one set of rows"):  # an opened store too
            bertscope.search("storm", open_store(stores[name]), collection="news", model=bundled)
        assert bertscope.search("storm", stores[name], k=1, model=bundled)[0].id == "1"
    hits = bertscope.search("storm", stores["s.db"], collection="default", k=1, model=bundled)
    assert hits[0].id == "1"
