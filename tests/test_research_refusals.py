"""Bad input to fit-post, contextuality --words and calibrate is refused in one line, never a wrong
result: texts that give one vector (a whitening to 0 dimensions was written), one text, PCA past the
directions the texts span, --words with nothing in it or with -k, and calibrate's empty texts, empty file
and non-UTF-8 line."""

from __future__ import annotations

from pathlib import Path

import numpy as np
import pytest

import bertscope
import bertscope.cli.research as cli_research
from bertscope.core.post import PostKind, Whitening, fit_post, fit_post_on_texts, load_post
from bertscope.errors import InvalidInput
from bertscope.research.baseline import calibrate, read_pairs
from console import Ran, run_main

DATA = Path(__file__).parent / "data"
CONTEXTS = str(DATA / "contexts.txt")


def one_line(ran: Ran, *needles: str) -> str:
    """The one error line of a run refused as other input errors are (exit 1), holding every needle."""
    assert ran.code == 1, ran
    assert ran.stderr.startswith("error: ") and ran.stderr.count("\n") == 1, ran.stderr
    assert "Traceback" not in ran.stderr
    for needle in needles:
        assert needle in ran.stderr, ran.stderr
    return ran.stderr


@pytest.fixture
def bundled_cli(bundled: bertscope.Model, monkeypatch: pytest.MonkeyPatch) -> bertscope.Model:
    """The research commands load the session's bundled model."""
    monkeypatch.setattr(cli_research, "load_model", lambda *a, **k: bundled)
    return bundled


# 1. Texts that give one vector: nothing to whiten ----------------------------------------------------------


@pytest.mark.parametrize(
    ("kind", "nothing"),
    [("whitening", "nothing to whiten"), ("pca", "no direction to keep"),
     ("abtt", "no direction to remove"), ("standardize", "no variation to scale")],
)  # fmt: skip
def test_fit_post_refuses_vectors_that_are_one_vector(kind: str, nothing: str) -> None:
    one = np.tile(np.random.default_rng(0).normal(size=(1, 32)), (20, 1))
    said = f"^the 20 texts give one vector: {nothing}; give texts that differ$"
    with pytest.raises(InvalidInput, match=said):
        fit_post(one, kind)
    # The same text embedded in batches of other lengths differs in its last bits: still one vector.
    noisy = one + np.random.default_rng(1).normal(scale=1e-8, size=one.shape)
    with pytest.raises(InvalidInput, match=said):
        fit_post(noisy, kind)


def test_fit_post_command_refuses_one_repeated_text(tmp_path: Path, bundled_cli: bertscope.Model) -> None:
    ident = tmp_path / "ident.txt"
    ident.write_text("the same sentence again\n" * 20)
    out = tmp_path / "w.safetensors"
    ran = run_main("fit-post", "-i", str(ident), "--kind", "whitening", "-o", str(out))
    one_line(ran, "the 20 texts give one vector: nothing to whiten; give texts that differ")
    assert not out.exists()


def test_texts_that_differ_but_give_one_vector_are_told_to_change_the_options(
    bundled: bertscope.Model,
) -> None:
    texts = ["a cat sat", "the dog ran far", "rain again today"]
    # layer 0 cls is the [CLS] row for every text: "give texts that differ" would be no fix
    with pytest.raises(InvalidInput, match=r"^the 3 texts differ but give one vector with layers \[0\] and "):
        fit_post_on_texts(bundled, texts, "whitening", dim=1, layers="0", pooling="cls")


def test_a_post_file_of_0_dimensions_is_refused_when_loaded(tmp_path: Path) -> None:
    # What fit-post wrote before: a whitening 384 -> 0 dims, which made every vector empty.
    path = Whitening(np.zeros(384), np.zeros((384, 0)), {"dim": 0, "n_fit": 20}).save(
        tmp_path / "w.safetensors"
    )
    with pytest.raises(InvalidInput, match=r"w\.safetensors is a whitening to 0 dimensions: .*fit-post"):
        load_post(path)
    one_line(run_main("embed", "a cat", "--post", str(path)), "a whitening to 0 dimensions")
    # a mean and a matrix that do not fit each other are no post file either
    bad = Whitening(np.zeros(8), np.zeros((4, 2)), {}).save(tmp_path / "bad.safetensors")
    with pytest.raises(InvalidInput, match=r"not a bertscope post-processing file \(a mean \(d,\)"):
        load_post(bad)


# 2. One text -----------------------------------------------------------------------------------------------


def test_fit_post_command_names_the_file_and_its_count(tmp_path: Path) -> None:
    one = tmp_path / "one.txt"
    one.write_text("a single line\n")
    ran = run_main(
        "fit-post", "-i", str(one), "--kind", "pca", "--dim", "2", "-o", str(tmp_path / "p.safetensors")
    )
    one_line(ran, f"fit-post needs 2 texts or more; {one} gives 1")


def test_fit_post_names_itself_and_the_count() -> None:
    with pytest.raises(
        InvalidInput, match=r"^fit_post needs \(n, d\) vectors with n >= 2; got 1 \(shape \(1, 8\)\)"
    ):
        fit_post(np.ones((1, 8)), "pca", dim=2)


# 3. PCA and whitening: one limit, checked one way ----------------------------------------------------------


