"""The eval commands after audit 24: a sweep streams its pairs in chunks (memory bounded by a chunk's
vectors, the numbers those of one pass over every text), shows progress, takes poolings as one
comma-separated string and refuses a gold score that is no number by its pair; `eval words` names a word
read as [UNK] by its file and line; a line that is not three tab-separated fields says the fix; repeated
pairs are warned of; standard input is named <stdin> in the table's title."""

from __future__ import annotations

import io
import sys
import warnings
from collections.abc import Callable, Iterator
from contextlib import contextmanager
from pathlib import Path
from typing import Any

import numpy as np
import pytest

import bertscope
from bertscope.errors import CorpusError, InvalidInput
from bertscope.research import analysis
from bertscope.research.analysis import correlations, layer_vectors, read_pairs, sweep, word_dataset

DATA = Path(__file__).parent / "data"


@pytest.fixture(scope="module")
def pairs() -> tuple[list[str], list[str], np.ndarray]:
    """The 30 scored sentence pairs of the fixture."""
    return read_pairs(DATA / "pairs.tsv")


def test_a_sweep_in_chunks_equals_one_pass_over_every_text(
    bundled: bertscope.Model, pairs: tuple, monkeypatch: pytest.MonkeyPatch
) -> None:
    left, right, gold = pairs
    # expected: every distinct text's vectors of every layer kept at once (layer_vectors), then correlated
    unique = list(dict.fromkeys([*left, *right]))
    every = layer_vectors(bundled, unique, ["cls", "mean"])
    ia, ib = [unique.index(t) for t in left], [unique.index(t) for t in right]
    expected = {
        (name, layer): correlations(every[name][ia, layer], every[name][ib, layer], gold)
        for name in ("cls", "mean")
        for layer in (0, 4, 6)
    }
    seen: list[int] = []
    embed = analysis._layer_vectors

    def counting(model: Any, texts: list[str], *args: Any, **kwargs: Any) -> Any:
        seen.append(len(texts))
        return embed(model, texts, *args, **kwargs)

    monkeypatch.setattr(analysis, "PAIR_CHUNK", 4)
    monkeypatch.setattr(analysis, "_layer_vectors", counting)
    result = sweep(bundled, left, right, gold, layers="0,4,6", poolings=["cls", "mean"])
    assert len(seen) == 8 and max(seen) <= 8  # 30 pairs 4 at a time: never every text's vectors at once
    assert result.settings["n_texts"] == len(unique)
    for record in result.records:
        want = expected[record["pooling"], record["layer"]]
        for key in ("spearman", "pearson"):
            np.testing.assert_allclose(record[key], want[key], atol=1e-6, equal_nan=True)
    assert sum(np.isnan(r["spearman"]) for r in result.records) == 1  # cls at layer 0, as in one pass


def test_a_sweep_shows_progress_over_its_texts(
    bundled: bertscope.Model, pairs: tuple, monkeypatch: pytest.MonkeyPatch
) -> None:
    left, right, gold = pairs
    asked: list[tuple[int | None, bool | None]] = []
    counted: list[int] = []

    @contextmanager
    def recording(total: int | None, *, enabled: bool | None = None) -> Iterator[Callable[[int, int], None]]:
        asked.append((total, enabled))
        yield lambda texts, _tokens: counted.append(texts)

    monkeypatch.setattr(analysis, "progress_callback", recording)
    sweep(bundled, left, right, gold, layers="6", poolings=["mean"], progress=True)
    n_texts = len(set(left) | set(right))
    assert asked == [(n_texts, True)] and sum(counted) == n_texts


def test_a_sweep_takes_poolings_as_one_comma_separated_string(bundled: bertscope.Model, pairs: tuple) -> None:
    left, right, gold = pairs
    one = sweep(bundled, left, right, gold, layers="6", poolings="mean")
    assert one.poolings == ["mean"]
    two = sweep(bundled, left, right, gold, layers="6", poolings="cls, mean")
    listed = sweep(bundled, left, right, gold, layers="6", poolings=["cls", "mean"])
    assert two.records == listed.records


