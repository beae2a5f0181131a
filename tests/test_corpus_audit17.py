"""Corpus jobs and readers, as the seventeenth audit found them: CSV and TSV texts past csv's field limit,
Ctrl-C in a job's last batch, a store made with another model, ids that are no string or number, repeated
CSV columns, bad bytes on stdin, a stale .rejects file after --overwrite, and Ctrl-C during the imports."""

from __future__ import annotations

import csv
import io
import re
import signal
import subprocess
import sys
from collections.abc import Iterator
from pathlib import Path

import pyarrow.parquet as pq
import pytest

import bertscope
from bertscope.errors import CorpusError, JobInterrupted
from bertscope.io import job, readers
from bertscope.io.readers import read_corpus

# --- 1. texts past csv's field limit ------------------------------------------------------------------


@pytest.mark.parametrize("suffix", [".tsv", ".csv"])
def test_a_csv_or_tsv_text_past_131072_characters_is_read(tmp_path: Path, suffix: str) -> None:
    path = tmp_path / f"big{suffix}"
    huge = "x " * 100_000
    with path.open("w", newline="") as stream:
        writer = csv.writer(stream, delimiter="\t" if suffix == ".tsv" else ",")
        writer.writerows([["id", "text"], ["1", huge], ["2", "ok"]])
    records = list(read_corpus(path, id_field="id"))
    assert [(r.id, len(r.text)) for r in records] == [("1", len(huge)), ("2", 2)]


@pytest.fixture
def csv_limit_restored() -> Iterator[None]:
    """csv's field limit is the process's: a test that lowers it puts it back."""
    before = csv.field_size_limit()
    yield
    csv.field_size_limit(before)


