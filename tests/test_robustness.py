"""Defects found by trying bertscope as a new user (issue 13): each test fails without its fix."""

from __future__ import annotations

import json
import shutil
from pathlib import Path

import numpy as np
import pytest

import bertscope

TEXTS = ["A powerful storm battered the coast.", "The price of bread rose again.", "I like eating bread"]


def _copy_bundled(bundled_path: Path, dest: Path) -> Path:
    shutil.copytree(bundled_path, dest)
    return dest


def test_auto_reads_the_pooling_mode_format_of_sentence_transformers_5(
    bundled_path: Path, tmp_path: Path
) -> None:
    """`{"pooling_mode": "cls"}` (ST >= 5) is read, and auto equals sentence-transformers on it."""
    from sentence_transformers import SentenceTransformer

    folder = _copy_bundled(bundled_path, tmp_path / "cls-model")
    (folder / "1_Pooling" / "config.json").write_text(
        json.dumps({"embedding_dimension": 384, "pooling_mode": "cls", "include_prompt": True})
    )
    m = bertscope.load(folder, device="cpu")
    assert m.info().pooling == "cls"
    ours = m.embed(TEXTS).vectors
    theirs = SentenceTransformer(str(folder), device="cpu").encode(TEXTS, convert_to_numpy=True)
    np.testing.assert_allclose(ours, theirs, atol=1e-5)


@pytest.mark.parametrize(
    ("pooling", "why"),
    [
        ({"embedding_dimension": 384, "pooling_mode": "weightedmean"}, "weightedmean"),
        ({"embedding_dimension": 384, "pooling_mode": ["cls", "mean"]}, r"cls \+ mean"),
        ({"word_embedding_dimension": 384, "pooling_mode_lasttoken": True}, "lasttoken"),
    ],
)
def test_auto_refuses_a_pooling_it_cannot_reproduce(
    bundled_path: Path, tmp_path: Path, pooling: dict[str, object], why: str
) -> None:
    folder = _copy_bundled(bundled_path, tmp_path / "odd-pooling")
    (folder / "1_Pooling" / "config.json").write_text(json.dumps(pooling))
    m = bertscope.load(folder, device="cpu")
    with pytest.raises(bertscope.InvalidSpec, match=why):
        m.embed("a text")
    assert m.embed("a text", pooling="mean").vectors.shape == (1, 384)  # a named pooling still works


def test_auto_refuses_a_dense_module(bundled_path: Path, tmp_path: Path) -> None:
    folder = _copy_bundled(bundled_path, tmp_path / "dense")
    modules = json.loads((folder / "modules.json").read_text())
    dense = {"idx": 2, "name": "2", "path": "2_Dense", "type": "sentence_transformers.models.Dense"}
    modules.insert(2, dense)
    (folder / "modules.json").write_text(json.dumps(modules))
    with pytest.raises(bertscope.InvalidSpec, match="Dense module"):
        bertscope.load(folder, device="cpu").embed("a text")


def test_a_folder_without_tokenizer_files_is_refused(bundled_path: Path, tmp_path: Path) -> None:
    folder = tmp_path / "no-tokenizer"
    folder.mkdir()
    for name in ("config.json", "model.safetensors"):
        shutil.copy(bundled_path / name, folder / name)
    with pytest.raises(bertscope.ModelLoadError, match="tokenizer files are missing"):
        bertscope.load(folder, device="cpu")


@pytest.mark.parametrize("value", ["no", 1, 0.0, None])
def test_flags_must_be_booleans(bundled: bertscope.Model, value: object) -> None:
    with pytest.raises(bertscope.InvalidSpec, match="mask_special must be True or False"):
        bundled.embed("x", mask_special=value)  # type: ignore[arg-type]
    if value is not None:  # normalize=None means "the model's own choice"
        with pytest.raises(bertscope.InvalidSpec, match="normalize must be True or False"):
            bundled.embed("x", normalize=value)  # type: ignore[arg-type]


def test_max_tokens_overrides_the_sentence_transformers_limit_within_the_positions() -> None:
    assert bertscope.load(device="cpu").max_tokens == 256  # all-MiniLM-L6-v2's max_seq_length
    assert bertscope.load(device="cpu", max_tokens=512).max_tokens == 512
    for bad in (0, 1, 513, True):
        with pytest.raises(bertscope.InvalidSpec, match="max_tokens"):
            bertscope.load(device="cpu", max_tokens=bad)  # type: ignore[arg-type]


