"""A corpus read into Ray: bertscope's own readers inside Ray read tasks, so ids equal the local job's.

Ids: a single input gives the local ids (line or row number, or --id-field); several inputs (a glob)
give `<file stem>:<line or row>`, or the --id-field values as they are (unique across files is the
caller's promise). The read tasks hand on blocks of about a batch of rows (Ray would join a file's rows
into one block, and one block reaches one actor). A numbered read (a corpus job's) adds each record's
input and number (`units`), and a resumed one reads past the records its saved shards hold; a located
one (a bertscope job's own) adds each record's FILE:LINE, which the job's actors name a refusal by.
A job's read tasks count the empty texts they pass over, each writing its input's count to a small file
in the job's folder (`empty_texts` sums them): the driver never reads the corpus a second time.
"""

from __future__ import annotations

import glob
import json
import math
import os
from collections.abc import Iterable, Iterator, Mapping
from pathlib import Path
from typing import Any

from ..errors import CorpusError, InvalidInput
from ..io.job import nothing_to_embed
from ..io.levels import missing_field
from ..io.parts_sink import atomic_write_text
from ..io.readers import Record, Rejects, read_corpus, source_name
from .cluster import IO_CPUS, import_ray
from .units import RECORD, SOURCE, WHERE, Unit, skip_done

__all__ = [
    "input_sources",
    "corpus_dataset",
    "corpus_datasource",
    "source_prefix",
    "Numbered",
    "refuse_unfit_dataset",
    "refuse_empty_corpus",
    "empty_texts",
]

# A numbered read: the units done per input (by its number), and the output they were written to.
Numbered = tuple[Mapping[int, list[Unit]], Path]
_EMPTY = "empty-{:05d}.json"  # an input's count of empty texts, written by its read task once read whole


def input_sources(source: str | list[str]) -> list[Any]:
    """The inputs a Ray job reads: a list of texts as one source, or the files a path or glob names."""
    if isinstance(source, list):
        return [source]
    if source == "-":
        raise InvalidInput("the Ray engine reads files, not stdin; write the texts to a file first")
    paths = sorted(glob.glob(source)) if glob.has_magic(source) else [source]
    if not paths:
        raise CorpusError(f"{source}: no file matches")
    seen: dict[str, str] = {}
    for path in paths:
        first = seen.setdefault(Path(path).stem, path)
        if first != path:
            raise CorpusError(
                f"{source}: {first} and {path} share the name stem {Path(path).stem!r}, so their "
                "'<stem>:<row>' ids would clash; rename one, or give ids of your own with id_field= "
                "(--id-field)"
            )
    for path in paths:
        read_corpus(path)  # checks existence and type now, on the driver; records are read lazily
    return paths


def refuse_empty_corpus(
    source: str | list[str], sources: list[Any], output: Path, *, text_field: str, id_field: str | None
) -> None:
    """CorpusError, in the local job's words, where no input holds a text: read up to the first text
    (an empty corpus has none; a bad record before it is refused here, as the reader would)."""
    rejects = Rejects()
    for input_ in sources:
        if next(read_corpus(input_, text_field=text_field, id_field=id_field, rejects=rejects), None):
            return
    raise CorpusError(nothing_to_embed(source, output, rejects, text_field=text_field))


def refuse_unfit_dataset(dataset: Any, text_field: str, *, needs_id: bool) -> None:
    """Refuse, before any actor starts, a dataset whose schema Ray knows without running it (read from
    Parquet, made from items) and that has no `text_field` (or no `id` where the level needs one), or
    whose `text_field` holds no text (numbers, bytes, lists). A dataset whose schema only running it
    tells is checked batch by batch by the actors, alike (`bertscope.io.levels.arrow_texts`)."""
    import pyarrow as pa

    schema = getattr(dataset.schema(fetch_if_missing=False), "base_schema", None)
    if not isinstance(schema, pa.Schema):
        return
    if text_field not in schema.names:
        raise InvalidInput(missing_field(text_field, schema.names, "name the text column with text_field="))
    if needs_id and "id" not in schema.names:
        raise InvalidInput(
            missing_field("id", schema.names, "give each row an id (this level's rows name it)")
        )
    kind = schema.field(text_field).type
    if not _texts_type(kind):
        raise InvalidInput(
            f"field {text_field!r} is a {kind} column, not text: give a column of strings (cast it), "
            "or name the text column with text_field="
        )


def _texts_type(kind: Any) -> bool:
    """Whether an Arrow column of this type can hold texts: strings, nulls, or Python objects (checked
    per value); a dictionary of strings."""
    import pyarrow as pa

    if pa.types.is_dictionary(kind):
        return _texts_type(kind.value_type)
    plain = (pa.types.is_string, pa.types.is_large_string, pa.types.is_null)
    view = getattr(pa.types, "is_string_view", None)
    return (
        any(test(kind) for test in plain) or bool(view and view(kind)) or isinstance(kind, pa.ExtensionType)
    )


