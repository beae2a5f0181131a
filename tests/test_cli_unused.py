"""Options that would have no effect are refused in one line, naming the option and where it applies,
before any model loads and before any file is written; the same options where they apply still run. A
corpus job's summary counts its rows in the level's unit (words, not their pieces)."""

from __future__ import annotations

from pathlib import Path
from typing import Any

import pyarrow.parquet as pq
import pytest

from bertscope.core._enums import Level
from bertscope.io.job import JobSummary
from console import run_main

REPO = Path(__file__).resolve().parents[1]
NEWS = REPO / "examples" / "news.txt"
PAIRS = REPO / "tests" / "data" / "pairs.tsv"


@pytest.fixture
def no_load(monkeypatch: pytest.MonkeyPatch) -> None:
    """Loading a model fails loudly: a refusal that came after the load would be another message."""

    def called(*args: Any, **kwargs: Any) -> Any:
        raise AssertionError("a model was loaded before the options were checked")

    import bertscope.model

    monkeypatch.setattr(bertscope.model, "load", called)


@pytest.fixture(scope="module")
def store(tmp_path_factory: pytest.TempPathFactory) -> Path:
    """A sentence store of three texts, made by the bundled model."""
    path = tmp_path_factory.mktemp("unused") / "corpus.parquet"
    assert run_main("embed", "a storm hits the coast", "a cat", "bread", "-o", str(path), "-q").code == 0
    return path


# (arguments, with {D} a folder to write in; the option named; where the message says it applies)
REFUSED = [
    (["embed", "hi", "--precision", "float16", "--json"], "--precision", "for corpus jobs only; add -o FILE"),
    (["embed", "hi", "--precision", "float32"], "--precision", "for corpus jobs only"),
    (
        ["embed", "-i", str(NEWS), "-o", "{D}/sw.parquet", "--subword", "first"],
        "--subword",
        "it applies with --level words (sentence rows here)",
    ),
    (
        ["embed", "a cat", "--tokens", "--subword", "first"],
        "--subword",
        "it applies with --level words (tokens rows here)",
    ),
    (
        ["embed", "-i", str(NEWS), "-o", "{D}/c.parquet", "--chunks", "sentence", "--subword", "last"],
        "--subword",
        "(chunks rows here)",
    ),
    (["embed", "-i", str(NEWS), "-o", "{D}/w4.parquet", "--workers", "4"], "--workers", "--engine ray only"),
    (["embed", "a cat", "--address", "auto"], "--address", "for --engine ray only"),
    (
        ["embed", "a cat", "--text-field", "body"],
        "--text-field",
        "names a field of -i FILE records (.jsonl, .csv, .tsv, .parquet); texts given as arguments",
    ),
    (
        ["embed", "-i", str(NEWS), "-o", "{D}/t.parquet", "--text-field", "body", "--id-field", "id"],
        "--text-field and --id-field",
        "name fields of -i FILE records",
    ),
    (
        ["embed", "-i", str(NEWS), "-o", "{D}/x.parquet", "--collection", "news"],
        "--collection",
        "a collection in an SQLite store (.db)",
    ),
    (
        ["embed", "-i", str(NEWS), "-o", "{D}/x.db", "--precision", "float16"],
        "--precision float16",
        "SQLite stores (x.db) keep float32 vectors: drop --precision",
    ),
]


@pytest.mark.usefixtures("no_load")
@pytest.mark.parametrize(
    ("args", "option", "where"), REFUSED, ids=lambda v: " ".join(v) if isinstance(v, list) else None
)
def test_an_option_without_effect_is_refused_in_one_line(
    args: list[str], option: str, where: str, tmp_path: Path
) -> None:
    ran = run_main(*(a.replace("{D}", str(tmp_path)) for a in args))
    assert ran.code == 1 and ran.stdout == "", ran
    assert ran.stderr.startswith(f"error: {option}") and ran.stderr.count("\n") == 1, ran.stderr
    assert where in ran.stderr
    assert list(tmp_path.iterdir()) == []  # nothing written


def test_similar_refuses_a_collection_of_a_store_that_has_none(store: Path) -> None:
    ran = run_main("similar", "a storm", "--store", str(store), "--collection", "news")
    assert ran.code == 1 and ran.stdout == ""
    assert ran.stderr == (
        "error: --collection news names a collection in an SQLite store (.db); corpus.parquet holds one set "
        "of rows: drop --collection\n"
    )
    found = run_main("similar", "a storm", "--store", str(store), "-k", "1", "--json")
    assert found.code == 0 and "a storm hits the coast" in found.stdout


def test_the_options_still_run_where_they_apply(tmp_path: Path) -> None:
    """--subword on word rows (printed and stored), --precision float16 into Parquet."""
    first = run_main("embed", "unbelievable cats", "--level", "words", "--subword", "first", "--json")
    mean = run_main("embed", "unbelievable cats", "--level", "words", "--json")
    assert first.code == 0 and mean.code == 0 and first.stdout != mean.stdout
    out = tmp_path / "w.parquet"
    ran = run_main("embed", "a cat", "-o", str(out), "--level", "words", "--subword", "last",
                   "--precision", "float16", "-q")  # fmt: skip
    assert ran.code == 0, ran
    assert str(pq.read_schema(out).field("embedding").type.value_type) == "halffloat"


def test_a_word_job_counts_its_words_and_names_the_pieces(tmp_path: Path) -> None:
    out = tmp_path / "words.parquet"
    ran = run_main("embed", "good tokenization", "a dog", "-o", str(out), "--level", "words")
    assert ran.code == 0, ran
    rows = pq.read_metadata(out).num_rows
    pieces = sum(len(p) for p in pq.read_table(out, columns=["pieces"]).column("pieces").to_pylist())
    assert rows == 4 and pieces > rows  # "tokenization" is token ##ization
    assert f"2 texts embedded, {rows} words ({pieces} word pieces), 0 truncated" in ran.stderr


@pytest.mark.parametrize(
    ("level", "shown"),
    [
        (Level.SENTENCE, "3 texts embedded, 40 tokens, 0 truncated"),
        (Level.TOKENS, "3 texts embedded, 40 tokens, 0 truncated"),
        (Level.WORDS, "3 texts embedded, 30 words (34 word pieces), 0 truncated"),
        (Level.CHUNKS, "3 texts embedded, 30 chunks (34 tokens), 0 truncated"),
    ],
)
def test_the_summary_line_names_the_rows_in_the_levels_unit(level: Level, shown: str) -> None:
    tokens = 34 if level in (Level.WORDS, Level.CHUNKS) else 40
    summary = JobSummary(output=Path("out.parquet"), embedded=3, tokens=tokens, level=level, rows=30)
    assert summary.line().startswith(shown + " in ")


@pytest.mark.usefixtures("no_load")
def test_a_plot_commands_default_picture_that_exists_is_refused_naming_the_default(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    monkeypatch.chdir(tmp_path)
    Path("layers.png").write_bytes(b"old")
    plotted = run_main("plot", "layers", "a cat")  # drawing is the command: no --no-plot to name
    assert plotted.code == 1 and plotted.stderr.count("\n") == 1 and "--no-plot" not in plotted.stderr
    assert "(layers.png is where this command draws by default)" in plotted.stderr
    assert Path("layers.png").read_bytes() == b"old"
