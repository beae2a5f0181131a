"""The one table of vector export files and their one writer: static rows and word vectors alike.

Rows are named vectors with a few columns beside them (a piece and its id, a word and its count). Each
format is one entry of `EXPORTS`: the suffixes that choose it alone and its writer.

word2vec   `<path>`: "n d" then "name v1 ... vd" per line, and, where the rows have more columns than
           their name, `<stem>.counts.tsv` (gensim's vocabulary file, `fvocab`: its names escaped as the
           text's, spaces too, since gensim splits both at whitespace)
npy        `<path>.npy` (n, d) float32 and the side file: `<stem>.vocab.txt` (one name a line) or
           `<stem>.vocab.tsv` (several columns)
parquet    the columns, then vector (fixed-size float32 list)
projector  `<stem>.vectors.tsv` and `<stem>.metadata.tsv` (a header line where it has several columns, as
           projector.tensorflow.org reads it)

A name in a text file is escaped (`escape_name`, undone by `unescape_name`) so that each row is one line
and each cell one column, and each row keeps a name of its own: a piece holding a newline ("new\nline", an
added token) would otherwise split its line and shift every row after it. Parquet keeps names as they are.

Every file is written under a short hidden temporary name beside its target (`.bertscope-XXXXXXXX.part`:
any name that can be written can be exported) and renamed into place only when every block is in
(`Staged`); the files it replaces are moved aside first and put back if any rename fails, so an export
that fails or is interrupted leaves no file that looks complete, and the files it would have replaced as
they were. `staged()` holds several exports' files to one commit (every layer of an aggregation). An .npy
is written in order, header then rows, so a full disk is an OSError (ENOSPC) at its write and a killed
export leaves at most the bytes it wrote, in its .part file.

A new format is an `ExportFormat` member and an entry in `EXPORTS`.
"""

from __future__ import annotations

import contextlib
import errno
import io
import os
import secrets
from collections.abc import Callable, Iterable, Iterator, Sequence
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

import numpy as np

from ..errors import CorpusError, InvalidInput
from ._enums import StrEnum

__all__ = [
    "EXPORTS", "Block", "ExportFormat", "ExportRule", "RowKind", "Rows", "escape_name", "export_format",
    "Staged", "formats_help", "side_path", "staged", "unescape_name", "write_rows", "write_vectors",
]  # fmt: skip


class ExportFormat(StrEnum):
    """Files the static vectors export to."""

    WORD2VEC = "word2vec"
    NPY = "npy"
    PARQUET = "parquet"
    PROJECTOR = "projector"


@dataclass(frozen=True)
class RowKind:
    """What a row holds beside its vector: its columns (name first among `side`) and their types."""

    columns: tuple[tuple[str, type], ...]  # Parquet's columns before the vector, in order: (name, int|str)
    side: tuple[str, ...]  # the columns of the side files (vocabulary, metadata), the row's name first


# (columns by name, (n, d) vectors): n rows
Block = tuple[dict[str, Sequence[Any]], np.ndarray]


@dataclass
class Rows:
    """Rows to write: their kind, how many and how wide, and blocks of (columns, (n, d) vectors)."""

    kind: RowKind
    count: int
    dim: int
    blocks: Iterable[Block]


def _hidden(folder: Path, suffix: str) -> Path:
    """A new empty hidden file in `folder`, its name short whatever the target's (255 bytes is legal)."""
    while True:  # os.open rather than mkstemp: the file gets the umask's mode, as open() gives it
        made = folder / f".bertscope-{secrets.token_hex(4)}{suffix}"
        try:
            os.close(os.open(made, os.O_WRONLY | os.O_CREAT | os.O_EXCL, 0o666))
            return made
        except FileExistsError:
            continue


