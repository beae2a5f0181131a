"""A new user's audit, kept: a calibration line never dropped as a header, a store checked with another
model refused before it embeds, a fingerprint difference named apart from the rows', a lock file that
cannot be created told apart from one another job holds, and a threshold refusal naming the flags."""

from __future__ import annotations

import inspect
import json
import shutil
from pathlib import Path
from typing import Any

import pytest
from filelock import FileLock

import bertscope
from bertscope.cli.embed import similarity
from bertscope.cli.explain import calibrate
from bertscope.errors import CorpusError, InvalidInput, InvalidSpec
from bertscope.io.job_lock import job_lock, lock_path
from bertscope.model import Model
from bertscope.research.baseline import Threshold, read_pairs
from bertscope.verify import store as store_check
from bertscope.verify.drift import StoreCheck
from bertscope.verify.store import verify_store
from console import Ran, run_main
from tiny_models import build_tiny_model

DATA = Path(__file__).parent / "data"


def one_line(ran: Ran, code: int, *needles: str) -> str:
    assert ran.code == code, ran
    assert ran.stderr.startswith("error: ") and ran.stderr.count("\n") == 1, ran.stderr
    assert "Traceback" not in ran.stderr
    for needle in needles:
        assert needle in ran.stderr, ran.stderr
    return ran.stderr


# 1. A first line is a header only beyond doubt -------------------------------------------------------


@pytest.mark.parametrize(
    "first",
    [
        "a cat\ta kitten\tmaybe",  # the audit's: a pair with a word for its label
        "cat\tkitten\tsimilar",  # no column names in the text fields
        "sentence1\tsentence2\tnone",  # a missing value is no column name
    ],
)
def test_a_first_pair_with_a_word_label_is_refused_by_its_line(tmp_path: Path, first: str) -> None:
    pairs = tmp_path / "pairs.tsv"
    pairs.write_text(f"{first}\na cat\ta kitten\t1\na cat\ta car\t0\n")
    with pytest.raises(InvalidInput, match=r"pairs.tsv:1: expected text<TAB>text<TAB>0 or 1"):
        read_pairs(pairs)


@pytest.mark.parametrize(
    "header",
    ["a\tb\tlabel", "text_a\ttext_b\tlabel", "Sentence1\tSentence2\tScore",
     "sentence1\tsentence2\tgold_label", "query\tdocument\trelevant", "s1\ts2\tsame"],
)  # fmt: skip
def test_a_real_header_is_skipped(tmp_path: Path, header: str) -> None:
    pairs = tmp_path / "pairs.tsv"
    pairs.write_text(f"{header}\na cat\ta kitten\t1\na cat\ta car\t0\n")
    assert read_pairs(pairs) == [("a cat", "a kitten", 1), ("a cat", "a car", 0)]


def test_calibrate_refuses_the_audits_file_naming_the_line_and_the_header_fix(tmp_path: Path) -> None:
    pairs = tmp_path / "badlab3.tsv"
    pairs.write_text("a cat\ta kitten\tmaybe\na cat\ta kitten\t1\na cat\ta car\t0\n")
    out = tmp_path / "t4.json"
    ran = run_main("calibrate", str(pairs), "-o", str(out))
    one_line(ran, 1, "badlab3.tsv:1:", "maybe'", "name its third column 'label'")
    assert not out.exists()


# 5. A threshold made with other settings names what to pass ------------------------------------------


def _threshold(settings: dict[str, object], model: str = "m") -> Threshold:
    return Threshold(0.5, 1.0, 1.0, 1.0, 1, 1, model, settings)


def test_a_threshold_refusal_names_the_settings_to_score_with() -> None:
    made = {"layers": [6], "combine": "mean", "pooling": "mean", "mask_special": False, "normalize": False}
    threshold = _threshold({**made, "post": None})
    here = {**made, "layers": [0], "pooling": "cls", "mask_special": True, "normalize": True, "post": None}
    with pytest.raises(InvalidSpec) as refused:
        threshold.check("other", here)
    said = str(refused.value)
    assert "pooling: cls here, mean in the file" in said
    assert "pass layers=[6] pooling='mean'," in said
    assert "normalize" not in said  # unit length leaves a cosine as it is where no post-processor follows
    assert "leave mask_special=True (--mask-special) out" in said
    assert "load the model it was calibrated with (m)" in said
    threshold.check("m", {**made, "post": None})  # the same settings: no refusal


def test_similarity_names_the_flags_and_the_help_examples_agree(tmp_path: Path) -> None:
    made = tmp_path / "threshold.json"
    assert run_main("calibrate", str(DATA / "labelled_pairs.tsv"), "-p", "mean", "-o", str(made)).code == 0
    # the file says normalize false; the default normalizes: the same cosines, so it applies as it is
    assert run_main("similarity", "a", "b", "--threshold-file", str(made)).code == 0
    said = one_line(
        run_main("similarity", "a", "b", "-p", "cls", "--threshold-file", str(made)), 1, "pass --pooling mean"
    )
    assert "use those" not in said
    # calibrate's --help example writes the file that similarity's --help example reads: both -p mean
    assert "calibrate -i pairs.tsv -p mean -o threshold.json" in (inspect.getdoc(calibrate) or "")
    assert 'similarity "a" "b" -p mean --threshold-file threshold.json' in (inspect.getdoc(similarity) or "")
    ran = run_main("similarity", "a", "b", "-p", "mean", "--threshold-file", str(made), "--json")
    assert ran.code == 0, ran.stderr
    assert "same" in json.loads(ran.stdout)


