"""A Ray job's output folder: Parquet shards `part-RRR-TTTTTT.parquet` (run, write task) with the local
Parquet sink's schema, metadata and per-row-group checksums, and `_bertscope.json` written last by a
finished job: a folder of shards without it holds a job that did not finish.

A job resumes as the local one does (`--resume`): beside each shard, `_resume/<shard>.json` lists the
units (`units.Unit`) its rows belong to, in row order, written before the shard is renamed into place.
A resumed job keeps the units whose rows the saved shards hold in full (their vectors checked against
their checksums), takes the rows of any other unit out of the shards that hold some of them (a unit cut
across two write tasks, one of them lost), refuses other settings than the saved shards', and writes
its own shards as the next run. A finished job's `_resume/` is removed after its manifest is written.
"""

from __future__ import annotations

import hashlib
import json
import os
import shutil
import time
from collections import Counter
from collections.abc import Iterable, Iterator
from contextlib import contextmanager, suppress
from pathlib import Path
from typing import Any

from ..errors import CorpusError, InvalidInput
from ..io.checksums import vector_names
from ..io.parquet_checked import CheckedParquet, write_checked
from ..io.parquet_sink import PARQUET_META_KEY
from ..io.parts_sink import write_settings
from ..io.sink_settings import going_on, settings_diff, settings_differ
from .units import UNIT, Unit

__all__ = [
    "MANIFEST",
    "RESUME",
    "ShardFolder",
    "abandoned_if_unwritten",
    "beside",
    "finish_swap",
    "open_folder",
    "shard_sink",
    "swap_in",
    "write_manifest",
]

# Written last by a finished job, beside its shards; the leading _ keeps Parquet readers of the folder
# (pyarrow, Ray, Spark) from taking it (or the _resume folder) for data.
MANIFEST = "_bertscope.json"
RESUME = "_resume"
# The settings a job started with, in `RESUME`: written before its first shard
_STARTED = "settings.json"
_SHARD_BYTES = 128 << 20  # the rows a write task gathers into one shard: Ray's default largest block
_REDO = "start the job again with overwrite=True (--overwrite)"


