"""Audit 26f: `tokens -i FILE` (and `-i -`) read as embed reads, its output written text by text; the
anatomy's proof line says the comparison that came out; `proof_holds` in the anatomy's JSON; a pair on a
one-segment model refused by `tokens` as by embed; the pair's refusal over the limit said in --long's help."""

from __future__ import annotations

import io
import json
import math
import sys
from pathlib import Path
from typing import Any

import pytest
from fastapi.testclient import TestClient

import bertscope
from bertscope.anatomy import Anatomy
from bertscope.server import create_app
from console import run_main
from tiny_models import config_variant


def _items(*args: str) -> list[dict[str, Any]]:
    ran = run_main("tokens", *args, "--json")
    assert ran.code == 0, ran
    items: list[dict[str, Any]] = json.loads(ran.stdout)["items"]
    return items


def test_tokens_reads_a_file_as_embed_does_with_each_line_number_as_id(tmp_path: Path) -> None:
    """`tokens -i two.txt` was 'No such option: -i': a file's texts had to be pasted as arguments."""
    (tmp_path / "texts.txt").write_text("a cat sat\n\n  \nthe dog\n")
    ran = run_main("tokens", "-i", str(tmp_path / "texts.txt"), "--json")
    assert ran.code == 0, ran
    items = json.loads(ran.stdout)["items"]
    assert [(item["text"], item["id"]) for item in items] == [("a cat sat", "1"), ("the dog", "4")]
    given = _items("a cat sat", "the dog")  # the same tokens as the texts given as arguments
    assert [{**item, "id": None} for item in items] == [{**item, "id": None} for item in given]
    assert [item["id"] for item in given] == ["1", "2"]
    assert "2 empty lines skipped (ids name each text's own line)" in ran.stderr
    table = run_main("tokens", "-i", str(tmp_path / "texts.txt"))
    assert table.code == 0 and "4: 'the dog'" in table.stdout and "│ dog " in table.stdout


