"""Corpus jobs and stores, as the nineteenth audit found them: an over-long text named by its place in a
batch, a parts folder a failed settings write left unresumable, a full disk said as a foreign SQLite file
or as bytes written, nothing said of the records an all-rejected job set aside, blank .jsonl lines not
counted, and changed views said as two whole dicts."""

from __future__ import annotations

import errno
import os
import sqlite3
import subprocess
import sys
from pathlib import Path
from typing import Any

import pytest

import bertscope
from bertscope.errors import CorpusError, InputTooLong
from bertscope.io import parts_sink, sqlite_store
from bertscope.io.readers import read_corpus

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


@pytest.mark.parametrize("late", [True, False])
def test_an_over_long_text_in_a_chunk_job_is_named_by_its_line(
    tmp_path: Path, tiny_models: dict[str, bertscope.Model], late: bool
) -> None:
    """Chunk jobs named it "the text of id '6'" while every other level says its file and line (review)."""
    model = tiny_models["bert"]
    corpus = tmp_path / "long.txt"
    corpus.write_text("\n".join([*TEXTS, "one more", _long_text(model)]) + "\n")
    out = tmp_path / "chunks.parquet"
    options = {"level": "chunks", "chunks": "paragraph", "late": late, "long": "error", "batch_size": 2}
    with pytest.raises(InputTooLong) as caught:
        bertscope.embed_corpus(corpus, out, model=model, **options)  # type: ignore[arg-type]
    said = str(caught.value)
    assert f"{corpus}:6: the text" in said and "of id" not in said, said
    assert said.endswith(f"; 4 texts are saved: {RESUME_FIX}"), said


# --- 2. a parts folder whose settings write failed --------------------------------------------------------


def _disk_full(*_args: object, **_kwargs: object) -> None:
    raise OSError(errno.ENOSPC, os.strerror(errno.ENOSPC))


@pytest.mark.parametrize("suffix", [".parquet", ".npy"])
def test_a_failed_settings_write_says_so_and_leaves_nothing_to_resume(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch, tiny_dirs: dict[str, Path], suffix: str
) -> None:
    out = tmp_path / f"out{suffix}"
    with monkeypatch.context() as patched:
        patched.setattr(parts_sink, "atomic_write_text", _disk_full)
        with pytest.raises(CorpusError) as caught:
            bertscope.embed_corpus(TEXTS, out, model=str(tiny_dirs["bert"]))
    assert str(caught.value) == (
        f"{out}: could not write the job's settings (No space left on device); nothing was saved: fix that, "
        "then run it again"
    )
    assert not out.with_name(out.name + ".parts").exists()


@pytest.mark.parametrize("resume", [False, True])
def test_a_parts_folder_without_settings_is_nothing_saved(
    tmp_path: Path, tiny_dirs: dict[str, Path], resume: bool
) -> None:
    out = tmp_path / "out.parquet"
    parts = out.with_name(out.name + ".parts")
    parts.mkdir()
    (parts / "settings.json.tmp").touch()  # what a full disk left before this fix
    summary = bertscope.embed_corpus(TEXTS, out, model=str(tiny_dirs["bert"]), resume=resume)
    assert summary.embedded == len(TEXTS) and out.exists() and not parts.exists()


# --- 3. a full disk while an SQLite store opens -----------------------------------------------------------


class _FailingAt:
    """An SQLite connection whose statement beginning with `failing` fails as SQLite does on a full disk."""

    def __init__(self, db: sqlite3.Connection, failing: str, said: str) -> None:
        self.db, self.failing, self.said = db, failing, said

    def execute(self, sql: str, *args: object) -> sqlite3.Cursor:
        if sql.startswith(self.failing):
            raise sqlite3.OperationalError(self.said)
        return self.db.execute(sql, *args)

    def executescript(self, sql: str) -> sqlite3.Cursor:
        if sql.startswith(self.failing):
            raise sqlite3.OperationalError(self.said)
        return self.db.executescript(sql)

    def __getattr__(self, name: str) -> object:
        return getattr(self.db, name)


