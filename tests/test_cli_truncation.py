"""Every command that cuts a text at the model's limit says so once, on stderr, naming the fix it has."""

from __future__ import annotations

import json
import warnings
from pathlib import Path
from typing import Any

import pytest

import bertscope
from bertscope.errors import InputTooLong, TruncatedTextsWarning
from console import Ran, run_main

LONG = "word " * 400  # 402 tokens: past the tiny BERT's 64 (and the bundled model's 256)
SHORT = "a cat sat on the mat"
WINDOW = "--long window keeps every token"
SPLIT = "split the text to see its end"
SHOWN = "--long window shows (and embeds) every token"  # tokens takes --long window itself

# command (with {text} for the text) -> the fix its one line names
COMMANDS: dict[str, tuple[list[str], str]] = {
    "similarity": (["similarity", "{text}", "a dog"], WINDOW),
    "similarity --json": (["similarity", "{text}", "a dog", "--json"], WINDOW),
    "embed": (["embed", "{text}", "a dog"], WINDOW),
    "embed --json": (["embed", "{text}", "--json"], WINDOW),
    "embed --tokens": (["embed", "{text}", "--tokens"], WINDOW),
    "embed --tokens --json": (["embed", "{text}", "--tokens", "--json"], WINDOW),
    "embed --level words": (["embed", "{text}", "--level", "words"], WINDOW),
    "tokens": (["tokens", "{text}", "a dog"], SHOWN),
    "tokens --json": (["tokens", "{text}", "--json"], SHOWN),
    "tokens --pad": (["tokens", "{text}", "--pad", "--json"], SHOWN),
    "anatomy": (["anatomy", "{text}"], SPLIT),
    "anatomy --json": (["anatomy", "{text}", "--json"], SPLIT),
    "attention": (["attention", "{text}"], SPLIT),
    "attention --json": (["attention", "{text}", "--json"], SPLIT),
    "explain": (["explain", "{text}", "a dog"], WINDOW),
    "explain --json": (["explain", "{text}", "a dog", "--json"], WINDOW),
}


def run(args: list[str], text: str) -> Ran:
    """The command on `text`, every cut warning shown (not once per place, as by default): a command that
    said the cut twice would print it twice here."""
    with warnings.catch_warnings():
        warnings.simplefilter("always", TruncatedTextsWarning)
        return run_main(*(text if arg == "{text}" else arg for arg in args))


def cut_lines(ran: Ran) -> list[str]:
    return [line for line in ran.stderr.splitlines() if "truncated" in line or "tokens cut" in line]


def on_tiny(args: list[str], tiny_dirs: dict[str, Path]) -> list[str]:
    """The command on the tiny BERT (64 tokens): the line said is the same whatever the model's limit, and
    the bundled model's 256 kept tokens cost each command a forward (and a 256 x 256 attention) more."""
    return [*args, "-m", str(tiny_dirs["bert"])]


@pytest.mark.parametrize("name", list(COMMANDS))
def test_a_cut_is_said_once_with_its_fix(name: str, tiny_dirs: dict[str, Path]) -> None:
    args, fix = COMMANDS[name]
    ran = run(on_tiny(args, tiny_dirs), LONG)
    assert ran.code == 0, ran.stderr
    said = cut_lines(ran)
    assert len(said) == 1, ran.stderr
    assert said[0].startswith("warning: 1 ") and "64 tokens" in said[0] and "338 tokens dropped" in said[0]
    assert said[0].endswith(fix) or fix + " " in said[0], said[0]
    assert "long='" not in said[0]  # the flag the user types, not the Python keyword
    if "--json" in args:
        json.loads(ran.stdout)  # stdout stays pure JSON: the line went to stderr


@pytest.mark.parametrize(
    "name", ["similarity", "embed --tokens", "tokens", "anatomy", "attention", "explain"]
)
def test_a_text_within_the_limit_says_nothing(name: str, tiny_dirs: dict[str, Path]) -> None:
    ran = run(on_tiny(COMMANDS[name][0], tiny_dirs), SHORT)
    assert ran.code == 0, ran.stderr
    assert cut_lines(ran) == [], ran.stderr


