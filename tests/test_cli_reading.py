"""Every command's -i FILE is read as `embed -i` reads it (cli/app.py read_lines -> io/readers.py): a
line each of a .txt, the `text` field of each .jsonl/.csv/.tsv/.parquet record; the header-only table
and the Ray-only inputs and outputs refused in one line that names the fix."""

from __future__ import annotations

import json
from collections.abc import Callable
from pathlib import Path
from typing import Any

import numpy as np
import pyarrow as pa
import pyarrow.parquet as pq
import pytest

import bertscope
from bertscope.io.readers import read_corpus, read_lines
from console import run_main

TEXTS = [
    "I walked along the river bank at dawn.",
    "The bank raised its interest rates again.",
    "Fresh bread smells wonderful in the morning.",
    "She paid for the bread with a coin from the bank.",
]


@pytest.fixture(scope="module")
def inputs(tmp_path_factory: pytest.TempPathFactory) -> dict[str, Path]:
    """The same texts as a .txt, a .jsonl (id before text) and a .tsv with a text/label header."""
    folder = tmp_path_factory.mktemp("reading")
    txt, jsonl, tsv = folder / "t.txt", folder / "t.jsonl", folder / "t.tsv"
    txt.write_text("".join(f"{text}\n" for text in TEXTS))
    jsonl.write_text("".join(json.dumps({"id": f"d{n}", "text": t}) + "\n" for n, t in enumerate(TEXTS)))
    tsv.write_text("text\tlabel\n" + "".join(f"{text}\tlabel{n}\n" for n, text in enumerate(TEXTS)))
    return {"txt": txt, "jsonl": jsonl, "tsv": tsv}


def _json(*args: str) -> Any:
    code, stdout, stderr = run_main(*args)
    assert code == 0, stderr
    return json.loads(stdout)


def _fit_post(path: Path, tmp_path: Path, _: Path) -> Any:
    out = tmp_path / f"{path.suffix[1:]}.safetensors"
    code, _, stderr = run_main("fit-post", "-i", str(path), "--kind", "pca", "--dim", "2", "-o", str(out))
    assert code == 0 and f"fitted on {len(TEXTS)} texts" in stderr + _, stderr
    from safetensors.numpy import load_file

    return {name: np.round(array, 5).tolist() for name, array in sorted(load_file(out).items())}


def _bench(path: Path, tmp_path: Path, tiny: Path) -> Any:
    rows = _json("bench", "-i", str(path), "--modes", "float32", "-m", str(tiny), "--json")
    return [{k: v for k, v in row.items() if k in ("mode", "texts", "cos_min")} for row in rows]


# each command run on the input file, a folder for its outputs and the tiny BERT's folder: the commands
# that take -m read on the tiny BERT (what is read does not depend on the model; each run on the bundled
# model cost ~0.1-0.4 s more, and each command runs three times)
COMMANDS: dict[str, Callable[[Path, Path, Path], Any]] = {
    "fit-post": _fit_post,
    "geometry": lambda path, _, tiny: _json(
        "geometry", "-i", str(path), "--layers", "-1", "-m", str(tiny), "--json"
    ),
    "cka": lambda path, _, tiny: _json(
        "cka", "-i", str(path), "--level", "sentence", "-m", str(tiny), "--json"
    ),
    # "bundled" by name, loaded afresh on each side, took 3.3 s for the three runs; on the tiny BERT the
    # texts read still tell the inputs apart (the "tokens" it counts)
    "compare": lambda path, _, tiny: _json(
        "compare", str(tiny), str(tiny), "-i", str(path), "--top", "3", "--json"
    ),
    "bench": _bench,
    "contextuality": lambda path, _, tiny: _json(
        "contextuality", "-i", str(path), "--words", "bank", "--no-plot", "-m", str(tiny), "--json"
    ),
    "plot words": lambda path, tmp, _: _json(
        "plot", "words", "bank,bread", "-i", str(path), "-o", str(tmp / f"{path.suffix[1:]}.png"), "--json"
    ),
    "similarity --reference": lambda path, *_: _json(
        "similarity", "a river bank", "money in the bank", "--reference", str(path), "--json"
    ),
}


@pytest.mark.parametrize("command", list(COMMANDS))
def test_records_give_what_the_txt_of_their_texts_gives(
    command: str,
    inputs: dict[str, Path],
    tmp_path: Path,
    bundled: bertscope.Model,
    tiny_dirs: dict[str, Path],
) -> None:
    """Before, a .jsonl's JSON syntax and a .tsv's header and label column were embedded as text."""
    run = COMMANDS[command]
    from_txt = run(inputs["txt"], tmp_path, tiny_dirs["bert"])
    assert run(inputs["jsonl"], tmp_path, tiny_dirs["bert"]) == from_txt
    assert run(inputs["tsv"], tmp_path, tiny_dirs["bert"]) == from_txt