class ShardFolder:
    """The output folder of a new or resumed Ray job: the shards it keeps and the units they hold."""

    def __init__(self, out: Path) -> None:
        self.out = out
        self.kept: list[Path] = []
        self.done: dict[int, list[Unit]] = {}  # the units whose rows are saved, by input number
        self.records = 0  # the records those units cover
        self.run = 0  # the number in this run's shard names

    def load(self) -> None:
        """Read what an unfinished job saved: its whole units, each shard checked; the rest taken out."""
        import pyarrow.parquet as pq

        for stale in [*self.out.glob("part-*.parquet.tmp"), *(self.out / RESUME).glob("*.tmp")]:
            stale.unlink()  # a write (or a taking out) a kill stopped
        shards = {p.stem: p for p in sorted(self.out.glob("part-*.parquet"))}
        recorded = {p.stem: p for p in (self.out / RESUME).glob("part-*.json")}
        for name in recorded.keys() - shards.keys():  # written just before a shard that never was
            recorded[name].unlink()
        runs = [int(name.split("-")[1]) for name in shards if name.count("-") == 2]
        self.run = max(runs, default=-1) + 1
        segments: dict[str, list[tuple[str, int]]] = {}
        for name, shard in shards.items():
            if name not in recorded:
                raise CorpusError(
                    f"{shard}: a shard of a Ray job that kept no record of its rows (written before Ray "
                    f"jobs could resume), so the job cannot be resumed exactly; {_REDO}"
                )
            segments[name] = [(k, int(n)) for k, n in json.loads(recorded[name].read_text())["units"]]
            if sum(n for _, n in segments[name]) != pq.read_metadata(shard).num_rows:
                raise CorpusError(f"{shard}: its rows are not the ones {RESUME}/{name}.json lists; {_REDO}")
        totals: Counter[str] = Counter()
        for parts in segments.values():
            for key, rows in parts:
                totals[key] += rows
        whole = {key for key, rows in totals.items() if Unit.parse(key).rows == rows}
        for number, (name, shard) in enumerate(shards.items()):
            whole_shard = all(key in whole for key, _ in segments[name])
            kept = shard if whole_shard else self._take_out(shard, segments[name], whole, number)
            if kept is not None:
                _check(kept)
                self.kept.append(kept)
        for unit in map(Unit.parse, whole):
            self.done.setdefault(unit.source, []).append(unit)
            self.records += unit.records

    def _take_out(
        self, shard: Path, segments: list[tuple[str, int]], whole: set[str], number: int
    ) -> Path | None:
        """The shard without the rows of units it holds only some of, written as a shard of this run (a
        kill before the old one is removed leaves those units twice: neither counts, both are redone)."""
        import numpy as np
        import pyarrow.parquet as pq

        kept, starts = [(k, n) for k, n in segments if k in whole], np.cumsum([0, *(n for _, n in segments)])
        rows = [np.arange(s, s + n) for (k, n), s in zip(segments, starts, strict=False) if k in whole]
        new = None
        if kept:
            _check(shard)
            table = pq.read_table(shard).take(np.concatenate(rows))
            new = self.out / f"part-{self.run:03d}-k{number:05d}.parquet"
            tmp = new.with_name(new.name + ".tmp")
            write_checked(tmp, [table], pq.read_schema(shard))
            _record(self.out, new, kept)
            os.replace(tmp, new)
        shard.unlink()
        (self.out / RESUME / f"{shard.stem}.json").unlink()
        return new

    def settled(self, schema: Any, settings: dict[str, Any]) -> Any:
        """The schema this run writes: the kept shards' own, refused where their settings or columns
        differ from the asked ones (`settings`, which `schema` holds in its metadata)."""
        import pyarrow.parquet as pq

        # The settings a job started with are kept before its first shard: a job killed before it wrote
        # one is resumed with the same settings only, as the local job is (its part folder's settings).
        started = self.out / RESUME / _STARTED
        if started.exists():
            _refuse_other_settings(self.out, json.loads(started.read_text()), settings)
        if not self.kept:
            if not started.exists():
                write_settings(started, settings, self.out, fix=": fix that, then run it again")
            return schema
        saved = pq.read_schema(self.kept[0])
        # Compared as the local job compares them: the settings alone, without what the metadata adds
        # (the vector width, which the columns show, and any digest of the settings themselves).
        added = json.loads(schema.metadata[PARQUET_META_KEY]).keys() - settings.keys()
        stored = {k: v for k, v in json.loads(saved.metadata[PARQUET_META_KEY]).items() if k not in added}
        _refuse_other_settings(self.out, stored, {k: v for k, v in settings.items() if k not in added})
        if not started.exists():  # a job saved before it kept them: its shards' settings, proven above
            write_settings(started, settings, self.out, fix=": fix that, then run it again with --resume")
        if not saved.remove_metadata().equals(schema.remove_metadata()):
            raise CorpusError(
                f"{self.out}: the saved shards hold the columns {', '.join(saved.names)} where this run "
                f"writes {', '.join(schema.names)}; resume with the options it was started with "
                "(--no-text leaves the text out), or start again with overwrite=True (--overwrite)"
            )
        return saved


def _refuse_other_settings(out: Path, stored: dict[str, Any], asked: dict[str, Any]) -> None:
    """Refuse to resume an unfinished job with settings other than those it was started with."""
    if settings_differ(stored, asked):
        raise CorpusError(
            f"{out}: the unfinished job was started with other settings ({settings_diff(stored, asked)}); "
            + going_on(stored, asked)
        )


def open_folder(out: Path, *, resume: bool, overwrite: bool) -> ShardFolder:
    """A Ray job's output folder, refused as the local job refuses its output: a finished job's without
    --overwrite, an unfinished one's without --resume or --overwrite."""
    if out.suffix.lower() in (".parquet", ".npy", ".db", ".sqlite", ".sqlite3"):
        raise InvalidInput(f"{out}: the Ray engine writes a folder of Parquet shards; name a folder")
    if not out.parent.exists():
        raise CorpusError(f"cannot write {out}: the folder {out.parent} does not exist")
    old = sorted(out.glob("part-*.parquet*"))
    manifest, state = out / MANIFEST, out / RESUME
    if overwrite and (old or manifest.exists() or state.exists()):
        # The old job's output stays whole until this one is (`swap_in`): this run writes beside it.
        staging = beside(out)
        shutil.rmtree(staging, ignore_errors=True)  # an earlier replacement that was stopped
        staging.mkdir()
        (staging / RESUME).mkdir()
        return ShardFolder(staging)
    if manifest.exists():  # (with overwrite, nothing of a job's is there by now)
        if resume:
            raise CorpusError(
                f"{out} is already complete: nothing to resume (overwrite=True (--overwrite) redoes it)"
            )
        note = shard_folder_note(out) or f"{out} holds the output of an earlier job"
        raise CorpusError(f"{note}; pass overwrite=True (--overwrite) to replace it")
    elif (old or state.exists()) and not resume:
        note = shard_folder_note(out) or f"{out} holds a Ray job that wrote no shard"
        raise CorpusError(
            f"{note}; pass resume=True (--resume) to continue it or overwrite=True (--overwrite) to start "
            "again"
        )
    out.mkdir(exist_ok=True)
    folder = ShardFolder(out)
    if resume:
        folder.load()
    state.mkdir(exist_ok=True)
    return folder