def test_tokens_reads_stdin_with_i_dash_and_points_a_lone_dash_there(monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setattr(sys, "stdin", io.StringIO("hello world\nbread\n"))
    items = _items("-i", "-")
    assert [(item["text"], item["id"]) for item in items] == [("hello world", "1"), ("bread", "2")]
    dash = run_main("tokens", "-")
    assert dash.code == 1 and "give -i - (cat FILE | bertscope tokens -i -)" in dash.stderr


def test_tokens_refuses_texts_and_a_file_together_and_a_file_without_text(tmp_path: Path) -> None:
    (tmp_path / "blank.txt").write_text("\n \n")
    both = run_main("tokens", "a cat", "-i", str(tmp_path / "blank.txt"))
    assert both.code == 1 and "give texts as arguments or with -i/--input, not both" in both.stderr
    blank = run_main("tokens", "-i", str(tmp_path / "blank.txt"))
    assert blank.code == 1 and "every line is empty" in blank.stderr and blank.stdout == ""


def test_tokens_json_is_written_text_by_text_and_a_refusal_names_the_line(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    """Every text was tokenized and its JSON made before a byte was written: 20,000 texts peaked at 382 MB.
    Now a batch is tokenized at a time and its items written before the next batch is read."""
    from bertscope.cli import basics
    from bertscope.core.folder import FolderView

    monkeypatch.setattr(basics, "BATCH", 2)
    written_before: list[int] = []  # stdout's length as each batch is tokenized
    real = FolderView.tokenize

    def tokenize(self: Any, items: Any, **options: Any) -> Any:
        written_before.append(len(sys.stdout.getvalue()))  # type: ignore[union-attr]
        assert len(items) <= 2
        return real(self, items, **options)

    monkeypatch.setattr(FolderView, "tokenize", tokenize)
    lines = [f"text number {n}" for n in range(5)]
    (tmp_path / "five.txt").write_text("\n".join(lines) + "\n")
    items = _items("-i", str(tmp_path / "five.txt"))
    assert [item["text"] for item in items] == lines and [item["id"] for item in items] == list("12345")
    assert len(written_before) == 3 and written_before[0] == 0 and 0 < written_before[1] < written_before[2]
    # a text past the limit on line 4, under --long error: named by its line, the first items written
    (tmp_path / "five.txt").write_text("a\nb\nc\n" + "word " * 600 + "\ne\n")
    refused = run_main("tokens", "-i", str(tmp_path / "five.txt"), "--json", "--long", "error")
    assert refused.code == 1 and "the text of id '4'" in refused.stderr
    assert refused.stdout.startswith('{"items": [') and not refused.stdout.rstrip().endswith("]}")


def test_tokens_pad_reads_a_file_whole(tmp_path: Path) -> None:
    (tmp_path / "two.txt").write_text("a\nb c d\n")
    ran = run_main("tokens", "-i", str(tmp_path / "two.txt"), "--pad", "--json")
    assert ran.code == 0, ran
    assert json.loads(ran.stdout)["attention_mask"] == [[1, 1, 1, 0, 0], [1, 1, 1, 1, 1]]


@pytest.fixture(scope="module")
def tiny_bert(tiny_dirs: dict[str, Path]) -> str:
    return str(tiny_dirs["bert"])


@pytest.mark.parametrize("error", [1.44e-2, math.nan])
def test_a_failing_proof_says_its_error_is_not_within_the_bound(
    tiny_bert: str, monkeypatch: pytest.MonkeyPatch, error: float
) -> None:
    """`max |error| = 1.44e-02 (< 1e-5) FAILS`: the line said a comparison that was false."""
    monkeypatch.setattr(Anatomy, "max_abs_error", property(lambda self: error))
    ran = run_main("anatomy", "I like eating bread", "-m", tiny_bert)
    assert ran.code == 1
    assert f"max |error| = {error:.2e} (not <= 1e-5) FAILS" in ran.stdout
    assert "(< 1e-5)" not in ran.stdout and f"only to {error:.2e} (not <= 1e-5)" in ran.stderr


def test_a_proof_at_its_bound_holds_and_says_at_most(tiny_bert: str, monkeypatch: pytest.MonkeyPatch) -> None:
    """`proof_holds` tests <= while the line said <: an error equal to the bound held, said as under it."""
    monkeypatch.setattr(Anatomy, "max_abs_error", property(lambda self: self.proof_bound))
    ran = run_main("anatomy", "I like eating bread", "-m", tiny_bert)
    assert ran.code == 0, ran
    assert "max |error| = 1.00e-05 (<= 1e-5) holds" in ran.stdout


def test_proof_holds_is_in_the_anatomys_json_nan_failing(
    tiny_bert: str, monkeypatch: pytest.MonkeyPatch
) -> None:
    """`anatomy --json` and POST /anatomy (both `Anatomy.to_dict`) gave max_abs_error and proof_bound but not
    the verdict the library's `proof_holds` gives."""
    model = bertscope.load(tiny_bert, device="cpu")
    assert isinstance(model, bertscope.Model)
    (a,) = model.anatomy(["I like eating bread"])
    assert a.to_dict()["proof_holds"] is True is a.proof_holds
    ran = run_main("anatomy", "I like eating bread", "-m", tiny_bert, "--json")
    assert ran.code == 0 and json.loads(ran.stdout)["proof_holds"] is True
    with TestClient(create_app(model)) as client:
        answer = client.post("/anatomy", json={"text": "I like eating bread"})
    assert answer.status_code == 200 and answer.json()["proof_holds"] is True
    monkeypatch.setattr(Anatomy, "max_abs_error", property(lambda self: math.nan))
    assert a.to_dict()["proof_holds"] is False
    ran = run_main("anatomy", "I like eating bread", "-m", tiny_bert, "--json")
    shown = json.loads(ran.stdout)
    assert ran.code == 1 and shown["proof_holds"] is False and shown["max_abs_error"] is None


def test_tokens_refuses_a_pair_on_a_one_segment_model_as_embed_does(
    tiny_dirs: dict[str, Path], tmp_path: Path
) -> None:
    """`tokens --pair` showed B as segment 1, exit 0, on a model with type_vocab_size=1, which embed and
    anatomy refuse: the model has no row for it."""
    folder = str(config_variant(tiny_dirs, tmp_path, "bert", type_vocab_size=1))
    said = (
        "segment (token type) id 1 is out of range: this model has type_vocab_size=1, so it takes no text "
        "pairs"
    )
    for args in (("--json",), (), ("--pad",)):
        ran = run_main("tokens", "How are you", "--pair", "Fine.", "-m", folder, *args)
        assert ran.code == 1 and said in ran.stderr and ran.stdout == "", (args, ran)
    embedded = run_main("embed", "How are you", "--pair", "Fine.", "-m", folder)
    assert embedded.code == 1 and said in embedded.stderr
    assert run_main("tokens", "How are you", "-m", folder).code == 0  # one text: segment 0 only


@pytest.mark.parametrize("command", ["tokens", "anatomy"])
def test_long_help_says_a_pair_over_the_limit_is_refused(command: str) -> None:
    """`--long truncate` cuts a text, never a pair ('a pair is neither truncated nor windowed'): said only in
    docs/fast-modes.md, not where --long is chosen."""
    ran = run_main(command, "--help")
    words = " ".join(ran.stdout.replace("│", " ").split())
    assert "a --pair over the limit is refused whatever --long says" in words


def test_the_docs_say_a_pair_over_the_limit_is_refused_and_show_tokens_i() -> None:
    page = " ".join((Path(__file__).parent.parent / "docs" / "tokens-and-layers.md").read_text().split())
    assert "a pair over the model's limit is refused whatever `long` says" in page.lower()
    assert "$ bertscope tokens -i texts.txt" in page and "3: 'How are you?'" in page
