"""Streaming corpus readers: one Record at a time, with file:line for every complaint."""

from __future__ import annotations

import csv
import json
import math
import os
import shlex
import sqlite3
import sys
from collections.abc import Iterable, Iterator
from contextlib import contextmanager
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any, TextIO

from ..core.text_files import STDIN_NAME, closed_stdin, not_a_file, shown_path
from ..core.texts_given import VECTOR_RESULTS, type_named
from ..core.tokens import TextTokenizer, text_problem
from ..errors import CorpusError, InvalidSpec

__all__ = [
    "Record",
    "Rejects",
    "empty_corpus",
    "given_texts",
    "read_corpus",
    "check_readable",
    "read_lines",
    "refuse_fields_without_records",
    "source_name",
    "SUPPORTED_INPUTS",
]

SUPPORTED_INPUTS = (
    ".txt or any UTF-8 text file (one text per line)", ".jsonl", ".csv", ".tsv", ".parquet",
    "- (stdin, one text per line)",
)  # fmt: skip
# How many ids read from an id field the duplicate check holds in memory; past them they go to a
# temporary on-disk SQLite table (`_SeenIds`), so memory stays bounded whatever the corpus's size. Read
# when a corpus is opened, so a test can lower it.
IDS_IN_MEMORY = 65536
# The longest field the CSV and TSV readers take, in characters: csv's own limit is a C long (2**31 - 1
# where a long is 32 bits), and a text this long is held whole, as a .txt line is.
_FIELD_LIMIT = 2**31 - 1
# A line holding a carriage return that ends no line: lines end at "\n" ("\r\n" too) in every reader.
_LONE_CR = (
    "a carriage return (\\r) inside the line: the file has CR (old Mac) line endings, or a stray CR; "
    "lines end at \\n: convert them (e.g. tr '\\r' '\\n' < FILE > FIXED)"
)
# The corpus files read as records (by a text field); every other file is read a line a text.
_RECORD_SUFFIXES = (".jsonl", ".csv", ".tsv", ".parquet")
# The byte-order marks of the other Unicode encodings ("Unicode" in Notepad, PowerShell's >, iconv -t
# utf-16), the longer first: UTF-32's little-endian mark begins with UTF-16's.
_WIDE_BOMS = (
    (b"\xff\xfe\x00\x00", "UTF-32"), (b"\x00\x00\xfe\xff", "UTF-32"),
    (b"\xff\xfe", "UTF-16"), (b"\xfe\xff", "UTF-16"),
)  # fmt: skip
# The usual non-UTF-8 text is Latin-1 (or Windows-1252): the example conversion every reader names.
_LATIN1_FIX = "(e.g. iconv -f latin1 -t utf-8)"


@dataclass
class Record:
    """One text to embed, its id, where it came from (line or row, 1-based) and any extra fields."""

    id: str
    text: str
    line: int
    meta: dict[str, Any] = field(default_factory=dict)


@dataclass
class Rejects:
    """What a reader passed over: malformed records (with --skip-bad) and empty texts."""

    bad: list[str] = field(default_factory=list)
    empty: int = 0
    # of the empty ones, the blank lines of a record file (JSONL): no record at all, not an empty field
    blank: int = 0


def given_texts(source: object) -> bool:
    """Whether a corpus `source` is texts given in code (a list, a generator, any iterable of str) rather
    than a file's name (a str, a path, "-" for stdin)."""
    return not isinstance(source, (str, bytes, os.PathLike)) and isinstance(source, Iterable)


def source_name(source: object) -> str:
    """How messages name a corpus: the file, <stdin>, or <texts> for texts given in code."""
    return "<texts>" if given_texts(source) else shown_path(source)


