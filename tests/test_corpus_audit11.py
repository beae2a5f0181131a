"""Corpus jobs and stores, as the eleventh audit found them: --overwrite deleting the old output before
the new one was written, --resume with --overwrite, stale side files of a rewritten .npy, the threshold file
with views, job options beside --view, CR line endings, options similar ignores, and names."""

from __future__ import annotations

import json
from collections.abc import Iterator
from pathlib import Path

import numpy as np
import pyarrow.parquet as pq
import pytest

import bertscope
from bertscope.errors import CorpusError, InvalidSpec
from console import run_main

TEXTS = ["a storm hits the coast", "prices keep rising", "the river bank flooded", "a quiet day"]


def _ids(out: Path) -> list[str]:
    """The ids a store holds, in stored order (a collection's by id)."""
    if out.suffix == ".parquet":
        return [str(i) for i in pq.read_table(out).column("id").to_pylist()]
    if out.suffix == ".npy":
        return out.with_suffix(".ids.txt").read_text().split()
    import sqlite3

    db = sqlite3.connect(out)
    try:
        return [
            r[0] for r in db.execute("SELECT id FROM embeddings WHERE collection = 'default' ORDER BY id")
        ]
    finally:
        db.close()


@pytest.mark.parametrize("suffix", [".parquet", ".npy", ".db"])
def test_overwrite_keeps_the_old_output_when_the_new_job_fails(
    tmp_path: Path, bundled: bertscope.Model, suffix: str
) -> None:
    out = tmp_path / f"keep{suffix}"
    bertscope.embed_corpus(TEXTS, out, model=bundled)
    bad = tmp_path / "bad.jsonl"
    bad.write_text('{"text": "ok one"}\n{"text": 5}\n')
    with pytest.raises(CorpusError, match="bad.jsonl:2"):
        bertscope.embed_corpus(bad, out, model=bundled, overwrite=True)
    assert _ids(out) == ["1", "2", "3", "4"]
    assert [h.id for h in bertscope.search("storm", out, model=bundled, top_k=1)] == ["1"]


def _interrupted(texts: list[str], at: int) -> Iterator[str]:
    for number, text in enumerate(texts):
        if number == at:
            raise KeyboardInterrupt
        yield text


@pytest.mark.parametrize("suffix", [".parquet", ".npy", ".db"])
def test_an_interrupted_overwrite_keeps_the_old_output_and_resumes(
    tmp_path: Path, bundled: bertscope.Model, suffix: str
) -> None:
    out = tmp_path / f"swap{suffix}"
    bertscope.embed_corpus(TEXTS, out, model=bundled)
    new = [f"new text {i}" for i in range(6)]
    with pytest.raises(KeyboardInterrupt):
        bertscope.embed_corpus(_interrupted(new, 4), out, model=bundled, batch_size=2, overwrite=True)
    assert _ids(out) == ["1", "2", "3", "4"]  # the old output, whole and searchable
    assert bertscope.search("storm", out, model=bundled, top_k=1)[0].id == "1"
    with pytest.raises(CorpusError, match="unfinished"):  # neither flag: the replacement is not lost
        bertscope.embed_corpus(new, out, model=bundled, batch_size=2)
    summary = bertscope.embed_corpus(new, out, model=bundled, batch_size=2, resume=True)
    assert summary.resumed_from == 4 or suffix == ".db"
    assert sorted(_ids(out)) == ["1", "2", "3", "4", "5", "6"]
    assert bertscope.search("new text 5", out, model=bundled, top_k=1)[0].id == "6"
    if suffix == ".db":  # the rows' checksums, bound to the collection's name anew, hold
        assert [c["name"] for c in bertscope.list_collections(out)] == ["default"]
        assert run_main("verify", "--store", str(out), "--backend", "torch").code == 0


def test_resume_with_overwrite_is_refused(tmp_path: Path, bundled: bertscope.Model) -> None:
    out = tmp_path / "ro.parquet"
    with pytest.raises(KeyboardInterrupt):
        bertscope.embed_corpus(_interrupted(TEXTS, 2), out, model=bundled, batch_size=1)
    with pytest.raises(InvalidSpec, match="resume=True .* overwrite=True"):
        bertscope.embed_corpus(TEXTS, out, model=bundled, resume=True, overwrite=True)
    assert len(list((tmp_path / "ro.parquet.parts").glob("*.done"))) == 2  # the saved parts stay
    ran = run_main("embed", "-i", "-", "-o", str(out), "--resume", "--overwrite", "--backend", "torch")
    assert ran.code != 0 and "--resume" in ran.stderr and "--overwrite" in ran.stderr
    assert len(ran.stderr.strip().splitlines()) == 1


