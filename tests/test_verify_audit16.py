"""`verify --store` with load options: a store made at a token limit of its own is re-embedded at it
whatever options are given (a --threads 1 read it at the model's 64 and said DRIFT), and a runtime option
typed (--dtype) replaces the store's runtime instead of meeting its backend as if typed beside it; where
only the precision differs, the DRIFT headline names how to check the store itself."""

from __future__ import annotations

from pathlib import Path

import pytest

import bertscope

TEXTS = [f"sentence number {i} says a little more than the limit of twelve tokens does" for i in range(12)]


def _store(tiny_dirs: dict[str, Path], tmp_path: Path, backend: str = "torch") -> Path:
    path = tmp_path / "cut.parquet"
    model = bertscope.load(tiny_dirs["bert"], device="cpu", backend=backend, max_tokens=12)
    bertscope.embed_corpus(TEXTS, path, model=model, progress=False)
    return path


def test_load_options_keep_the_store_s_token_limit(tiny_dirs: dict[str, Path], tmp_path: Path) -> None:
    from console import run_main

    store = str(_store(tiny_dirs, tmp_path))
    for options in ([], ["--threads", "1"], ["--backend", "torch"], ["--device", "cpu"]):
        ran = run_main("verify", "--store", store, "--rows", "4", *options)
        assert ran.code == 0, (options, ran.stdout, ran.stderr)
        assert ran.stdout.startswith("ok: 4 of 12 rows"), ran.stdout


def test_a_runtime_option_replaces_the_store_s_runtime(tiny_dirs: dict[str, Path], tmp_path: Path) -> None:
    from console import run_main

    store = str(_store(tiny_dirs, tmp_path, backend="onnxruntime"))  # which runs float32 only
    ran = run_main("verify", "--store", store, "--rows", "4", "--dtype", "bfloat16")
    assert ran.code == 1, ran.stderr  # DRIFT, not bad input (2)
    assert ran.stdout.startswith("DRIFT: the model differs from the store's (settings.precision.dtype)")
    assert "only the precision differs: load the model as the store ran" in ran.stdout
    assert "truncation" not in ran.stdout  # read at the store's 12 tokens, as it was cut


def test_input_reads_a_record_file_s_text_field(tmp_path: Path) -> None:
    import json

    from console import run_main

    records = tmp_path / "body.jsonl"
    records.write_text("".join(json.dumps({"key": i, "body": t}) + "\n" for i, t in enumerate(TEXTS)))
    ran = run_main("verify", "-i", str(records), "--text-field", "body", "--limit", "3", "--json")
    assert ran.code == 0, ran.stderr
    alone = run_main("verify", "--json")  # the canaries and short texts, without a sample
    assert json.loads(ran.stdout)["n_texts"] == json.loads(alone.stdout)["n_texts"] + 3


def test_a_moved_model_folder_is_named(tiny_dirs: dict[str, Path], tmp_path: Path) -> None:
    import shutil

    from bertscope.errors import ModelLoadError
    from console import run_main

    folder = tmp_path / "tinybert"
    shutil.copytree(tiny_dirs["bert"], folder)
    store = tmp_path / "tiny.parquet"
    assert run_main("embed", *TEXTS[:3], "-m", str(folder), "-o", str(store), "-q").code == 0
    moved = folder.rename(tmp_path / "moved")
    for options in ([], ["--threads", "1"]):
        ran = run_main("verify", "--store", str(store), *options)
        assert ran.code == 2 and ran.stderr.count("\n") == 1, ran.stderr
        assert f"made with the model folder {folder}, which is not there now" in ran.stderr
        assert "new place with -m" in ran.stderr and "bundled" not in ran.stderr
    with pytest.raises(ModelLoadError, match="give the folder's new place with model="):
        bertscope.verify_store(store)
    assert run_main("verify", "--store", str(store), "-m", str(moved)).code == 0


def test_a_forgotten_id_field_is_named(bundled: bertscope.Model, tmp_path: Path) -> None:
    import json

    from console import run_main

    records = tmp_path / "sb.jsonl"
    records.write_text("".join(json.dumps({"id": f"d{i}", "text": t}) + "\n" for i, t in enumerate(TEXTS)))
    store = tmp_path / "sb.parquet"
    assert run_main("embed", "-i", str(records), "--id-field", "id", "-o", str(store), "-q").code == 0
    ran = run_main("verify", "--store", str(store), "--corpus", str(records))
    assert ran.code == 2 and "no text with id 'd" in ran.stderr
    assert ran.stderr.rstrip().endswith("give the --id-field its job was given"), ran.stderr
    fixed = run_main("verify", "--store", str(store), "--corpus", str(records), "--id-field", "id")
    assert fixed.code == 0, fixed.stderr


def test_save_fingerprint_replaces_a_file_only_when_asked(tiny_dirs: dict[str, Path], tmp_path: Path) -> None:
    from bertscope.errors import InvalidInput
    from bertscope.verify import read_fingerprint, save_fingerprint

    model = bertscope.load(tiny_dirs["bert"], device="cpu")
    path = tmp_path / "fp.json"
    path.write_text("{}")
    with pytest.raises(InvalidInput, match="fp.json exists; pass overwrite=True to replace it"):
        save_fingerprint(model, path)
    assert path.read_text() == "{}"  # the reference left as it was
    made = save_fingerprint(model, path, overwrite=True)
    assert read_fingerprint(path)["id"] == made["id"]
