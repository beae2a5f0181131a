"""The explorer's routes and files as an auditor found them (audit 21): errors under /explorer/ naming
the real path, every method a path takes, the batch's names, the one-text route's refusals."""

from __future__ import annotations

import re
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import pytest
from fastapi.testclient import TestClient

import bertscope


@pytest.fixture(scope="module")
def client(bundled: bertscope.Model) -> Iterator[TestClient]:
    from bertscope.server import create_app

    with TestClient(create_app(bundled)) as served:
        yield served


def test_a_missing_explorer_file_names_its_own_path_and_the_docs(client: TestClient) -> None:
    """The mount's root_path (/explorer) was taken for the service's: the path lost its /explorer and the
    docs link gained it (/explorer/docs, a 404), and /explorer/ was read as TEI's POST /."""
    missing = client.get("/explorer/x.js")
    assert missing.status_code == 404
    assert missing.json() == {
        "detail": "no route GET /explorer/x.js; the routes are listed at /docs (and /openapi.json)"
    }
    folder = client.get("/explorer/no/such/")
    assert folder.status_code == 404 and set(folder.json()) == {"detail"}
    assert folder.json()["detail"].startswith("no route GET /explorer/no/such/;")
    put = client.put("/explorer/app.js")
    assert put.status_code == 405 and put.headers["allow"] == "GET, HEAD"
    assert put.json() == {"detail": "method PUT is not allowed on /explorer/app.js; send it as GET"}


def test_a_mounted_service_names_its_own_docs(bundled: bertscope.Model) -> None:
    from bertscope.server import create_app

    with TestClient(create_app(bundled), root_path="/bertscope") as mounted:
        missing = mounted.get("/bertscope/explorer/x.js")
    assert missing.json()["detail"] == (
        "no route GET /explorer/x.js; the routes are listed at /bertscope/docs (and /bertscope/openapi.json)"
    )


def test_the_page_path_allows_get_and_post(client: TestClient) -> None:
    """TEI's POST / came before the page's GET /: the router's 405 named POST alone."""
    refused = client.delete("/")
    assert refused.status_code == 405 and refused.headers["allow"] == "GET, HEAD, POST"
    assert refused.json()["detail"] == "method DELETE is not allowed on /; send it as GET or POST"
    assert client.head("/").status_code == 200  # HEAD, as the Allow header says
    one = client.get("/embed")  # a path with one route keeps its one method
    assert one.headers["allow"] == "POST" and one.json()["detail"].endswith("send it as POST")


def test_explore_batch_names_the_batch_as_model_batch_does(
    client: TestClient, bundled: bertscope.Model
) -> None:
    """/explore/batch said `ids` (Model.batch: input_ids), had no token_type_ids and no `model`."""
    texts = ["I like bread", "Hi"]
    found = client.post("/explore/batch", json={"inputs": texts}).json()
    expected = bundled.batch(texts)
    for name in ("input_ids", "attention_mask", "token_type_ids"):
        assert found[name] == expected[name].tolist(), name
    assert found["ids"] == found["input_ids"]  # the older name, kept beside it
    assert found["model"] == client.get("/info").json()["model_id"]
    assert client.get("/explore/posts").json() == {"model": found["model"], "posts": []}


def test_explore_batch_has_no_token_types_where_the_family_has_none(tmp_path: Path) -> None:
    from bertscope.server import create_app
    from tiny_models import build_tiny_model

    model = bertscope.load(build_tiny_model("distilbert", tmp_path / "distilbert"), device="cpu")
    assert isinstance(model, bertscope.Model)
    with TestClient(create_app(model)) as served:
        found = served.post("/explore/batch", json={"inputs": ["a cat", "a"]}).json()
    assert found["token_type_ids"] is None
    assert found["input_ids"] == model.batch(["a cat", "a"])["input_ids"].tolist()


@pytest.mark.parametrize("path", ["/explorer/index.html", "/explorer/"])
def test_the_page_is_served_at_the_root_only(client: TestClient, path: str) -> None:
    """/explorer/index.html served the page, its relative links then under /explorer/explorer/ (404s)."""
    moved = client.get(path, follow_redirects=False)
    assert moved.status_code == 307 and moved.headers["location"] == "/"
    assert client.get(path).text == client.get("/").text