def beside(out: Path) -> Path:
    """The hidden folder beside `out` where a job that replaces `out`'s output writes, till it is whole."""
    return out.with_name(f".{out.name}.new")


def _job_entry(name: str) -> bool:
    """Whether a file or folder in a job's output is the job's own (its shards, manifest, resume records)."""
    return name.startswith("part-") or name in (MANIFEST, RESUME, MANIFEST + ".tmp")


def _replaced(out: Path) -> Path:
    """The hidden folder beside `out` that holds the replaced job's output while `swap_in` runs."""
    return out.with_name(f".{out.name}.old")


def swap_in(new: Path, out: Path) -> None:
    """Put a finished replacement (`beside(out)`, with its manifest) in the old job's place: the old
    shards, manifest and resume records go only now; other files in `out` (not the job's) stay in it.

    Each step leaves a state `finish_swap` completes: a process stopped between the renames loses neither
    output, nor the user's files (they stay with the old output until the new one is in place)."""
    replaced = _replaced(out)
    shutil.rmtree(replaced, ignore_errors=True)
    os.replace(out, replaced)
    os.replace(new, out)
    _users_files_kept(replaced, out)


def _users_files_kept(replaced: Path, out: Path) -> None:
    """Move the files that are not the job's from the replaced output into `out`, then drop the rest."""
    for entry in replaced.iterdir():
        if not _job_entry(entry.name) and not (out / entry.name).exists():
            os.replace(entry, out / entry.name)
    shutil.rmtree(replaced, ignore_errors=True)


def finish_swap(out: Path) -> str | None:
    """Complete a replacement a stopped process left half done (run before anything reads `out`): what it
    did, or None where there was nothing to do. A replacement whose manifest was written is finished, so it
    goes in place; an unfinished one stays hidden beside `out` for the next --overwrite to drop."""
    new, replaced = beside(out), _replaced(out)
    finished = f"{out}: put in place the finished replacement an earlier run stopped while swapping it in"
    if (new / MANIFEST).is_file() and out.exists() and not replaced.exists():
        swap_in(new, out)  # stopped before its first rename
        return finished
    if (new / MANIFEST).is_file() and not out.exists():
        os.replace(new, out)  # stopped between its renames: the replaced output waits beside it
        if replaced.is_dir():
            _users_files_kept(replaced, out)
        return finished
    if not out.exists() and replaced.is_dir():
        os.replace(replaced, out)
        return f"{out}: put back the output that an earlier run stopped while replacing it"
    if out.is_dir() and replaced.is_dir():
        _users_files_kept(replaced, out)  # stopped before the user's files moved over
        return finished
    return None


@contextmanager
def abandoned_if_unwritten(out: Path, *, made: bool) -> Iterator[None]:
    """A job that fails (or is stopped) before a shard is in place leaves nothing to trip the next run,
    as the local job leaves nothing: its resume records and unfinished shards go, and the folder too
    where this job `made` it. A folder holding a shard keeps everything, for --resume."""
    try:
        yield
    except BaseException:
        if not any(out.glob("part-*.parquet")):
            shutil.rmtree(out / RESUME, ignore_errors=True)
            for tmp in out.glob("part-*.parquet.tmp"):
                tmp.unlink(missing_ok=True)
            if made:
                with suppress(OSError):
                    out.rmdir()  # only if empty: whatever else is there is not this job's
        raise


