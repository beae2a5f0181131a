"""Review 6 D1, D2: token limits that must stay what they were.

D1: the long canary of a fingerprint is sized as before 530c607 (the positions within the tokenizer's
`model_max_length`), so a fingerprint saved then still compares for a model whose tokenizer limit is below
its positions. D2: a store's query is cut at the store's recorded limit (`load(max_tokens=12)`), not at the
model's default.
"""

from __future__ import annotations

import hashlib
import json
import warnings
from pathlib import Path

import pytest

import bertscope
from bertscope.backends.onnx import calibration_texts
from bertscope.io.query import model_for
from bertscope.verify.fingerprint import canary_texts, fingerprint
from console import run_main
from tiny_models import build_tiny_model

# 28bf9ae's canary for the tiny BERT below (1024 positions, tokenizer limit 128) and for the bundled model:
# the calibration text once (611 words), its canaries.texts hash as `verify --save` wrote it then.
OLD_LONG_WORDS = 611
OLD_TEXTS_HASH = "1d7fff2951f721dc"

LONG = (
    "a powerful storm battered the northern coast overnight cutting power to thousands of homes and "
    "businesses while rescue crews worked through the rain"
)
TEXTS = [LONG, "the price of bread rose again", "a quiet morning in the village square"]


@pytest.fixture(scope="module")
def long_positions(tmp_path_factory: pytest.TempPathFactory) -> Path:
    """A tiny BERT with 1024 positions whose tokenizer_config says model_max_length 128."""
    folder = build_tiny_model("bert", tmp_path_factory.mktemp("tinypos") / "m", max_positions=1024)
    config_file = folder / "tokenizer_config.json"
    config = json.loads(config_file.read_text(encoding="utf-8"))
    config["model_max_length"] = 128
    config_file.write_text(json.dumps(config), encoding="utf-8")
    return folder


def _texts_hash(texts: list[str]) -> str:
    return hashlib.sha256("\n".join(texts).encode("utf-8")).hexdigest()[:16]


def _expected_canaries(positions: int, tokenizer_max: int) -> list[str]:
    """28bf9ae's rule: repeats of the calibration text past min(positions, tokenizer limit)."""
    sentences = calibration_texts()
    joined = " ".join(sentences)
    repeats = min(positions, tokenizer_max) // len(joined.split()) + 1
    return [*sentences, " ".join([joined] * repeats)]


@pytest.mark.parametrize("backend", ["auto", "torch"])
def test_canary_sized_by_the_tokenizer_limit(long_positions: Path, backend: str) -> None:
    m = bertscope.load(long_positions, device="cpu", backend=backend)
    assert (m.max_positions, m.max_tokens) == (1024, 128)  # the case 530c607 changed
    texts = canary_texts(m)
    assert texts == _expected_canaries(1024, 128)
    assert len(texts[-1].split()) == OLD_LONG_WORDS
    assert _texts_hash(texts) == OLD_TEXTS_HASH
    if backend == "auto":  # the saved fingerprint's field that read DIFFERENT
        assert fingerprint(m)["canaries"]["texts"] == OLD_TEXTS_HASH


def test_bundled_canaries_unchanged(bundled: bertscope.Model, long_positions: Path) -> None:
    texts = canary_texts(bundled)
    assert texts == _expected_canaries(512, 512)
    assert len(texts[-1].split()) == OLD_LONG_WORDS and _texts_hash(texts) == OLD_TEXTS_HASH
    # and the model whose limits 530c607 split gives the same canaries as the bundled one
    assert canary_texts(bertscope.load(long_positions, device="cpu")) == texts


@pytest.fixture(scope="module")
def cut_store(tmp_path_factory: pytest.TempPathFactory) -> Path:
    """A store made with load(max_tokens=12): its first text is cut at 12 tokens."""
    store = tmp_path_factory.mktemp("cut12") / "s.parquet"
    with warnings.catch_warnings():
        warnings.simplefilter("ignore")  # its texts are cut on purpose
        bertscope.embed_corpus(TEXTS, store, model=bertscope.load(max_tokens=12), progress=False)
    return store


def test_search_cuts_the_query_at_the_store_limit(cut_store: Path) -> None:
    with warnings.catch_warnings():
        warnings.simplefilter("ignore")  # the query is cut as the store's texts were
        hits = bertscope.search(LONG, cut_store, top_k=1)
    assert hits[0].text.startswith("a powerful storm")
    assert hits[0].score == pytest.approx(1.0, abs=1e-6)  # 0.927 at the model's default limit (256)


def test_cli_similar_cuts_the_query_at_the_store_limit(cut_store: Path) -> None:
    ran = run_main("similar", LONG, "--store", str(cut_store), "-k", "1", "--json")
    assert ran.code == 0, ran.stderr
    found = json.loads(ran.stdout)
    hits = found["hits"] if isinstance(found, dict) else found
    assert hits[0]["text"].startswith("a powerful storm")
    assert hits[0]["score"] == pytest.approx(1.0, abs=1e-6)


def test_verify_and_occurrences_embed_at_the_store_limit(cut_store: Path) -> None:
    """verify re-embeds a store's rows at the limit they were cut at (at the model's default they read as
    DRIFT); the store's model, as search, verify and occurrence queries load it, cuts at 12."""
    ran = run_main("verify", "--store", str(cut_store), "--rows", str(len(TEXTS)))
    assert ran.code == 0, ran.stdout + ran.stderr
    assert ran.stdout.startswith("ok:"), ran.stdout
    from bertscope.io.query import model_for
    from bertscope.io.stores import open_store

    assert model_for(open_store(cut_store).settings, None, store_limit=True).max_tokens == 12


def test_a_store_limit_over_the_model_leaves_the_model_at_its_own(long_positions: Path) -> None:
    """Over the model's positions the model is not the store's: loaded at its own limit, for the caller's
    check of the model to name (test_audit_checks: verify refuses another model before embedding)."""
    settings = {"model": "some model", "fingerprint": {"settings": {"truncation": {"max_tokens": 2048}}}}
    assert model_for(settings, str(long_positions), store_limit=True).max_tokens == 128
    # within the positions: loaded at the store's limit; none recorded: the model's own limit
    settings["fingerprint"]["settings"]["truncation"]["max_tokens"] = 300
    assert model_for(settings, str(long_positions), store_limit=True).max_tokens == 300
    assert model_for({"model": "some model"}, str(long_positions), store_limit=True).max_tokens == 128


def test_a_store_limit_loads_the_model_once(long_positions: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    """A store's recorded limit within the positions costs one load, at that limit (it cost two: the
    model's default first); over the positions, the refused load is followed by one at the model's own."""
    from bertscope.core import loaders

    loads: list[dict[str, object]] = []
    real = loaders._registered[0]

    def counted(name: object, **settings: object) -> object:
        loads.append(settings)
        return real(name, **settings)

    monkeypatch.setattr(loaders, "_registered", [counted])
    settings = {"model": "some model", "fingerprint": {"settings": {"truncation": {"max_tokens": 300}}}}
    assert model_for(settings, str(long_positions), store_limit=True).max_tokens == 300
    assert [s.get("max_tokens") for s in loads] == [300]
    loads.clear()
    settings["fingerprint"]["settings"]["truncation"]["max_tokens"] = 2048
    assert model_for(settings, str(long_positions), store_limit=True).max_tokens == 128
    assert [s.get("max_tokens") for s in loads] == [2048, None]
