"""A resumed corpus job goes on only with the options and the input it was started with; bad input's
advice names only the flags its caller has."""

from __future__ import annotations

import io
import json
from collections.abc import Iterator
from contextlib import contextmanager
from pathlib import Path
from typing import Any

import numpy as np
import pyarrow.parquet as pq
import pytest

import bertscope
from bertscope.io.readers import read_corpus, read_lines
from bertscope.io.sinks import NpySink, ParquetSink

TEXTS = [f"text number {n} about {topic}" for n, topic in enumerate(["rain", "bread", "banks"] * 4, 1)]
BATCH = 3  # 12 texts: 4 parts, the job stopped after 2


class _Killed(Exception):
    """Stands for a kill between two parts: the parts written before it stay."""


@contextmanager
def _killed_after(parts: int) -> Iterator[None]:
    """Every sink's write fails once `parts` parts are saved, as a kill there would leave the job."""
    with pytest.MonkeyPatch.context() as patch:
        for sink in (ParquetSink, NpySink):

            def write(self: Any, records: list[Any], rows: Any, _original: Any = sink.write) -> None:
                if len(self.files) >= parts:
                    raise _Killed
                _original(self, records, rows)

            patch.setattr(sink, "write", write)
        with pytest.raises(_Killed):
            yield


def _stopped(source: Any, target: Path, model: bertscope.Model) -> None:
    """An unfinished job for `target`: 2 of its parts saved."""
    with _killed_after(2):
        bertscope.embed_corpus(source, target, model=model, batch_size=BATCH)
    assert len(list(target.with_name(target.name + ".parts").glob("part-*.done"))) == 2


def _txt(path: Path, texts: list[str]) -> Path:
    path.write_text("".join(t + "\n" for t in texts))
    return path


def test_resume_with_texts_left_out_is_refused_at_start(tmp_path: Path, bundled: bertscope.Model) -> None:
    source, target = _txt(tmp_path / "in.txt", TEXTS), tmp_path / "out.parquet"
    _stopped(source, target, bundled)
    parts = sorted(target.with_name("out.parquet.parts").glob("part-*"))
    with pytest.raises(bertscope.CorpusError, match=r"other settings \(keep_text: True then, False now\)"):
        bertscope.embed_corpus(source, target, model=bundled, batch_size=BATCH, resume=True, keep_text=False)
    assert sorted(target.with_name("out.parquet.parts").glob("part-*")) == parts  # nothing embedded
    bertscope.embed_corpus(source, target, model=bundled, batch_size=BATCH, resume=True)
    rows = pq.read_table(target).to_pydict()
    assert rows["text"] == TEXTS and rows["id"] == [str(n) for n in range(1, 13)]
    assert json.loads(pq.read_schema(target).metadata[b"bertscope"])["keep_text"] is True


def test_parts_of_an_older_job_are_never_mixed_with_other_columns(
    tmp_path: Path, bundled: bertscope.Model
) -> None:
    """A job whose saved settings predate keep_text: the first new part is compared with the saved ones."""
    source, target = _txt(tmp_path / "in.txt", TEXTS), tmp_path / "out.parquet"
    _stopped(source, target, bundled)
    state = target.with_name("out.parquet.parts") / "settings.json"
    state.write_text(json.dumps({k: v for k, v in json.loads(state.read_text()).items() if k != "keep_text"}))
    with pytest.raises(bertscope.CorpusError, match="this run's part holds the columns id, embedding"):
        bertscope.embed_corpus(source, target, model=bundled, batch_size=BATCH, resume=True, keep_text=False)
    assert len(list(target.with_name("out.parquet.parts").glob("part-*.parquet"))) == 2
    bertscope.embed_corpus(source, target, model=bundled, batch_size=BATCH, resume=True)
    assert pq.read_table(target).column("text").to_pylist() == TEXTS


@pytest.mark.parametrize("suffix", [".parquet", ".npy"])
def test_resume_from_another_input_is_refused(suffix: str, tmp_path: Path, bundled: bertscope.Model) -> None:
    source, target = _txt(tmp_path / "in.txt", TEXTS), tmp_path / f"out{suffix}"
    _stopped(source, target, bundled)
    _txt(source, TEXTS[::-1])  # the same ids (line numbers), other texts
    with pytest.raises(bertscope.CorpusError) as refused:
        bertscope.embed_corpus(source, target, model=bundled, batch_size=BATCH, resume=True)
    message = str(refused.value)
    assert message.startswith(f"{source}:1-3: these records are not the ones the unfinished job for {target}")
    assert "--overwrite" in message and "\n" not in message
    _txt(source, TEXTS + ["one more text at the end"])  # the input it started from, grown: goes on exactly
    bertscope.embed_corpus(source, target, model=bundled, batch_size=BATCH, resume=True)
    whole = bundled.embed([*TEXTS, "one more text at the end"]).vectors
    if suffix == ".parquet":
        rows = pq.read_table(target).to_pydict()
        assert rows["text"] == [*TEXTS, "one more text at the end"]
        vectors = np.array(rows["embedding"])
    else:
        assert target.with_suffix(".ids.txt").read_text().split() == [str(n) for n in range(1, 14)]
        vectors = np.load(target)
    np.testing.assert_allclose(vectors, whole, atol=1e-5)