@dataclass
class Staged:
    """Temporary files beside their targets, renamed onto them together once every one is written."""

    pairs: list[tuple[Path, Path]] = field(default_factory=list)  # (temporary, target)

    def __call__(self, target: Path) -> Path:
        """A new temporary file beside `target` (hidden, so no listing takes it for the export)."""
        temporary = _hidden(target.parent, ".part")
        self.pairs.append((temporary, target))
        return temporary

    def commit(self) -> None:
        """Rename every temporary file onto its target, or, if any rename fails, leave every target as it was.

        A folder at a target is refused first, by name. Each existing target is moved aside (a hidden
        `.old` beside it) before any rename, and put back if one fails (a file open elsewhere on Windows,
        EBUSY or EPERM here): new rows never sit beside the old names of a side file."""
        for _, target in self.pairs:
            if target.is_dir():
                raise IsADirectoryError(errno.EISDIR, os.strerror(errno.EISDIR), str(target))
        aside: list[tuple[Path, Path, bool]] = []  # (backup, target, moved there)
        placed: list[Path] = []
        try:
            for _, target in self.pairs:
                if os.path.lexists(target):
                    aside.append((_hidden(target.parent, ".old"), target, False))
                    os.replace(target, aside[-1][0])
                    aside[-1] = (aside[-1][0], target, True)
            for temporary, target in self.pairs:
                os.replace(temporary, target)
                placed.append(target)
        except BaseException:
            for target in placed:
                with contextlib.suppress(OSError):
                    target.unlink()
            for backup, target, moved in reversed(aside):
                # a target that cannot be put back stays whole in its backup: nothing is lost
                with contextlib.suppress(OSError):
                    if moved:
                        os.replace(backup, target)
                    else:
                        backup.unlink()
            raise
        for backup, _, _ in aside:
            # every new file is in place: a backup that cannot go now fails no export that succeeded
            with contextlib.suppress(OSError):
                backup.unlink()
        self.pairs.clear()

    def discard(self) -> None:
        """Remove the temporary files still there."""
        for temporary, _ in self.pairs:
            temporary.unlink(missing_ok=True)
        self.pairs.clear()


@contextlib.contextmanager
def staged() -> Iterator[Staged]:
    """Files staged by every write inside, renamed into place together when it ends, or none at all."""
    stage = Staged()
    try:
        yield stage
        stage.commit()
    finally:  # an exception, a KeyboardInterrupt, or a rename that failed: no half file stays
        stage.discard()


# A writer writes the files of `path` under the temporary names `stage(target)` gives, and returns the
# targets: they are renamed into place when it returns.
Writer = Callable[[Path, Rows, Callable[[Path], Path]], list[Path]]


@dataclass(frozen=True)
class ExportRule:
    """One export format: the suffixes that choose it alone, what they are called, and its writer."""

    suffixes: tuple[str, ...]
    described: str  # how messages name the suffixes
    write: Writer


# The characters at which a line ends for some reader (Python's str.splitlines ends one at each of these,
# gensim and most tools at \n, a text-mode open at \r too), written as escapes; the common three short.
_LINE_ENDS = "\n\r\x0b\x0c\x1c\x1d\x1e\x85\u2028\u2029"
_SHORT = {"\t": "\\t", "\n": "\\n", "\r": "\\r"}
_UNSHORT = {"\\": "\\", "t": "\t", "n": "\n", "r": "\r"}
_HEX = frozenset("0123456789abcdefABCDEF")


def _escaped_char(char: str, *, spaces: bool) -> str:
    if char in _SHORT:
        return _SHORT[char]
    if char in _LINE_ENDS or (spaces and char.isspace()):
        return f"\\u{ord(char):04x}"
    return char


def escape_name(name: str, *, spaces: bool = False) -> str:
    """`name` as every text export writes it: a tab, newline or carriage return as \\t, \\n, \\r, any other
    line end as \\uXXXX, with `spaces` (word2vec text, whose columns are split at spaces) every other
    whitespace character too (a space is \\u0020), and a backslash doubled where it would begin an escape
    (a vocabulary's own "\\" piece is written as it is); `unescape_name` reverses it."""
    if not any(c == "\\" or c.isspace() or c in _LINE_ENDS for c in name):
        return name
    out = [_escaped_char(c, spaces=spaces) for c in name]
    for i, char in enumerate(name):
        # doubled before what an escape starts with (\, t, n, r, u) as written: "\\n" is no newline
        if char == "\\" and i + 1 < len(name) and out[i + 1][:1] in _UNSHORT.keys() | {"u"}:
            out[i] = "\\\\"
    return "".join(out)


def unescape_name(text: str) -> str:
    """The name `escape_name` wrote as `text` (a backslash that begins no escape is itself)."""
    out, i = [], 0
    while i < len(text):
        char, code = text[i], text[i + 1 : i + 2]
        if char == "\\" and code == "u" and len(text) >= i + 6 and set(text[i + 2 : i + 6]) <= _HEX:
            out.append(chr(int(text[i + 2 : i + 6], 16)))
            i += 6
        elif char == "\\" and code in _UNSHORT:
            out.append(_UNSHORT[code])
            i += 2
        else:
            out.append(char)
            i += 1
    return "".join(out)


def _side_lines(rows: Rows, columns: dict[str, Sequence[Any]], *, spaces: bool = False) -> str:
    cells = [[escape_name(str(v), spaces=spaces) for v in columns[name]] for name in rows.kind.side]
    return "".join("\t".join(row) + "\n" for row in zip(*cells, strict=True))


