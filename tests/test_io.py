"""Corpus jobs: every input and output type, dedup, resume after kill -9 and Ctrl-C, search, bad input."""

from __future__ import annotations

import json
import os
import signal
import sqlite3
import subprocess
import sys
import time
from collections.abc import Callable
from pathlib import Path

import numpy as np
import pyarrow as pa
import pyarrow.parquet as pq
import pytest
from typer.testing import CliRunner

import bertscope
import bertscope.io
from bertscope.cli import app
from bertscope.io.stores import open_store

TEXTS = [
    "a storm hits the coast",
    "the market rises again",
    "heavy rain floods the city",
    "fresh bread from the bakery",
    "the bank raised interest rates",
    "a river runs through the valley",
]


def write_txt(folder: Path, texts: list[str], name: str = "corpus.txt") -> Path:
    """A one-text-per-line corpus file."""
    path = folder / name
    path.write_text("".join(t + "\n" for t in texts))
    return path


def parquet_rows(path: Path) -> dict[str, list]:
    """A Parquet output as a dict of columns."""
    return pq.read_table(path).to_pydict()


def test_txt_to_parquet_equals_embed(tmp_path: Path, bundled: bertscope.Model) -> None:
    source = write_txt(tmp_path, TEXTS)
    summary = bertscope.embed_corpus(
        source, tmp_path / "out.parquet", model=bundled, layers="-2", pooling="mean"
    )
    assert summary.embedded == len(TEXTS)
    table = pq.read_table(tmp_path / "out.parquet")
    assert table.column_names == ["id", "text", "embedding", "n_tokens", "truncated"]
    assert table.schema.field("embedding").type == pa.list_(pa.float32(), 384)
    vectors = np.array(table.column("embedding").to_pylist(), dtype=np.float32)
    expected = bundled.embed(TEXTS, layers="-2", pooling="mean").vectors
    np.testing.assert_allclose(vectors, expected, atol=1e-6)
    assert table.column("id").to_pylist() == [str(i) for i in range(1, 7)]
    settings = json.loads(table.schema.metadata[b"bertscope"])
    assert settings["layers"] == [5] and settings["pooling"] == "mean" and settings["dimension"] == 384
    assert settings["model"] == bundled.info().source and settings["dtype"] == "float32"
    assert not (tmp_path / "out.parquet.parts").exists()


def test_jsonl_into_sqlite_collection_with_dedup(tmp_path: Path, bundled: bertscope.Model) -> None:
    source = tmp_path / "docs.jsonl"
    source.write_text(
        "".join(json.dumps({"id": f"d{i}", "body": t, "src": "x"}) + "\n" for i, t in enumerate(TEXTS))
    )
    store = tmp_path / "docs.db"
    first = bertscope.embed_corpus(
        source, store, model=bundled, text_field="body", id_field="id", collection="news"
    )
    assert first.embedded == 6
    again = bertscope.embed_corpus(
        source, store, model=bundled, text_field="body", id_field="id", collection="news"
    )
    assert again.embedded == 0 and again.already == 6
    extra = tmp_path / "extra.jsonl"
    extra.write_text(json.dumps({"id": "copy", "body": TEXTS[0]}) + "\n")
    reused = bertscope.embed_corpus(
        extra, store, model=bundled, text_field="body", id_field="id", collection="news"
    )
    assert reused.embedded == 0 and reused.reused == 1
    db = sqlite3.connect(store)
    assert db.execute("PRAGMA journal_mode").fetchone()[0] == "wal"
    blob, meta = db.execute("SELECT embedding, metadata FROM embeddings WHERE id = 'd2'").fetchone()
    np.testing.assert_allclose(np.frombuffer(blob, "<f4"), bundled.embed([TEXTS[2]]).vectors[0], atol=1e-6)
    assert json.loads(meta) == {"src": "x"}
    (listing,) = bertscope.list_collections(store)
    assert listing["name"] == "news" and listing["count"] == 7 and listing["dimension"] == 384
    with pytest.raises(bertscope.CorpusError, match="other settings"):
        bertscope.embed_corpus(
            source, store, model=bundled, text_field="body", id_field="id", collection="news", layers="0"
        )
    clash = tmp_path / "clash.jsonl"
    clash.write_text(json.dumps({"id": "d1", "body": "another text"}) + "\n")
    with pytest.raises(bertscope.CorpusError, match="another text"):
        bertscope.embed_corpus(
            clash, store, model=bundled, text_field="body", id_field="id", collection="news"
        )


