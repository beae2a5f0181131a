"""The explorer and framework audit of round 11: /explain and the Explain and Sentences tabs say how many
tokens a cut left out, the Tokens tab marks the right characters after an emoji, a static model's refusal
reaches the page whole, `explore --port` is checked as `serve` checks it, and the LlamaIndex and LangChain
adapters name the right text and keyword, take BaseEmbedding's own fields and pickle."""

from __future__ import annotations

import asyncio
import pickle
import socket
import tempfile
from collections.abc import Iterator
from concurrent.futures import ThreadPoolExecutor
from pathlib import Path
from typing import Any

import httpx
import numpy as np
import pytest

import bertscope
from bertscope.errors import InvalidInput, InvalidSpec, TruncatedTextsWarning
from bertscope.static_model import StaticModel
from console import run_main
from test_explorer import FLAGS, _chromium
from test_server import serving

TEXTS = ["I like eating bread", "The banana bread was horrible", "a cat sat on the mat"]
OPTIONS = {"layers": "-2", "pooling": "mean", "mask_special": True}
LONG = " ".join(["bread"] * 40)  # 42 tokens: 18 past a 24-token limit


@pytest.fixture(scope="module")
def short() -> bertscope.Model:
    """The bundled model cut at 24 tokens: a cut costs the page no seconds of drawing."""
    return bertscope.load(device="cpu", max_tokens=24)


@pytest.fixture(scope="module")
def page(short: bertscope.Model) -> Iterator[tuple[Any, str]]:
    """A headless Chromium page (Debian's, through Playwright) and the service on `short`."""
    playwright = pytest.importorskip("playwright.sync_api", reason="the dev extra installs playwright")
    exe = _chromium()
    if exe is None:
        pytest.skip("Debian's Chromium is absent and could not be installed")
    with (
        serving(short) as base,
        playwright.sync_playwright() as p,
        tempfile.TemporaryDirectory() as profile,
    ):
        context = p.chromium.launch_persistent_context(
            profile, executable_path=exe, args=FLAGS, viewport={"width": 1200, "height": 900}
        )
        context.set_default_timeout(120_000)
        try:
            yield context.new_page(), base
        finally:
            context.close()


# 1 ------------------------------------------------------------------------------------------------


def test_explain_answers_how_many_tokens_were_cut(short: bertscope.Model) -> None:
    """/explain cut a long text to the limit and said nothing: tokens_a had 24 entries, no n_dropped."""
    for pooling in ("mean", "cls"):  # an exact split and the [CLS] attention view
        with pytest.warns(TruncatedTextsWarning):
            said = short.explain(LONG, "bread", pooling=pooling).to_dict()
        assert said["n_dropped"] == [18, 0] and len(said["tokens_a"]) == 24, pooling
    with serving(short) as base:
        body = {"a": "bread", "b": LONG, "pooling": "mean", "top_k": 2}
        answer = httpx.post(base + "/explain", json=body, timeout=120).json()
    assert answer["n_dropped"] == [0, 18] and len(answer["tokens_b"]) == 24, answer.get("detail")


@pytest.mark.timeout(400)
def test_explain_and_sentences_tabs_say_the_cut(page: tuple[Any, str]) -> None:
    pg, base = page
    errors: list[str] = []
    pg.on("pageerror", lambda e: errors.append(str(e)))
    pg.goto(base + "/")
    pg.wait_for_selector("body[data-ready]")
    pg.click("[data-tab=explain]")
    pg.fill("#x-a", "bread")
    pg.fill("#x-b", LONG)
    pg.click("#explain")
    pg.wait_for_selector("#explain-cut:not([hidden])")
    assert pg.get_attribute("#explain-cut", "data-dropped") == "18"
    assert "18 tokens at the end of B" in pg.text_content("#explain-cut")
    pg.fill("#x-b", "a loaf of bread")
    pg.click("#explain")
    pg.wait_for_selector("#explain-cut[data-dropped='0'][hidden]", state="attached")

    pg.click("[data-tab=sentences]")
    pg.fill("#sentences", f"bread\n{LONG}")
    pg.click("#compare")
    pg.wait_for_selector("#sentences-cut:not([hidden])")
    assert "18 tokens at the end of S2" in pg.text_content("#sentences-cut")
    assert not errors, errors


# 2 ------------------------------------------------------------------------------------------------


