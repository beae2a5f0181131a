"""`verify` on a static model (a model2vec folder): fingerprinted by its rows' canaries, never a traceback.

It has no Hugging Face forward to compare with: `verify` alone refuses in one line with exit 2 (a refusal,
so that 1 still means drift), `--save` writes its fingerprint and `--against` checks it (1 on a moved row).
"""

from __future__ import annotations

import json
import shutil
from pathlib import Path

import numpy as np
import pytest
from safetensors.numpy import load_file, save_file

import bertscope
from bertscope.errors import InvalidSpec
from bertscope.verify import check_fingerprint, fingerprint, verify_model
from console import run_main


@pytest.fixture(scope="module")
def saved(m2v_folder: Path, tmp_path_factory: pytest.TempPathFactory) -> Path:
    path = tmp_path_factory.mktemp("fp") / "static.fingerprint.json"
    ran = run_main("verify", "-m", str(m2v_folder), "--save", str(path))
    assert ran.code == 0, ran.stderr
    assert ran.stderr.startswith("saved: fingerprint") and "Traceback" not in ran.stderr, ran.stderr
    return path


def _one_line_refusal(ran: object) -> str:
    stderr: str = ran.stderr  # type: ignore[attr-defined]
    assert ran.code == 2, stderr  # type: ignore[attr-defined]
    assert stderr.startswith("error:") and stderr.count("\n") == 1, stderr
    return stderr


def test_verify_alone_refuses_a_static_model_in_one_line_with_exit_2(
    m2v_folder: Path, tmp_path: Path
) -> None:
    stderr = _one_line_refusal(run_main("verify", "-m", str(m2v_folder)))
    assert "is a static model (model2vec)" in stderr and "--save FILE" in stderr and "--against" in stderr
    sample = tmp_path / "sample.txt"
    sample.write_text("a river bank\n", encoding="utf-8")
    sampled = run_main(
        "verify", "-m", str(m2v_folder), "--save", str(tmp_path / "fp.json"), "-i", str(sample)
    )
    assert "no Hugging Face forward" in _one_line_refusal(sampled)


def test_a_saved_static_fingerprint_holds_its_rows_canaries(saved: Path, static_m2v: object) -> None:
    made = json.loads(saved.read_text(encoding="utf-8"))
    assert made["settings"]["family"] == "model2vec" and made["settings"]["layers"] == 0
    assert [layer["layer"] for layer in made["canaries"]["layers"]] == [0]
    mean = np.asarray(made["canaries"]["layers"][0]["mean"])
    assert mean.shape == (len(made["canaries"]["tokens"]), 8) and np.abs(mean).max() > 0
    assert made["canaries"]["tokens"][-1] == static_m2v.max_tokens  # type: ignore[attr-defined]
    assert made["environment"]["attention_implementation"] is None
    assert fingerprint(static_m2v)["id"] == made["id"]
    # modules.json names the folder itself ("."): its config.json is listed once, by its own name
    assert "config.json" in made["files"] and not any(name.startswith("./") for name in made["files"])


def test_against_its_own_fingerprint_passes(saved: Path, m2v_folder: Path) -> None:
    ran = run_main("verify", "-m", str(m2v_folder), "--against", str(saved))
    assert ran.code == 0 and ran.stdout.startswith("ok: same fingerprint"), (ran.stdout, ran.stderr)


def test_a_moved_row_is_drift_exit_1(saved: Path, m2v_folder: Path, tmp_path: Path) -> None:
    moved = tmp_path / "moved"
    shutil.copytree(m2v_folder, moved)
    tensors = load_file(str(moved / "model.safetensors"))
    rows = tensors["embeddings"]
    tensors["embeddings"] = (rows * 1.01).astype(rows.dtype)  # every row 1% longer
    save_file(tensors, str(moved / "model.safetensors"))
    ran = run_main("verify", "-m", str(moved), "--against", str(saved), "--json")
    assert ran.code == 1, ran.stderr
    what = {d["what"] for d in json.loads(ran.stdout)["differences"]}
    assert {"files.model.safetensors", "canaries.layer 0"} <= what, what
    # the canaries alone catch it too: the same files named, only the rows moved
    expected = json.loads(saved.read_text(encoding="utf-8"))
    expected["files"] = fingerprint(bertscope.load(moved), with_canaries=False)["files"]
    check = check_fingerprint(bertscope.load(moved), expected)
    assert [d.what for d in check.differences] == ["canaries.layer 0"], check.differences


def test_the_library_refuses_the_reference_check_in_one_line(static_m2v: object) -> None:
    with pytest.raises(bertscope.InvalidSpec, match=r"static model \(model2vec\).*save_fingerprint"):
        verify_model(static_m2v)


def test_the_static_models_own_verify_checks_a_fingerprint_and_refuses_without_one(
    saved: Path, static_m2v: object
) -> None:
    check = static_m2v.verify(against=saved)  # type: ignore[attr-defined]
    assert check.ok, check
    with pytest.raises(InvalidSpec, match="no Hugging Face forward to verify it against"):
        static_m2v.verify()  # type: ignore[attr-defined]