def test_csv_to_npy_with_ids(tmp_path: Path, bundled: bertscope.Model) -> None:
    source = tmp_path / "table.csv"
    source.write_text("key,text\n" + "".join(f'k{i},"{t}, indeed"\n' for i, t in enumerate(TEXTS)))
    bertscope.embed_corpus(source, tmp_path / "vectors.npy", model=bundled, id_field="key")
    matrix = np.load(tmp_path / "vectors.npy", mmap_mode="r")
    assert matrix.dtype == np.float32 and matrix.shape == (6, 384)
    assert (tmp_path / "vectors.ids.txt").read_text().split() == [f"k{i}" for i in range(6)]
    np.testing.assert_allclose(matrix[3], bundled.embed([TEXTS[3] + ", indeed"]).vectors[0], atol=1e-6)
    assert json.loads((tmp_path / "vectors.settings.json").read_text())["dimension"] == 384


def test_parquet_input_and_tsv_input(tmp_path: Path, bundled: bertscope.Model) -> None:
    source = tmp_path / "data.parquet"
    pq.write_table(pa.table({"text": TEXTS, "n": list(range(6))}), source)
    bertscope.embed_corpus(source, tmp_path / "out.parquet", model=bundled, keep_text=False)
    assert "text" not in pq.read_table(tmp_path / "out.parquet").column_names
    tsv = tmp_path / "data.tsv"
    tsv.write_text("text\tlabel\n" + "".join(f"{t}\t1\n" for t in TEXTS))
    assert bertscope.embed_corpus(tsv, tmp_path / "tsv.parquet", model=bundled).embedded == 6


def test_existing_output_is_never_overwritten_silently(tmp_path: Path, bundled: bertscope.Model) -> None:
    source = write_txt(tmp_path, TEXTS)
    target = tmp_path / "out.parquet"
    bertscope.embed_corpus(source, target, model=bundled)
    with pytest.raises(bertscope.CorpusError, match="--overwrite"):
        bertscope.embed_corpus(source, target, model=bundled)
    with pytest.raises(bertscope.CorpusError, match="already complete"):
        bertscope.embed_corpus(source, target, model=bundled, resume=True)
    assert bertscope.embed_corpus(source, target, model=bundled, overwrite=True, layers="0").embedded == 6
    assert json.loads(pq.read_table(target).schema.metadata[b"bertscope"])["layers"] == [0]


def test_bad_records(tmp_path: Path, bundled: bertscope.Model) -> None:
    source = tmp_path / "bad.jsonl"
    source.write_text(
        '{"text": "fine"}\n{broken\n{"text": ""}\n{"body": "no text field"}\n{"text": "also fine"}\n'
    )
    with pytest.raises(bertscope.CorpusError, match=r"bad.jsonl:2: not a JSON object"):
        bertscope.embed_corpus(source, tmp_path / "a.parquet", model=bundled)
    assert not (tmp_path / "a.parquet").exists()
    summary = bertscope.embed_corpus(source, tmp_path / "b.parquet", model=bundled, skip_bad=True)
    assert (summary.embedded, summary.empty, summary.rejected) == (2, 1, 2)
    rejects = (tmp_path / "b.parquet.rejects").read_text().splitlines()
    assert rejects[0].startswith(f"{source}:2:") and "the fields are: body" in rejects[1]
    csv_source = tmp_path / "bad.csv"
    csv_source.write_text("text,label\nok,1\ntoo,many,fields\n")
    with pytest.raises(bertscope.CorpusError, match=r"bad.csv:3: 3 fields where the header has 2"):
        bertscope.embed_corpus(csv_source, tmp_path / "c.parquet", model=bundled)
    dup = tmp_path / "dup.jsonl"
    dup.write_text('{"id": 1, "text": "a"}\n{"id": 1, "text": "b"}\n')
    with pytest.raises(bertscope.CorpusError, match="duplicate id '1'"):
        bertscope.embed_corpus(dup, tmp_path / "d.parquet", model=bundled, id_field="id")
    with pytest.raises(bertscope.CorpusError, match="no column 'body'; the columns are: text"):
        pq.write_table(pa.table({"text": ["x"]}), tmp_path / "in.parquet")
        bertscope.embed_corpus(
            tmp_path / "in.parquet", tmp_path / "e.parquet", model=bundled, text_field="body"
        )
    with pytest.raises(bertscope.CorpusError, match="no such file"):
        bertscope.embed_corpus(tmp_path / "missing.txt", tmp_path / "f.parquet", model=bundled)
    # Text of any suffix reads as lines; this is not text.
    (tmp_path / "corpus.bin").write_bytes(b"\x00\x01\xff")
    with pytest.raises(bertscope.CorpusError, match="unknown corpus type .bin and not UTF-8 text"):
        bertscope.embed_corpus(tmp_path / "corpus.bin", tmp_path / "g.parquet", model=bundled)
    with pytest.raises(bertscope.CorpusError, match="unknown output type .csv"):
        bertscope.embed_corpus(write_txt(tmp_path, TEXTS), tmp_path / "out.csv", model=bundled)