def empty_corpus(source: object, rejects: Rejects, *, text_field: str = "text") -> str:
    """Why a corpus read to its end gave no text, and the fix, said after its name (`source_name`) by every
    command that reads one: a file (or stdin) with nothing in it is empty; one of blank lines only says
    every line is empty; records say their text field is."""
    fix = "give one text or more" if given_texts(source) or str(source) == "-" else (
        "give a file with one text or more"
    )  # fmt: skip
    if given_texts(source) or not rejects.empty:
        return f"the corpus is empty (no text in it): {fix}"
    if str(source) == "-" or Path(str(source)).suffix.lower() not in _RECORD_SUFFIXES:
        return f"every line is empty (no text in it): {fix}"
    if rejects.blank == rejects.empty:  # a record file of blank lines holds no record to have a field
        return f"every line is empty (no text in it): {fix}"
    return f"every record's {text_field!r} field is empty (no text in it): {fix}"


def refuse_fields_without_records(
    source: object, *, text_field: str = "text", id_field: str | None = None
) -> None:
    """Refuse a `text_field` other than "text", or an `id_field`, for a corpus with no fields to read
    them from (texts given in code, stdin, a .txt: a line a text); they would be ignored in silence."""
    named = [
        f"{name}={value!r}"
        for name, value, default in (("text_field", text_field, "text"), ("id_field", id_field, None))
        if value != default
    ]
    if not named or not (given_texts(source) or str(source) == "-" or str(source).lower().endswith(".txt")):
        return
    what = f"{named[0]} names a field" if len(named) == 1 else f"{' and '.join(named)} name fields"
    read = (
        "the texts given are not records"
        if given_texts(source)
        else f"{source_name(source)} is read a line a text"
    )
    drop = " and ".join(n.split("=")[0] + "=" for n in named)
    raise InvalidSpec(f"{what} of records (.jsonl, .csv, .tsv, .parquet); {read}: drop {drop}")


def read_corpus(
    source: str | Path | Iterable[str],
    *,
    text_field: str = "text",
    id_field: str | None = None,
    skip_bad: bool = False,
    rejects: Rejects | None = None,
    offers_skip_bad: bool = False,
    tokenizer: TextTokenizer | None = None,
) -> Iterator[Record]:
    """Records of a corpus file (or "-" for stdin), or of texts given in code (a list or any iterable of
    str, read one at a time: a generator is never held whole); empty texts are skipped and counted in
    `rejects`.

    With the model's `tokenizer`, a text it turns into no word pieces is a bad record too (`text_problem`).

    Without `id_field`, a record's id is 1-based: its line number in .txt and .jsonl, its data row number
    (the header not counted) in .csv, .tsv and .parquet. Complaints name the file's own line; a malformed
    record's says that --skip-bad would set it aside only where the caller `offers_skip_bad` (a corpus job).

    The file and its type are checked at once; records are read lazily. Ids read from `id_field` must be
    unique, checked exactly in bounded memory: past `IDS_IN_MEMORY` of them, in a temporary on-disk table.
    """
    rejects = rejects if rejects is not None else Rejects()
    name = "<texts>" if given_texts(source) else str(source)
    # Ids the reader numbers (no id field, or a text a line) are unique as made: only named ids are checked.
    named_ids = False
    if isinstance(source, VECTOR_RESULTS):  # iterable as its rows: else "<texts>:1: not a text"
        raise CorpusError(
            f"cannot read a {type(source).__name__} as a corpus: vectors already made, not texts; pass the "
            "texts it was made from"
        )
    if given_texts(source):
        records: Iterator[Record] = _given(source)  # type: ignore[arg-type]
    elif not isinstance(source, (str, os.PathLike)):
        raise CorpusError(
            f"cannot read a value of type {type(source).__name__} as a corpus: give a file's path, '-' for "
            "stdin, or the texts (a list or any iterable of str)"
        )
    elif name == "-" or Path(name).suffix.lower() == ".txt":
        records = _text_lines(name, skip_bad, rejects)
    else:
        path = Path(name)
        suffix = path.suffix.lower()
        if not path.is_file():
            raise _unreadable(name, path)
        named_ids = id_field is not None and suffix in _RECORD_SUFFIXES
        if suffix == ".jsonl":
            records = _jsonl(path, text_field, id_field, skip_bad, rejects)
        elif suffix in (".csv", ".tsv"):
            records = _csv(path, text_field, id_field, "\t" if suffix == ".tsv" else ",", skip_bad, rejects)
        elif suffix == ".parquet":
            records = _parquet(path, text_field, id_field)
        elif suffix == ".json":
            raise CorpusError(f"{name}: a JSON corpus is read one object per line: write it as .jsonl")
        elif _is_text(path):
            records = _file_lines(path, skip_bad, rejects)  # lee_background.cor: text is text, any suffix
        else:
            with path.open("rb") as stream:
                _refuse_wide(stream.read(4), name)  # a UTF-16 text of another suffix is text all the same
            raise CorpusError(
                f"{name}: unknown corpus type {suffix or '(none)'} and not UTF-8 text; supported: "
                f"{', '.join(SUPPORTED_INPUTS)}"
            )
    return _checked(
        records, source_name(source), rejects, skip_bad, offers_skip_bad=offers_skip_bad,
        tokenizer=tokenizer, ids_in_memory=IDS_IN_MEMORY if named_ids else None,
    )  # fmt: skip