def _word2vec(path: Path, rows: Rows, stage: Callable[[Path], Path]) -> list[Path]:
    name = rows.kind.side[0]
    kept: list[dict[str, Sequence[Any]]] = []
    with stage(path).open("w", encoding="utf-8", newline="\n") as out:
        out.write(f"{rows.count} {rows.dim}\n")
        for columns, block in rows.blocks:
            text = io.StringIO()
            np.savetxt(text, np.asarray(block, dtype=np.float32), fmt="%.7g")
            # word2vec text splits its columns at spaces: a name keeps none (escape_name)
            for label, row in zip(columns[name], text.getvalue().splitlines(), strict=True):
                out.write(escape_name(str(label), spaces=True) + " " + row + "\n")
            if len(rows.kind.side) > 1:
                kept.append(columns)
    if len(rows.kind.side) == 1:
        return [path]
    counts = side_path(path, ".counts.tsv")
    # gensim reads this file (fvocab) split at whitespace too: its names are escaped as the .vec's are
    with stage(counts).open("w", encoding="utf-8", newline="\n") as out:
        for columns in kept:
            out.write(_side_lines(rows, columns, spaces=True))
    return [path, counts]


@contextlib.contextmanager
def _naming(target: Path) -> Iterator[None]:
    """An OSError that names no file (a write on a full disk: ENOSPC) raised naming `target`."""
    try:
        yield
    except OSError as exc:
        if exc.filename is not None:
            raise
        raise OSError(exc.errno, exc.strerror, str(target)) from None


def _npy(path: Path, rows: Rows, stage: Callable[[Path], Path]) -> list[Path]:
    # np.save adds .npy to any other name; say the name it really writes.
    path = path if path.suffix == ".npy" else path.with_name(path.name + ".npy")
    vocab = path.with_suffix(".vocab.txt" if len(rows.kind.side) == 1 else ".vocab.tsv")
    # the header for the known shape, then each block's bytes in order: the matrix is never held whole,
    # a full disk is an ENOSPC at a write (a map over a sparse file died of SIGBUS), and a killed export
    # leaves only what it wrote (space reserved up front left the whole matrix's size behind)
    dtype = np.dtype("<f4")
    header = {"descr": np.lib.format.dtype_to_descr(dtype), "fortran_order": False}
    written = 0
    with stage(path).open("wb") as matrix, stage(vocab).open("w", encoding="utf-8", newline="\n") as names:
        with _naming(path):
            np.lib.format.write_array_header_1_0(matrix, {**header, "shape": (rows.count, rows.dim)})
        for columns, block in rows.blocks:
            block = np.ascontiguousarray(block, dtype=dtype)
            if block.ndim != 2 or block.shape[1] != rows.dim or written + len(block) > rows.count:
                raise ValueError(f"a block of shape {block.shape} past ({rows.count}, {rows.dim}) rows")
            with _naming(path):
                matrix.write(block.data)
            written += len(block)
            names.write(_side_lines(rows, columns))
        if written != rows.count:  # the header says rows.count: a short file would not load
            raise ValueError(f"{written} rows written where {rows.count} were announced")
        with _naming(path):
            matrix.flush()
            os.fsync(matrix.fileno())  # a delayed allocation's ENOSPC is said here, not lost at close
    return [path, vocab]


def _parquet(path: Path, rows: Rows, stage: Callable[[Path], Path]) -> list[Path]:
    import pyarrow as pa
    import pyarrow.parquet as pq

    types = {int: pa.int64(), str: pa.string()}
    fields = [(name, types[kind]) for name, kind in rows.kind.columns]
    schema = pa.schema([*fields, ("vector", pa.list_(pa.float32(), rows.dim))])
    with pq.ParquetWriter(stage(path), schema) as writer:
        for columns, block in rows.blocks:
            flat = np.asarray(block, dtype=np.float32).reshape(-1)
            vectors = pa.FixedSizeListArray.from_arrays(pa.array(flat), rows.dim)
            arrays = [pa.array(list(columns[name]), kind) for name, kind in fields]
            writer.write_table(pa.Table.from_arrays([*arrays, vectors], schema=schema))
    return [path]


def _projector(path: Path, rows: Rows, stage: Callable[[Path], Path]) -> list[Path]:
    vectors_path, meta_path = side_path(path, ".vectors.tsv"), side_path(path, ".metadata.tsv")
    with (
        stage(vectors_path).open("w") as vec_out,
        stage(meta_path).open("w", encoding="utf-8", newline="\n") as meta_out,
    ):
        if len(rows.kind.side) > 1:  # the projector reads a header only where there are several columns
            meta_out.write("\t".join(rows.kind.side) + "\n")
        for columns, block in rows.blocks:
            np.savetxt(vec_out, np.asarray(block, dtype=np.float32), delimiter="\t", fmt="%.7g")
            meta_out.write(_side_lines(rows, columns))
    return [vectors_path, meta_path]