def test_a_threshold_for_other_settings_than_a_stores_says_to_calibrate_again(tmp_path: Path) -> None:
    """A store's vectors are made: the fix is the calibration (or another store), never a flag to pass."""
    made = tmp_path / "threshold.json"
    assert run_main("calibrate", str(DATA / "labelled_pairs.tsv"), "-p", "mean", "-o", str(made)).code == 0
    store = tmp_path / "news.parquet"
    texts = tmp_path / "news.txt"
    texts.write_text("a storm hits the coast\nfood prices rise\n", encoding="utf-8")
    assert run_main("embed", "-i", str(texts), "-o", str(store), "--layers", "3").code == 0
    said = one_line(
        run_main("similar", "a storm", "--store", str(store), "--threshold-file", str(made)),
        1,
        f"other settings than {store} was made with",
        "layers: [3] in the store, [6] in the file",
        "calibrate again with the store's model and settings",
    )
    assert "--layers" not in said


# 2, 3. A store checked with another model, or a changed one -------------------------------------------


@pytest.fixture(scope="module")
def corpus_store(tmp_path_factory: pytest.TempPathFactory, bundled: Model) -> Path:
    folder = tmp_path_factory.mktemp("audit_store")
    corpus = folder / "corpus.txt"
    corpus.write_text("".join(f"sentence number {i} about cats and dogs\n" for i in range(12)))
    bertscope.embed_corpus(corpus, folder / "corpus.parquet", model=bundled, progress=False)
    return folder / "corpus.parquet"


def test_a_store_checked_with_another_model_is_refused_before_embedding(
    corpus_store: Path, tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    tiny = build_tiny_model("bert", tmp_path / "tinybert")

    def no_embedding(*args: object, **kwargs: object) -> None:
        raise AssertionError("the rows were re-embedded before the models were compared")

    monkeypatch.setattr(store_check, "_check_sentences", no_embedding)
    with pytest.raises(InvalidInput) as refused:
        verify_store(corpus_store, model=str(tiny), rows=4)
    said = str(refused.value)
    assert "was made with all-MiniLM-L6-v2" in said and "layers 6" in said, said
    assert f"names another model, {tiny}" in said and "layers 2" in said, said
    ran = run_main("verify", "--store", str(corpus_store), "-m", str(tiny))
    one_line(ran, 2, "all-MiniLM-L6-v2", "names another model")
    assert "does not exist" not in ran.stderr


def test_a_changed_model_with_unchanged_rows_says_the_model_differs(
    corpus_store: Path, bundled_path: Path, tmp_path: Path
) -> None:
    extended = tmp_path / "extended"
    shutil.copytree(bundled_path, extended)
    with (extended / "vocab.txt").open("a", encoding="utf-8") as vocab:
        vocab.write("zzzyyyword\n")  # one word added: the file's hash moves, no vector does
    check = verify_store(corpus_store, model=str(extended), rows=12)
    assert not check.ok and check.model_changes == ["files.vocab.txt"] and check.rows_out == 0
    assert check.max_abs == 0.0
    headline = check.headline()
    assert headline.startswith("DRIFT: the model differs from the store's (files.vocab.txt); ")
    assert "the vectors of the 12 rows checked are unchanged" in headline, headline
    ran = run_main("verify", "--store", str(corpus_store), "-m", str(extended))
    assert ran.code == 1 and ran.stdout.splitlines()[0] == headline, ran.stdout


def test_the_headline_says_what_differs() -> None:
    base: dict[str, Any] = {"store": "s.parquet", "rows": 50, "model": "m"}
    assert StoreCheck(True, 20, 0.0, 1.0, **base).headline().startswith("ok: 20 of 50 rows of s.parquet")
    rows_only = StoreCheck(False, 20, 0.1, 0.9, **base, rows_out=3).headline()
    assert rows_only.startswith("DRIFT: 20 of 50 rows") and "model differs" not in rows_only
    both = StoreCheck(False, 20, 0.1, 0.9, **base, model_changes=["files.model.safetensors"], rows_out=3)
    said = both.headline()
    assert said.startswith("DRIFT: the model differs from the store's (files.model.safetensors), and 3 of")
    assert "unchanged" not in said


# 4. A lock held by another job, or a lock file that cannot be created ----------------------------------


def test_a_held_lock_says_another_job_writes_the_output(tmp_path: Path) -> None:
    out = tmp_path / "out.npy"
    held = FileLock(lock_path(out))
    held.acquire()
    try:
        with pytest.raises(CorpusError, match="being written by another job"), job_lock(out):
            pass
    finally:
        held.release()
    with job_lock(out):  # released: the job goes on
        assert lock_path(out).exists()


@pytest.mark.skipif(not Path("/proc/self").is_dir(), reason="needs /proc, where no file can be created")
def test_a_lock_file_that_cannot_be_created_is_not_another_job(tmp_path: Path) -> None:
    with pytest.raises(CorpusError) as refused, job_lock(Path("/proc/out.npy")):
        pass
    said = str(refused.value)
    assert "lock file out.npy.lock cannot be created in /proc" in said and "another job" not in said, said
    corpus = tmp_path / "corpus.txt"
    corpus.write_text("a cat\na dog\n")
    ran = run_main("embed", "-i", str(corpus), "-o", "/proc/out.npy")
    assert "cannot be created in /proc" in ran.stderr and "another job" not in ran.stderr, ran.stderr
    assert ran.code != 0 and ran.stderr.count("\n") == 1