def test_plot_layers_says_a_cut_once(tmp_path: Path, tiny_dirs: dict[str, Path]) -> None:
    # the tiny BERT (64 tokens) draws its cut text in 64 x 64 cells a layer: the bundled model's 256 x 256
    # took ~8 s to draw, and the line said is the same whatever the model's limit
    model = str(tiny_dirs["bert"])
    ran = run(
        ["plot", "layers", "{text}", "-l", "0,2", "-m", model, "-o", str(tmp_path / "l.png"), "--json"], LONG
    )
    assert ran.code == 0, ran.stderr
    said = cut_lines(ran)
    assert len(said) == 1 and said[0].endswith(SPLIT), ran.stderr
    answer = json.loads(ran.stdout)
    # the cut in the answer too, as /explore/layers sends it (it was said on stderr alone)
    assert answer["n_dropped"] > 0 and answer["n_dropped"] == bertscope.load(model).tokenize(LONG).n_dropped


def test_similar_says_a_long_query_is_cut(tmp_path: Path, tiny_dirs: dict[str, Path]) -> None:
    corpus = tmp_path / "corpus.txt"
    corpus.write_text("a cat\na dog\nthe bank of the river\n")
    store = tmp_path / "store.parquet"  # embedded by the tiny BERT, which `similar` reloads from the store
    assert run_main(*on_tiny(["embed", "-i", str(corpus), "-o", str(store), "--quiet"], tiny_dirs)).code == 0
    ran = run(["similar", "{text}", "--store", str(store), "-k", "1", "--json"], LONG)
    assert ran.code == 0, ran.stderr
    said = cut_lines(ran)
    assert len(said) == 1 and "shorten it" in said[0], ran.stderr
    json.loads(ran.stdout)
    assert cut_lines(run(["similar", "{text}", "--store", str(store), "-k", "1"], SHORT)) == []


def test_verify_keeps_its_own_long_canary_quiet() -> None:
    ran = run(["verify", "--json"], "")
    assert ran.code == 0, ran.stderr
    assert cut_lines(ran) == [], ran.stderr


@pytest.mark.parametrize(
    "extra",
    [[], ["--tokens"], ["--level", "words"], ["--chunks", "sentence"], ["--chunks", "sentence", "--naive"]],
)
def test_long_error_names_the_text_as_its_table_and_file_do(
    extra: list[str], tiny_dirs: dict[str, Path], tmp_path: Path
) -> None:
    """`--long error` named the second argument "text 1" (the library's index from 0) where the tables
    print it as 2 and `text 2 is empty` counts from 1, and a line of -i by that index, not its id."""
    kind = "document" if "--chunks" in extra else "text"
    ran = run_main("embed", SHORT, LONG, "--long", "error", *extra, "-m", str(tiny_dirs["bert"]))
    assert ran.code == 1 and f" {kind} 2 has " in ran.stderr and f"{kind} 1 " not in ran.stderr, ran.stderr
    corpus = tmp_path / "texts.txt"
    corpus.write_text(f"{SHORT}\n\n{LONG}\n", encoding="utf-8")  # line 3: the id a corpus job gives it
    ran = run_main("embed", "-i", str(corpus), "--long", "error", *extra, "-m", str(tiny_dirs["bert"]))
    assert ran.code == 1 and f"the {kind} of id '3' has " in ran.stderr, ran.stderr


def test_the_library_still_counts_its_texts_from_0(tiny_models: dict[str, Any]) -> None:

    model: bertscope.Model = tiny_models["bert"]
    with pytest.raises(InputTooLong, match=r"^text 1 has 402 tokens"):
        model.embed([SHORT, LONG], long="error")
    with pytest.raises(InputTooLong, match=r"^document 1 has 402 tokens"):
        model.embed_chunks([SHORT, LONG], long="error")