@pytest.mark.parametrize("level", [{}, {"level": "chunks", "chunks": "sentence"}])
def test_a_text_the_tokenizer_gives_no_pieces_is_a_bad_record(
    tmp_path: Path, bundled: bertscope.Model, level: dict[str, str]
) -> None:
    source = tmp_path / "marks.jsonl"
    source.write_text(
        '{"text": "Berlin is big. It is old."}\n{"text": "\\u0301\\u0301"}\n{"text": "Last."}\n'
    )
    with pytest.raises(bertscope.CorpusError, match=r"marks.jsonl:2: the text gives no word pieces"):
        bertscope.embed_corpus(source, tmp_path / "a.parquet", model=bundled, progress=False, **level)
    out = tmp_path / "b.parquet"
    summary = bertscope.embed_corpus(source, out, model=bundled, skip_bad=True, progress=False, **level)
    assert summary.rejected == 1 and pq.read_table(out).num_rows >= 2
    assert (tmp_path / "b.parquet.rejects").read_text().startswith(f"{source}:2:")


def test_search_every_store_and_by_id(tmp_path: Path, bundled: bertscope.Model) -> None:
    source = write_txt(tmp_path, TEXTS)
    outputs = [tmp_path / "s.parquet", tmp_path / "s.npy", tmp_path / "s.db"]
    for output in outputs:
        bertscope.embed_corpus(source, output, model=bundled)
    expected = bundled.similarity(["storm at sea"], TEXTS)[0]
    for output in outputs:
        hits = bertscope.search("storm at sea", output, k=3, model=bundled, rows_per_read=2)
        assert [h.id for h in hits] == [str(i + 1) for i in np.argsort(-expected)[:3]]
        np.testing.assert_allclose([h.score for h in hits], np.sort(expected)[::-1][:3], atol=1e-5)
    by_id = bertscope.search(None, outputs[0], item_id="4", k=2)
    assert "4" not in [h.id for h in by_id] and len(by_id) == 2
    with pytest.raises(bertscope.CorpusError, match="no id '99'"):
        bertscope.search(None, outputs[0], item_id="99")
    with pytest.raises(bertscope.CorpusError, match="its collections: default"):
        open_store(outputs[2], collection="nope")


def test_search_reloads_the_stored_model_and_settings(tmp_path: Path, tiny_dirs: dict[str, Path]) -> None:
    model = bertscope.load(tiny_dirs["bert"], device="cpu")
    source = write_txt(tmp_path, ["a cat", "a dog", "the car was horrible", "i like bread"])
    store = tmp_path / "tiny.db"
    bertscope.embed_corpus(source, store, model=str(tiny_dirs["bert"]), layers="1", pooling="max")
    hits = bertscope.search("a cat", store, k=1)
    assert hits[0].id == "1" and hits[0].score == pytest.approx(1.0, abs=1e-5)
    assert model.info().source == json.loads(json.dumps(open_store(store).settings))["model"]


def test_search_loads_the_stores_model_through_the_registered_loader(
    monkeypatch: pytest.MonkeyPatch, bundled: bertscope.Model
) -> None:
    """model_for loads by name through core.loaders (the package registers bertscope.load): the store's
    name and runtime settings reach the loader, and a loaded model is used as it is."""
    from bertscope.core import loaders
    from bertscope.io.search import model_for

    asked: list[tuple[object, dict[str, object]]] = []

    def loader(name: object = None, **settings: object) -> bertscope.Model:
        asked.append((name, settings))
        return bundled

    monkeypatch.setattr(loaders, "_registered", [loader])
    settings = {"model_arg": "some/folder", "dtype": "float32", "backend": "onnxruntime", "quantize": "int8"}
    assert model_for(settings) is bundled and model_for(settings, bundled) is bundled
    assert asked == [("some/folder", {"dtype": "float32", "backend": "onnxruntime", "quantize": "int8"})]
    monkeypatch.setattr(loaders, "_registered", [])
    with pytest.raises(bertscope.ModelLoadError, match="import bertscope"):
        model_for(settings)