@pytest.mark.parametrize("text", ["bad \ud800 text", "\u200b\u200b", "\x00\x01"])
def test_texts_a_tokenizer_cannot_take_are_one_clear_error(bundled: bertscope.Model, text: str) -> None:
    with pytest.raises(bertscope.InvalidInput, match="text 1 (holds a lone surrogate|has only control)"):
        bundled.embed(["fine", text])
    with pytest.raises(bertscope.InvalidInput, match="text 1"):
        list(bundled.iter_embed(iter(["fine", text])))


def test_a_corpus_line_of_invisible_characters_is_a_bad_record(
    tmp_path: Path,
    bundled: bertscope.Model,
) -> None:
    """It names file:line, and --skip-bad gets past it (it aborted the whole job as 'text 231')."""
    source = tmp_path / "corpus.txt"
    source.write_bytes("one fine line\n\u200b\u200b\nanother fine line\n".encode() + b"bad \xff byte\n")
    with pytest.raises(bertscope.CorpusError, match=r"corpus.txt:2: the text has only control"):
        bertscope.embed_corpus(source, tmp_path / "a.parquet", model=bundled)
    summary = bertscope.embed_corpus(source, tmp_path / "b.parquet", model=bundled, skip_bad=True)
    assert summary.embedded == 2 and summary.rejected == 2
    rejects = Path(str(tmp_path / "b.parquet") + ".rejects").read_text()
    assert "corpus.txt:2: the text has only control" in rejects and "corpus.txt:4: not UTF-8" in rejects
    jsonl = tmp_path / "corpus.jsonl"
    jsonl.write_text('{"text": "fine"}\n{"text": "bad \\ud800 escape"}\n')
    with pytest.raises(bertscope.CorpusError, match=r"corpus.jsonl:2: the text holds a lone surrogate"):
        bertscope.embed_corpus(jsonl, tmp_path / "c.parquet", model=bundled)


def test_csv_ids_are_data_row_numbers_and_an_unclosed_quote_is_named(tmp_path: Path) -> None:
    from bertscope.io.readers import Rejects, read_corpus

    good = tmp_path / "good.csv"
    good.write_text('text,label\nfirst,1\n"second, with a comma",0\n')
    assert [(r.id, r.text) for r in read_corpus(good)] == [("1", "first"), ("2", "second, with a comma")]
    # A bad byte is named at its own line (it was "after line 0", or a guess from the decoder's buffer),
    # and --skip-bad gets past it without renumbering the rows after it.
    latin = tmp_path / "latin.csv"
    latin.write_bytes(b"text\nfirst\ncaf\xe9 au lait\nthird\n")
    with pytest.raises(bertscope.CorpusError, match=r"latin.csv:3: not UTF-8"):
        list(read_corpus(latin))
    rejects = Rejects()
    kept = [(r.id, r.text) for r in read_corpus(latin, skip_bad=True, rejects=rejects)]
    assert kept == [("1", "first"), ("3", "third")] and rejects.bad[0].startswith(f"{latin}:3: not UTF-8")
    bad = tmp_path / "bad.csv"
    bad.write_text('id,text\n1,hello there\n2,"an unclosed quote here\n3,third\n4,fourth\n')
    with pytest.raises(bertscope.CorpusError, match=r"bad.csv:3: unexpected end of data .*unclosed quote"):
        list(read_corpus(bad, id_field="id"))


def _corpus(tmp_path: Path, lines: list[str]) -> Path:
    source = tmp_path / "corpus.txt"
    source.write_text("".join(line + "\n" for line in lines))
    return source


@pytest.mark.parametrize("batch_size", [0, -1, True])
def test_a_batch_size_below_one_is_refused_and_leaves_nothing(
    tmp_path: Path, bundled: bertscope.Model, batch_size: int
) -> None:
    out = tmp_path / "out.parquet"
    with pytest.raises(bertscope.InvalidSpec, match="batch_size"):
        bertscope.embed_corpus(_corpus(tmp_path, TEXTS), out, model=bundled, batch_size=batch_size)
    assert list(tmp_path.iterdir()) == [tmp_path / "corpus.txt"]