def test_a_npy_rewritten_at_another_level_keeps_no_stale_labels(
    tmp_path: Path, bundled: bertscope.Model
) -> None:
    out = tmp_path / "sw.npy"
    bertscope.embed_corpus(TEXTS, out, model=bundled)
    bertscope.embed_corpus(TEXTS, out, model=bundled, level="chunks", overwrite=True)
    assert not out.with_suffix(".ids.txt").exists()
    assert bertscope.search("storm", out, model=bundled, top_k=1)[0].id == "1"
    bertscope.embed_corpus(TEXTS, out, model=bundled, overwrite=True)  # and back
    assert not out.with_suffix(".rows.jsonl").exists()
    assert bertscope.search("storm", out, model=bundled, top_k=1)[0].id == "1"


def test_a_stale_ids_file_beside_a_chunk_npy_is_not_read(tmp_path: Path, bundled: bertscope.Model) -> None:
    out = tmp_path / "st.npy"
    bertscope.embed_corpus(TEXTS, out, model=bundled, level="chunks")
    out.with_suffix(".ids.txt").write_text("9\n8\n7\n6\n")  # as an older bertscope's --overwrite left it
    assert bertscope.search("storm", out, model=bundled, top_k=1)[0].id == "1"
    assert np.isfinite(np.load(out)).all()


def _threshold_file(path: Path, settings: dict[str, object], threshold: float = 0.3) -> Path:
    data = {
        "format": "bertscope-threshold/1", "threshold": threshold, "precision": 1.0, "recall": 1.0, "f1": 1.0,
        "positives": 8, "negatives": 8, "model": "all-MiniLM-L6-v2 (bundled)", "settings": settings,
    }  # fmt: skip
    path.write_text(json.dumps(data))
    return path


def test_the_threshold_file_is_checked_against_the_view_searched(
    tmp_path: Path, bundled: bertscope.Model
) -> None:
    out = tmp_path / "v1.parquet"
    bertscope.embed_corpus(TEXTS, out, model=bundled, views=["a=-1/mean", "b=-2/cls"])
    view_a = {"layers": [6], "combine": "mean", "pooling": "mean", "mask_special": False, "normalize": False}
    thr = _threshold_file(tmp_path / "thr.json", {**view_a, "post": None})
    args = ("similar", "storm", "--store", str(out), "--threshold-file", str(thr), "--backend", "torch")
    ran = run_main(*args, "--view", "a", "--json")
    assert ran.code == 0, ran.stderr
    assert [h["id"] for h in json.loads(ran.stdout)] == ["1"] and "1 of 4 hits" in ran.stderr
    other = run_main(*args, "--view", "b")
    assert other.code != 0 and "layers: [5] in the store, [6] in the file" in other.stderr


def test_job_options_every_view_sets_are_refused(tmp_path: Path, bundled: bertscope.Model) -> None:
    views = ["a=-2:/mean/sum/no_normalize", "b=-2:/cls/concat/normalize"]
    with pytest.raises(InvalidSpec, match="every view sets its own combine and normalize"):
        bertscope.embed_corpus(TEXTS, tmp_path / "v.parquet", model=bundled, views=views,
                               normalize=True, combine="sum")  # fmt: skip
    base = ("embed", "-i", "-", "-o", str(tmp_path / "v.parquet"), "--backend", "torch")
    ran = run_main(*base, "--view", views[0], "--view", views[1], "--normalize", "--combine", "mean")
    assert ran.code != 0 and "--combine and --normalize/--no-normalize would be read by none" in ran.stderr
    assert not (tmp_path / "v.parquet").exists()


@pytest.mark.parametrize(
    ("views", "option", "said"),
    [
        (["a=-2:/mean", "b=-2:/cls"], ["--mask-special"], "view 'b' takes the job's --mask-special"),
        (["a=-1/mean", "b=-2:/cls"], ["--combine", "sum"], "view 'a' takes the job's --combine sum"),
    ],
)
def test_a_job_option_that_does_nothing_to_a_view_advises_only_what_works(
    tmp_path: Path, views: list[str], option: list[str], said: str
) -> None:
    source = tmp_path / "t.txt"
    source.write_text("\n".join(TEXTS) + "\n")
    args = [a for v in views for a in ("--view", v)]
    ran = run_main("embed", "-i", str(source), "-o", str(tmp_path / "v.parquet"), *args, *option,
                   "--backend", "torch")  # fmt: skip
    assert ran.code != 0 and said in ran.stderr, ran.stderr
    assert "--pooling" not in ran.stderr and "--layers" not in ran.stderr