def _run_job(args: list[str], command: str = "embed", **kwargs: object) -> subprocess.Popen[str]:
    """Start `python -m bertscope embed ...` (or another command) as a user would."""
    env = {**os.environ, "HF_HUB_OFFLINE": "1"}
    return subprocess.Popen(
        [sys.executable, "-m", "bertscope", command, *args],
        stdout=subprocess.PIPE,
        stderr=subprocess.PIPE,
        text=True,
        env=env,
        **kwargs,
    )  # type: ignore[call-overload]


def _embed_in_process(args: list[str], command: str = "embed") -> None:
    """Run `bertscope embed ...` in this process: the same command, without a fresh interpreter's start."""
    result = CliRunner().invoke(app, [command, *args])
    assert result.exit_code == 0, (result.output, result.exception)


def _wait_for_parts(
    parts: Path,
    count: int,
    process: subprocess.Popen[str],
    timeout: float = 120,
    ready: Callable[[Path], bool] | None = None,
) -> None:
    """Block until the job has written `count` part files, or `ready(parts)` holds (and is still running)."""
    deadline = time.monotonic() + timeout
    while time.monotonic() < deadline:
        if ready is not None and ready(parts):
            return
        if ready is None and parts.exists() and len(list(parts.glob("part-*.parquet"))) >= count:
            return
        assert process.poll() is None, "the job ended before it could be interrupted"
        time.sleep(0.01)
    raise AssertionError("the job wrote no parts in time")


def stop_and_resume(
    args: list[str],
    target: Path,
    *,
    how: str = "kill-9",
    command: str = "embed",
    out_flag: str = "-o",
    ready: Callable[[Path], bool] | None = None,
) -> None:
    """Run `embed ARGS -o TARGET` as its own process, stop it after 3 parts, then --resume it here.

    how: "kill-9" (SIGKILL) or "ctrl-c" (SIGINT, which must exit 130 and tell the user to --resume).
    Another command (`static --from-corpus ... -o TARGET`) names when it is far enough
    along: `ready(TARGET.parts)`.
    """
    job = _run_job([*args, out_flag, str(target)], command)
    _wait_for_parts(target.with_name(target.name + ".parts"), 3, job, ready=ready)
    if how == "kill-9":
        job.send_signal(signal.SIGKILL)
        job.wait(timeout=60)
    else:
        job.send_signal(signal.SIGINT)
        _, stderr = job.communicate(timeout=120)
        assert job.returncode == 130 and "--resume" in stderr
        assert "resume=True" not in stderr  # the library's words, reworded into the flag typed
    assert not target.exists()
    _embed_in_process([*args, out_flag, str(target), "--resume"], command)


# 20 parts of 100: the job is stopped after 3, so 17 are still to come when the signal is sent (the
# test fails, never passes, if the job ended first: `stop_and_resume` checks it ran and left no output).
BIG = 2000


@pytest.fixture(scope="module")
def big_corpus(tmp_path_factory: pytest.TempPathFactory) -> Path:
    """A corpus large enough that the tiny model is still at work when the job is stopped."""
    rng = np.random.default_rng(0)
    words = "i like eating bread the banana was horrible a cat dog car am tokenization".split()
    lines = [" ".join(rng.choice(words, size=rng.integers(2, 30))) for _ in range(BIG)]
    return write_txt(tmp_path_factory.mktemp("big"), lines, "big.txt")


# The runtime of the interrupted jobs, whose checks are the job's (parts, resume), not the runtime's: ONNX
# Runtime, exported once by the first run (in this process, where torch is loaded already) and opened
# light by the job that is stopped, whose start then imports neither torch nor transformers (the tiny
# BERT's default, torch, was ~4 s of that process's ~5 s before its third part).
LIGHT = ["--backend", "onnxruntime"]


def _job_args(big_corpus: Path, tiny_dirs: dict[str, Path]) -> list[str]:
    """The options every run of the interrupted-job tests shares."""
    return ["-i", str(big_corpus), "--model", str(tiny_dirs["bert"]), "--batch-size", "100", "-q", *LIGHT]