def test_a_job_failing_before_it_saved_anything_leaves_nothing(
    tmp_path: Path, bundled: bertscope.Model
) -> None:
    source = tmp_path / "corpus.jsonl"
    source.write_text('{"text": "fine"}\nnot json\n')
    out = tmp_path / "out.parquet"
    with pytest.raises(bertscope.CorpusError, match="corpus.jsonl:2"):
        bertscope.embed_corpus(source, out, model=bundled)
    assert not Path(str(out) + ".parts").exists()
    source.write_text('{"text": "fine"}\n')
    assert bertscope.embed_corpus(source, out, model=bundled).embedded == 1  # no "exists (unfinished)"


def test_resume_never_replaces_a_finished_output_nor_skips_over_a_gap(
    tmp_path: Path, bundled: bertscope.Model
) -> None:
    import pyarrow.parquet as pq

    texts = [f"sentence number {i} about bread" for i in range(8)]
    out = tmp_path / "out.parquet"
    parts = Path(str(out) + ".parts")
    source = tmp_path / "corpus.txt"
    # A job stopped by a bad record after two whole parts of two texts.
    source.write_bytes(
        ("".join(t + "\n" for t in texts[:4])).encode() + b"\xff\n" + texts[5].encode() + b"\n"
    )
    with pytest.raises(bertscope.CorpusError, match="not UTF-8"):
        bertscope.embed_corpus(source, out, model=bundled, batch_size=2)
    assert sorted(p.name for p in parts.glob("*.done")) == ["part-000000.done", "part-000001.done"]
    with pytest.raises(bertscope.CorpusError, match=r"out.parquet.parts holds an unfinished job .*--resume"):
        bertscope.embed_corpus(source, out, model=bundled, batch_size=2)  # not "out.parquet exists"
    (parts / "part-000000.done").unlink()
    with pytest.raises(bertscope.CorpusError, match="part 0 is missing"):
        bertscope.embed_corpus(source, out, model=bundled, batch_size=2, resume=True)

    # A finished output with parts left by a kill while they were being removed: resume refuses, data kept.
    _corpus(tmp_path, texts)
    bertscope.embed_corpus(source, out, model=bundled, batch_size=2, overwrite=True)
    before = pq.read_table(out).to_pydict()
    parts.mkdir()
    (parts / "settings.json").write_text("{}")
    (parts / "part-000003.done").write_text("2")
    with pytest.raises(bertscope.CorpusError, match="already complete"):
        bertscope.embed_corpus(source, out, model=bundled, batch_size=2, resume=True)
    assert pq.read_table(out).to_pydict() == before and len(before["id"]) == 8
    assert not parts.exists()


def test_a_layer_named_twice_is_refused_with_a_short_message(bundled: bertscope.Model) -> None:
    with pytest.raises(
        bertscope.InvalidSpec, match=r"layer 0 appears twice in '0,0,0,0,.*\.\.\.; name each"
    ) as err:
        bundled.embed("x", layers="0," * 100_000 + "0")
    assert len(str(err.value)) < 300
    assert bundled.embed("x", layers="0,-1", combine="concat").vectors.shape == (1, 768)


def test_window_ownership_takes_linear_memory() -> None:
    import tracemalloc

    from bertscope.core.tokens import Window, window_owner

    n, width, step = 40_000, 126, 63  # the quadratic version needed n x windows floats: 203 MB here
    starts = list(range(0, n - width, step)) + [n - width]
    windows = [Window([], [], s, s + width, 1) for s in starts]
    tracemalloc.start()
    owner = window_owner(windows, n)
    peak = tracemalloc.get_traced_memory()[1]
    tracemalloc.stop()
    assert peak < 5_000_000, peak
    centres = np.array([(w.content_start + w.content_stop - 1) / 2 for w in windows])
    assert np.all(np.abs(np.arange(n) - centres[owner]) <= width / 2)


def test_whitening_fits_to_the_rank_when_some_dimensions_are_constant() -> None:
    from bertscope.core.post import Whitening

    rng = np.random.default_rng(0)
    vectors = rng.normal(size=(200, 20))
    vectors[:, [3, 7, 11]] = 0.25  # constant, as LayerNorm dimensions with ~0 weight are
    with pytest.warns(UserWarning, match="whitening to 17 dimensions.*3 of their 20 directions are constant"):
        white = Whitening.fit(vectors)
    z = white.apply(vectors)
    np.testing.assert_allclose(z.T @ z / len(z), np.eye(17), atol=1e-6)
    with pytest.raises(bertscope.InvalidInput, match=r"more texts will not help.*dim=1\.\.17"):
        Whitening.fit(vectors, dim=18)
    with pytest.raises(bertscope.InvalidInput, match=r"fit on more texts \(at least 11\)"):
        Whitening.fit(vectors[:10], dim=10)
    # Without dim the wish grows with the texts: "at least 11" would fail again at 11 (it asked for 11).
    with pytest.raises(bertscope.InvalidInput, match=r"10 texts span only 9 .*at least 21 texts.*dim=1\.\.9"):
        Whitening.fit(vectors[:10])


