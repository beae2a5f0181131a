"""Review 26 of the command-line fixes: tokens -i reads a record's text and id from the fields named
(--text-field/--id-field, as embed -i), and --pad names each file record by its id."""

from __future__ import annotations

import io
import json
import sys
from pathlib import Path
from typing import Any

import pytest

from console import run_main


def _keyed(tmp_path: Path) -> Path:
    path = tmp_path / "keyed.jsonl"
    rows = [{"sentence": "I like bread", "key": "a7"}, {"sentence": "cats sleep", "key": "b9"}]
    path.write_text("".join(json.dumps(row) + "\n" for row in rows))
    return path


def test_tokens_reads_the_text_and_id_fields_named_as_embed_does(tmp_path: Path) -> None:
    """tokens' refusal said "such as --text-field sentence", and tokens had no --text-field."""
    path = _keyed(tmp_path)
    ran = run_main("tokens", "-i", str(path), "--text-field", "sentence", "--id-field", "key", "--json")
    assert ran.code == 0, ran
    items = json.loads(ran.stdout)["items"]
    assert [(item["id"], item["text"]) for item in items] == [("a7", "I like bread"), ("b9", "cats sleep")]
    unnamed = run_main("tokens", "-i", str(path))
    assert unnamed.code == 1 and "name the text's field, such as --text-field sentence" in unnamed.stderr
    table = run_main("tokens", "-i", str(path), "--text-field", "sentence", "--id-field", "key")
    assert table.code == 0 and "b9: 'cats sleep'" in table.stdout
    # a field named where there are no records is refused, as embed refuses it
    lines = tmp_path / "lines.txt"
    lines.write_text("a cat\n")
    idle = run_main("tokens", "-i", str(lines), "--id-field", "key")
    assert idle.code == 1 and "drop --id-field" in idle.stderr and idle.stdout == ""


def test_tokens_pad_names_a_file_record_by_its_id(tmp_path: Path) -> None:
    """--pad titled a file's line 3 'text 1' and its --json carried no ids."""
    path = tmp_path / "gap.txt"
    path.write_text("a\n\nb c d\n")
    padded = run_main("tokens", "-i", str(path), "--pad", "--json")
    assert padded.code == 0, padded
    batch = json.loads(padded.stdout)
    assert batch["ids"] == ["1", "3"] and batch["attention_mask"] == [[1, 1, 1, 0, 0], [1, 1, 1, 1, 1]]
    table = run_main("tokens", "-i", str(path), "--pad")
    assert table.code == 0 and "3: 'b c d'" in table.stdout and "text 1" not in table.stdout
    keyed = run_main(
        "tokens",
        "-i",
        str(_keyed(tmp_path)),
        "--text-field",
        "sentence",
        "--id-field",
        "key",
        "--pad",
        "--json",
    )
    assert keyed.code == 0 and json.loads(keyed.stdout)["ids"] == ["a7", "b9"]
    given = run_main("tokens", "a", "b c", "--pad", "--json")
    assert given.code == 0 and json.loads(given.stdout)["ids"] == ["1", "2"]


def _no_load(monkeypatch: pytest.MonkeyPatch) -> None:
    """A model load fails loudly: a refusal seen instead proves the file was read before any load."""
    from bertscope.cli import layers

    def refuse(*args: Any, **kwargs: Any) -> Any:
        raise AssertionError("the model loaded before the file was read")

    monkeypatch.setattr(layers, "load_model", refuse)


def _conllu(path: Path, ids: list[str]) -> Path:
    """Three words in a chain (each word's head the next, the last the root) under the IDs given."""
    heads = ["2", "3", "0"]
    rows = [
        f"{i}\t{w}\t_\tNOUN\t_\t_\t{h}\tdep\t_\t_"
        for i, w, h in zip(ids, ["The", "cat", "sat"], heads, strict=True)
    ]
    path.write_text("\n".join(rows) + "\n\n", encoding="utf-8")
    return path


@pytest.mark.parametrize("task", [[], ["--task", "distance"], ["--task", "depth"]])
def test_probe_refuses_a_malformed_file_before_the_model_loads(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch, task: list[str]
) -> None:
    """probe loaded the model (22 s and an export on a fresh cache) before it read -i and --test."""
    _no_load(monkeypatch)
    bad = _conllu(tmp_path / "bad.conllu", ["1", "2-x", "3"])
    said = "the ID '2-x' is neither a word range (3-4) nor an empty node (3.1); fix the ID column"
    ran = run_main("probe", "-i", str(bad), *task)
    assert (ran.code, ran.stderr) == (1, f"error: {bad}:2: {said}\n")
    good = _conllu(tmp_path / "good.conllu", ["1", "2", "3"])
    held = run_main("probe", "-i", str(good), "--test", str(bad), *task)
    assert (held.code, held.stderr) == (1, f"error: {bad}:2: {said}\n")


def test_probe_refuses_a_malformed_sentence_file_before_the_model_loads(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    _no_load(monkeypatch)
    bad = tmp_path / "topics.tsv"
    bad.write_text("a cat sat\tanimals\nno label here\n")
    ran = run_main("probe", "-i", str(bad), "--level", "sentence")
    assert (ran.code, ran.stderr) == (1, f"error: {bad}:2: expected text<TAB>label\n")


class _Terminal(io.StringIO):
    def isatty(self) -> bool:
        return True


@pytest.mark.parametrize("terminal", [True, False])
def test_nncf_bars_reach_a_terminal_and_never_a_log(monkeypatch: pytest.MonkeyPatch, terminal: bool) -> None:
    """--fast and int8_static wrote NNCF's redrawn bars ('Applying Weight Compression ━━━ 100%') into a log
    when stderr was a file: they go to stderr only where it is a terminal, and never to stdout (data)."""
    from rich.console import Console

    from bertscope.backends.openvino import _quiet_nncf

    stdout, stderr = io.StringIO(), _Terminal() if terminal else io.StringIO()
    monkeypatch.setattr(sys, "stdout", stdout)
    monkeypatch.setattr(sys, "stderr", stderr)
    bar = "Applying Weight Compression ━━━━━━━━ 100%"
    with _quiet_nncf():
        Console().print(bar)  # as NNCF's rich progress writes: to sys.stdout as it is then
        print(bar)
    assert stdout.getvalue() == ""
    assert stderr.getvalue().count("Applying Weight Compression") == (2 if terminal else 0)


def test_the_static_neighbour_table_names_its_column_token_as_json_does() -> None:
    """The table's column was `piece` where --json, the service, parquet and `Neighbor` say `token`."""
    table = run_main("static", "bread", "-k", "3")
    assert table.code == 0, table
    header = next(line for line in table.stdout.splitlines() if "rank" in line)
    assert [cell.strip() for cell in header.split("┃")[1:5]] == ["rank", "token", "id", "score"]
    as_json = json.loads(run_main("static", "bread", "-k", "3", "--json").stdout)
    first = as_json["items"][0]["neighbors"][0]
    assert {"token", "id", "score"} <= set(first) and first["token"] in table.stdout