def test_geometry_reads_a_parquet_by_its_text_column(inputs: dict[str, Path], tmp_path: Path) -> None:
    parquet = tmp_path / "t.parquet"
    pq.write_table(pa.table({"id": [f"d{n}" for n in range(len(TEXTS))], "text": TEXTS}), parquet)
    args = ("geometry", "--layers", "-1", "--json", "-i")
    assert _json(*args, str(parquet)) == _json(*args, str(inputs["txt"]))


def test_read_lines_streams_the_text_field(inputs: dict[str, Path]) -> None:
    for path in inputs.values():
        texts = read_lines(path)
        assert next(texts) == TEXTS[0]  # a generator: nothing read beyond the record at hand
        assert [TEXTS[0], *texts] == TEXTS
    assert list(read_lines(inputs["tsv"], text_field="label")) == [f"label{n}" for n in range(len(TEXTS))]


def test_a_record_without_the_text_field_is_the_embed_error(tmp_path: Path) -> None:
    source = tmp_path / "body.jsonl"
    source.write_text('{"id": 1, "body": "a text"}\n')
    for args in (("geometry", "-i", str(source)), ("embed", "-i", str(source))):
        code, _, stderr = run_main(*args)
        # the fix names the field that holds text, as the flag (audit 18f: it named no fix)
        told = (
            f"error: {source}:1: no field 'text'; the fields are: id, body; name the text's field, such as "
        )
        assert code == 1 and stderr == told + "--text-field body\n"


@pytest.mark.parametrize("content", ["a\tb\tc\n", "a\tb\tc\n1\t2\t3\n", "a\tb\tc"])
def test_a_header_without_the_text_field_is_named_even_with_no_rows(tmp_path: Path, content: str) -> None:
    source = tmp_path / "h.tsv"
    source.write_text(content)
    code, _, stderr = run_main("embed", "-i", str(source))
    assert code == 1 and stderr.startswith(f"error: {source}:1: no field 'text'; the fields are: a, b, c"), (
        stderr
    )


def test_a_header_without_the_id_field_is_named(tmp_path: Path) -> None:
    source = tmp_path / "t.csv"
    source.write_text("text\n")
    with pytest.raises(bertscope.CorpusError, match=r"t.csv:1: no id field 'key'; the fields are: text$"):
        list(read_corpus(source, id_field="key"))


def test_a_header_only_file_with_the_text_field_is_still_an_empty_corpus(tmp_path: Path) -> None:
    source = tmp_path / "h.tsv"
    source.write_text("text\tlabel\n")
    code, _, stderr = run_main("embed", "-i", str(source), "-o", str(tmp_path / "out.parquet"))
    assert code == 1 and "the corpus is empty" in stderr


def test_a_glob_input_without_ray_names_engine_ray(tmp_path: Path) -> None:
    pattern = str(tmp_path / "*.parquet")
    for output in ("out.parquet", "out_dir/"):
        code, _, stderr = run_main("embed", "-i", pattern, "-o", str(tmp_path / output))
        assert code == 1 and stderr.startswith(f"error: cannot read {pattern}: no such file")
        assert "--engine ray" in stderr and stderr.count("\n") == 1
    code, _, stderr = run_main("embed", "-i", str(tmp_path / "missing.txt"))
    assert code == 1 and "--engine ray" not in stderr  # a plain missing file gets no Ray hint


@pytest.mark.parametrize("folder_exists", [False, True])
def test_a_folder_output_without_ray_names_engine_ray_and_the_file_types(
    tmp_path: Path, inputs: dict[str, Path], folder_exists: bool
) -> None:
    output = tmp_path / "adir"
    if folder_exists:
        output.mkdir()
    code, _, stderr = run_main("embed", "-i", str(inputs["txt"]), "-o", str(output))
    assert code == 1 and stderr.count("\n") == 1 and "unknown output type (none)" not in stderr
    assert all(kind in stderr for kind in (".parquet", ".npy", ".db"))
    # a folder there is a Ray output; nothing there and no suffix is a type left out, not a folder
    assert ("--engine ray" in stderr) is folder_exists
    assert ("needs a known type" in stderr) is not folder_exists
    assert not (tmp_path / "adir.parts").exists()