def test_a_gold_score_that_is_no_number_is_refused_by_its_pair(bundled: bertscope.Model) -> None:
    left, right = ["a cat", "a dog", "the sun"], ["a dog", "the sun", "a cat"]
    with pytest.raises(InvalidInput, match=r"^sweep: pair 1 \('a dog', 'the sun'\) has the gold score 'x'"):
        sweep(bundled, left, right, [1.0, "x", 0.0], layers="6")  # type: ignore[list-item]


def test_eval_words_names_a_word_read_as_unk_by_its_file_and_line(bundled_path: Path, tmp_path: Path) -> None:
    from console import run_main

    words = tmp_path / "words.tsv"
    words.write_text("cat\tdog\t7\ncar\ttree\t2\nhouse\troad\t4\nriver\tbank\t6\n\U0001f600\tsmile\t8\n")
    ran = run_main("eval", "words", "-i", str(words), "-m", str(bundled_path))
    assert ran.code == 1
    line = ran.stderr.strip().splitlines()[-1]
    assert f"{words}:5: the first word: '\U0001f600' is not in this model's vocabulary" in line
    assert "give a word the vocabulary spells" in line


def test_the_missing_gensim_message_names_the_input_flag(monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setitem(sys.modules, "gensim.test.utils", None)  # import fails as where gensim is absent
    with pytest.raises(InvalidInput, match=r"pip install gensim`, or pass -i/--input FILE$"):
        word_dataset("simlex999")


@pytest.mark.parametrize(
    ("text", "said"),
    [
        ("a cat,a dog,1\nx,y,2\n", "bad.tsv:1: expected 3 tab-separated fields, found 1; the file looks "
         "comma-separated: separate the 3 fields with tabs"),
        ("a cat\ta dog\t1\tnote\n", "bad.tsv:1: expected 3 tab-separated fields, found 4; drop the extra "
         "column, or the tab inside a text"),
        ("a cat\t1\n", "bad.tsv:1: expected 3 tab-separated fields, found 2; give the 3 fields"),
    ],
)  # fmt: skip
def test_a_line_not_of_three_fields_says_the_fix(tmp_path: Path, text: str, said: str) -> None:
    path = tmp_path / "bad.tsv"
    path.write_text(text)
    with pytest.raises(CorpusError) as caught:
        read_pairs(path)
    assert str(caught.value).startswith(str(tmp_path / said))


def test_repeated_pairs_are_warned_of_once_and_kept(tmp_path: Path) -> None:
    path = tmp_path / "rep.tsv"
    lines = ["a cat\ta dog\t1", "the sun\ta car\t2", "a dog\ta cat\t1", "x\ty\t3", "a cat\ta dog\t4"]
    path.write_text("\n".join(lines) + "\n")
    with warnings.catch_warnings(record=True) as caught:
        warnings.simplefilter("always")
        left, _, gold = read_pairs(path)
    said = [str(w.message) for w in caught]
    assert said == [
        f"{path}: 2 pair(s) repeat an earlier line's texts (line 3 repeats line 1, line 5 repeats line 1; "
        "1 with another gold score); each is scored as a pair of its own: drop the repeats if they were "
        "not meant"
    ]
    assert len(left) == 5 and gold.tolist() == [1, 2, 1, 3, 4]


def test_eval_pairs_names_standard_input_as_its_warnings_do(
    bundled_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    from console import run_main

    text = "a cat\ta dog\t1\nthe sun\ta car\t0\nx y\tthe sea\t0.5\na cat\ta dog\t2\n"
    monkeypatch.setattr(sys, "stdin", io.TextIOWrapper(io.BytesIO(text.encode())))
    ran = run_main("eval", "pairs", "-i", "-", "--layers", "6", "--pooling", "mean", "-m", str(bundled_path))
    assert ran.code == 0, ran.stderr
    assert "<stdin>: 1 pair(s) repeat" in ran.stderr
    assert "<stdin>: 4 pairs" in ran.stdout and "-: 4 pairs" not in ran.stdout
