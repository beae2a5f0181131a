"""verify: the bundled model equals the plain Hugging Face float32 forward on every layer; its fingerprint
is the same on every exact runtime and thread count, and names each way a tampered copy of its folder
differs (causal mask, float16 weights, truncation length, a tokenizer that keeps case, a weight moved by
1e-4); a store's vectors are checked against the deployment, and drift is caught."""

from __future__ import annotations

import json
import random
import warnings
from collections.abc import Callable
from pathlib import Path
from typing import Any

import numpy as np
import pytest
from safetensors.numpy import load_file, save_file

import bertscope
from bertscope.backends.onnx import calibration_texts
from bertscope.core.loading import open_light
from bertscope.io.checksums import SETTINGS_KEY, sealed
from bertscope.model import Model
from bertscope.verify import check_fingerprint, verify_model
from bertscope.verify.fingerprint import canary_texts
from bertscope.verify.reference import SHORT_TEXTS, compare_to_reference, reference_texts
from bertscope.verify.store import verify_store
from console import run_main

SAMPLE = ["The river bank was flooded after the storm.", "I deposited the cheque at the bank [SEP] today."]


@pytest.fixture(scope="module")
def saved(tmp_path_factory: pytest.TempPathFactory) -> tuple[dict[str, Any], Path]:
    """`bertscope verify --save FP -i FILE --json` on the bundled model: its report and the file."""
    folder = tmp_path_factory.mktemp("verify")
    sample = folder / "sample.txt"
    sample.write_text("\n".join(SAMPLE) + "\n", encoding="utf-8")
    path = folder / "bundled.fingerprint.json"
    ran = run_main("verify", "-i", str(sample), "--save", str(path), "--json")
    assert ran.code == 0, ran.stderr
    return json.loads(ran.stdout), path


def test_the_bundled_model_equals_the_reference_on_every_layer(
    saved: tuple[dict[str, Any], Path], bundled: Model
) -> None:
    report, _ = saved
    assert report["ok"] is True and report["problems"] == []
    assert [d["layer"] for d in report["layers"]] == list(range(bundled.n_layers + 1))
    assert all(d["max_abs"] <= 1e-5 and d["min_cosine"] > 0.99999 for d in report["layers"])
    assert report["n_texts"] == len(canary_texts(bundled)) + len(SHORT_TEXTS) + len(SAMPLE)
    settings = report["settings"]
    assert settings["truncation"] == {"max_tokens": 256, "side": "right", "long": "truncate"}
    assert settings["attention"]["mask"] == "bidirectional" and settings["weights_dtype"] == "float32"
    assert settings["pooling"]["pooling"] == "mean" and settings["pooling"]["normalize"] is True
    assert settings["tokenizer"]["lowercase"] is True and settings["precision"]["dtype"] == "float32"


def test_the_fingerprint_file_holds_settings_hashes_and_canaries(saved: tuple[dict[str, Any], Path]) -> None:
    made = json.loads(saved[1].read_text(encoding="utf-8"))
    assert {"id", "settings", "files", "canaries", "environment"} <= set(made)
    assert {"config.json", "model.safetensors", "tokenizer.json", "1_Pooling/config.json"} <= set(
        made["files"]
    )
    canaries = made["canaries"]
    assert len(canaries["layers"]) == 7 and canaries["tokens"][-1] == 256  # the long text, truncated


@pytest.mark.parametrize(
    ("backend", "threads"), [("torch", 1), ("torch", 2), ("onnxruntime", 1), ("openvino", 2)]
)
def test_the_same_fingerprint_on_every_exact_runtime_and_thread_count(
    saved: tuple[dict[str, Any], Path], backend: str, threads: int
) -> None:
    if backend == "openvino":
        pytest.importorskip("openvino")
    model = bertscope.load(backend=backend, threads=threads, device="cpu")
    check = model.verify(against=saved[1])
    assert check.ok, check.to_dict()
    assert check.found_id == check.expected_id