EXPORTS: dict[ExportFormat, ExportRule] = {
    ExportFormat.WORD2VEC: ExportRule(
        (".vec", ".txt", ".w2v"), ".vec, .txt or .w2v (word2vec text)", _word2vec
    ),
    ExportFormat.NPY: ExportRule((".npy",), ".npy", _npy),
    ExportFormat.PARQUET: ExportRule((".parquet",), ".parquet", _parquet),
    ExportFormat.PROJECTOR: ExportRule((), "", _projector),
}


# Suffixes a side file's name replaces: a format's own, and .tsv (`h.tsv` -> h.vectors.tsv). Any other
# part after a dot is the name's own: `h.layer0` (a layer's files without a suffix) keeps its layer.
_REPLACED = (".vec", ".txt", ".w2v", ".npy", ".parquet", ".tsv")


def side_path(path: Path, tail: str) -> Path:
    """The file ending in `tail` beside `path` (w.vec -> w.counts.tsv, h.layer0 -> h.layer0.vectors.tsv)."""
    stem = path.stem if path.suffix.lower() in _REPLACED else path.name
    return path.with_name(stem + tail)


def formats_help() -> str:
    """The formats and the suffixes that choose them, as the command line's --format help says it."""
    chosen = [f"{f.value} for {'/'.join(rule.suffixes)}" for f, rule in EXPORTS.items() if rule.suffixes]
    return f"{', '.join(f.value for f in EXPORTS)} (default: {', '.join(chosen)})"


def refuse_stdout(output: object, what: str) -> None:
    """Refuse "-" as an output, as every command that writes files does (`-i -` reads stdin; no output is a
    stream: a store is resumed and read back, an export is several files written whole); `what` says what is
    written and the fix."""
    if str(output) == "-":
        raise CorpusError(f"-: stdout is not an output: {what}")


def export_format(path: Path, fmt: ExportFormat | str | None) -> ExportFormat:
    """The format asked for, or the one the suffix names; a suffix naming another format is refused,
    and so is a suffix that names none (`o.weird`) when no format is asked: nothing is written by guess.
    "-" (stdout) is refused: an export is files (word2vec text with its counts beside it), written whole."""
    refuse_stdout(path, "static vectors are written to a file; give a file name such as vectors.vec")
    implied = next((f for f, rule in EXPORTS.items() if path.suffix.lower() in rule.suffixes), None)
    if fmt is None:
        if implied is None:
            suffixes = ", ".join(rule.described for rule in EXPORTS.values() if rule.described)
            raise InvalidInput(
                f"{path.name}: the suffix {path.suffix or '(none)'} names no export format; end the name "
                f"in {suffixes.rsplit(', ', 1)[0]} or {suffixes.rsplit(', ', 1)[-1]}, or name the format "
                f"(format=, --format): {', '.join(f.value for f in ExportFormat)}"
            )
        return implied
    chosen = ExportFormat.parse(fmt, what="export format")
    if implied is not None and implied is not chosen:
        raise InvalidInput(
            f"{path.name} ends in {path.suffix} (the {implied.value} format) but the format asked is "
            f"{chosen.value}; "
            f"leave the format out (the suffix chooses) or name the file for {chosen.value}"
        )
    return chosen


def write_rows(
    path: str | Path, fmt: ExportFormat | str | None, rows: Rows, *, stage: Staged | None = None
) -> list[Path]:
    """Write `rows` to `path` in `fmt` (None: the suffix chooses); returns the files written.

    With `stage` (from `staged()`) the files are renamed into place when that ends, with the others
    staged there; else when this returns."""
    path = Path(path)
    chosen = export_format(path, fmt)
    if not path.parent.exists():
        raise InvalidInput(f"cannot write {path}: the folder {path.parent} does not exist")
    if stage is not None:
        return EXPORTS[chosen].write(path, rows, stage)
    with staged() as own:
        return EXPORTS[chosen].write(path, rows, own)


_WORDS = RowKind(columns=(("word", str), ("count", int)), side=("word", "count"))


def write_vectors(
    path: str | Path, fmt: ExportFormat | str | None, words: Sequence[str], counts: np.ndarray,
    vectors: np.ndarray, *, stage: Staged | None = None,
) -> list[Path]:  # fmt: skip
    """Write (n, d) `vectors` of `words` with their `counts`; returns the files written (renamed into
    place with `stage`'s others where one is given, as `write_rows`)."""
    vectors = np.asarray(vectors, dtype=np.float32)
    block = ({"word": list(words), "count": np.asarray(counts).tolist()}, vectors)
    return write_rows(path, fmt, Rows(_WORDS, len(words), int(vectors.shape[1]), [block]), stage=stage)