@pytest.mark.usefixtures("csv_limit_restored")
def test_a_tsv_past_the_limit_is_never_told_to_fix_its_quotes(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    monkeypatch.setattr(readers, "_FIELD_LIMIT", 10)
    tsv = tmp_path / "long.tsv"
    tsv.write_text("id\ttext\n1\t" + "x" * 50 + "\n")
    with pytest.raises(CorpusError) as caught:
        list(read_corpus(tsv, id_field="id"))
    assert "long.tsv:2: a field of the record that begins on this line is longer than 10" in str(caught.value)
    assert "quote" not in str(caught.value)
    csv_file = tmp_path / "long.csv"
    csv_file.write_text("id,text\n1," + "x" * 50 + "\n")
    with pytest.raises(CorpusError, match=r"long.csv:2: .* longer than 10 characters \(or an unclosed quote"):
        list(read_corpus(csv_file, id_field="id"))


# --- 2. Ctrl-C in a job's last batch, and before a batch's forward ------------------------------------

TEXTS = ["a storm hits the coast", "prices keep rising", "the river bank flooded", "a quiet day"]


def _ctrl_c() -> None:
    """What a Ctrl-C does to a running job: its SIGINT handler is called. Called here, in this thread, not
    raised as a signal: a raised one is run by the main thread when it next runs Python, which under
    pytest-xdist could be after the job restored the default handler (a KeyboardInterrupt that stops the
    worker)."""
    handler = signal.getsignal(signal.SIGINT)
    assert callable(handler) and handler is not signal.default_int_handler, "the job installs its own"
    handler(signal.SIGINT, None)


def _ctrl_c_in_forward(monkeypatch: pytest.MonkeyPatch, at: int) -> list[int]:
    """Ctrl-C (SIGINT to this process) during forward number `at` (1-based) of the job's level; the
    forwards run so far, counted."""
    forwards: list[int] = []
    make_level = job.make_level

    def level_with_ctrl_c(model: object, options: object) -> object:
        level = make_level(model, options)  # type: ignore[arg-type]
        embed = level.embed

        def embed_then_stop(records: list[object], **kwargs: object) -> object:
            forwards.append(len(records))
            if len(forwards) == at:
                _ctrl_c()
            return embed(records, **kwargs)  # type: ignore[arg-type]

        level.embed = embed_then_stop  # type: ignore[method-assign]
        return level

    monkeypatch.setattr(job, "make_level", level_with_ctrl_c)
    return forwards


def test_ctrl_c_in_the_last_batch_finishes_the_job(
    tmp_path: Path, tiny_dirs: dict[str, Path], monkeypatch: pytest.MonkeyPatch
) -> None:
    forwards = _ctrl_c_in_forward(monkeypatch, at=2)
    out = tmp_path / "last.parquet"
    summary = bertscope.embed_corpus(TEXTS, out, model=str(tiny_dirs["bert"]), batch_size=2)
    assert forwards == [2, 2] and summary.embedded == 4
    assert pq.read_table(out).column("id").to_pylist() == ["1", "2", "3", "4"]
    assert not (tmp_path / "last.parquet.parts").exists()


def test_ctrl_c_before_a_batch_stops_before_its_forward(
    tmp_path: Path, tiny_dirs: dict[str, Path], monkeypatch: pytest.MonkeyPatch
) -> None:
    forwards = _ctrl_c_in_forward(monkeypatch, at=1)
    out = tmp_path / "first.parquet"
    with pytest.raises(JobInterrupted, match=r"interrupted after 2 texts; .* resume=True"):
        bertscope.embed_corpus(TEXTS + ["one more"], out, model=str(tiny_dirs["bert"]), batch_size=2)
    assert forwards == [2]  # the second batch was never embedded
    # Asked while the texts were read, before any forward: nothing embedded, nothing left behind.

    def texts() -> Iterator[str]:
        yield TEXTS[0]
        _ctrl_c()
        yield from TEXTS[1:]

    early = tmp_path / "early.parquet"
    with pytest.raises(JobInterrupted, match="interrupted before any text was saved; nothing was written"):
        bertscope.embed_corpus(texts(), early, model=str(tiny_dirs["bert"]), batch_size=8)
    assert forwards == [2] and not early.exists() and not (tmp_path / "early.parquet.parts").exists()


class _WaitingStdin:
    """stdin whose writer has sent two lines and not closed it: a third read would wait (here: fail)."""

    def __init__(self) -> None:
        self.buffer = self._lines()

    @staticmethod
    def _lines() -> Iterator[bytes]:
        yield b"a storm hits the coast\n"
        yield b"prices keep rising\n"
        raise AssertionError("read on after the stop: stdin waits for lines that may never come")

    def __enter__(self) -> _WaitingStdin:
        return self

    def __exit__(self, *exc: object) -> None:
        return None


def test_ctrl_c_on_stdin_stops_without_reading_on(
    tmp_path: Path, tiny_dirs: dict[str, Path], monkeypatch: pytest.MonkeyPatch
) -> None:
    """Review of 60439e1: reading the next batch before looking at the flag waits on stdin or a pipe."""
    forwards = _ctrl_c_in_forward(monkeypatch, at=1)
    monkeypatch.setattr("sys.stdin", _WaitingStdin())
    out = tmp_path / "stdin.parquet"
    with pytest.raises(JobInterrupted, match=r"^interrupted after 2 texts; everything up to there is saved"):
        bertscope.embed_corpus("-", out, model=str(tiny_dirs["bert"]), batch_size=2)
    assert forwards == [2]


# --- 3. a store made with another model names the model first ------------------------------------------


def test_another_model_is_named_before_its_fingerprint(tmp_path: Path, tiny_dirs: dict[str, Path]) -> None:
    db = tmp_path / "s.db"
    bertscope.embed_corpus(TEXTS[:2], db, model=str(tiny_dirs["bert"]))
    with pytest.raises(CorpusError) as refused:
        bertscope.embed_corpus(TEXTS[2:], db, model=str(tiny_dirs["roberta"]))
    said = str(refused.value)
    models = f"model: '{tiny_dirs['bert']}' then, '{tiny_dirs['roberta']}' now"
    assert f"made with other settings ({models}; fingerprint files.config.json: " in said, said


# --- 4. ids that are no string or number ---------------------------------------------------------------


@pytest.mark.parametrize(
    ("value", "what"),
    [("true", "a boolean (true)"), ('{"a": 1}', "an object"), ("[1]", "a list"), ("NaN", "not a finite")],
)
def test_an_id_that_is_no_string_or_number_is_refused(tmp_path: Path, value: str, what: str) -> None:
    path = tmp_path / "ids.jsonl"
    path.write_text(f'{{"id": "a", "text": "one"}}\n{{"id": {value}, "text": "two"}}\n')
    with pytest.raises(CorpusError, match=rf"ids.jsonl:2: the id field 'id' is {re.escape(what)}"):
        list(read_corpus(path, id_field="id"))
    skipped = readers.Rejects()
    assert [r.id for r in read_corpus(path, id_field="id", skip_bad=True, rejects=skipped)] == ["a"]
    assert "give every record a string or number id" in skipped.bad[0]


def test_number_ids_are_kept_as_json_writes_them(tmp_path: Path) -> None:
    path = tmp_path / "num.jsonl"
    path.write_text('{"id": 1, "text": "one"}\n{"id": 1.0, "text": "two"}\n{"id": 2.5e-3, "text": "x"}\n')
    assert [r.id for r in read_corpus(path, id_field="id")] == ["1", "1.0", "0.0025"]


# --- 6. bad bytes on stdin -----------------------------------------------------------------------------


def _stdin(monkeypatch: pytest.MonkeyPatch, data: bytes) -> None:
    """stdin as a process gets it: bytes under a text layer that decodes as a C locale's does."""
    monkeypatch.setattr("sys.stdin", io.TextIOWrapper(io.BytesIO(data), "utf-8", "surrogateescape"))


def test_bad_bytes_on_stdin_are_named_as_in_a_file(monkeypatch: pytest.MonkeyPatch) -> None:
    _stdin(monkeypatch, b"ok\nbad \xff\n")
    with pytest.raises(CorpusError) as caught:
        list(read_corpus("-"))
    said = str(caught.value)
    assert said.startswith("<stdin>:2: not UTF-8 text (invalid start byte); convert the input to UTF-8"), said
    _stdin(monkeypatch, b"\xef\xbb\xbfok\r\nbad \xff\nthird\n")
    skipped = readers.Rejects()
    assert [(r.id, r.text) for r in read_corpus("-", skip_bad=True, rejects=skipped)] == [
        ("1", "ok"),
        ("3", "third"),
    ]
    assert skipped.bad == [
        "<stdin>:2: not UTF-8 text (invalid start byte); convert the input to UTF-8 "
        "(e.g. iconv -f latin1 -t utf-8)"
    ]


# --- 5. a repeated column name in a CSV header ---------------------------------------------------------


def test_a_repeated_column_the_job_reads_is_refused(tmp_path: Path) -> None:
    path = tmp_path / "dupcol.csv"
    path.write_text("id,id,text,note,note\n1,2,hello,a,b\n")
    said = r"dupcol.csv:1: the header names 2 columns 'id' \(columns 1, 2\), the id field read; give each"
    with pytest.raises(CorpusError, match=said):
        list(read_corpus(path, id_field="id"))
    tsv = tmp_path / "dupcol.tsv"
    tsv.write_text("text\tid\ttext\nhello\t1\tworld\n")
    with pytest.raises(CorpusError, match=r"dupcol.tsv:1: .* 'text' \(columns 1, 3\), the text field read"):
        list(read_corpus(tsv, id_field="id"))
    # a repeated column the job does not read is left alone
    assert [(r.id, r.text) for r in read_corpus(path, text_field="text")] == [("1", "hello")]


# --- 7. --overwrite and the old run's .rejects ---------------------------------------------------------


@pytest.mark.parametrize("suffix", [".parquet", ".db"])
def test_overwrite_removes_the_old_runs_rejects(
    tmp_path: Path, tiny_dirs: dict[str, Path], suffix: str
) -> None:
    model = str(tiny_dirs["bert"])
    bad = tmp_path / "bad.jsonl"
    bad.write_text('{"text": "ok one"}\nnot json\n')
    out = tmp_path / f"rj{suffix}"
    rejects = Path(f"{out}.rejects")
    first = bertscope.embed_corpus(bad, out, model=model, skip_bad=True)
    assert first.rejected == 1 and rejects.read_text().startswith(f"{bad}:2: not a JSON object")
    again = bertscope.embed_corpus(TEXTS, out, model=model, skip_bad=True, overwrite=True)
    assert again.rejected == 0 and again.rejects_file is None
    assert not rejects.exists()


# --- 8. Ctrl-C while the command line's modules load ---------------------------------------------------

# A Ctrl-C at a set place in the imports, with no signal and no timing: an import hook raises
# KeyboardInterrupt where the audit's Ctrl-C met it (core/st_settings.py, imported by the first command).
_CTRL_C_IN_IMPORTS = """
import sys
class CtrlC:
    def find_spec(self, name, path=None, target=None):
        if name == "bertscope.core.st_settings":
            raise KeyboardInterrupt
sys.meta_path.insert(0, CtrlC())
how = sys.argv[1]
if how == "console":  # as the console script runs: its file is named bertscope
    sys.argv = ["/venv/bin/bertscope", "info"]
    from bertscope.cli import main
elif how == "module":  # python -m bertscope
    import runpy
    sys.argv = ["bertscope", "info"]
    runpy.run_module("bertscope", run_name="__main__", alter_sys=True)
else:  # a program importing the command line: its Ctrl-C is its own
    import bertscope.cli
"""


@pytest.mark.parametrize("how", ["console", "module"])
def test_ctrl_c_in_the_imports_exits_130_in_one_line(how: str) -> None:
    ran = subprocess.run(
        [sys.executable, "-c", _CTRL_C_IN_IMPORTS, how], capture_output=True, text=True, timeout=120
    )
    assert (ran.returncode, ran.stderr) == (130, "interrupted\n"), ran.stderr


def test_ctrl_c_importing_the_command_line_in_a_program_stays_a_keyboard_interrupt() -> None:
    ran = subprocess.run(
        [sys.executable, "-c", _CTRL_C_IN_IMPORTS, "library"], capture_output=True, text=True, timeout=120
    )
    assert ran.returncode != 130 and ran.stderr.rstrip().endswith("KeyboardInterrupt"), ran.stderr


def test_reading_a_csv_gives_the_program_its_own_field_limit_back(tmp_path: Path) -> None:
    """Review of 2d5af8d: the raised limit stayed set for the whole host program."""
    table = tmp_path / "t.csv"
    table.write_text("id,text\n1,hello\n2,world\n")
    before = csv.field_size_limit()
    assert [r.text for r in read_corpus(table, id_field="id")] == ["hello", "world"]
    assert csv.field_size_limit() == before
