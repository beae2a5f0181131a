"""The verify audit (20) fixes: the int8 calibration gate judges the calibration, not int8 itself; a
damaged fingerprint is refused as damaged; verify's bounds on long lines, --json and names."""

from __future__ import annotations

import json
from collections.abc import Callable
from pathlib import Path
from typing import Any

import pytest

import bertscope
from bertscope.backends import int8_gate
from bertscope.model import Model
from bertscope.verify import fingerprint
from console import run_main

NEWS = [
    "The council approved the budget on Tuesday.",
    "Heavy rain closed two roads overnight.",
    "Shares fell sharply after the earnings report.",
]


# 1: the int8 gate holds texts of a few tokens to int8's floor -------------------------------------------


def _drift_by_length(short: float, longer: float) -> Any:
    """A stand-in for fitted_drift: `short` on a list of only short texts, `longer` on any other."""

    def measured(encoder: Any, runner: Any, texts: list[str]) -> tuple[float, str]:
        pieces = [len(t) - sum(t.special_tokens_mask) for t in encoder.tokenize(list(texts))]
        if max(pieces) <= int8_gate.SHORT_PIECES:
            return short, texts[0]
        return longer, texts[-1]

    return measured


def test_a_short_text_is_held_to_int8_s_floor_not_its_bound(
    tiny_dirs: dict[str, Path], cache: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    """Any int8 graph reads ~0.988 on 'No.' (the shipped one too): a calibration with it is not refused
    for that, but one that drifts further on it than int8's floor is, naming that floor."""
    monkeypatch.setattr(int8_gate, "fitted_drift", _drift_by_length(0.985, 0.995))
    m = bertscope.load(tiny_dirs["bert"], device="cpu", quantize="int8", calibration=[*NEWS, "No."])
    assert m.info().quantize == "int8"
    monkeypatch.setattr(int8_gate, "fitted_drift", _drift_by_length(0.975, 0.995))
    with pytest.raises(bertscope.InvalidSpec) as refused:
        bertscope.load(tiny_dirs["bert"], device="cpu", quantize="int8", calibration=[*NEWS, "Thanks!"])
    message = str(refused.value)
    assert "\n" not in message
    assert "min cosine of 0.9750" in message and "lowest on 'Thanks!'" in message
    assert f"under int8's bound {int8_gate.INT8_SHORT_MIN_COSINE} for texts that short" in message


def test_the_shipped_calibration_and_two_short_texts_load(cache: Path) -> None:
    """The auditor's case: refused at 0.9893 on 'No.' where the shipped graph reads lower on it."""
    from bertscope.backends.quantize import calibration_texts

    m = bertscope.load(device="cpu", quantize="int8", calibration=[*calibration_texts(), "Thanks!", "No."])
    assert m.info().quantize == "int8"


# 2: canaries edited or cut are a damaged file, not drift ------------------------------------------------


@pytest.fixture(scope="module")
def saved(bundled: Model) -> dict[str, Any]:
    return fingerprint(bundled)


def _bump(f: dict[str, Any]) -> None:
    f["canaries"]["layers"][6]["mean"][3][0] += 0.5


def _rows(f: dict[str, Any]) -> None:
    f["canaries"]["layers"][6]["mean"] = f["canaries"]["layers"][6]["mean"][:10]


EDITS: dict[str, Callable[[dict[str, Any]], None]] = {
    "a value": _bump,
    "layers cut": lambda f: f["canaries"].update(layers=f["canaries"]["layers"][:3]),
    "a token count": lambda f: f["canaries"]["tokens"].__setitem__(0, 99),
    "rows cut": _rows,
    "directions": lambda f: f["canaries"].update(directions="sha256-signs/4"),
}


@pytest.mark.parametrize("edit", list(EDITS))
def test_edited_canaries_are_a_damaged_file(saved: dict[str, Any], tmp_path: Path, edit: str) -> None:
    copy = json.loads(json.dumps(saved))
    EDITS[edit](copy)
    path = tmp_path / "fp.json"
    path.write_text(json.dumps(copy))
    ran = run_main("verify", "--against", str(path))
    assert ran.code == 2 and ran.stderr.startswith("error:"), ran
    line = " ".join(ran.stderr.split())
    assert "damaged fingerprint" in line and "verify --save" in line, line
    assert len(ran.stderr.strip().splitlines()) <= 3


def test_a_file_saved_before_canaries_had_a_checksum_still_reads(
    saved: dict[str, Any], tmp_path: Path
) -> None:
    copy = json.loads(json.dumps(saved))
    del copy["canaries"]["checksum"]
    path = tmp_path / "old.json"
    path.write_text(json.dumps(copy))
    ran = run_main("verify", "--against", str(path))
    assert ran.code == 0, ran


# 3: the reference tokenizer sees a long line's head, not the whole line ----------------------------------


def test_the_reference_tokenizes_a_long_line_s_head_with_the_same_ids(
    bundled: Model, monkeypatch: pytest.MonkeyPatch
) -> None:
    from transformers import PreTrainedTokenizerBase

    from bertscope.verify.reference import reference_states

    line = " ".join(["The council approved the budget on Tuesday."] * 40_000)  # ~1.8 MB, one line
    given: list[int] = []
    real = PreTrainedTokenizerBase.__call__

    def recorded(self: Any, text: Any, *args: Any, **kwargs: Any) -> Any:
        given.extend(len(t) for t in (text if isinstance(text, list) else [text]))
        return real(self, text, *args, **kwargs)

    monkeypatch.setattr(PreTrainedTokenizerBase, "__call__", recorded)
    ids, states = reference_states(bundled, [line, "Ok."])
    assert max(given) < 100_000  # the head, not the 1.8 MB line
    assert ids[0] == bundled.tokenize(line).ids and len(ids[0]) == bundled.max_tokens
    assert ids[1] == bundled.tokenize("Ok.").ids
    assert states[0].shape == (bundled.n_layers + 1, bundled.max_tokens, bundled.info().hidden_size)


# 4: --json keeps its promise on a command line click cannot read -----------------------------------------


@pytest.mark.parametrize(
    "words",
    [["--store", "x.parquet", "--rows", "0"], ["--rows", "abc"], ["--bogus"]],
)
def test_verify_json_answers_a_usage_error_with_one_object(words: list[str]) -> None:
    ran = run_main("verify", *words, "--json")
    assert ran.code == 2 and ran.stderr.startswith("error:"), ran
    answer = json.loads(ran.stdout)
    assert answer["ok"] is False and "verify --help" in answer["error"]
    assert answer["error"] == " ".join(ran.stderr.split())[len("error: ") :]


def test_another_command_s_usage_error_writes_nothing_on_stdout() -> None:
    ran = run_main("embed", "--bogus", "--json", "x")
    assert ran.code == 2 and ran.stdout == ""


# 5: counts named n_texts / n_tokens, the old attributes still read --------------------------------------


def test_verification_counts_are_n_texts_and_n_tokens() -> None:
    from bertscope.verify import Verification

    made = Verification(
        ok=True, layers=[], sentence_min_cosine=1.0, tolerance={}, n_texts=3, n_tokens=20, settings={},
        environment={},
    )  # fmt: skip
    answer = made.to_dict()
    assert (
        (answer["n_texts"], answer["n_tokens"]) == (3, 20)
        and "texts" not in answer
        and "tokens" not in answer
    )
    with pytest.deprecated_call(match=r"Verification\.texts is deprecated; use \.n_texts"):
        assert made.texts == 3
    with pytest.deprecated_call(match=r"Verification\.tokens is deprecated; use \.n_tokens"):
        assert made.tokens == 20


# 7: --min-cosine on an exact model is refused, not dropped ----------------------------------------------


def test_min_cosine_on_an_exact_model_is_refused(bundled: Model) -> None:
    with pytest.raises(
        bertscope.InvalidSpec, match=r"min_cosine=0\.5 bounds a lossy mode's drift.*leave it out"
    ):
        bundled.verify(min_cosine=0.5)
    ran = run_main("verify", "--min-cosine", "0.9", "--json")
    assert ran.code == 2 and "--min-cosine bounds a lossy mode's drift" in ran.stderr, ran
    assert json.loads(ran.stdout)["ok"] is False


# 8: a store's ok headline states the tolerance it proved -------------------------------------------------


def test_a_store_s_headline_states_its_tolerance() -> None:
    from bertscope.verify.drift import StoreCheck

    lossy = StoreCheck(
        ok=True, rows_checked=10, max_abs=0.00868, min_cosine=0.99873293, tolerance={"min_cosine": 0.98},
        store="int8.parquet", rows=50, model="m",
    )  # fmt: skip
    assert lossy.headline().endswith("min cosine 0.99873293; tolerance min cosine >= 0.98")
    exact = StoreCheck(
        ok=True, rows_checked=10, max_abs=0.0, min_cosine=1.0,
        tolerance={"max_abs": 1e-5, "float16_step": False}, store="s.npy", rows=50, model="m",
    )  # fmt: skip
    assert exact.headline().endswith("; tolerance max abs <= 1e-05")


# 6: a token store checked against a larger corpus names both causes ------------------------------------


def test_a_token_store_against_a_larger_corpus_names_both_causes(tmp_path: Path) -> None:
    news = Path(__file__).parents[1] / "examples" / "news.txt"
    head = tmp_path / "n10.txt"
    head.write_text("".join(news.read_text().splitlines(keepends=True)[:10]))
    store = tmp_path / "tok.npy"
    assert run_main("embed", "-i", str(head), "-o", str(store), "--tokens").code == 0
    ran = run_main("verify", "--store", str(store), "--corpus", str(news), "--rows", "500")
    line = " ".join(ran.stderr.split())
    assert ran.code == 2 and line.startswith("error:"), ran
    assert f"{news} is not the corpus the store was made from, or rows were removed" in line, line
    assert "--corpus" in line and "Traceback" not in ran.stderr


# 9: wording --------------------------------------------------------------------------------------------


def test_a_chunk_store_without_its_corpus_says_it_keeps_chunk_texts_not_documents(tmp_path: Path) -> None:
    news = Path(__file__).parents[1] / "examples" / "news.txt"
    head = tmp_path / "n5.txt"
    head.write_text("".join(news.read_text().splitlines(keepends=True)[:5]))
    store = tmp_path / "chunks.parquet"
    assert run_main("embed", "-i", str(head), "-o", str(store), "--level", "chunks").code == 0
    ran = run_main("verify", "--store", str(store), "--rows", "5")
    line = " ".join(ran.stderr.split())
    assert ran.code == 2 and "keeps its chunks' texts, not the whole documents" in line, ran
    assert "--corpus" in line


def test_verify_help_names_both_lossy_bounds() -> None:
    ran = run_main("verify", "--help")
    said = " ".join(ran.stdout.split())
    assert "0.98 for --quantize int8" in said and "cosine bound with --fast" in said, said
