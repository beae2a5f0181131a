"""The research commands' options: outputs checked before the work, input files read or refused in one line,
true occurrence counts, texts printed as written, and one spelling of a mode accepted as the other."""

from __future__ import annotations

import json
from pathlib import Path
from typing import Any

import pytest

import bertscope
from bertscope.core.post import load_post
from bertscope.errors import InvalidInput
from bertscope.research.baseline import read_pairs
from bertscope.research.senses import word_senses
from console import Ran, run_main

SENSES = Path(__file__).parent / "data" / "bank_senses.txt"
BRACKETS = ["the bank [b] is wide", "my bank [x] said no", "a bank [y] of fog"]
LATIN1 = "caf\xe9\tcoffee shop\t1\n".encode("latin-1")


def one_line_error(ran: Ran, needle: str) -> None:
    assert ran.code == 1, ran
    assert ran.stderr.startswith("error: ") and needle in ran.stderr, ran.stderr
    assert "Traceback" not in ran.stderr and ran.stderr.count("\n") == 1


@pytest.fixture(scope="module")
def store(tmp_path_factory: pytest.TempPathFactory, bundled: bertscope.Model) -> Path:
    """Word rows of the bank corpus and three texts with brackets: 'bank' occurs 23 times."""
    root = tmp_path_factory.mktemp("options")
    texts = root / "bank.txt"
    texts.write_text(SENSES.read_text(encoding="utf-8") + "\n".join(BRACKETS) + "\n", encoding="utf-8")
    path = root / "words.parquet"
    bertscope.embed_corpus(texts, path, model=bundled, level="words")
    return path


@pytest.fixture
def no_model(monkeypatch: pytest.MonkeyPatch) -> None:
    """Loading a model fails the test: what these commands refuse, they refuse before any work."""
    from bertscope.cli import explain, research

    def refuse(*args: Any, **kwargs: Any) -> None:
        raise AssertionError("the work ran before the output was checked")

    for module in (explain, research):
        monkeypatch.setattr(module, "load_model", refuse)


def test_fit_post_refuses_a_wrong_suffix_and_an_existing_file(
    tmp_path: Path, bundled: bertscope.Model
) -> None:
    texts = tmp_path / "texts.txt"
    texts.write_text("\n".join(f"sentence number {n} about bread" for n in range(8)) + "\n")
    kept = tmp_path / "small.parquet"
    kept.write_bytes(b"a corpus store")
    one_line_error(run_main("fit-post", "-i", str(texts), "-o", str(kept), "--dim", "1"), "not .parquet")
    assert kept.read_bytes() == b"a corpus store"
    one_line_error(run_main("fit-post", "-i", str(texts), "-o", str(tmp_path / "w.txt")), ".safetensors")
    assert not (tmp_path / "w.txt").exists()
    fitted = tmp_path / "w.safetensors"
    fitted.write_bytes(b"an older fit")
    args = ["fit-post", "-i", str(texts), "-o", str(fitted), "--kind", "abtt", "--dim", "1"]
    one_line_error(run_main(*args), "pass --overwrite")
    assert fitted.read_bytes() == b"an older fit"
    assert run_main(*args, "--overwrite").code == 0
    assert load_post(fitted).kind.value == "abtt"


def test_calibrate_keeps_a_first_row_that_ends_in_a_number(tmp_path: Path) -> None:
    pairs = tmp_path / "pairs.tsv"
    pairs.write_text("a cat\ta kitten\t1.0\na cat\ta car\t0\n")
    assert read_pairs(pairs) == [("a cat", "a kitten", 1), ("a cat", "a car", 0)]
    pairs.write_text("text_a\ttext_b\tlabel\na cat\ta kitten\t1\n")
    assert read_pairs(pairs) == [("a cat", "a kitten", 1)]
    pairs.write_text("a cat\ta kitten\na cat\ta car\t0\n")
    with pytest.raises(InvalidInput, match=r"pairs.tsv:1: expected"):
        read_pairs(pairs)


@pytest.mark.parametrize(
    "args",
    [
        ["explain", "a", "b", "-o", "{dir}/x.txt"],
        ["plot", "static", "cat", "dog", "car", "-o", "{dir}/s.txt"],
        ["contextuality", "-i", "{dir}/in.txt", "-o", "{dir}/c.txt"],
        ["explain", "a", "b", "-o", "{dir}/no_suffix"],
    ],
)
def test_a_picture_with_a_wrong_suffix_is_refused_before_the_work(
    args: list[str], tmp_path: Path, no_model: None
) -> None:
    (tmp_path / "in.txt").write_text("the bank\n")
    ran = run_main(*(a.format(dir=tmp_path) for a in args))
    one_line_error(ran, "not a picture format" if "." in args[-1] else "no suffix")
    assert ".png, .ps" in ran.stderr and list(tmp_path.iterdir()) == [tmp_path / "in.txt"]