@pytest.fixture(scope="module")
def uninterrupted(big_corpus: Path, tiny_dirs: dict[str, Path]) -> Path:
    """The output of the same job run without interruption (in this process: only the stop needs its own)."""
    reference = big_corpus.with_name("whole.parquet")
    _embed_in_process([*_job_args(big_corpus, tiny_dirs), "-o", str(reference)])
    return reference


@pytest.mark.parametrize("how", ["kill-9", "ctrl-c"])
def test_interrupted_job_resumes_to_the_same_result(
    how: str, tmp_path: Path, big_corpus: Path, tiny_dirs: dict[str, Path], uninterrupted: Path
) -> None:
    common = _job_args(big_corpus, tiny_dirs)
    reference = uninterrupted
    target = tmp_path / "resumed.parquet"
    stop_and_resume(common, target, how=how)
    whole, again = parquet_rows(reference), parquet_rows(target)
    assert again["id"] == whole["id"] and len(whole["id"]) == BIG
    np.testing.assert_allclose(np.array(again["embedding"]), np.array(whole["embedding"]), atol=1e-6)


def test_stdin_and_cli_summary(tmp_path: Path) -> None:
    target = tmp_path / "out.parquet"
    result = CliRunner().invoke(app, ["embed", "-i", "-", "-o", str(target)], input="\n".join(TEXTS) + "\n\n")
    assert result.exit_code == 0, (result.output, result.exception)
    assert "6 texts embedded" in result.stderr and str(target) in result.stderr
    assert parquet_rows(target)["text"] == TEXTS


def test_edge_inputs_from_review(tmp_path: Path, bundled: bertscope.Model) -> None:
    tsv = tmp_path / "quotes.tsv"
    tsv.write_text('text\n"Hello there\nsecond row\n')
    assert [r.text for r in bertscope.io.read_corpus(tsv)] == ['"Hello there', "second row"]
    bom = tmp_path / "excel.csv"
    bom.write_text("text,id\nhello,1\n", encoding="utf-8-sig")
    assert [r.text for r in bertscope.io.read_corpus(bom)] == ["hello"]
    latin = tmp_path / "latin.jsonl"
    latin.write_bytes(b'{"text": "ok"}\n{"text": "caf\xe9"}\n')
    with pytest.raises(bertscope.CorpusError, match="not UTF-8"):
        bertscope.embed_corpus(latin, tmp_path / "latin.parquet", model=bundled)
    not_db = tmp_path / "bad.db"
    not_db.write_text("hello\n")
    with pytest.raises(bertscope.CorpusError, match="not an SQLite store"):
        open_store(not_db)
    empty = write_txt(tmp_path, ["", "  "], "empty.txt")
    for output in ("e.parquet", "e.npy", "e.db"):
        with pytest.raises(bertscope.CorpusError, match="every line is empty"):
            bertscope.embed_corpus(empty, tmp_path / output, model=bundled)
        assert not (tmp_path / (output + ".parts")).exists()
    broken_ids = tmp_path / "ids.jsonl"
    broken_ids.write_text(json.dumps({"id": "x\ry", "text": "apple pie"}) + "\n")
    with pytest.raises(bertscope.CorpusError, match="line break"):
        bertscope.embed_corpus(broken_ids, tmp_path / "ids.npy", model=bundled, id_field="id")
    store = tmp_path / "s.npy"
    bertscope.embed_corpus(write_txt(tmp_path, TEXTS), store, model=bundled)
    wrong_width = "the query vector has 10 numbers but the store.s vectors have 384"
    with pytest.raises(bertscope.InvalidInput, match=wrong_width):
        bertscope.search(np.ones(10, np.float32), store)  # (zeros are refused first: no direction)


def test_texts_of_only_special_tokens_are_refused(bundled: bertscope.Model) -> None:
    with pytest.raises(bertscope.InvalidInput, match="no word pieces besides the special ones"):
        bundled.embed(["fine", "\x00"], pooling="max", mask_special=True)


def test_read_lines_reads_a_txt_as_read_corpus_does(tmp_path: Path) -> None:
    """One reader: BOM dropped, CR cut, blank lines passed over, in both."""
    from bertscope.io.readers import read_lines

    source = tmp_path / "bom.txt"
    source.write_bytes("\ufeffone\r\n\r\n \ntwo\n".encode())
    texts = [r.text for r in bertscope.io.read_corpus(source)]
    assert list(read_lines(source)) == texts == ["one", "two"]
    with pytest.raises(bertscope.CorpusError, match="no such file"):
        read_lines(tmp_path / "missing.txt")