@pytest.mark.parametrize(
    ("name", "body"),
    [
        ("cr.txt", "first text\rsecond text\rthird text\r"),
        ("cr.csv", "text\rfirst text\rsecond text\r"),
        ("cr.jsonl", '{"text": "first text"}\r{"text": "second text"}\r'),
    ],
)
def test_cr_line_endings_are_refused_in_one_line(tmp_path: Path, name: str, body: str) -> None:
    source = tmp_path / name
    source.write_bytes(body.encode())
    with pytest.raises(
        CorpusError, match=rf"{name}:1: .*carriage return .*CR \(old Mac\) line endings"
    ) as exc:
        _read(source)
    assert "\n" not in str(exc.value)


def _read(source: Path | str) -> list[str]:
    from bertscope.io.readers import read_corpus

    return [r.text for r in read_corpus(source)]


def test_crlf_line_endings_and_stdin_read_as_files_do(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    import io

    source = tmp_path / "crlf.txt"
    source.write_bytes(b"first text\r\nsecond text\r\n")
    assert _read(source) == ["first text", "second text"]
    stdin = io.TextIOWrapper(io.BytesIO(b"first text\rsecond text\r"), encoding="utf-8")
    monkeypatch.setattr("sys.stdin", stdin)  # a pipe's stdin reads "\r" as a line end unless told
    with pytest.raises(CorpusError, match=r"<stdin>:1: .*carriage return"):
        _read("-")


@pytest.fixture(scope="module")
def token_store(tmp_path_factory: pytest.TempPathFactory, bundled: bertscope.Model) -> Path:
    out = tmp_path_factory.mktemp("tok") / "tok.parquet"
    bertscope.embed_corpus(TEXTS, out, model=bundled, level="tokens")
    return out


@pytest.mark.parametrize(
    ("extra", "said"),
    [
        (["--view", "foo"], "--view: --word reads"),
        (["--prompt", "query: ", "--post", "nonexist.npz"], "--post, --prompt: --word reads"),
        (["--threshold-file", "thr.json"], "--threshold-file: --word reads"),
        (["--prompt-name", "query"], "--prompt-name: --word reads"),
    ],
)
def test_similar_word_refuses_what_it_would_ignore(token_store: Path, extra: list[str], said: str) -> None:
    ran = run_main("similar", "--store", str(token_store), "--word", "bank", "--context", "the river bank",
                   "--backend", "torch", *extra)  # fmt: skip
    assert ran.code != 0 and said in ran.stderr and len(ran.stderr.strip().splitlines()) == 1, ran.stderr


def test_similar_word_alone_and_id_run_no_model(
    token_store: Path, tmp_path: Path, bundled: bertscope.Model
) -> None:
    ran = run_main("similar", "--store", str(token_store), "--word", "bank", "-m", "/nonexistent/model")
    assert ran.code != 0 and "no model runs: drop -m/--model" in ran.stderr
    out = tmp_path / "n.db"
    bertscope.embed_corpus(TEXTS, out, model=bundled)
    for extra in (["-m", "/nonexistent/model"], ["--dtype", "bfloat16"]):
        ran = run_main("similar", "--id", "1", "--store", str(out), *extra)
        assert ran.code != 0 and "--id searches with the stored vector of '1', so no model runs" in ran.stderr
    ran = run_main("similar", "--id", "1", "--store", str(out), "--json")
    assert ran.code == 0 and json.loads(ran.stdout)[0]["id"] != "1"


def test_a_npy_token_store_is_sent_to_a_parquet_one(tmp_path: Path, bundled: bertscope.Model) -> None:
    out = tmp_path / "t.npy"
    bertscope.embed_corpus(TEXTS, out, model=bundled, level="tokens")
    with pytest.raises(CorpusError, match=r"occurrences are searched in a \.parquet store .* -o t\.parquet"):
        bertscope.search("storm", out, model=bundled)


def test_names_the_table_help_and_errors_agree_on(tmp_path: Path, bundled: bertscope.Model) -> None:
    out = tmp_path / "c.db"
    bertscope.embed_corpus(TEXTS, out, model=bundled)
    listed = json.loads(run_main("collections", str(out), "--json").stdout)[0]
    assert listed["n_texts"] == listed["count"] == 4  # the count of texts is n_texts; count still reads
    shown = run_main("collections", str(out)).stdout
    assert "n_texts" in shown and "dimension" in shown
    helped = run_main("index", "info", "--help").stdout
    assert "CRC-32" in helped and "SHA-256" not in helped
    ran = run_main("embed", "fine", "", "--backend", "torch")
    assert ran.code != 0 and "text 2 is empty" in ran.stderr  # the ids printed count from 1