def shard_folder_note(path: str | Path) -> str | None:
    """What a Ray job's output folder (or a shard in one) holds, for a reader to say; None for other paths.

    A folder of `part-*.parquet` shards with `_bertscope.json` holds a finished job; without it, a job
    that was stopped or failed (or written before bertscope marked finished jobs), whose shards are
    some of its rows, not all. A job's folder without a shard says which of the two it holds.
    """
    path = Path(path)
    folder = path if path.is_dir() else path.parent
    shards = sorted(folder.glob("part-*.parquet"))  # finished: a shard is renamed from .tmp once whole
    writing = sorted(folder.glob("part-*.parquet.tmp"))  # half-written, never read
    half = f"; {len(writing)} half-written, not read" if writing else ""
    if path.is_dir() and not shards and (folder / MANIFEST).exists():
        return f"{folder} holds a finished Ray job that wrote no rows (no part-*.parquet shard)"
    if path.is_dir() and not shards and (folder / RESUME).is_dir():
        return (
            f"{folder} holds a Ray job that wrote no shard (no part-*.parquet: it was stopped or failed "
            f"before its first{half})"
        )
    if not (path.is_dir() or path.name.startswith("part-")) or not (shards or writing):
        return None
    if (folder / "settings.json").exists():  # a local job's part folder, which says its own state
        return None
    if (folder / MANIFEST).exists():
        return (
            None if path.is_file() else f"{folder} holds a finished Ray job of {len(shards)} Parquet shard(s)"
        )
    what = f"a shard of {folder}, which holds" if path.is_file() else f"{folder} holds"
    return (
        f"{what} {len(shards)} shard(s) of a Ray job that did not finish (no {MANIFEST}: it was stopped "
        f"or failed{half}), so some rows are missing"
    )


def shard_sink(out: Path, schema: Any, run: int) -> Any:
    """A Ray datasink: each write task writes one shard `part-<run>-<task>.parquet` with the local schema
    and checksums, of about 128 MiB (a small job's rows in one), and the units its rows belong to."""
    from ray.data import Datasink
    from ray.data.block import BlockAccessor

    class BertscopeShards(Datasink):
        @property
        def min_bytes_per_write(self) -> int:
            # Ray would write a shard per few batches (thousands of small files for a big corpus)
            return _SHARD_BYTES

        def write(self, blocks: Iterable[Any], ctx: Any) -> None:
            # Named by run and task, written under a temporary name: a retried task replaces its shard.
            part = out / f"part-{run:03d}-{ctx.task_idx:06d}.parquet"
            tmp = part.with_name(part.name + ".tmp")
            units: list[tuple[str, int]] = []

            def tables() -> Iterable[Any]:
                for block in blocks:
                    table = BlockAccessor.for_block(block).to_arrow()
                    if table.num_rows:
                        units.extend(_segments(table.column(UNIT)))
                        # The level's columns in its order and types (extra columns dropped), settings kept.
                        yield table.select(schema.names).cast(schema)

            if write_checked(tmp, tables(), schema):
                _record(out, part, units)
                os.replace(tmp, part)

    return BertscopeShards()


def write_manifest(out: Path, source: str | list[str], counts: dict[str, Any], schema: Any) -> None:
    """Mark the job finished: what it read, what it wrote, and the digest of the shards' settings; then
    drop what only a resumed job reads."""
    shards = sorted(out.glob("part-*.parquet"))
    manifest = {
        "finished": time.strftime("%Y-%m-%dT%H:%M:%S%z"),
        "inputs": source if isinstance(source, str) else f"{len(source)} texts",
        **counts,
        "shards": [s.name for s in shards],
        # sha256 of the `bertscope` metadata every shard holds: a shard from another job differs
        "settings_digest": hashlib.sha256(schema.metadata[PARQUET_META_KEY]).hexdigest(),
    }
    tmp = out / (MANIFEST + ".tmp")
    tmp.write_text(json.dumps(manifest, indent=1) + "\n")
    os.replace(tmp, out / MANIFEST)
    shutil.rmtree(out / RESUME, ignore_errors=True)


def _segments(column: Any) -> list[tuple[str, int]]:
    """(unit key, rows) of each run of equal keys in a column, in row order."""
    import pyarrow.compute as pc

    runs = pc.run_end_encode(column.combine_chunks())
    ends = runs.run_ends.to_pylist()
    return [
        (k, end - start) for k, start, end in zip(runs.values.to_pylist(), [0, *ends], ends, strict=False)
    ]


def _record(out: Path, shard: Path, units: list[tuple[str, int]]) -> None:
    """Write which units a shard's rows belong to (before the shard itself is in place)."""
    path = out / RESUME / f"{shard.stem}.json"
    tmp = path.with_name(path.name + ".tmp")
    tmp.write_text(json.dumps({"units": units}))
    os.replace(tmp, path)


def _check(shard: Path) -> None:
    """Refuse a saved shard whose vectors fail their checksums (or are not finite)."""
    checked = CheckedParquet(shard, rebuild=_REDO)
    names = vector_names(checked.file.schema_arrow)
    for group in range(checked.file.metadata.num_row_groups):
        checked.group(group, names)