def _tampered(root: Path, name: str, edit: Callable[[Path], None], bundled_path: Path) -> Model:
    """A copy of the bundled folder (links to the files `edit` leaves alone), opened as `load()` opens
    a folder whose runtime needs no export: without torch for the tokenizer, torch for the forward."""
    folder = root / name
    folder.mkdir()
    for item in bundled_path.iterdir():
        (folder / item.name).symlink_to(item)
    edit(folder)
    loaded = open_light(folder)
    assert loaded is not None
    return Model(loaded, device="cpu", max_tokens=None, token_budget=None)


def _json_edit(name: str, change: Callable[[dict[str, Any]], None]) -> Callable[[Path], None]:
    def edit(folder: Path) -> None:
        data = json.loads((folder / name).read_text(encoding="utf-8"))
        (folder / name).unlink()
        change(data)
        (folder / name).write_text(json.dumps(data), encoding="utf-8")

    return edit


def _weights_edit(change: Callable[[str, np.ndarray], np.ndarray]) -> Callable[[Path], None]:
    def edit(folder: Path) -> None:
        weights = load_file(folder / "model.safetensors")
        (folder / "model.safetensors").unlink()
        save_file({key: change(key, value) for key, value in weights.items()}, folder / "model.safetensors")

    return edit


def _perturbed(key: str, value: np.ndarray) -> np.ndarray:
    if "encoder.layer.2." not in key:
        return value
    noise = np.random.default_rng(0).uniform(-1e-4, 1e-4, value.shape)
    return (value + noise).astype(value.dtype)


def _unset_lowercase(tokenizer: dict[str, Any]) -> None:
    tokenizer["normalizer"]["lowercase"] = False


def _cased(folder: Path) -> None:
    """A tokenizer that no longer lowercases, as transformers reads one: its config says so (it rebuilds
    BERT's normalizer from do_lower_case), and so does tokenizer.json."""
    _json_edit("tokenizer.json", _unset_lowercase)(folder)
    _json_edit("tokenizer_config.json", lambda c: c.update(do_lower_case=False))(folder)


TAMPERED: dict[str, tuple[Callable[[Path], None], set[str]]] = {
    "causal mask": (
        _json_edit("config.json", lambda c: c.update(is_decoder=True)),
        {"settings.attention.mask", "files.config.json", "canaries.layer 1"},
    ),
    "float16 weights": (
        _weights_edit(lambda _, v: v.astype(np.float16) if v.dtype == np.float32 else v),
        {"settings.weights_dtype", "files.model.safetensors", "canaries.layer 0"},
    ),
    "truncation length": (
        _json_edit("sentence_bert_config.json", lambda c: c.update(max_seq_length=128)),
        {"settings.truncation.max_tokens", "canaries.ids", "canaries.layer 6"},
    ),
    "cased tokenizer": (
        _cased,
        {"settings.tokenizer.lowercase", "files.tokenizer.json", "canaries.ids", "canaries.layer 0"},
    ),
    "1e-4 on layer 2's weights": (
        _weights_edit(_perturbed),
        {"files.model.safetensors", "canaries.layer 3", "canaries.layer 6"},
    ),
}


@pytest.mark.parametrize("case", list(TAMPERED))
def test_a_tampered_copy_is_caught_and_each_difference_named(
    saved: tuple[dict[str, Any], Path], tmp_path: Path, bundled_path: Path, case: str
) -> None:
    edit, named = TAMPERED[case]
    model = _tampered(tmp_path, "copy", edit, bundled_path)
    check = check_fingerprint(model, saved[1])
    found = {d.what for d in check.differences}
    assert not check.ok and named <= found, (case, sorted(found))
    if case == "1e-4 on layer 2's weights":  # the drift is named from the layer where it starts
        assert not found & {"canaries.layer 0", "canaries.layer 1", "canaries.layer 2"}
        assert not any(what.startswith("settings.") for what in found)