def test_a_query_with_post_on_a_store_made_without_it_is_refused(
    tmp_path: Path, bundled: bertscope.Model
) -> None:
    from bertscope.core.post import fit_post

    store = tmp_path / "plain.parquet"
    bertscope.embed_corpus(_corpus(tmp_path, TEXTS), store, model=bundled)
    white = fit_post(np.random.default_rng(0).normal(size=(50, 384)), "pca", dim=8).save(
        tmp_path / "p.safetensors"
    )
    with pytest.raises(bertscope.CorpusError, match="made without post-processing"):
        bertscope.search("a storm", store, model=bundled, post=white)


def test_broken_files_are_one_line_errors(tmp_path: Path) -> None:
    from bertscope.core.post import load_post

    corrupt = tmp_path / "broken.parquet"
    corrupt.write_bytes(b"PAR1 not really parquet")
    with pytest.raises(bertscope.CorpusError, match="not a readable Parquet file"):
        bertscope.search(np.zeros(384, np.float32), corrupt)
    with pytest.raises(bertscope.CorpusError, match="a folder, not a file"):
        bertscope.search(np.zeros(384, np.float32), tmp_path)
    with pytest.raises(bertscope.CorpusError, match="broken.parquet is not a readable Parquet file"):
        bertscope.embed_corpus(corrupt, tmp_path / "out.parquet")  # as the corpus, not the store
    assert not (tmp_path / "out.parquet.parts").exists()
    with pytest.raises(bertscope.CorpusError, match="a folder: give the corpus file"):
        bertscope.embed_corpus(tmp_path, tmp_path / "out.parquet")
    for name, data in (
        ("w.safetensors", b"\x08\x00\x00\x00\x00\x00\x00\x00{broken}"),
        ("w.npz", b"PK\x03\x04 no"),
    ):
        (tmp_path / name).write_bytes(data)
        with pytest.raises(bertscope.InvalidInput, match="is not a bertscope post-processing file"):
            load_post(tmp_path / name)


def test_an_org_less_hub_id_gets_the_hub_advice_offline() -> None:
    with pytest.raises(bertscope.ModelLoadError, match="not a local folder and the hub is switched off"):
        bertscope.load("bert-base-uncased", device="cpu")


def test_plot_words_says_which_words_are_missing(bundled: bertscope.Model, tmp_path: Path) -> None:
    from bertscope.research.plots import plot_words

    sentences = ["we sat on the bank", "the bank raised rates", "money in the bank", "river bank erosion"]
    with pytest.warns(UserWarning, match="not in the picture: zebra"):
        plot_words(bundled, ["zebra", "bank"], sentences, tmp_path / "w.png")
    assert (tmp_path / "w.png").stat().st_size > 1000


def test_corrupt_weights_are_a_model_load_error(bundled_path: Path, tmp_path: Path) -> None:
    folder = _copy_bundled(bundled_path, tmp_path / "corrupt")
    weights = folder / "model.safetensors"
    weights.write_bytes(weights.read_bytes()[:100_000])
    with pytest.raises(bertscope.ModelLoadError, match="could not be loaded as a model"):
        bertscope.load(folder, device="cpu")


def test_cli_errors_from_outside_are_one_line(tmp_path: Path) -> None:
    """Bad ids, an unwritable place: one 'error:' line, no traceback, as the console runs it; exit 1, and 2
    for an --ids item that is no whole number (a usage error, as a value not of an option's type)."""
    import os
    import subprocess
    import sys

    from console import run_main

    env = {**os.environ, "HF_HUB_OFFLINE": "1", "PYTHONPATH": os.pathsep.join(sys.path)}
    corpus = _corpus(tmp_path, TEXTS)
    # /proc takes no new files, not even from root: the OSError of a read-only place, for everyone.
    # This one runs as the console runs it, in its own process; the others in-process (the same main).
    args = ["embed", "-i", str(corpus), "-o", "/proc/bertscope-out.parquet"]
    run = subprocess.run(
        [sys.executable, "-m", "bertscope", *args], capture_output=True, text=True, env=env, timeout=300
    )
    outcomes = [(run.returncode, run.stderr, "error:", 1)]
    for args in (["static", "--ids", "abc"], ["static", "--ids", "abc", "-o", str(tmp_path / "x.vec")]):
        ran = run_main(*args)
        outcomes.append((ran.code, ran.stderr, "--ids takes token ids", 2))
    for code, stderr, expected, exit_code in outcomes:
        assert code == exit_code, stderr
        assert expected in stderr and "Traceback" not in stderr, stderr
        assert len(stderr.strip().splitlines()) == 1, stderr