def test_tokens_tab_marks_the_characters_after_an_emoji(page: tuple[Any, str]) -> None:
    """The service counts code points and JS strings UTF-16 units: after 🍞 each mark was one off."""
    pg, base = page
    errors: list[str] = []
    pg.on("pageerror", lambda e: errors.append(str(e)))
    text = "🍞 I like eating 𝔟read"
    pg.goto(base + "/")
    pg.wait_for_selector("body[data-ready]")
    pg.fill("#text", text)
    pg.fill("#text2", "")
    pg.click("#go")
    pg.wait_for_selector(f"body[data-ready='{text}']")
    marks = pg.eval_on_selector_all("#spans mark", "ms => ms.map(m => m.textContent)")
    tokens = httpx.post(base + "/v2/tokenize", json={"inputs": [text]}, timeout=60).json()["items"][0]
    want = [text[t["start"] : t["end"]] for t in tokens["tokens"] if not t["special"]]
    assert marks == want and marks[0] == "🍞", marks
    assert pg.text_content("#spans") == text
    assert not errors, errors


# 5 ------------------------------------------------------------------------------------------------


def test_a_static_models_refusal_reaches_the_explorer_whole(static_m2v: StaticModel) -> None:
    """The service's rewording dropped " (model2vec) ... (origin)" as the clause of layers=, which
    /explore/layers does not take: the banner read "... is a static model", no fix."""
    from bertscope.server.explorer import LayersRequest
    from bertscope.server.wording import as_fields

    with serving(static_m2v) as base:
        refused = httpx.post(base + "/explore/layers", json={"inputs": "a cat"}, timeout=60)
    said = refused.json()["detail"]
    assert refused.status_code == 422, said
    assert said.startswith(f"{static_m2v.source} is a static model (model2vec) with no layers: "), said
    assert said.endswith(f"or the model it was distilled from ({static_m2v.origin})"), said
    assert "layers=" not in said and "needs a transformer; use embed" in said
    # An aside closed before the option is no clause of it; an open one still is (dropped with it).
    message = "x (an aside) with no layers: layers='all' needs one; use y"
    assert as_fields(message, LayersRequest) == "x (an aside) with no layers: layers 'all' needs one; use y"
    assert as_fields("x (pass layers='all') here", LayersRequest) == "x here"


# 6 ------------------------------------------------------------------------------------------------


@pytest.fixture
def no_loading(monkeypatch: pytest.MonkeyPatch) -> list[object]:
    """`explore`'s model loading, recorded instead of run: a refusal must come before it."""
    import bertscope.cli.explore as explore

    loads: list[object] = []
    monkeypatch.setattr(explore, "load_model", lambda *a, **k: loads.append(a))
    return loads


def test_explore_refuses_a_port_past_65535_before_loading(no_loading: list[object]) -> None:
    """It loaded the model, then ended in some 60 lines of OverflowError."""
    ran = run_main("explore", "--port", "70000", "--no-open")
    assert ran.code == 2 and "65535" in ran.stderr and "Traceback" not in ran.stderr, ran
    assert no_loading == []


def test_explore_says_a_busy_port_in_one_line_before_loading(no_loading: list[object]) -> None:
    """It loaded the model, then uvicorn said "ERROR: [Errno 98] ..." and ended with 3."""
    with socket.socket() as busy:
        busy.bind(("127.0.0.1", 0))
        busy.listen()
        port = busy.getsockname()[1]
        ran = run_main("explore", "--port", str(port), "--no-open")
    assert ran.code == 1 and no_loading == [], ran
    lines = ran.stderr.strip().splitlines()
    assert len(lines) == 1 and f"port {port} on 127.0.0.1 is in use: choose another --port" in lines[0], ran


def test_explore_port_0_serves_on_the_port_it_bound(
    short: bertscope.Model, monkeypatch: pytest.MonkeyPatch
) -> None:
    import uvicorn

    import bertscope.cli.explore as explore

    bound: list[int] = []

    class Bound:
        """uvicorn.Server that records the socket it is handed instead of serving on it."""

        started, should_exit = False, True

        def __init__(self, config: Any) -> None:
            pass

        def run(self, *, sockets: list[socket.socket]) -> None:
            bound.append(sockets[0].getsockname()[1])
            sockets[0].close()

    monkeypatch.setattr(explore, "load_model", lambda *a, **k: short)
    monkeypatch.setattr(uvicorn, "Server", Bound)
    ran = run_main("explore", "--port", "0", "--no-open")
    assert ran.code == 0 and len(bound) == 1 and bound[0] != 0, ran


# 3, 8, 7, 4: the adapters ------------------------------------------------------------------------

