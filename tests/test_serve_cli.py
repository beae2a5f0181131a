"""`bertscope serve`'s argument checks: every refusal is one line, said before "serving ... on http://"."""

from __future__ import annotations

from pathlib import Path

import pytest
import uvicorn

import bertscope
from console import run_main


@pytest.fixture
def no_server(bundled: bertscope.Model, monkeypatch: pytest.MonkeyPatch) -> list[str]:
    """The bundled model for `serve`, and a uvicorn that records a start instead of serving forever."""
    from bertscope.cli import serve

    started: list[str] = []
    monkeypatch.setattr(serve, "load_model", lambda *a, **k: bundled)
    monkeypatch.setattr(uvicorn.Server, "run", lambda self, *a, **k: started.append("run"))
    return started


def _refused(*args: str) -> str:
    done = run_main("serve", *args)
    assert done.code == 1, done
    assert "serving" not in done.stderr and done.stdout == ""
    line = done.stderr.strip()
    assert line.startswith("error: ") and "\n" not in line, line
    return line


def test_a_missing_post_or_store_file_is_refused_before_serving(no_server: list[str], tmp_path: Path) -> None:
    missing = tmp_path / "missing.json"
    assert _refused("--post", f"x={missing}") == f"error: --post x={missing}: there is no file {missing}"
    assert _refused("--store", f"s={missing}") == f"error: --store s={missing}: there is no file {missing}"
    assert "NAME=FILE" in _refused("--post", "nofile")
    assert no_server == []


def test_a_bad_post_or_store_file_is_refused_before_serving(no_server: list[str], tmp_path: Path) -> None:
    bad = tmp_path / "white.safetensors"
    bad.write_text("not a post-processing file")
    assert "is not a bertscope post-processing file" in _refused("--post", f"w={bad}")
    not_a_store = tmp_path / "tokens.parquet"
    not_a_store.write_text("not parquet")
    _refused("--store", f"t={not_a_store}")
    assert no_server == []


@pytest.mark.parametrize("key", ["", "   "])
def test_an_empty_api_key_is_refused(no_server: list[str], key: str) -> None:
    line = _refused("--api-key", key)
    assert line == (
        "error: --api-key is empty: an empty key is not allowed; give a key, or leave --api-key out to serve "
        "without one"
    )
    assert no_server == []


def test_good_arguments_announce_then_serve(no_server: list[str]) -> None:
    done = run_main("serve", "--api-key", "s3cret", "--port", "8765")
    assert done.code == 0, done.stderr
    assert "serving all-MiniLM-L6-v2" in done.stderr and "http://127.0.0.1:8765" in done.stderr
    assert no_server == ["run"]
