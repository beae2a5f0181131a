"""Command-line options checked before any work: bad values, conflicts and options left unused are
refused with one line (exit 2 for a usage error, verify's bad-input 2), and nothing is overwritten."""

from __future__ import annotations

import json
from pathlib import Path

import pytest

from console import run_main


def _refused(*args: str, code: int | None = None, says: str = "") -> str:
    """Run the console, expect it to refuse in one line (no traceback); returns stderr."""
    ran = run_main(*args)
    assert ran.code != 0 if code is None else ran.code == code, ran
    assert "Traceback" not in ran.stderr and ran.stdout == "", ran
    assert says in ran.stderr, ran.stderr
    return ran.stderr


def _vectors(*args: str) -> list[list[float]]:
    ran = run_main("embed", *args, "--json")
    assert ran.code == 0, ran
    return json.loads(ran.stdout)["vectors"]  # type: ignore[no-any-return]


def test_static_export_keeps_an_existing_file_unless_overwrite(tmp_path: Path) -> None:
    target = tmp_path / "big.parquet"
    target.write_bytes(b"a corpus store")
    _refused("static", "dog", "-o", str(target), says="--overwrite")
    assert target.read_bytes() == b"a corpus store"
    assert run_main("static", "dog", "-o", str(target), "--overwrite").code == 0
    assert target.stat().st_size > len(b"a corpus store")


def test_embed_reads_records_without_output(tmp_path: Path) -> None:
    """Printed vectors read -i as the corpus job does: the field of a .jsonl, the data rows of a .csv."""
    plain = _vectors("a cat", "a dog")
    docs = tmp_path / "docs.jsonl"
    docs.write_text('{"id": "a", "body": "a cat"}\n{"id": "b", "body": "a dog"}\n')
    assert _vectors("-i", str(docs), "--text-field", "body", "--id-field", "id") == plain
    table = tmp_path / "d.csv"
    table.write_text("text,id\na cat,1\na dog,2\n")
    assert _vectors("-i", str(table)) == plain


@pytest.mark.parametrize("limit", ["0", "-2"])
def test_eval_words_limit_must_be_positive(tmp_path: Path, limit: str) -> None:
    pairs = tmp_path / "pairs.tsv"
    pairs.write_text("cat\tdog\t7\nbread\tcake\t6\ncar\tsky\t1\n")
    ran = run_main("eval", "words", "-i", str(pairs), "--limit", limit, "--no-plot")
    assert ran.code == 2 and "--limit" in ran.stderr


@pytest.mark.parametrize("command", [["embed", "-i", "x.txt", "-o", "out"], ["static", "--corpus", "x.txt"]])
def test_ray_workers_must_be_positive(tmp_path: Path, command: list[str]) -> None:
    ran = run_main(*command, "--engine", "ray", "--workers", "0")
    assert ran.code == 2 and "--workers" in ran.stderr
    assert not (tmp_path / "out").exists()


def test_verify_refuses_an_unwritable_save_before_the_work(
    tmp_path: Path, tiny_dirs: dict[str, Path]
) -> None:
    save = tmp_path / "nodir" / "fp.json"
    stderr = _refused("verify", "-m", str(tiny_dirs["bert"]), "--save", str(save), code=2)
    assert "does not exist" in stderr and "verified in" not in stderr
    # with --json, the refusal is also a JSON object on stdout (a CI step's verify.json says why)
    ran = run_main("verify", "-m", str(tiny_dirs["bert"]), "--save", str(save), "--json")
    assert ran.code == 2 and json.loads(ran.stdout) == {
        "ok": False,
        "error": stderr.removeprefix("error: ").strip(),
    }


def test_embed_chunks_refuses_fast_with_a_backend() -> None:
    """--fast picks the backend itself: refused with --chunks as it is without."""
    _refused("embed", "A cat. A dog.", "--chunks", "sentence", "--fast", "--backend", "torch", says="fast")


def test_verify_store_refuses_the_model_check_options(tmp_path: Path) -> None:
    sample = tmp_path / "c.txt"
    sample.write_text("a cat\n")
    args = ["-i", str(sample), "--limit", "5", "--min-cosine", "0.2"]
    stderr = _refused("verify", "--store", str(tmp_path / "s.parquet"), *args, code=2)
    assert "--input, --limit, --min-cosine" in stderr


def test_static_refuses_ids_with_word() -> None:
    _refused("static", "bread", "--ids", "--word", says="--ids")


def test_embed_corpus_job_refuses_json(tmp_path: Path) -> None:
    corpus, output = tmp_path / "c.txt", tmp_path / "x.parquet"
    corpus.write_text("a cat\n")
    _refused("embed", "-i", str(corpus), "-o", str(output), "--json", says="--json")
    assert not output.exists()


def test_stride_is_checked_before_any_text(tmp_path: Path) -> None:
    assert run_main("embed", "short", "--long", "window", "--stride", "0").code == 2
    corpus, output = tmp_path / "c.txt", tmp_path / "x.parquet"
    corpus.write_text("short\n")
    args = ["-i", str(corpus), "-o", str(output), "--long", "window", "--stride", "999"]
    _refused("embed", *args, says="stride must be between 1 and")
    assert not output.exists()
