"""A resumed .npy job refuses a part whose `.done` marker lost the checksums that the job's earlier parts,
or its settings' row checks, say were written: edited vectors and ids never go into a finished store with
fresh checksums. A job whose parts were all saved before checksums still resumes."""

from __future__ import annotations

import json
from pathlib import Path

import numpy as np
import pyarrow as pa
import pytest

from bertscope.errors import CorpusError
from bertscope.io.levels import Rows
from bertscope.io.readers import Record
from bertscope.io.sinks import NpySink
from bertscope.io.stores import open_store

DIM = 8
SETTINGS = {"model": "synthetic", "layers": [6], "pooling": "mean"}
BATCH = 4


def _write(sink: NpySink, first: int) -> None:
    """One part of BATCH rows: ids r{first}.., vectors whose first value is the row number."""
    vectors = np.random.default_rng(first).standard_normal((BATCH, DIM)).astype(np.float32)
    vectors[:, 0] = np.arange(first, first + BATCH)
    records = [Record(f"r{n}", f"text {n}", n + 1) for n in range(first, first + BATCH)]
    table = pa.table(
        {
            "id": [r.id for r in records],
            "text": [r.text for r in records],
            "embedding": pa.FixedSizeListArray.from_arrays(pa.array(vectors.reshape(-1)), DIM),
        }
    )
    sink.write(records, Rows(table, BATCH, BATCH, 0))


def _stopped(path: Path, parts: int = 3) -> Path:
    """An unfinished job for `path` (as a kill leaves one): `parts` parts saved, the output not joined."""
    sink = NpySink(path, settings=SETTINGS, resume=False, overwrite=False)
    for part in range(parts):
        _write(sink, part * BATCH)
    return path.with_name(path.name + ".parts")


def _strip(parts: Path, number: int, *, edit: bool = True) -> None:
    """Pop the checksums from a part's marker; with `edit`, swap two of its rows and rename an id."""
    marker = parts / f"part-{number:06d}.done"
    kept = json.loads(marker.read_text())
    marker.write_text(json.dumps({k: v for k, v in kept.items() if k not in ("embedding", "labels")}))
    if edit:
        part = parts / f"part-{number:06d}.npy"
        vectors = np.load(part)
        np.save(part, vectors[[1, 0, 2, 3]])
        ids = parts / f"part-{number:06d}.ids.txt"
        ids.write_text(ids.read_text().replace(f"r{number * BATCH + 2}\n", "LAUNDERED-ID\n"))


def _resume(path: Path) -> NpySink:
    return NpySink(path, settings=SETTINGS, resume=True, overwrite=False)


def test_a_part_stripped_after_parts_with_checksums_is_refused(tmp_path: Path) -> None:
    path = tmp_path / "job.npy"
    parts = _stopped(path)
    _strip(parts, 1)
    with pytest.raises(CorpusError) as refused:
        _resume(path)
    message = str(refused.value)
    assert "\n" not in message
    assert f"{parts / 'part-000001.done'} keeps no embedding, labels checksums" in message
    assert "earlier parts keep" in message and "--overwrite" in message
    assert not path.exists()


def test_the_first_part_stripped_is_refused_by_the_jobs_row_checks(tmp_path: Path) -> None:
    path = tmp_path / "job.npy"
    parts = _stopped(path)
    assert json.loads((parts / "settings.json").read_text())["row_checks"] >= 1
    _strip(parts, 0)
    with pytest.raises(
        CorpusError, match=r"part-000000\.done keeps no embedding, labels checksums.*row checks"
    ):
        _resume(path)
    # Every marker stripped (the job then reads as one saved before checksums): still refused.
    for number in (1, 2):
        _strip(parts, number, edit=False)
    with pytest.raises(CorpusError, match=r"part-000000\.done keeps no"):
        _resume(path)


def test_a_label_checksum_stripped_alone_is_refused_at_the_join(tmp_path: Path) -> None:
    path = tmp_path / "job.npy"
    parts = _stopped(path)
    marker = parts / "part-000002.done"
    kept = json.loads(marker.read_text())
    marker.write_text(json.dumps({k: v for k, v in kept.items() if k != "labels"}))
    with pytest.raises(CorpusError, match=r"part-000002\.done keeps no labels checksum"):
        _resume(path)


def test_a_job_saved_before_checksums_still_resumes(tmp_path: Path) -> None:
    """Parts whose markers are plain counts, in a job whose settings say no row checks, go on; a part
    written after them by this bertscope keeps its checksums, and the finished store reads."""
    path = tmp_path / "old.npy"
    parts = _stopped(path, parts=2)
    state = parts / "settings.json"
    state.write_text(
        json.dumps({k: v for k, v in json.loads(state.read_text()).items() if k != "row_checks"})
    )
    for number in (0, 1):
        (parts / f"part-{number:06d}.done").write_text(str(BATCH))
    sink = _resume(path)
    assert sink.done == 2 * BATCH
    _write(sink, 2 * BATCH)
    sink.finish()
    ids, _, vectors = next(open_store(path).chunks())
    assert ids == [f"r{n}" for n in range(3 * BATCH)] and vectors[:, 0].tolist() == list(range(3 * BATCH))
    # The legitimate upgrade (old parts, then new ones with checksums) is not a strip; a new part stripped
    # after the new ones is.
    path = tmp_path / "mixed.npy"
    parts = _stopped(path, parts=3)
    state = parts / "settings.json"
    state.write_text(
        json.dumps({k: v for k, v in json.loads(state.read_text()).items() if k != "row_checks"})
    )
    (parts / "part-000000.done").write_text(str(BATCH))
    _resume(path)
    _strip(parts, 2)
    with pytest.raises(CorpusError, match=r"part-000002\.done keeps no embedding, labels checksums"):
        _resume(path)