def test_explore_layers_refuses_a_list_or_an_empty_text_naming_inputs(client: TestClient) -> None:
    """A list said only "Input should be a valid string"; an empty text "text 0 is empty" of a route that
    takes one text."""
    listed = client.post("/explore/layers", json={"inputs": ["a", "b"]})
    assert listed.status_code == 422
    assert listed.json()["detail"] == "inputs: give one text (a string), not a list; /v2/embed takes several"
    empty = client.post("/explore/layers", json={"inputs": "  "})
    assert empty.status_code == 422
    assert empty.json()["detail"] == "inputs is empty: every text needs a non-space character"


@pytest.fixture(scope="module")
def browser() -> Iterator[Any]:
    """Debian's Chromium headless (as tests/test_explorer.py drives it), for the page's own logic."""
    from test_explorer import FLAGS, _chromium

    playwright = pytest.importorskip("playwright.sync_api", reason="the dev extra installs playwright")
    exe = _chromium()
    if exe is None:
        pytest.skip("Chromium is absent and could not be installed (apt-get install chromium needs root)")
    with playwright.sync_playwright() as p:
        launched = p.chromium.launch(executable_path=exe, args=FLAGS)
        try:
            yield launched
        finally:
            launched.close()


def _page_with_key(browser: Any, key: str) -> Any:
    """A fresh page whose tab holds `key` as a key given earlier (sessionStorage, as a reload keeps it)."""
    context = browser.new_context()
    context.set_default_timeout(120_000)  # a wait ends early only when the page is wrong
    context.add_init_script(f"sessionStorage.setItem('bertscope-key', {key!r})")
    return context.new_page()


@pytest.mark.timeout(400)
@pytest.mark.parametrize("answer", ["secret", None])
def test_a_refused_key_is_dropped_and_asked_again(
    browser: Any, bundled: bertscope.Model, answer: str | None
) -> None:
    """A mistyped key stayed in the tab: every call failed with the server's 401 and no prompt came."""
    from test_server import serving

    asked: list[str] = []

    def reply(dialog: Any) -> None:
        asked.append(dialog.message)
        dialog.accept(answer) if answer else dialog.dismiss()

    with serving(bundled, api_key="secret") as base:
        pg = _page_with_key(browser, "mistyped")
        pg.on("dialog", reply)
        pg.goto(base + "/")
        if answer:
            pg.wait_for_selector("body[data-ready]")  # every panel drawn with the key given
            assert pg.evaluate("sessionStorage.getItem('bertscope-key')") == "secret"
        else:
            pg.wait_for_selector("#error:has-text('--api-key')")
            assert "wants the key it was started with (its --api-key)" in pg.inner_text("#error")
            assert pg.evaluate("sessionStorage.getItem('bertscope-key')") is None
        assert asked[0] == "That API key was refused; this server's key:"
        pg.context.close()


@pytest.mark.timeout(400)
@pytest.mark.parametrize("answer", ["secret", None])
def test_calls_refused_at_once_share_one_prompt_and_keep_the_key_given(
    browser: Any, bundled: bertscope.Model, answer: str | None
) -> None:
    """A key gone stale in an open tab: exploreNow's four calls each got a 401, and each removed the key
    and prompted, the first's answer removed by the second, so four prompts, no key, the page never
    ready. Now the first 401 asks once; the others try the key it gave, or stop on its dismissal."""
    from test_server import serving

    asked: list[str] = []
    refused: list[str] = []

    def reply(dialog: Any) -> None:
        asked.append(dialog.message)
        dialog.accept(answer) if answer and len(asked) == 1 else dialog.dismiss()

    with serving(bundled, api_key="secret") as base:
        pg = _page_with_key(browser, "secret")
        pg.on("dialog", reply)
        pg.on("response", lambda res: refused.append(res.url[len(base) :]) if res.status == 401 else None)
        pg.goto(base + "/")
        pg.wait_for_selector("body[data-ready]")
        assert asked == [] and refused == []
        pg.evaluate("sessionStorage.setItem('bertscope-key', 'stale')")  # the server restarted, say
        pg.fill("#text", "the river bank")
        pg.evaluate("document.querySelector('#input').requestSubmit()")
        pg.wait_for_selector("body[data-ready='the river bank'], #error:not([hidden])")
        while len(refused) < 4:  # a dismissal shows its error while the other calls may be in flight
            pg.wait_for_event("response")
        # the four calls went out together with the stale key, and every one was refused
        assert sorted(refused) == ["/anatomy", "/attention", "/explore/layers", "/v2/tokenize"]
        assert asked == ["That API key was refused; this server's key:"]
        stored = pg.evaluate("sessionStorage.getItem('bertscope-key')")
        if answer:
            assert stored == "secret" and pg.is_hidden("#error")
            assert pg.evaluate("document.body.dataset.ready") == "the river bank"
        else:
            assert stored is None
            assert "wants the key it was started with (its --api-key)" in pg.inner_text("#error")
            assert pg.evaluate("document.body.dataset.ready") is None
        pg.context.close()