def test_resume_from_another_stdin_or_fewer_texts_is_refused(
    tmp_path: Path, bundled: bertscope.Model, monkeypatch: pytest.MonkeyPatch
) -> None:
    target = tmp_path / "out.parquet"
    monkeypatch.setattr("sys.stdin", io.StringIO("".join(t + "\n" for t in TEXTS)))
    _stopped("-", target, bundled)
    monkeypatch.setattr("sys.stdin", io.StringIO("".join(t + "\n" for t in TEXTS[:3] + TEXTS[4:])))
    with pytest.raises(bertscope.CorpusError, match=r"^<stdin>:4-6: these records are not the ones"):
        bertscope.embed_corpus("-", target, model=bundled, batch_size=BATCH, resume=True)
    with pytest.raises(
        bertscope.CorpusError, match=r"fewer texts \(4\) than the unfinished job already wrote"
    ):
        bertscope.embed_corpus(TEXTS[:4], target, model=bundled, batch_size=BATCH, resume=True)
    monkeypatch.setattr("sys.stdin", io.StringIO("".join(t + "\n" for t in TEXTS)))
    bertscope.embed_corpus("-", target, model=bundled, batch_size=BATCH, resume=True)
    assert pq.read_table(target).column("text").to_pylist() == TEXTS


def test_not_utf8_advises_skip_bad_only_where_the_caller_has_it(
    tmp_path: Path, bundled: bertscope.Model
) -> None:
    source = tmp_path / "latin.txt"
    source.write_bytes("fine\ncaf\xe9\n".encode("latin-1"))
    for reading in (lambda: list(read_lines(source)), lambda: list(read_corpus(source))):
        with pytest.raises(bertscope.CorpusError) as refused:
            reading()
        assert str(refused.value).endswith("latin.txt:2: not UTF-8 text (invalid continuation byte); "
                                           "convert the file to UTF-8 "
                                           "(e.g. iconv -f latin1 -t utf-8)")  # fmt: skip
    with pytest.raises(bertscope.CorpusError, match=r"-t utf-8\) \(--skip-bad sets such"):
        bertscope.embed_corpus(source, tmp_path / "out.parquet", model=bundled)
    summary = bertscope.embed_corpus(source, tmp_path / "out.parquet", model=bundled, skip_bad=True)
    assert (summary.embedded, summary.rejected) == (1, 1)


def test_a_resumed_aggregation_proves_its_input(tmp_path: Path, bundled: bertscope.Model) -> None:
    """`static --from-corpus --checkpoint --resume` keeps the digest of the texts it read with its sums:
    a changed input is refused (it would count some words twice and others never); the same input
    resumes to the uninterrupted result."""
    from bertscope.research.aggregate import AggregateSink

    corpus, checkpoint = _txt(tmp_path / "in.txt", TEXTS), tmp_path / "state"
    with pytest.MonkeyPatch.context() as patch:
        original = AggregateSink.write

        def write(self: Any, records: list[Any], rows: Any) -> None:
            if self.done >= 2 * BATCH:
                raise _Killed
            original(self, records, rows)

        patch.setattr(AggregateSink, "write", write)
        with pytest.raises(_Killed):
            bundled.static_from_corpus(corpus, layers=1, batch_size=BATCH, checkpoint=checkpoint)
    _txt(corpus, TEXTS[::-1])
    with pytest.raises(bertscope.CorpusError, match="these records are not the ones"):
        bundled.static_from_corpus(corpus, layers=1, batch_size=BATCH, checkpoint=checkpoint, resume=True)
    _txt(corpus, TEXTS)
    resumed = bundled.static_from_corpus(
        corpus, layers=1, batch_size=BATCH, checkpoint=checkpoint, resume=True
    )
    whole = bundled.static_from_corpus(TEXTS, layers=1, batch_size=BATCH)
    assert resumed.words == whole.words and resumed.counts.tolist() == whole.counts.tolist()
    np.testing.assert_allclose(resumed.vectors, whole.vectors, atol=1e-6)
