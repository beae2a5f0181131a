"""The command line's chunk and prompt options: `embed --chunks`, `--prompt-name`, `similar` on prompts."""

from __future__ import annotations

import json
from pathlib import Path

import numpy as np
from typer.testing import CliRunner

import bertscope
from bertscope.cli import app
from bertscope.io.stores import open_store
from console import run_main
from prompted import with_prompts

runner = CliRunner()
DOC = "Berlin is the capital of Germany. The city has 3.8 million people. It is known for its art scene."


def run_ok(*args: str) -> str:
    """Invoke the app in-process and return stdout, failing the test on a non-zero exit."""
    result = runner.invoke(app, list(args))
    assert result.exit_code == 0, (result.output, result.exception)
    return result.stdout


def test_embed_chunks_json_equals_the_library(bundled: bertscope.Model) -> None:
    for flag, late in (("--late", True), ("--naive", False)):
        [doc] = json.loads(run_ok("embed", DOC, "--chunks", "sentence", flag, "--json"))
        expected = bundled.embed_chunks(DOC, chunks="sentence", late=late)
        assert [(c["start"], c["end"]) for c in doc["chunks"]] == expected.spans
        assert [c["text"] for c in doc["chunks"]] == expected.chunks
        np.testing.assert_allclose([c["vector"] for c in doc["chunks"]], expected.vectors, atol=1e-5)
        assert doc["spec"]["late"] is late and doc["spec"]["long"] == ("window" if late else "truncate")
    table = run_ok("embed", DOC, "--chunks", "tokens", "--chunk-size", "6", "--chunk-overlap", "2")
    assert "document 1" in table and "chunk-size 6, chunk-overlap 2" in table  # titled by its id


def test_naive_chunk_over_the_window_warns_and_bad_options_are_one_line() -> None:
    long_chunk = "Short one. Words " + " ".join(["word"] * 300) + "."
    code, _, warned = run_main("embed", long_chunk, "--chunks", "sentence", "--naive", "--json")
    assert code == 0 and "1 chunk(s) longer than 256 tokens were truncated" in warned
    code, _, failed = run_main("embed", DOC, "--prompt-name", "query")
    assert code == 1
    assert "unknown prompt name 'query'; this model's prompts: none" in failed
    assert "Traceback" not in failed and len(failed.strip().splitlines()) == 1
    for args, error, needle in (
        (["--chunks", "pages"], bertscope.InvalidSpec, "unknown chunking 'pages'; choose one of: sentence"),
        (["--chunks", "sentence", "--pooling", "cls"], bertscope.InvalidSpec, "late chunking pools token"),
        (
            ["--chunks", "tokens", "--chunk-overlap", "200"],
            bertscope.InvalidSpec,
            "0 <= chunk_overlap < chunk_",
        ),
        (["--chunks", "sentence", "--tokens"], bertscope.InvalidInput, "--tokens, --chunks and --level"),
    ):
        result = runner.invoke(app, ["embed", DOC, *args])
        assert isinstance(result.exception, error) and needle in str(result.exception), result.exception


def test_a_passage_store_is_searched_with_the_query_prompt(bundled_path: Path, tmp_path: Path) -> None:
    folder = with_prompts(bundled_path, tmp_path / "prompted", include_prompt=False, default=None)
    corpus = tmp_path / "docs.txt"
    corpus.write_text(
        "The river bank was muddy.\nThe bank raised its interest rates.\nA cat sat on the mat.\n"
    )
    store = tmp_path / "docs.parquet"
    run_ok("embed", "-i", str(corpus), "-o", str(store), "-m", str(folder), "--prompt-name", "passage", "-q")
    settings = open_store(store).settings
    assert settings["prompt_name"] == "passage" and settings["prompt"] == "passage: "
    hits = json.loads(run_ok("similar", "money and loans", "--in", str(store), "-m", str(folder), "--json"))
    model = bertscope.load(folder, device="cpu")
    query = model.embed("money and loans", prompt_name="query").vectors[0]
    stored = model.embed(corpus.read_text().splitlines(), prompt_name="passage").vectors
    expected = sorted(stored @ query, reverse=True)
    np.testing.assert_allclose([h["score"] for h in hits], expected, atol=1e-5)
    assert hits[0]["text"] == "The bank raised its interest rates."
