"""Post-processing wired through the one flow: embed(post=), corpus jobs, search, the CLI and the service."""

from __future__ import annotations

import json
from pathlib import Path

import numpy as np
import pytest
from fastapi.testclient import TestClient
from typer.testing import CliRunner

import bertscope
from bertscope.cli import app as cli_app
from bertscope.core.post import fit_post_on_texts
from bertscope.server import ServerSettings, create_app

NEWS = Path(__file__).resolve().parents[1] / "examples" / "news.txt"
TEXTS = [line for line in NEWS.read_text().splitlines() if line.strip()]


@pytest.fixture(scope="module")
def white_file(bundled: bertscope.Model, tmp_path_factory: pytest.TempPathFactory) -> Path:
    """Whitening to 16 dimensions fitted on the example news corpus, saved."""
    processor = fit_post_on_texts(bundled, TEXTS, "whitening", dim=16)
    return processor.save(tmp_path_factory.mktemp("post") / "white.safetensors")


def test_embed_applies_post_and_records_it(bundled: bertscope.Model, white_file: Path) -> None:
    plain = bundled.embed(TEXTS)
    white = bundled.embed(TEXTS, post=white_file)
    assert white.vectors.shape == (len(TEXTS), 16) and white.spec["post"]["kind"] == "whitening"
    expected = bertscope.core.post.load_post(white_file).apply(plain.vectors)
    np.testing.assert_allclose(white.vectors, expected, atol=1e-5)
    with pytest.raises(bertscope.InvalidSpec, match="fitted on"):
        bundled.embed(TEXTS[:2], post=white_file, layers="0")


def test_corpus_job_and_search_use_the_same_post(
    bundled: bertscope.Model, white_file: Path, tmp_path: Path
) -> None:
    store = tmp_path / "white.parquet"
    bertscope.embed_corpus(NEWS, store, model=bundled, post=white_file)
    stored = bertscope.search(None, store, item_id="1", k=1)
    assert len(stored) == 1
    with pytest.raises(bertscope.CorpusError, match="pass the same file"):
        bertscope.search("a storm", store, model=bundled)
    hits = bertscope.search(TEXTS[0], store, model=bundled, post=white_file, k=1)
    assert hits[0].id == "1" and hits[0].score == pytest.approx(1.0, abs=1e-4)


def test_cli_embed_post(white_file: Path) -> None:
    result = CliRunner().invoke(cli_app, ["embed", TEXTS[0], "--post", str(white_file), "--json"])
    assert result.exit_code == 0, result.output
    assert len(json.loads(result.stdout)["vectors"][0]) == 16


def test_service_applies_a_loaded_post(bundled: bertscope.Model, white_file: Path) -> None:
    settings = ServerSettings(posts=(("white", str(white_file)),))
    with TestClient(create_app(bundled, settings=settings)) as client:
        answer = client.post("/v2/embed", json={"inputs": TEXTS[:3], "post": "white"})
        assert answer.status_code == 200, answer.text
        np.testing.assert_allclose(
            np.array(answer.json()["vectors"]), bundled.embed(TEXTS[:3], post=white_file).vectors, atol=1e-5
        )
        missing = client.post("/v2/embed", json={"inputs": "a text", "post": "pca"})
        assert missing.status_code == 422 and "loaded: white" in missing.text
        mismatch = client.post("/v2/embed", json={"inputs": "a text", "post": "white", "layers": "0"})
        assert mismatch.status_code == 422 and "fitted on" in mismatch.text


def test_api_key_guards_the_api_but_not_the_explorer_page(bundled: bertscope.Model) -> None:
    with TestClient(create_app(bundled, settings=ServerSettings(api_key="s3cret"))) as client:
        assert client.get("/").status_code == 200
        assert client.post("/v2/embed", json={"inputs": "a"}).status_code == 401
        authorised = client.post(
            "/v2/embed", json={"inputs": "a"}, headers={"Authorization": "Bearer s3cret"}
        )
        assert authorised.status_code == 200
