"""Every command that reads a file of texts takes --text-field, as `embed -i` and `verify` do: the texts of a
.jsonl whose field is not `text` give what the same texts in a .txt give, and --text-field on a .txt (a
line a text, no field to read) is refused in one line, as `embed` refuses it."""

from __future__ import annotations

import json
from pathlib import Path

import pytest

from console import run_main

TEXTS = [
    "She bought fresh bread at the bakery.",
    "The river bank was covered in snow.",
    "He plays the guitar every evening.",
    "Stocks fell sharply on Monday.",
]


@pytest.fixture(scope="module")
def files(tmp_path_factory: pytest.TempPathFactory) -> tuple[Path, Path]:
    folder = tmp_path_factory.mktemp("text_field")
    lines, records = folder / "texts.txt", folder / "records.jsonl"
    lines.write_text("\n".join(TEXTS) + "\n", encoding="utf-8")
    records.write_text("".join(json.dumps({"id": i, "body": t}) + "\n" for i, t in enumerate(TEXTS)))
    return lines, records


# Each command with its texts last: a .txt or the .jsonl with --text-field body must give the same output
COMMANDS = {
    "geometry": ["geometry", "--layers", "1,6", "--json", "-i"],
    "cka": ["cka", "--json", "-i"],
    "compare": ["compare", "bundled", "bundled", "--json", "-i"],
}


@pytest.mark.parametrize("name", list(COMMANDS))
def test_records_field_reads_as_lines(name: str, files: tuple[Path, Path]) -> None:
    lines, records = files
    args = [*COMMANDS[name][:-1], "--backend", "torch", COMMANDS[name][-1]]
    from_lines = run_main(*args, str(lines))
    from_records = run_main(*args, str(records), "--text-field", "body")
    assert from_lines.code == 0, from_lines.stderr
    assert from_records.code == 0, from_records.stderr
    assert json.loads(from_records.stdout) == json.loads(from_lines.stdout)


def test_records_without_the_field_named(files: tuple[Path, Path]) -> None:
    ran = run_main("cka", "--backend", "torch", "-i", str(files[1]))
    assert ran.code == 1  # a corpus error, as `embed -i` exits on it
    assert "no field 'text'" in ran.stderr and "body" in ran.stderr


@pytest.mark.parametrize(
    "args",
    [
        ["geometry", "--backend", "torch", "-i"],
        ["cka", "--backend", "torch", "-i"],
        ["contextuality", "--backend", "torch", "-i"],
        ["fit-post", "--backend", "torch", "-o", "post.npz"],
        ["bench", "--modes", "float32", "-i"],  # bench has no --backend: it times each mode's runtime
    ],
    ids=lambda a: a[0],
)
def test_text_field_on_lines_refused(args: list[str], files: tuple[Path, Path]) -> None:
    ran = run_main(*args, str(files[0]), "--text-field", "body")
    assert ran.code == 1
    line = ran.stderr.strip()
    assert "\n" not in line
    assert "texts.txt is read a line a text" in line and "drop --text-field" in line


def test_bench_text_field_without_file_refused() -> None:
    ran = run_main("bench", "--text-field", "body")
    assert ran.code == 1
    assert "--text-field names a field of -i FILE's records" in ran.stderr


def test_static_corpus_text_field(files: tuple[Path, Path], tmp_path: Path) -> None:
    lines, records = files
    common = ["static", "--backend", "torch", "-q", "--corpus"]
    assert run_main(*common, str(lines), "-o", str(tmp_path / "lines.vec")).code == 0
    ran = run_main(*common, str(records), "--text-field", "body", "-o", str(tmp_path / "records.vec"))
    assert ran.code == 0, ran.stderr
    assert (tmp_path / "records.vec").read_text() == (tmp_path / "lines.vec").read_text()
    assert (tmp_path / "records.counts.tsv").read_text() == (tmp_path / "lines.counts.tsv").read_text()


def test_static_text_field_without_corpus_refused() -> None:
    ran = run_main("static", "bread", "--text-field", "body")
    assert ran.code == 1
    assert "--text-field: for --corpus only" in ran.stderr


def test_static_corpus_text_field_on_lines_refused(files: tuple[Path, Path], tmp_path: Path) -> None:
    ran = run_main(
        "static", "--backend", "torch", "--corpus", str(files[0]), "--text-field", "body",
        "-o", str(tmp_path / "x.vec"),
    )  # fmt: skip
    assert ran.code == 1
    assert "drop --text-field" in ran.stderr
    assert not (tmp_path / "x.vec").exists()