def corpus_dataset(
    sources: list[Any],
    text_field: str,
    id_field: str | None,
    rows: int,
    *,
    tokenizer: Any = None,
    numbered: Numbered | None = None,
    located: bool = False,
    empties: Path | None = None,
) -> Any:
    """A Ray Dataset of the inputs' `id` and `text` columns, in blocks of about `rows` rows.

    Ray joins the tables a read task yields into blocks of up to 128 MiB, and an actor pool hands one
    block to one actor: a single input file would reach a single actor. Asking Ray for one block per
    `rows` rows (counted from Parquet metadata, estimated from the first MiB of a text file) has it cut
    each read task's blocks so; how many does not change the rows or their ids. `tokenizer` (the model's)
    makes a text it gives no word pieces a bad record, named by FILE:LINE as the local job names it.
    `numbered` (a corpus job's units done, and its output) adds the `_source` and `_record` columns and
    skips the records of the units done. `located` adds each row's FILE:LINE in a `_where` column, which
    the actors of `embed_dataset(..., located=True)` read (a refusal names it, as the local job's) and drop.
    `empties` (a folder every node writes to: the job's own) gets each input's count of empty texts once
    its read task has read it whole, for `empty_texts`.
    """
    ray = import_ray()
    blocks = sum(max(1, math.ceil(_estimated_rows(s) / rows)) for s in sources)
    datasource = corpus_datasource(
        sources, text_field, id_field, rows, tokenizer=tokenizer, numbered=numbered, located=located,
        empties=empties,
    )  # fmt: skip
    return ray.data.read_datasource(
        datasource,
        num_cpus=IO_CPUS,
        override_num_blocks=blocks,
    )


def _estimated_rows(source: Any, *, sample: int = 1 << 20) -> int:
    """How many records an input holds: exact for a list or Parquet, lines by the first MiB for text."""
    if isinstance(source, list):
        return len(source)
    path = Path(source)
    if path.suffix.lower() == ".parquet":
        import pyarrow.parquet as pq

        return int(pq.read_metadata(path).num_rows)
    with path.open("rb") as stream:
        head = stream.read(sample)
    if not head:
        return 0
    lines = head.count(b"\n") + (not head.endswith(b"\n"))
    return math.ceil(path.stat().st_size * lines / len(head))


def corpus_datasource(
    sources: list[Any],
    text_field: str,
    id_field: str | None,
    rows: int,
    *,
    tokenizer: Any = None,
    numbered: Numbered | None = None,
    located: bool = False,
    empties: Path | None = None,
) -> Any:
    """A Ray datasource: one read task per input, streaming bertscope's reader in tables of `rows`
    (`corpus_dataset` reads it in blocks of that size). `tokenizer`, `numbered`, `located`, `empties`:
    as `corpus_dataset`'s."""
    from ray.data import Datasource
    from ray.data.block import BlockMetadata
    from ray.data.datasource import ReadTask

    several = len(sources) > 1
    # In the object store once, not pickled into every read task (a large vocabulary is megabytes).
    shared = None if tokenizer is None else import_ray().put(tokenizer)

    def task(number: int, source: Any) -> Any:
        prefix = source_prefix(source, several, id_field)
        at = None if numbered is None else (number, list(numbered[0].get(number, [])), numbered[1])
        count = None if empties is None else empties / _EMPTY.format(number)
        return _reader(source, text_field, id_field, prefix, rows, shared, at, located=located, count=count)

    # Defined here because Ray is optional: importing bertscope.distributed must not need it.
    class BertscopeCorpus(Datasource):
        def estimate_inmemory_data_size(self) -> int | None:
            return sum(os.path.getsize(s) for s in sources if isinstance(s, str)) or None

        def get_read_tasks(self, parallelism: int, *args: Any, **kwargs: Any) -> list[Any]:
            meta = BlockMetadata(num_rows=None, size_bytes=None, exec_stats=None, input_files=None)
            return [ReadTask(task(number, s), meta) for number, s in enumerate(sources)]

    return BertscopeCorpus()


def source_prefix(source: Any, several: bool, id_field: str | None) -> str:
    """What an input's ids start with: `<file stem>:` where several inputs give line or row numbers."""
    return f"{Path(source).stem}:" if several and id_field is None else ""


def _reader(
    source: Any,
    text_field: str,
    id_field: str | None,
    prefix: str,
    rows: int,
    tokenizer: Any,
    at: tuple[int, list[Unit], Path] | None,
    *,
    located: bool = False,
    count: Path | None = None,
) -> Any:
    def read() -> Iterator[Any]:
        rejects = Rejects()
        yield from tables(rejects)
        if count is not None:  # read whole: a retried task writes the same count again
            atomic_write_text(count, json.dumps({"empty": rejects.empty}))

    def tables(rejects: Rejects) -> Iterator[Any]:
        import pyarrow as pa

        tok = None if tokenizer is None else import_ray().get(tokenizer)
        records = read_corpus(
            source, text_field=text_field, id_field=id_field, tokenizer=tok, rejects=rejects
        )
        ided = (Record(prefix + r.id, r.text, r.line) for r in records)
        shown = source_name(source)  # as the local job names a record: FILE:LINE

        def table(chunk: list[tuple[int, Record]]) -> dict[str, Any]:
            columns = {"id": [r.id for _, r in chunk], "text": [r.text for _, r in chunk]}
            if located:
                columns[WHERE] = [f"{shown}:{r.line}" for _, r in chunk]
            return columns

        if at is None:
            for chunk in _chunks(((0, r) for r in ided), rows):
                yield pa.table(table(chunk))
            return
        number, done, output = at
        name = "<texts>" if isinstance(source, list) else str(source)
        for chunk in _chunks(skip_done(ided, done, source=name, output=output), rows):
            numbered = {
                SOURCE: pa.array([number] * len(chunk), pa.int32()),
                RECORD: pa.array([n for n, _ in chunk], pa.int64()),
            }
            yield pa.table({**table(chunk), **numbered})

    return read


def _chunks(records: Iterable[tuple[int, Record]], size: int) -> Iterator[list[tuple[int, Record]]]:
    chunk: list[tuple[int, Record]] = []
    for record in records:
        chunk.append(record)
        if len(chunk) == size:
            yield chunk
            chunk = []
    if chunk:
        yield chunk


def empty_texts(empties: Path) -> int:
    """The empty texts a job's read tasks passed over: the sum of their counts in `empties`."""
    return sum(json.loads(p.read_text())["empty"] for p in empties.glob(_EMPTY.replace("{:05d}", "*")))