@pytest.mark.parametrize(
    ("failing", "said"),
    [
        ("PRAGMA journal_mode", "database or disk is full"),
        ("PRAGMA user_version", "disk I/O error"),
        ("BEGIN;", "database or disk is full"),  # the first migration
    ],
)
def test_a_full_disk_opening_a_store_says_so_not_a_foreign_file(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch, tiny_dirs: dict[str, Path], failing: str, said: str
) -> None:
    db = tmp_path / "out.db"
    opened = sqlite3.connect
    with monkeypatch.context() as patched:
        patched.setattr(sqlite_store.sqlite3, "connect", lambda path: _FailingAt(opened(path), failing, said))
        with pytest.raises(CorpusError) as caught:
            bertscope.embed_corpus(TEXTS, db, model=str(tiny_dirs["bert"]))
    assert str(caught.value) == (
        f"{db}: could not open the store ({said}); nothing was written to it: free the disk or lift the "
        "limit, then run the same job again"
    )


# --- 4. a .npy part cut short by the disk says why ---------------------------------------------------------

# Files past RLIMIT_FSIZE fail as a full disk does (a short write), with SIGXFSZ ignored: numpy's fwrite
# said only how many bytes it wrote. Run in a child process, whose limit ends with it.
_SHORT_WRITE = """
import resource, signal, sys
import bertscope
model = bertscope.load(sys.argv[1], device="cpu")
signal.signal(signal.SIGXFSZ, signal.SIG_IGN)
resource.setrlimit(resource.RLIMIT_FSIZE, (8192, resource.getrlimit(resource.RLIMIT_FSIZE)[1]))
try:
    bertscope.embed_corpus([f"text number {i}" for i in range(200)], sys.argv[2], model=model)
except bertscope.CorpusError as exc:
    print(exc)
"""


def test_a_short_npy_write_says_the_cause(tmp_path: Path, tiny_dirs: dict[str, Path]) -> None:
    out = tmp_path / "out.npy"
    done = subprocess.run(
        [sys.executable, "-c", _SHORT_WRITE, str(tiny_dirs["bert"]), str(out)],
        capture_output=True, text=True, timeout=300, check=True,
    )  # fmt: skip
    assert done.stdout.strip() == (
        f"{out}: could not write a batch (File too large); nothing was saved: free the disk or lift the "
        "limit, then run the same job again"
    )


# --- 5. a job whose every record was set aside says why ----------------------------------------------------


def test_a_job_with_every_record_rejected_says_why(tmp_path: Path, tiny_dirs: dict[str, Path]) -> None:
    corpus = tmp_path / "bad.jsonl"
    corpus.write_text('{"text": ["a"]}\n{"text": ""}\nnot json\n')
    out = tmp_path / "out.parquet"
    with pytest.raises(CorpusError) as caught:
        bertscope.embed_corpus(corpus, out, model=str(tiny_dirs["bert"]), skip_bad=True)
    assert str(caught.value) == (
        f"{corpus}: no texts to embed (1 empty, 2 rejected); nothing was written to {out}. Rejected: "
        f"{corpus}:1: field 'text' is a list, not text; {corpus}:3: not a JSON object: Expecting value: "
        "line 1 column 1 (char 0)"
    )
    assert sorted(p.name for p in tmp_path.iterdir()) == ["bad.jsonl"]


# --- 6. blank lines: one behaviour in every reader ---------------------------------------------------------


@pytest.mark.parametrize(("name", "lines"), [("blank.txt", "\n \n\n"), ("blank.jsonl", "\n \n\n")])
def test_a_corpus_of_blank_lines_is_empty_in_every_reader(
    tmp_path: Path, tiny_dirs: dict[str, Path], name: str, lines: str
) -> None:
    corpus = tmp_path / name
    corpus.write_text(lines)
    out = tmp_path / "out.parquet"
    with pytest.raises(CorpusError) as caught:
        bertscope.embed_corpus(corpus, out, model=str(tiny_dirs["bert"]))
    assert str(caught.value) == (
        f"{corpus}: every line is empty (no text in it): give a file with one text or more; "
        f"nothing was written to {out}"
    )