def test_pca_refuses_more_directions_than_the_texts_span_as_whitening_does() -> None:
    vectors = np.random.default_rng(0).normal(size=(30, 64))  # 30 centred vectors span 29 directions
    for kind, fewer in (("pca", "keep fewer"), ("whitening", "whiten to fewer")):
        said = rf"span fewer than 30 directions \(only 29\); fit on more texts \(at least 31\) or {fewer}"
        with pytest.raises(InvalidInput, match=said):
            fit_post(vectors, kind, dim=30)
    # without dim: all the width is asked, and 30 texts are too few for it; whitening would divide by
    # the missing directions' zero variance, PCA only rotates and keeps what they span, said
    with pytest.raises(InvalidInput, match=r"30 texts span only 29 directions .*dim=1\.\.29"):
        fit_post(vectors, "whitening")
    with pytest.warns(UserWarning, match=r"pca to 29 dimensions.*30 texts span 29 directions"):
        assert fit_post(vectors, "pca").dim_out == 29
    assert fit_post(vectors, "pca", dim=29).dim_out == 29


def test_pca_without_dim_keeps_the_directions_spanned_when_the_rest_are_constant() -> None:
    vectors = np.random.default_rng(0).normal(size=(200, 20))
    vectors[:, [3, 7]] = 0.5  # constant, as LayerNorm dimensions with ~0 weight are
    with pytest.warns(UserWarning, match="pca to 18 dimensions.*2 of their 20 directions are constant"):
        pca = fit_post(vectors, PostKind.PCA)
    assert pca.dim_out == 18
    with pytest.raises(InvalidInput, match=r"more texts will not help .*keep with dim=1\.\.18"):
        fit_post(vectors, "pca", dim=19)


# 4. contextuality --words ----------------------------------------------------------------------------------


@pytest.mark.parametrize("words", [",", " , "])
def test_contextuality_words_with_no_word_is_refused_in_flags(
    words: str, bundled_cli: bertscope.Model
) -> None:
    ran = run_main("contextuality", "-i", CONTEXTS, "--words", words, "--no-plot")
    one_line(ran, f"--words {words!r} names no word: give comma-separated words, e.g. --words bank")
    assert "words=" not in ran.stderr  # the command line's words, not the library's keyword


@pytest.mark.parametrize(
    ("flags", "said"),
    [(["-k", "3"], "--top-k 3 applies without --words"),
     (["--top-k", "10"], "--top-k 10 applies without --words"),  # typed, even at its default
     (["--min-contexts", "2"], "--min-contexts 2 applies without --words"),
     (["-k", "3", "--min-contexts", "2"], "--top-k 3 and --min-contexts 2 apply without --words")],
)  # fmt: skip
def test_contextuality_refuses_a_count_that_words_replaces(flags: list[str], said: str) -> None:
    ran = run_main("contextuality", "-i", CONTEXTS, "--words", "bank", *flags, "--no-plot")
    one_line(ran, said, "drop --words")


def test_the_library_refuses_top_k_beside_words_and_an_empty_word_list(bundled: bertscope.Model) -> None:
    """contextuality(words=[...], top_k=3) ignored top_k, and words=[] measured the most frequent words,
    both in silence; `--words bank` alone still runs (the CLI no longer hands its default -k on)."""
    texts = Path(CONTEXTS).read_text(encoding="utf-8").splitlines()
    with pytest.raises(
        InvalidInput, match=r"^top_k=3 chooses the most frequent words, which words= replaces"
    ):
        bundled.contextuality(texts, words=["bank"], top_k=3)
    with pytest.raises(InvalidInput, match=r"^words=\[\] names no word"):
        bundled.contextuality(texts, words=[])
    ran = run_main("contextuality", "-i", CONTEXTS, "--words", "bank", "--no-plot", "--json")
    assert ran.code == 0 and '"bank"' in ran.stdout, ran.stderr


# 5. calibrate's file ---------------------------------------------------------------------------------------


def test_calibrate_names_the_line_and_the_column_of_an_empty_text(tmp_path: Path) -> None:
    pairs = tmp_path / "p.tsv"
    pairs.write_text("a cat\t\t1\na car\ta bus\t0\n")
    ran = run_main("calibrate", "-i", str(pairs), "-o", str(tmp_path / "t.json"))
    one_line(ran, f"{pairs}:1: the second text is empty", "give both texts of the pair")
    pairs.write_text("a cat\ta kitten\t1\n \ta bus\t0\n")
    with pytest.raises(InvalidInput, match=r"p\.tsv:2: the first text is empty"):
        read_pairs(pairs)


def test_calibrate_names_an_empty_file(tmp_path: Path) -> None:
    pairs = tmp_path / "p.tsv"
    pairs.write_text("")
    ran = run_main("calibrate", "-i", str(pairs), "-o", str(tmp_path / "t.json"))
    one_line(ran, f"{pairs} holds no labelled pairs: give lines TEXT<TAB>TEXT<TAB>0/1")
    pairs.write_text("text_a\ttext_b\tlabel\n\n")  # a header alone holds no pair either
    with pytest.raises(InvalidInput, match="holds no labelled pairs"):
        read_pairs(pairs)


def test_calibrate_names_the_line_of_a_byte_that_is_not_utf8(tmp_path: Path) -> None:
    pairs = tmp_path / "latin.tsv"
    pairs.write_bytes("a cat\ta kitten\t1\nthe caf\xe9\ta bar\t0\n".encode("latin-1"))
    ran = run_main("calibrate", "-i", str(pairs), "-o", str(tmp_path / "t.json"))
    one_line(ran, f"{pairs}:2: not UTF-8 text", "iconv")


def test_the_library_names_the_pair_and_the_column(bundled: bertscope.Model) -> None:
    with pytest.raises(
        InvalidInput, match=r"^pair 1: the second text is empty: .*give both texts of the pair$"
    ):
        calibrate(bundled, [("a cat", "a kitten", 1), ("a car", "  ", 0)])