BLANK_AT_3 = ["a", "b", "c", "   ", "e"]


def _run_apart(coroutine: Any) -> Any:
    """asyncio.run in a thread of its own: Playwright's sync API (this module's page) holds an event
    loop in this one."""
    with ThreadPoolExecutor(1) as pool:
        return pool.submit(asyncio.run, coroutine).result()


def test_llamaindex_names_the_refused_text_by_its_place_in_the_list(bundled: bertscope.Model) -> None:
    """LlamaIndex cuts the list into embed_batch_size batches: the fourth text was "text 1" of the second."""
    li = pytest.importorskip("bertscope.integrations.llamaindex")
    emb = li.BertscopeEmbedding(bundled, embed_batch_size=2)
    for call in (
        lambda: emb.get_text_embedding_batch(BLANK_AT_3),
        lambda: _run_apart(emb.aget_text_embedding_batch(BLANK_AT_3)),
    ):
        with pytest.raises(InvalidInput, match=r"^text 3 is empty"):
            call()
    # A batch with no list around it (LlamaIndex's own paths) quotes the text rather than guess a number.
    with pytest.raises(InvalidInput, match=r"^the text '   ' is empty"):
        emb._get_text_embeddings(["a", "   "])


@pytest.mark.parametrize("module", ["langchain", "llamaindex"])
def test_both_prompts_of_a_role_are_refused_in_the_classs_keywords(
    module: str, bundled: bertscope.Model
) -> None:
    """It said "give prompt_name or prompt, not both": the library's keywords, which the classes lack."""
    integration = pytest.importorskip(f"bertscope.integrations.{module}")
    cls = integration.BertscopeEmbeddings if module == "langchain" else integration.BertscopeEmbedding
    with pytest.raises(InvalidSpec, match=r"^give query_prompt_name or query_prompt, not both"):
        cls(bundled, query_prompt_name="query", query_prompt="x: ")
    # A prompt name the model lacks: the fix names the class's keyword, not prompt=.
    with pytest.raises(InvalidSpec, match=r"unknown prompt name 'query'.* give the text with query_prompt=$"):
        cls(bundled, query_prompt_name="query")


def test_llamaindex_takes_base_embeddings_fields_and_makes_itself_again(bundled: bertscope.Model) -> None:
    """num_workers, embeddings_cache and model_name were UnknownOption, so from_dict(to_dict()) failed."""
    li = pytest.importorskip("bertscope.integrations.llamaindex")
    emb = li.BertscopeEmbedding(bundled, num_workers=2, embeddings_cache=None, model_name="mine", **OPTIONS)
    assert (emb.num_workers, emb.model_name) == (2, "mine")
    again = li.BertscopeEmbedding.from_dict(emb.to_dict())
    assert again.model_name == "mine" and again.num_workers == 2
    want = bundled.embed(TEXTS, **OPTIONS).vectors
    np.testing.assert_allclose(again.get_text_embedding_batch(TEXTS), want, atol=1e-5)
    # The recipe is in to_dict, so an IngestionPipeline's cache (a hash of it) tells two recipes apart.
    assert emb.to_dict() != li.BertscopeEmbedding(bundled, num_workers=2, model_name="mine").to_dict()


def test_llamaindex_pickles_by_loading_its_model_again(bundled_path: Path, bundled: bertscope.Model) -> None:
    """IngestionPipeline(...).run(num_workers=2) pickles it: the model was dropped ("Removing unpickleable
    private attribute _model") and the worker failed on an AttributeError."""
    li = pytest.importorskip("bertscope.integrations.llamaindex")
    emb = li.BertscopeEmbedding(bundled_path, device="cpu", query_prompt="q: ", embed_batch_size=2, **OPTIONS)
    again = pickle.loads(pickle.dumps(emb))
    assert again.embed_batch_size == 2 and again.to_dict() == emb.to_dict()
    want = bundled.embed(TEXTS, **OPTIONS).vectors
    np.testing.assert_allclose(again.get_text_embedding_batch(TEXTS), want, atol=1e-5)
    query = bundled.embed(["pets"], prompt="q: ", **OPTIONS).vectors[0]
    np.testing.assert_allclose(again.get_query_embedding("pets"), query, atol=1e-5)
    # A model the caller loaded has load options no process can know: one line naming the fix.
    with pytest.raises(
        InvalidSpec, match=r"made from a loaded model does not pickle .* give its name or folder"
    ):
        pickle.dumps(li.BertscopeEmbedding(bundled))