def _given(texts: Iterable[object]) -> Iterator[Record]:
    """One Record per text given in code, numbered from 1, read one at a time (a generator stays one)."""
    for number, text in enumerate(texts, 1):
        if not isinstance(text, str):
            kind = type(text).__name__
            raise CorpusError(f"<texts>:{number}: not a text but a value of type {kind}: give str items only")
        yield Record(str(number), text, number)


def _is_text(path: Path, *, sample: int = 1 << 16) -> bool:
    """Whether a file of another suffix reads as plain UTF-8 text (its first 64 KiB: no NUL, valid UTF-8)."""
    import codecs

    with path.open("rb") as stream:
        head = stream.read(sample)
    if b"\0" in head:
        return False
    try:
        # not final: a character cut at the sample's end is not a fault
        codecs.getincrementaldecoder("utf-8")().decode(head, final=False)
    except UnicodeDecodeError:
        return False
    return True


def read_lines(source: str | Path, *, text_field: str = "text") -> Iterator[str]:
    """The texts of a corpus file (or stdin for "-"), one at a time, read exactly as `read_corpus` reads it.

    A line each of a .txt (or any UTF-8 text file) and of stdin, the `text_field` of each .jsonl, .csv,
    .tsv or .parquet record: the command line's `-i FILE` reads a file the same way whichever command
    reads it, and as a corpus job does. Streamed: nothing is held but the record at hand.
    """
    return (record.text for record in read_corpus(source, text_field=text_field))


def _text_lines(name: str, skip_bad: bool, rejects: Rejects) -> Iterator[Record]:
    """One Record per line of a text file or stdin; a missing file fails here, before any reading."""
    if name == "-":
        if sys.stdin is None:  # closed (`<&-`, a daemon): Python sets no stream, there is nothing to read
            raise CorpusError(closed_stdin("the texts"))
        raw = getattr(sys.stdin, "buffer", None)
        if raw is not None:
            # read as bytes and decoded a line at a time, as a file is: a bad byte is named as it is in a
            # file (stdin's own decoding made it a lone surrogate, blamed on the text)
            return _stdin_lines(sys.stdin, raw, skip_bad, rejects)
        try:  # lines end at "\n" alone, as a file's do (a TTY's or pipe's stdin reads "\r" as one too)
            sys.stdin.reconfigure(newline="\n")  # type: ignore[union-attr]
        except (AttributeError, ValueError, OSError):  # not a text file (a test's StringIO), or read from
            pass
        return _lines(sys.stdin, STDIN_NAME, skip_bad, rejects)
    path = Path(name)
    if not path.is_file():
        raise _unreadable(name, path)
    return _file_lines(path, skip_bad, rejects)


def check_readable(name: str) -> None:
    """Refuse a corpus path that gives no file to read (missing, a folder, a pipe, a pattern without Ray)
    in the words reading it would (`-` is stdin)."""
    if name != "-" and not Path(name).is_file():
        raise _unreadable(name, Path(name))