def test_blank_jsonl_lines_are_counted_as_empty_as_in_a_txt(
    tmp_path: Path, tiny_dirs: dict[str, Path]
) -> None:
    for name, lines in (("c.txt", "a\n\nb\n"), ("c.jsonl", '{"text": "a"}\n\n{"text": "b"}\n')):
        (tmp_path / name).write_text(lines)
        summary = bertscope.embed_corpus(
            tmp_path / name, tmp_path / f"{name}.parquet", model=str(tiny_dirs["bert"])
        )
        assert (summary.embedded, summary.empty) == (2, 1), name


def test_a_field_of_another_type_is_named_with_its_article(tmp_path: Path) -> None:
    corpus = tmp_path / "n.jsonl"
    corpus.write_text('{"text": 3}\n')
    with pytest.raises(CorpusError, match=r"n.jsonl:1: field 'text' is an int, not text"):
        list(read_corpus(corpus))


# --- 8. a Ray job resumed before its first shard keeps the settings it was started with ------------------


def test_a_ray_job_killed_before_its_first_shard_resumes_with_its_own_settings_only(tmp_path: Path) -> None:
    from bertscope.distributed.shards import open_folder

    out = tmp_path / "out"
    started = {"model": "m", "layers": "-1", "pooling": "mean"}
    assert open_folder(out, resume=False, overwrite=False).settled("schema", started) == "schema"
    # killed here, before a shard: a resume with other settings is refused, as the local job refuses it
    with pytest.raises(CorpusError) as caught:
        open_folder(out, resume=True, overwrite=False).settled("schema", {**started, "layers": "-2"})
    assert str(caught.value) == (
        f"{out}: the unfinished job was started with other settings (layers: '-1' then, '-2' now); "
        "resume with the same options, or start again with overwrite=True (--overwrite)"
    )
    assert open_folder(out, resume=True, overwrite=False).settled("schema", started) == "schema"


def test_a_ray_jobs_settings_write_that_fails_is_one_line(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    """The Ray job's settings kept before its first shard: a full disk was a raw OSError (review)."""
    from bertscope.distributed import shards

    monkeypatch.setattr(parts_sink, "atomic_write_text", _disk_full)  # what write_settings writes with
    out = tmp_path / "out"
    with pytest.raises(CorpusError) as caught:
        shards.open_folder(out, resume=False, overwrite=False).settled("schema", {"layers": "-1"})
    assert str(caught.value) == (
        f"{out}: could not write the job's settings (No space left on device): fix that, then run it again"
    )


def test_a_resume_with_a_view_changed_names_only_what_changed() -> None:
    """Resuming with another --view printed both whole view dicts, in different key orders (audit 19c)."""
    from bertscope.io.sink_settings import settings_diff

    last = {"combine": "mean", "layers": [6], "pooling": "mean"}
    then = {"views": {"cls4": {"combine": "mean", "layers": [3, 4, 5, 6], "pooling": "cls"}, "last": last}}
    now = {"views": {"last": last, "cls4": {"combine": "mean", "layers": [4, 5, 6], "pooling": "cls"}}}
    assert settings_diff(then, now) == "view cls4 layers: [3, 4, 5, 6] then, [4, 5, 6] now"


def test_a_static_models_over_long_text_is_named_by_its_line(tmp_path: Path, static_m2v: Any) -> None:
    """A static model's long='error' named the text by its place in the batch too (fix helper 19c)."""
    corpus = tmp_path / "long.txt"
    long_text = "word " * (static_m2v.max_seq_length + 10)
    corpus.write_text("\n".join([*TEXTS, "one more", long_text]) + "\n")
    with pytest.raises(InputTooLong) as caught:
        bertscope.embed_corpus(corpus, tmp_path / "out.parquet", model=static_m2v, batch_size=2, long="error")
    assert str(caught.value).startswith(f"{corpus}:6: the text has "), caught.value


def test_a_resume_with_a_view_added_names_it_once() -> None:
    """A view on one side only was said as one 'None then' line per setting (review)."""
    from bertscope.io.sink_settings import settings_diff

    last = {"layers": [6], "pooling": "mean"}
    added = {"combine": "mean", "layers": [1], "pooling": "cls"}
    said = settings_diff({"views": {"last": last}}, {"views": {"last": last, "cls": added}})
    assert said == f"view cls: None then, {added!r} now"