def test_senses_refuses_a_picture_with_a_wrong_suffix_before_clustering(
    store: Path, tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    from bertscope.research import senses

    monkeypatch.setattr(senses, "word_senses", None)  # called: a TypeError, not the one-line refusal
    one_line_error(run_main("senses", "bank", "--in", str(store), "-o", str(tmp_path / "s.txt")), ".png")


@pytest.mark.parametrize(
    "args",
    [["plot", "layers", "hi", "-o", "{dir}/x.txt"], ["cka", "-i", "{dir}/in.txt", "-o", "{dir}/cka.txt"]],
)
def test_other_pictures_with_a_wrong_suffix_end_in_one_line(args: list[str], tmp_path: Path) -> None:
    """cka and plot layers draw through save_figure: refused there, after the work (cka's note first)."""
    (tmp_path / "in.txt").write_text("the cat sat on the mat\na dog lay on the rug\nbread is good\n" * 2)
    ran = run_main(*(a.format(dir=tmp_path) for a in args))
    assert ran.code == 1 and "Traceback" not in ran.stderr
    last = ran.stderr.splitlines()[-1]
    assert last.startswith("error: cannot write the picture") and "not a picture format" in last


def test_files_that_are_not_utf8_are_refused_in_one_line(tmp_path: Path) -> None:
    latin = tmp_path / "latin.txt"
    latin.write_bytes(LATIN1)
    one_line_error(run_main("calibrate", str(latin)), "latin.txt:1: not UTF-8 text")
    ran = run_main("distill", "--vocabulary", str(latin), "-o", str(tmp_path / "d5"))
    one_line_error(ran, "latin.txt:1: not UTF-8 text")
    assert "iconv" in ran.stderr and not (tmp_path / "d5").exists()
    # the eval pair and word readers name the line of the bad byte too (they named none)
    later = tmp_path / "later.tsv"
    later.write_bytes(b"a cat\ta dog\t0.5\n" + LATIN1)
    for kind in ("pairs", "words"):
        one_line_error(run_main("eval", kind, "-i", str(later)), "later.tsv:2: not UTF-8 text")


def test_senses_reports_true_counts_and_refuses_a_limit_below_three(store: Path) -> None:
    base = ["senses", "bank", "--in", str(store), "-k", "2", "--json"]
    all_of_them = run_main(*base, "--limit", "23")
    assert all_of_them.code == 0 and "note" not in all_of_them.stderr
    found = json.loads(all_of_them.stdout)
    assert found["n_occurrences"] == 23 and found["capped"] is False
    fewer = run_main(*base, "--limit", "22")
    assert "occurs more than 22 times" in fewer.stderr and json.loads(fewer.stdout)["capped"] is True
    refused = run_main(*base, "--limit", "0")
    assert refused.code == 2 and "--limit" in refused.stderr
    with pytest.raises(InvalidInput, match="limit=0"):
        word_senses(store, "bank", limit=0)


def test_snippets_with_brackets_are_printed_as_written(store: Path) -> None:
    shown = run_main("senses", "bank", "--in", str(store), "-k", "1", "--examples", "23").stdout
    listed = run_main("similar", "--in", str(store), "--word", "bank", "-k", "23").stdout
    for table in (shown, listed):
        assert "«bank» [b] is wide" in table and "\\[" not in table


def test_bench_reads_a_mode_as_quantize_spells_it(monkeypatch: pytest.MonkeyPatch) -> None:
    from bertscope.backends import modes

    asked: list[list[str]] = []
    monkeypatch.setattr(modes, "compare_modes", lambda texts, names, **kwargs: asked.append(names) or [])
    assert run_main("bench", "--modes", "int8_fused,INT8-static", "--drift", "--json").code == 0
    assert asked == [["int8_fused", "int8_static"]]


@pytest.mark.parametrize(
    "args",
    [
        ["plot", "words", "bank,river", "-i", "t.txt", "-o", "w.txt"],
        ["plot", "layers", "hi there", "-o", "l.txt"],
        ["cka", "-i", "t.txt", "-o", "c.txt"],
        ["eval", "pairs", "-i", "p.tsv", "-o", "s.txt"],
    ],
)
def test_every_picture_is_checked_before_the_model_loads(
    args: list[str], monkeypatch: pytest.MonkeyPatch, tmp_path: Path
) -> None:
    """The picture's suffix is refused before any model loads (the loader would fail the test if called)."""
    from bertscope.cli import evaluate, layers, pictures

    def never(*_: object, **__: object) -> object:
        raise AssertionError("the model loaded before the picture was checked")

    for module in (evaluate, layers, pictures):
        monkeypatch.setattr(module, "load_model", never)
    monkeypatch.chdir(tmp_path)
    (tmp_path / "p.tsv").write_text("a cat\ta dog\t1.0\nthe sun\tthe moon\t0.5\nbread\ttoast\t0.8\n")
    (tmp_path / "t.txt").write_text("a bank\nthe river\n")
    one_line_error(run_main(*args), "suffix")


def test_cka_and_probe_read_levels_as_embed_spells_them() -> None:
    from bertscope.cli.app import level_option

    assert [level_option(x, ["word", "sentence"]) for x in ("words", "sentences", "word", "sentence")] == [
        "word", "sentence", "word", "sentence",
    ]  # fmt: skip
    assert [level_option(x, ["token", "sentence"]) for x in ("tokens", "token")] == ["token", "token"]