@pytest.mark.timeout(400)
def test_anatomy_draws_the_projection_the_proof_speaks_of(
    browser: Any, bundled: bertscope.Model, tmp_path: Path
) -> None:
    """ALBERT projects after the LayerNorm (16 wide to 32): the page drew the parts up to the LayerNorm
    only, while the proof compared the projected rows with layer 0."""
    from test_server import serving
    from tiny_models import build_tiny_model

    albert = bertscope.load(build_tiny_model("albert", tmp_path / "albert"), device="cpu")
    assert isinstance(albert, bertscope.Model)
    drawn: dict[str, tuple[list[str], list[int]]] = {}
    for name, model in (("albert", albert), ("bert", bundled)):
        with serving(model) as base:
            pg = _page_with_key(browser, "")
            pg.goto(base + "/")
            pg.wait_for_selector("body[data-ready]")
            heads = pg.locator("#anatomy thead th").all_inner_texts()[3:]
            widths = pg.eval_on_selector_all(
                "#anatomy tbody tr:first-child canvas", "cs => cs.map(c => c.width)"
            )
            drawn[name] = (heads, widths)
            pg.context.close()
    heads, widths = drawn["albert"]
    assert heads == ["word", "+ position", "+ segment", "= sum", "LayerNorm", "projected (encoder input)"]
    assert widths == [16, 16, 16, 16, 16, 32]
    assert drawn["bert"][0] == ["word", "+ position", "+ segment", "= sum", "LayerNorm"]  # no copy of it


def test_explore_points_at_serve_for_posts_limits_and_a_key(client: TestClient) -> None:
    """`explore` has no --post, --max-inputs or --api-key; its help said nothing of where they are, while
    the docs spoke of the server's post-processings. Its 413s name `bertscope serve` (which has them)."""
    from typer.testing import CliRunner

    from bertscope.cli import app

    result = CliRunner().invoke(app, ["explore", "--help"], env={"COLUMNS": "200"})
    said = " ".join(result.output.split())
    assert result.exit_code == 0
    assert "For post-processings (--post), limits or a key (--api-key), run bertscope serve with them" in said
    many = client.post("/explore/batch", json={"inputs": ["a"] * 257})  # over the default --max-inputs, 256
    assert many.status_code == 413
    assert "start bertscope serve with a higher --max-inputs" in many.json()["detail"]


def test_the_docs_name_every_option_explore_takes() -> None:
    """docs/explorer.md said explore takes the model and runtime options "only" and listed them, leaving
    out --fast-min-cosine and --remeasure, which it takes."""
    import typer.main

    from bertscope.cli import app

    explore = typer.main.get_command(app).commands["explore"]  # type: ignore[attr-defined]
    intro = (Path(__file__).parents[1] / "docs" / "explorer.md").read_text(encoding="utf-8").split("![")[0]
    named = set(re.findall(r"`(-[\w-]+)", intro))  # `--post NAME=FILE` names --post
    taken = [param.opts + param.secondary_opts for param in explore.params if param.name != "help"]
    assert taken and all(named.intersection(opts) for opts in taken), (taken, named)