@pytest.mark.parametrize(("case", "named"), [("causal mask", "is_decoder")])
def test_verify_alone_names_a_causal_mask(tmp_path: Path, bundled_path: Path, case: str, named: str) -> None:
    """A causal mask: the reference runs the same config (so the vectors agree), but the setting itself is
    named. (A tokenizer.json that stopped lowercasing while its config still says do_lower_case is read as
    transformers reads it, lowercasing: tests/test_light.py.)"""
    edit, _ = TAMPERED[case]
    report = verify_model(_tampered(tmp_path, "copy", edit, bundled_path))
    assert report.ok is False and named in report.problems[0], report.problems
    assert all(d.max_abs <= 1e-5 for d in report.layers)


def test_the_command_line_names_the_differences_and_exits_1(
    saved: tuple[dict[str, Any], Path], tmp_path: Path, bundled_path: Path
) -> None:
    edit, _ = TAMPERED["1e-4 on layer 2's weights"]
    _tampered(tmp_path, "moved", edit, bundled_path)
    ran = run_main(
        "verify", "-m", str(tmp_path / "moved"), "--backend", "torch", "--against", str(saved[1]), "--json"
    )
    assert ran.code == 1, ran.stderr
    report = json.loads(ran.stdout)
    assert report["ok"] is False
    assert {"what": "canaries.layer 3"}.items() <= report["differences"][1].items()
    assert set(report["differences"][0]) == {"what", "expected", "found"}
    same = run_main("verify", "--against", str(saved[1]))
    assert same.code == 0 and same.stdout.startswith("ok: same fingerprint"), same.stdout


def test_bad_input_exits_2(saved: tuple[dict[str, Any], Path], tmp_path: Path) -> None:
    not_json = tmp_path / "fp.json"
    not_json.write_text("{", encoding="utf-8")
    other = tmp_path / "other.json"
    other.write_text(json.dumps({"bertscope_fingerprint": 99}), encoding="utf-8")
    for args in (
        ["--against", str(not_json)],
        ["--against", str(other)],
        ["--against", str(tmp_path / "missing.json")],
        ["--input", str(tmp_path / "missing.txt")],
        ["--save", str(tmp_path / "a.json"), "--against", str(saved[1])],
        ["--store", str(tmp_path / "missing.parquet")],
    ):
        ran = run_main("verify", *args)
        assert ran.code == 2 and ran.stderr.startswith("error:"), (args, ran.stderr)


# Stores ---------------------------------------------------------------------------------------------

# 20 texts: two batches of 16 and at least the 20 rows a check below samples, at any level
TEXTS = [f"{sentence} ({n})" for n in range(2) for sentence in calibration_texts()[:10]]


@pytest.fixture(scope="module")
def stores(tmp_path_factory: pytest.TempPathFactory, bundled: Model) -> dict[str, Path]:
    """The same 20 texts embedded into each format by the bundled model (float32 and float16 Parquet)."""
    folder = tmp_path_factory.mktemp("stores")
    corpus = folder / "corpus.txt"
    corpus.write_text("\n".join(TEXTS) + "\n", encoding="utf-8")
    made = {}
    for name in ("s.parquet", "s.sqlite", "s.npy"):
        bertscope.embed_corpus(corpus, folder / name, model=bundled, progress=False, batch_size=16)
        made[name] = folder / name
    bertscope.embed_corpus(
        corpus, folder / "half.parquet", model=bundled, progress=False, precision="float16"
    )
    made["half.parquet"], made["corpus"] = folder / "half.parquet", corpus
    return made


@pytest.mark.parametrize("name", ["s.parquet", "s.sqlite", "s.npy", "half.parquet"])
def test_a_store_and_its_deployment_share_one_space(
    stores: dict[str, Path], bundled: Model, name: str
) -> None:
    corpus = stores["corpus"] if name.endswith(".npy") else None
    check = verify_store(stores[name], model=bundled, rows=12, corpus=corpus)
    assert check.ok, check.to_dict()
    assert check.rows_checked == 12 and check.rows == len(TEXTS)
    assert check.max_abs <= (1e-3 if name == "half.parquet" else 1e-5)