def _unreadable(name: str, path: Path) -> CorpusError:
    if path.is_dir():
        what = "a folder: give the corpus file inside it"
    elif path.exists():  # /dev/null, a pipe, a socket: there, but no file to read lines from
        what = f"{not_a_file(path)}: give a text file, or - to read stdin"
    elif any(sign in name for sign in "*?["):
        what = "no such file; a pattern of many files is read by a Ray corpus job only (embed --engine ray)"
    else:
        what = "no such file"
    return CorpusError(f"cannot read {name}: {what}")


def _checked(
    records: Iterator[Record],
    name: str,
    rejects: Rejects,
    skip_bad: bool,
    *,
    offers_skip_bad: bool = False,
    tokenizer: TextTokenizer | None = None,
    ids_in_memory: int | None = IDS_IN_MEMORY,
) -> Iterator[Record]:
    """The records with a text, each id unique (`ids_in_memory`: see `_SeenIds`; None where the reader
    numbers the ids, unique as made), malformed ones refused or set aside; complaints name `name`:line."""
    seen = _SeenIds(ids_in_memory) if ids_in_memory is not None else None
    line = 0
    try:
        for record in records:
            line = record.line
            if not record.text.strip():
                rejects.empty += 1
                continue
            if seen is not None and record.id in seen:
                raise CorpusError(f"{name}:{line}: duplicate id {record.id!r}; ids must be unique")
            problem = text_problem(record.text, tokenizer=tokenizer)
            if problem:
                _bad(f"{name}:{line}: the text {problem}", skip_bad, rejects)
                continue
            if seen is not None:
                seen.add(record.id)
            yield record
    except _BadRecord as exc:
        hint = " (--skip-bad sets such records aside in a .rejects file)" if offers_skip_bad else ""
        raise CorpusError(f"{exc}{hint}") from None
    except UnicodeDecodeError as exc:
        where = f"after line {line}" if line else "in its first lines"
        raise CorpusError(
            f"{name}: not UTF-8 text {where} ({exc.reason}); convert the file to UTF-8 {_LATIN1_FIX}"
        ) from None
    finally:
        if seen is not None:
            seen.close()