def test_static_npy_export_reports_the_file_it_writes(bundled: bertscope.Model, tmp_path: Path) -> None:
    written = bundled.export_static(tmp_path / "vectors", format="npy")
    assert written[0] == tmp_path / "vectors.npy" and written[0].exists()


def test_static_export_takes_its_format_from_the_suffix(bundled: bertscope.Model, tmp_path: Path) -> None:
    """`--export sub.npy` wrote word2vec text into sub.npy (the format defaulted to word2vec)."""
    (path, vocab) = bundled.export_static(tmp_path / "sub.npy", items=["bread", "cake"])
    np.testing.assert_array_equal(np.load(path), bundled.static(["bread", "cake"]))
    assert vocab.read_text() == "bread\ncake\n"
    (parquet,) = bundled.export_static(tmp_path / "sub.parquet", items=["bread"])
    assert parquet.read_bytes()[:4] == b"PAR1"
    with pytest.raises(bertscope.InvalidInput, match=r"sub.npy ends in .npy \(the npy format\) but"):
        bundled.export_static(tmp_path / "sub.npy", format="word2vec", items=["bread"])


@pytest.mark.parametrize("suffix", [".parquet", ".npy", ".db"])
def test_a_file_size_limit_mid_job_is_one_clear_error_and_resume_finishes(
    tmp_path: Path, bundled: bertscope.Model, suffix: str
) -> None:
    """A limit hit mid-write gave 40-line tracebacks ("38400 requested and 10208 written" for .npy)."""
    import resource

    texts = [f"sentence number {i} about bread and the bank of the river" for i in range(300)]
    source, out = _corpus(tmp_path, texts), tmp_path / f"out{suffix}"
    soft, hard = resource.getrlimit(resource.RLIMIT_FSIZE)
    # 100 vectors (154 kB) fit in a part or an SQLite batch; the 300 of the whole output do not.
    resource.setrlimit(resource.RLIMIT_FSIZE, (300_000, hard))
    try:
        with pytest.raises(bertscope.CorpusError, match=r"out\.(parquet|npy|db)\b.*(limit|large).*--resume"):
            bertscope.embed_corpus(source, out, model=bundled, batch_size=100)
    finally:
        resource.setrlimit(resource.RLIMIT_FSIZE, (soft, hard))
    assert not [p for p in tmp_path.rglob("*.tmp")]
    summary = bertscope.embed_corpus(source, out, model=bundled, batch_size=100, resume=True)
    assert summary.resumed_from + summary.already + summary.embedded == 300
    hits = bertscope.search(texts[250], out, model=bundled, k=1)
    assert hits[0].id == "251" and hits[0].score == pytest.approx(1.0, abs=1e-5)


def test_a_cased_word_is_told_the_piece_it_normalises_to(bundled: bertscope.Model) -> None:
    """`static Bread` said the tokenizer "splits it into ['bread']", one piece."""
    with pytest.raises(bertscope.UnknownToken, match="normalises it to the piece 'bread': pass 'bread'"):
        bundled.static("Bread")


def test_two_jobs_on_one_sqlite_collection_are_one_clear_error(
    tmp_path: Path, bundled: bertscope.Model, monkeypatch: pytest.MonkeyPatch
) -> None:
    """Another job makes the collection between this job's check and its first write (was a traceback)."""
    import sqlite3

    from bertscope.io.sqlite_store import SqliteSink

    original = SqliteSink.write

    def raced(self: SqliteSink, records: list, rows: object) -> None:
        if not self.created:
            other = sqlite3.connect(self.path)
            with other:
                other.execute(
                    "INSERT INTO collections (name, model, settings, dimension, created) "
                    "VALUES (?, ?, ?, ?, ?)",
                    (self.collection, "m", "{}", 384, "now"),
                )
            other.close()
        original(self, records, rows)  # type: ignore[arg-type]

    monkeypatch.setattr(SqliteSink, "write", raced)
    with pytest.raises(bertscope.CorpusError, match="collection 'news' could not take .*another job"):
        bertscope.embed_corpus(
            _corpus(tmp_path, TEXTS), tmp_path / "shared.db", model=bundled, collection="news"
        )


