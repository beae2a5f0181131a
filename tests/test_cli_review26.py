"""Review 26 of the command-line fixes: tokens -i reads a record's text and id from the fields named
(--text-field/--id-field, as embed -i), and --pad names each file record by its id."""

from __future__ import annotations

import json
from pathlib import Path

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