class _SeenIds:
    """The ids read so far, exactly: a set of up to `in_memory` of them, then a temporary on-disk SQLite
    table keyed by them (PRIMARY KEY), so that memory stays bounded however many records a corpus holds.

    Past the spill, new ids gather in a set of up to `batch` (at most `in_memory`) before they are
    inserted together, in key order, and a fixed bitmap of their hashes (`_FILTER_BITS`) answers "never
    seen" without asking the table for most ids; an id the bitmap may have seen is looked up, so the
    answer stays exact. The table is SQLite's
    private temporary database (opened with an empty name): never named in the file system, removed when
    it is closed or the process ends, its pages in memory up to SQLite's cache and on disk past it.
    """

    _FILTER_BITS = 1 << 26  # 8 MiB: at 1,000,000 ids about 1.5 in 100 new ones are looked up

    def __init__(self, in_memory: int, *, batch: int = 32768) -> None:
        self.in_memory = max(0, in_memory)
        # sorted batches this large insert ids in random order about twice as fast as batches of 4,096
        self.batch = max(1, min(batch, self.in_memory))
        self.recent: set[str] = set()
        self.db: sqlite3.Connection | None = None
        self.filter = bytearray()

    def __contains__(self, item_id: str) -> bool:
        if item_id in self.recent:
            return True
        if self.db is None or not self._maybe(item_id):
            return False
        found = self.db.execute("SELECT 1 FROM ids WHERE id = ?", (_key(item_id),)).fetchone()
        return found is not None

    def add(self, item_id: str) -> None:
        """Record an id (one not yet in the set: the caller asked first)."""
        self.recent.add(item_id)
        if self.db is not None:
            self._mark(item_id)
            if len(self.recent) >= self.batch:
                self._flush()
        elif len(self.recent) > self.in_memory:
            self._spill()

    def close(self) -> None:
        """Drop the table (SQLite removes its file) and the ids held."""
        if self.db is not None:
            self.db.close()
            self.db = None
        self.recent.clear()

    def _spill(self) -> None:
        try:
            self.db = sqlite3.connect("")  # "": a private temporary database on disk, removed on close
            self.db.execute("PRAGMA journal_mode = OFF")  # nothing to roll back: it is built once
            self.db.execute("CREATE TABLE ids (id BLOB PRIMARY KEY) WITHOUT ROWID")
        except sqlite3.Error as exc:
            raise _no_room(exc) from None
        self.filter = bytearray(self._FILTER_BITS // 8)
        for item_id in self.recent:
            self._mark(item_id)
        self._flush()

    def _flush(self) -> None:
        assert self.db is not None
        try:
            with self.db:
                # in key order: each insert lands beside the one before it in the table's B-tree
                self.db.executemany(
                    "INSERT INTO ids VALUES (?)", [(k,) for k in sorted(map(_key, self.recent))]
                )
        except sqlite3.Error as exc:
            raise _no_room(exc) from None
        self.recent.clear()

    def _mark(self, item_id: str) -> None:
        spot = hash(item_id) % self._FILTER_BITS
        self.filter[spot >> 3] |= 1 << (spot & 7)

    def _maybe(self, item_id: str) -> bool:
        spot = hash(item_id) % self._FILTER_BITS
        return bool(self.filter[spot >> 3] & (1 << (spot & 7)))


def _no_room(exc: sqlite3.Error) -> CorpusError:
    """The duplicate check's temporary table could not be made or written (`_SeenIds`)."""
    return CorpusError(
        f"cannot keep the ids read so far in a temporary file for the duplicate check ({exc}); "
        "set TMPDIR to a folder with room"
    )


def _key(item_id: str) -> bytes:
    """An id as the table keeps it: its UTF-8 bytes (a lone surrogate from JSON kept as it is)."""
    return item_id.encode("utf-8", "surrogatepass")


def _lines(stream: TextIO, name: str, skip_bad: bool, rejects: Rejects) -> Iterator[Record]:
    with stream:
        for number, line in enumerate(stream, 1):
            # stdin is not opened as utf-8-sig; a byte-order mark on it is dropped here alike
            text = line.removeprefix("\ufeff") if number == 1 else line
            yield from _line_record(text, number, name, skip_bad, rejects)


def _decoded(path: Path, skip_bad: bool, rejects: Rejects) -> Iterator[tuple[int, str]]:
    """(line number, text) of a UTF-8 file, decoded per line: a bad byte is a bad record at file:line."""
    with path.open("rb") as stream:
        yield from _decoded_lines(stream, str(path), skip_bad, rejects)


def _decoded_lines(
    stream: Iterable[bytes], name: str, skip_bad: bool, rejects: Rejects
) -> Iterator[tuple[int, str]]:
    for number, raw in enumerate(stream, 1):
        if number == 1:
            _refuse_wide(raw, name)
        try:
            # A byte-order mark (Excel, Notepad) is dropped from the first line only.
            yield number, raw.decode("utf-8-sig" if number == 1 else "utf-8")
        except UnicodeDecodeError as exc:
            _bad(_not_utf8(name, number, exc), skip_bad, rejects)


def _not_utf8(name: str, number: int, exc: UnicodeDecodeError) -> str:
    """A line that is not UTF-8, named with the usual conversion (from Latin-1)."""
    what = "the file" if name != STDIN_NAME else "the input"
    return f"{name}:{number}: not UTF-8 text ({exc.reason}); convert {what} to UTF-8 {_LATIN1_FIX}"


def _refuse_wide(head: bytes, name: str) -> None:
    """Refuse a file (or stdin) that begins with a UTF-16 or UTF-32 byte-order mark, naming the conversion.
    Every line of it is unreadable as UTF-8 (or a text of NULs), so the whole file is refused, even with
    skip_bad: setting its lines aside one by one would leave nothing, or garbage, to embed."""
    encoding = next((enc for bom, enc in _WIDE_BOMS if head.startswith(bom)), None)
    if encoding is None:
        return
    lower = encoding.lower()
    if name == STDIN_NAME:
        fix = f"convert the input to UTF-8 first (iconv -f {lower} -t utf-8)"
    else:
        path = Path(name)
        converted = path.with_name(f"{path.stem}.utf8{path.suffix}")
        fix = f"convert it: iconv -f {lower} -t utf-8 {shlex.quote(name)} > {shlex.quote(str(converted))}"
    raise CorpusError(
        f"{name}:1: {encoding} text (it begins with a {encoding} byte-order mark), not UTF-8; {fix}"
    )


def _stdin_lines(stdin: TextIO, raw: Iterable[bytes], skip_bad: bool, rejects: Rejects) -> Iterator[Record]:
    with stdin:
        for number, line in _decoded_lines(raw, STDIN_NAME, skip_bad, rejects):
            yield from _line_record(line, number, STDIN_NAME, skip_bad, rejects)


def _file_lines(path: Path, skip_bad: bool, rejects: Rejects) -> Iterator[Record]:
    for number, line in _decoded(path, skip_bad, rejects):
        yield from _line_record(line, number, str(path), skip_bad, rejects)


def _line_record(line: str, number: int, name: str, skip_bad: bool, rejects: Rejects) -> Iterator[Record]:
    """The record of one line (its "\n" or "\r\n" ending dropped); a bad record where a carriage return
    is left inside it. Lines end at "\n" in every reader (the CSV reader, resume's checks, verify's): a
    file with CR (old Mac) line endings would be one text of all its lines, read as lines it would give
    other ids than every reader before this gave it, so it is refused, with the fix."""
    text = line.rstrip("\r\n")
    if "\r" in text:
        _bad(f"{name}:{number}: {_LONE_CR}", skip_bad, rejects)
        return
    yield Record(str(number), text, number)


def _jsonl(
    path: Path, text_field: str, id_field: str | None, skip_bad: bool, rejects: Rejects
) -> Iterator[Record]:
    for number, line in _decoded(path, skip_bad, rejects):
        if not line.strip():
            rejects.empty += 1  # counted as a .txt's blank line is: its line has no text
            rejects.blank += 1
            continue
        try:
            row = json.loads(line)
            if not isinstance(row, dict):
                raise ValueError(f"a JSON {type(row).__name__}, not an object")
        except ValueError as exc:
            lone = f"; {_LONE_CR}" if "\r" in line.rstrip("\r\n") else ""
            _bad(f"{path}:{number}: not a JSON object: {exc}{lone}", skip_bad, rejects)
            continue
        yield from _row_or_reject(row, number, path, text_field, id_field, skip_bad, rejects)


def _csv(
    path: Path, text_field: str, id_field: str | None, delimiter: str, skip_bad: bool, rejects: Rejects
) -> Iterator[Record]:
    # TSV has no quoting, so a leading '"' is just text.
    bad_lines: set[int] = set()
    stream = _csv_lines(path, skip_bad, rejects, bad_lines)
    # csv's default field limit (131,072 characters) refused a text that .txt and .jsonl read whole: a
    # field may be as long as a line may be elsewhere (a C long on every platform bounds it). The limit is
    # the csv module's, process-wide: raised while this file is read, then given back (`_field_limit`).
    with _field_limit(_FIELD_LIMIT):
        yield from _csv_records(path, stream, text_field, id_field, delimiter, skip_bad, rejects, bad_lines)


@contextmanager
def _field_limit(limit: int) -> Iterator[None]:
    """csv's field size limit set to `limit` inside, the caller's own given back after."""
    previous = csv.field_size_limit(limit)
    try:
        yield
    finally:
        csv.field_size_limit(previous)


def _csv_records(
    path: Path, stream: Iterator[str], text_field: str, id_field: str | None, delimiter: str, skip_bad: bool,
    rejects: Rejects, bad_lines: set[int],
) -> Iterator[Record]:  # fmt: skip
    """`_csv`'s records of the lines `stream` gives."""
    if delimiter == "\t":
        reader = csv.reader(stream, delimiter=delimiter, quoting=csv.QUOTE_NONE, strict=True)
    else:
        reader = csv.reader(stream, delimiter=delimiter, strict=True)
    try:
        header = next(reader, None)
    except csv.Error as exc:
        raise CorpusError(_csv_error(path, 1, exc, delimiter)) from None
    if header is None:
        return
    for wanted, what in ((text_field, "field"), (id_field, "id field")):
        if wanted is not None and wanted not in header:
            # the header alone says so: a header-only file is not an empty corpus
            raise CorpusError(f"{path}:1: no {what} {wanted!r}; the fields are: {', '.join(header)}")
        columns = [str(n) for n, name in enumerate(header, 1) if name == wanted]
        if len(columns) > 1:
            # a row read as a dict keeps the last of them: another column than the user meant, in silence
            read = "text field" if wanted == text_field else what
            raise CorpusError(
                f"{path}:1: the header names {len(columns)} columns {wanted!r} (columns "
                f"{', '.join(columns)}), the {read} read; give each column its own name"
            )
    rows = 0
    for first, number, row in _csv_rows(reader, path, delimiter):
        set_aside = any(first <= bad <= number for bad in bad_lines)
        if not row and not set_aside:
            continue  # a blank line
        rows += 1  # counted even when set aside: the ids of the rows after it stay their data row numbers
        if set_aside:
            continue  # a record holding a line already set aside as not UTF-8
        if len(row) != len(header):
            where = f"{path}:{number}" if first == number else f"{path}:{first}-{number}"
            # A quoted field over several lines that breaks the field count is an unclosed quote.
            hint = (
                f": an unclosed quote on line {first} joined lines {first}-{number}" if first < number else ""
            )
            _bad(f"{where}: {len(row)} fields where the header has {len(header)}{hint}", skip_bad, rejects)
            continue
        fields = dict(zip(header, row, strict=True))
        yield from _row_or_reject(fields, number, path, text_field, id_field, skip_bad, rejects, rows)


def _csv_lines(path: Path, skip_bad: bool, rejects: Rejects, bad_lines: set[int]) -> Iterator[str]:
    """The lines of a CSV decoded one by one, so a bad byte is named at its own line (not "after line 0")."""
    for number, raw in _raw_lines(path):
        if number == 1:
            _refuse_wide(raw, str(path))
        try:
            # Excel writes a byte-order mark (utf-8-sig) at the start of the file.
            yield raw.decode("utf-8-sig" if number == 1 else "utf-8")
        except UnicodeDecodeError as exc:
            _bad(_not_utf8(str(path), number, exc), skip_bad, rejects)
            bad_lines.add(number)
            yield "\n"  # an empty line keeps the reader's line numbers the file's own


def _raw_lines(path: Path) -> Iterator[tuple[int, bytes]]:
    with path.open("rb") as stream:
        yield from enumerate(stream, 1)


def _csv_rows(reader: Any, path: Path, delimiter: str) -> Iterator[tuple[int, int, list[str]]]:
    """(first line, last line, fields) per record; a quoting error names the line its record began on."""
    first = reader.line_num + 1
    try:
        for row in reader:
            yield first, reader.line_num, row
            first = reader.line_num + 1
    except csv.Error as exc:
        raise CorpusError(_csv_error(path, first, exc, delimiter)) from None


def _csv_error(path: Path, first: int, exc: csv.Error, delimiter: str) -> str:
    """A CSV reader's error, at the line its record began on: a carriage return in an unquoted field
    (CR line endings), a field past `_FIELD_LIMIT`, or (in a CSV: a TSV has no quoting) an unclosed quote."""
    if "new-line character" in str(exc):
        return f"{path}:{first}: {_LONE_CR}"
    if "field limit" in str(exc):
        unclosed = "" if delimiter == "\t" else " (or an unclosed quote ran on to the file's end: fix it)"
        return (
            f"{path}:{first}: a field of the record that begins on this line is longer than "
            f"{_FIELD_LIMIT:,} characters{unclosed}; split the text into shorter records"
        )
    if delimiter == "\t":
        return f"{path}:{first}: {exc} in the record that begins on this line"
    return (
        f"{path}:{first}: {exc} in the record that begins on this line (an unclosed quote?); fix its quotes"
    )


def _parquet(path: Path, text_field: str, id_field: str | None) -> Iterator[Record]:
    import pyarrow.parquet as pq

    number = 0
    try:
        file = pq.ParquetFile(path)
        columns = file.schema_arrow.names
        for wanted in (text_field, id_field):
            if wanted is not None and wanted not in columns:
                raise CorpusError(f"{path}: no column {wanted!r}; the columns are: {', '.join(columns)}")
        wanted_columns = [c for c in (text_field, id_field) if c is not None]
        for batch in file.iter_batches(columns=wanted_columns, batch_size=4096):
            for row in batch.to_pylist():
                number += 1
                yield _from_row(row, number, path, text_field, id_field)
    except (OSError, ValueError) as exc:  # pyarrow's ArrowInvalid is a ValueError
        where = f" after row {number}" if number else ""
        raise CorpusError(
            f"{path} is not a readable Parquet file{where} ({exc}): it is corrupt or cut short; write it "
            "again, or give the texts as .txt or .jsonl"
        ) from None


def _row_or_reject(
    row: dict[str, Any],
    number: int,
    path: Path,
    text_field: str,
    id_field: str | None,
    skip_bad: bool,
    rejects: Rejects,
    index: int | None = None,
) -> Iterator[Record]:
    try:
        yield _from_row(row, number, path, text_field, id_field, index)
    except CorpusError as exc:
        _bad(str(exc), skip_bad, rejects)


def _from_row(
    row: dict[str, Any],
    number: int,
    path: Path,
    text_field: str,
    id_field: str | None,
    index: int | None = None,
) -> Record:
    """A Record from a row at line `number`; without an id field its id is `index` (default: `number`)."""
    if text_field not in row:
        # the fix names the field holding the longest text on this line (an id is a short one), else the first
        texts = {key: len(value) for key, value in row.items() if isinstance(value, str)}
        named = max(texts, key=texts.__getitem__) if texts else next(iter(row), None)
        fix = f"; name the text's field, such as text_field={str(named)!r}" if named is not None else ""
        raise CorpusError(
            f"{path}:{number}: no field {text_field!r}; the fields are: {', '.join(map(str, row))}{fix}"
        )
    text = row[text_field]
    if text is None:
        text = ""
    if not isinstance(text, str):
        raise CorpusError(f"{path}:{number}: field {text_field!r} is {type_named(text)}, not text")
    if id_field is None:
        record_id = str(number if index is None else index)
    elif id_field not in row:
        raise CorpusError(
            f"{path}:{number}: no id field {id_field!r}; the fields are: {', '.join(map(str, row))}"
        )
    elif row[id_field] is None:
        raise CorpusError(f"{path}:{number}: the id field {id_field!r} is null; give every record an id")
    else:
        record_id = _id_text(row[id_field], f"{path}:{number}: the id field {id_field!r}")
    meta = {k: v for k, v in row.items() if k not in (text_field, id_field)}
    return Record(record_id, text, number, meta)


def _id_text(value: object, where: str) -> str:
    """An id as stored: a string as it is, a number as JSON writes it (1 is "1", 1.0 is "1.0"); a
    boolean, an object, a list or a number that is not finite is refused (str() made "True", "{'a': 1}")."""
    if isinstance(value, bool):
        what = f"a boolean ({'true' if value else 'false'})"
    elif isinstance(value, dict):
        what = "an object"
    elif isinstance(value, (list, tuple)):
        what = "a list"
    elif isinstance(value, float) and not math.isfinite(value):
        what = f"not a finite number ({value})"
    else:
        return str(value)
    raise CorpusError(f"{where} is {what}, not a string or number; give every record a string or number id")


class _BadRecord(CorpusError):
    """A malformed record met without skip_bad (`_checked` says whether --skip-bad would set it aside)."""


def _bad(message: str, skip_bad: bool, rejects: Rejects) -> None:
    if not skip_bad:
        raise _BadRecord(message)
    rejects.bad.append(message)