@pytest.mark.parametrize(
    "asked",
    [{"threads": 0}, {"threads": -1}, {"token_budget": -5}, {"token_budget": 0}, {"token_budget": "1024"},
     {"max_tokens": "12"}, {"max_tokens": 0.5}],
)  # fmt: skip
def test_load_refuses_a_count_below_one(asked: dict[str, object], monkeypatch: pytest.MonkeyPatch) -> None:
    """threads=0 reached torch (a RuntimeError) or set OMP_NUM_THREADS=0 on the light path; token_budget=-5
    was kept and 0 meant the default: one line now, before anything loads."""
    import os

    monkeypatch.delenv("OMP_NUM_THREADS", raising=False)
    (name,) = asked
    least = 2 if name == "max_tokens" else 1  # a text takes [CLS] and [SEP] at least
    with pytest.raises(bertscope.InvalidSpec, match=f"^{name} must be a whole number of at least {least}"):
        bertscope.load(device="cpu", **asked)  # type: ignore[arg-type]
    assert "OMP_NUM_THREADS" not in os.environ


def test_count_options_of_static_and_explain_are_one_line(bundled: bertscope.Model) -> None:
    """k="5" and top="3" were raw TypeErrors (docs/errors.md promises one line for k="5")."""
    from bertscope.static import first_words

    for call, message in (
        (lambda: bundled.static_neighbors("bread", k="5"), "k must be a whole number of at least 1, got '5'"),
        (lambda: bundled.static_neighbors("bread", k=0), "k must be a whole number of at least 1, got 0"),
        (lambda: first_words(bundled, 2.5), "top must be a whole number of at least 1, got 2.5"),
        (lambda: bundled.explain("a", "b", top="3"), "top must be a whole number of at least 0, got '3'"),
    ):
        with pytest.raises(bertscope.InvalidSpec, match=message):
            call()
    assert bundled.explain("a cat", "a dog", top=0).top_pairs == []
    assert len(bundled.explain("a cat", "a dog", top=np.int64(2)).top_pairs) == 2


def test_similarity_takes_vectors_as_sentence_transformers_does(bundled: bertscope.Model) -> None:
    """`model.similarity(embeddings, embeddings)` (the switch from sentence-transformers) was an error
    about texts: arrays in give their cosine matrix, as sentence-transformers' model.similarity."""
    from sentence_transformers.util import cos_sim

    embeddings = bundled.encode(TEXTS)
    expected = cos_sim(embeddings, embeddings).numpy()
    got = bundled.similarity(embeddings, embeddings)
    assert isinstance(got, np.ndarray) and got.shape == (3, 3)
    np.testing.assert_allclose(got, expected, atol=1e-6)
    np.testing.assert_allclose(bundled.similarity(embeddings[0], embeddings), expected[:1], atol=1e-6)
    np.testing.assert_allclose(bundled.similarity(TEXTS, TEXTS), expected, atol=1e-5)  # texts as before
    with pytest.raises(bertscope.InvalidInput, match="dimensions"):
        bundled.similarity(embeddings, embeddings[:, :10])
    with pytest.raises(bertscope.InvalidInput, match="b is list"):
        bundled.similarity(embeddings, TEXTS)
    with pytest.raises(bertscope.InvalidSpec, match="takes no embedding options"):
        bundled.similarity(embeddings, embeddings, pooling="cls")


@pytest.mark.parametrize("a, b", [("a", "b"), (["a cat"], [[1.0, 2.0]]), ([[1.0, 2.0]], "b")])
def test_cos_sim_of_texts_says_it_takes_vectors(a: object, b: object) -> None:
    for measure in (bertscope.cos_sim, bertscope.pairwise_cos_sim):
        with pytest.raises(bertscope.InvalidInput, match="takes vectors .* embed texts first"):
            measure(a, b)  # type: ignore[arg-type]
    np.testing.assert_allclose(bertscope.cos_sim([[1.0, 0.0]], [[1, 0], [0, 1]]), [[1.0, 0.0]])