def test_the_sample_is_stratified_over_the_rows() -> None:
    from bertscope.verify.store import sample_rows

    rows = sample_rows(1000, 10, seed=3)
    assert [r // 100 for r in rows] == list(range(10))
    assert list(sample_rows(5, 10)) == [0, 1, 2, 3, 4]


def test_a_store_checked_with_another_model_drifts(
    stores: dict[str, Path], tmp_path: Path, bundled_path: Path
) -> None:
    edit, _ = TAMPERED["1e-4 on layer 2's weights"]
    moved = _tampered(tmp_path, "moved", edit, bundled_path)
    check = verify_store(stores["s.parquet"], model=moved, rows=8)
    assert check.ok is False and check.max_abs > 1e-5
    assert check.differences[0].what.startswith("row ") and check.differences[0].expected == "stored"


def test_verify_store_on_the_command_line(stores: dict[str, Path]) -> None:
    ran = run_main("verify", "--store", str(stores["s.parquet"]), "--rows", "5", "--json")
    assert ran.code == 0, ran.stderr
    report = json.loads(ran.stdout)
    assert {"ok", "rows_checked", "max_abs", "min_cosine", "differences"} <= set(report)
    assert report["rows_checked"] == 5 and report["differences"] == []
    no_texts = run_main("verify", "--store", str(stores["s.npy"]))
    assert no_texts.code == 2 and "--corpus" in no_texts.stderr
    with_texts = run_main(
        "verify", "--store", str(stores["s.npy"]), "--corpus", str(stores["corpus"]), "--rows", "4"
    )
    assert with_texts.code == 0 and with_texts.stdout.startswith("ok: 4 of 20 rows"), with_texts.stdout


LEVELS = {
    "tokens": {"level": "tokens", "layers": "0,3,6", "combine": "stack"},
    "words": {"level": "words", "precision": "float16"},
    "chunks": {"level": "chunks"},
}


@pytest.mark.parametrize("level", list(LEVELS))
def test_token_word_and_chunk_stores_are_checked_row_by_row(
    stores: dict[str, Path], bundled: Model, tmp_path: Path, bundled_path: Path, level: str
) -> None:
    out = tmp_path / f"{level}.parquet"
    bertscope.embed_corpus(stores["corpus"], out, model=bundled, progress=False, **LEVELS[level])
    corpus = stores["corpus"] if level == "chunks" else None  # chunk rows hold the chunk, not the text
    check = verify_store(out, model=bundled, rows=20, corpus=corpus)
    assert check.ok and check.rows_checked == 20, check.to_dict()
    if level == "tokens":  # one layer_N column per kept layer: the drift starts at layer 3
        edit, _ = TAMPERED["1e-4 on layer 2's weights"]
        drifted = verify_store(out, model=_tampered(tmp_path, "moved", edit, bundled_path), rows=20)
        named = {d.what.split()[0] for d in drifted.differences}
        # the rows drift from layer 3 on; the store's fingerprint names the weights file
        assert not drifted.ok and named == {"layer_3", "layer_6", "files.model.safetensors"}, named


def test_a_lossy_mode_is_held_to_its_cosine_floor() -> None:
    """bfloat16 is not within 1e-5; it is judged by its sentence vectors' cosine to the reference."""
    import warnings

    with warnings.catch_warnings():
        warnings.simplefilter("ignore")  # bfloat16 on a CPU without it natively: slow, and said so
        model = bertscope.load(dtype="bfloat16", backend="torch", device="cpu")
    loose = model.verify(min_cosine=0.99)
    assert loose.ok and loose.tolerance["min_cosine"] == 0.99, loose.to_dict()
    assert loose.settings["precision"]["dtype"] == "bfloat16" and max(d.max_abs for d in loose.layers) > 1e-5
    assert 0.99 < loose.sentence_min_cosine < 0.9999999  # a floor above it fails


def test_a_fingerprint_in_a_stores_settings_is_compared_too(
    stores: dict[str, Path], bundled: Model, tmp_path: Path
) -> None:
    import shutil

    from bertscope.verify.fingerprint import store_fingerprint

    for suffix in (".npy", ".ids.txt", ".settings.json"):
        shutil.copyfile(stores["s.npy"].with_suffix(suffix), tmp_path / f"s{suffix}")
    settings_file = tmp_path / "s.settings.json"
    settings = json.loads(settings_file.read_text(encoding="utf-8"))
    recorded = store_fingerprint(bundled)
    assert set(recorded) == {"id", "settings", "files"}  # nothing of the machine: equal on a resume
    settings["fingerprint"] = recorded

    def write() -> None:  # as a job writes them: their checksum over all but the row checksums
        made = sealed({k: v for k, v in settings.items() if k not in ("checksums", SETTINGS_KEY)})
        settings_file.write_text(json.dumps({**made, "checksums": settings["checksums"]}), encoding="utf-8")

    write()
    corpus = stores["corpus"]
    assert verify_store(tmp_path / "s.npy", model=bundled, rows=4, corpus=corpus).ok
    recorded["settings"]["truncation"]["max_tokens"] = 128
    write()
    check = verify_store(tmp_path / "s.npy", model=bundled, rows=4, corpus=corpus)
    assert not check.ok and [d.what for d in check.differences] == ["settings.truncation.max_tokens"]


# int8's activation scales are set per batch: the same text moves with the texts batched with it.
_SHORT = ["thanks!", "Ok.", "Why?", "Sure.", "No way", "Great!", "Hi!", "Yes."]
_RUNS = [c * n for c in "-=~.#|_*" for n in (3, 4, 5, 6)]


def test_an_int8_store_passes_against_the_model_that_wrote_it(tmp_path: Path) -> None:
    """Rows re-embedded in other batches than the job's stay within int8's store floor (they fell under
    the 0.999 floor's 0.996 bound); a row that is another text's vector still fails."""
    from bertscope.verify.drift import StoreCheck, add_drift

    model = bertscope.load(quantize="int8")
    lines = (_SHORT * 4 + _RUNS * 8)[:160]
    random.Random(3).shuffle(lines)
    corpus = tmp_path / "short.txt"
    corpus.write_text("\n".join(lines) + "\n", encoding="utf-8")
    bertscope.embed_corpus(corpus, tmp_path / "int8.parquet", model=model, progress=False)
    check = verify_store(tmp_path / "int8.parquet", model=model, rows=40, seed=0)
    assert check.ok, check.to_dict()
    assert check.min_cosine < 0.999 and check.tolerance["min_cosine"] == pytest.approx(2 * 0.98**2 - 1)

    texts = [*_SHORT, *calibration_texts()[:8]]
    alone = np.stack([model.embed([t], progress=False).vectors[0] for t in texts])
    batched = model.embed([*texts, *_RUNS], progress=False).vectors[: len(texts)]
    settings = {"dtype": "float32", "quantize": "int8"}
    labels = [f"row {i}" for i in range(len(texts))]
    same = StoreCheck(True, len(texts), 0.0, 1.0)
    add_drift(same, model, settings, labels, alone, batched)
    assert not same.differences, same.to_dict()
    altered = alone.copy()
    altered[9] = alone[12]  # a row holding another sentence's vector
    moved = StoreCheck(True, len(texts), 0.0, 1.0)
    add_drift(moved, model, settings, labels, altered, batched)
    assert [d.what for d in moved.differences] == ["row 9"], moved.to_dict()


def test_save_refuses_to_replace_a_fingerprint_unless_told(tmp_path: Path) -> None:
    """The file `--against` checks a deployment by was replaced in silence by a second `--save`."""
    path = tmp_path / "fp.json"
    path.write_text('{"reference": "kept"}', encoding="utf-8")
    ran = run_main("verify", "--save", str(path))
    assert ran.code != 0 and "exists; pass --overwrite" in ran.stderr, ran
    assert path.read_text(encoding="utf-8") == '{"reference": "kept"}'
    ran = run_main("verify", "--overwrite")
    assert ran.code != 0 and "add --save FILE" in ran.stderr, ran
    assert run_main("verify", "--save", str(path), "--overwrite", "--json").code == 0
    assert "reference" not in json.loads(path.read_text(encoding="utf-8"))


def test_verify_says_no_cut_of_its_own_long_canary(bundled) -> None:  # type: ignore[no-untyped-def]
    """The reference texts hold one over the limit on purpose (cut alike on both sides, no vector handed
    back): a plain verify() warns of nothing."""
    import warnings

    with warnings.catch_warnings():
        warnings.simplefilter("error", bertscope.TruncatedTextsWarning)
        assert bundled.verify().ok


def test_verify_measures_short_texts_beside_the_canaries_which_stay_as_saved(bundled: Model) -> None:
    """The canaries are held in every saved fingerprint (their texts' hash, token counts and vectors): they
    are the 51 texts fingerprints were saved with, and the short texts are measured beside them only."""
    import hashlib

    canaries = canary_texts(bundled)
    joined = "\n".join(canaries).encode("utf-8")
    assert len(canaries) == 51 and hashlib.sha256(joined).hexdigest()[:16] == "1d7fff2951f721dc"
    assert reference_texts(bundled) == [*canaries, *SHORT_TEXTS]
    assert all(len(text.split()) <= 4 for text in SHORT_TEXTS)
    assert not set(SHORT_TEXTS) & {*calibration_texts(), *_short_calibration()}  # held out of every int8


def _short_calibration() -> tuple[str, ...]:
    from bertscope.backends.openvino import SHORT_CALIBRATION

    return SHORT_CALIBRATION


def test_int8_reads_lower_on_the_short_texts_and_passes_the_floor_the_docs_suggest() -> None:
    """verify's int8 figure read ~0.998 on the long canaries alone, while short texts read ~0.99: the docs
    suggested 0.995, which passed a deployment whose "Ok." was at 0.992. The short texts now set the
    figure, and the suggested `--min-cosine 0.98` is one a healthy int8 passes on them."""
    model = bertscope.load(quantize="int8")
    long_only = compare_to_reference(model, canary_texts(model), min_cosine=0.98)
    whole = verify_model(model, min_cosine=0.98)
    assert isinstance(whole, bertscope.verify.Verification)
    assert whole.n_texts == len(canary_texts(model)) + len(SHORT_TEXTS)
    assert whole.sentence_min_cosine < long_only.sentence_min_cosine
    assert whole.ok, whole.to_dict()  # no upper bound on the drift: how far int8 moves depends on the CPU
    ran = run_main("verify", "--quantize", "int8", "--min-cosine", "0.98")
    assert ran.code == 0 and "ok: 61 texts" in ran.stdout, ran


def test_a_lossy_modes_default_floor_is_its_precisions() -> None:
    """Without --min-cosine (and no --fast bound), int8 is held to 0.98, the floor `verify --store` holds
    it to; at 0.999, which bfloat16 keeps, every healthy int8 was called drifted (exit 1)."""
    from bertscope.verify.settings import lossy_floor

    assert lossy_floor(bertscope.load(quantize="int8")) == 0.98
    ran = run_main("verify", "--quantize", "int8")
    assert ran.code == 0 and "tolerance min cosine >= 0.98 " in ran.stdout, ran
    with warnings.catch_warnings():
        warnings.simplefilter("ignore")  # bfloat16 on a CPU without it natively: slow, and said so
        assert lossy_floor(bertscope.load(dtype="bfloat16", backend="torch", device="cpu")) == 0.999
