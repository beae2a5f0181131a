"""One name for a vector's width (session 20): `dimension`, as collections, index info and geometry say
it, in `embed --json`, `SentenceEmbeddings.to_dict()` and /v2/embed (which still sends `dim` beside it,
marked deprecated). `bertscope info` and /v2/info list sentence-transformers' attributes alike:
default_prompt_name, truncate_dim and similarity_fn_name (the info command lacked the last two, /v2/info
all three)."""

from __future__ import annotations

import json
from collections.abc import Iterator
from pathlib import Path

import pytest
from fastapi.testclient import TestClient

import bertscope
from bertscope.server import create_app
from console import run_main
from tiny_models import build_tiny_model


@pytest.fixture(scope="module")
def client(bundled: bertscope.Model) -> Iterator[TestClient]:
    with TestClient(create_app(bundled)) as c:
        yield c


def test_to_dict_and_embed_json_name_the_width_dimension(bundled: bertscope.Model) -> None:
    made = bundled.embed(["a cat", "a dog"]).to_dict()
    assert made["dimension"] == 384 and "dim" not in made
    code, out, _ = run_main("embed", "a cat", "--json")
    assert code == 0 and json.loads(out)["dimension"] == 384 and "dim" not in json.loads(out)


def test_v2_embed_sends_dimension_and_its_older_name(client: TestClient) -> None:
    answer = client.post("/v2/embed", json={"inputs": ["a cat"]}).json()
    assert answer["dimension"] == answer["dim"] == len(answer["vectors"][0]) == 384
    assert list(answer)[:3] == ["model", "dimension", "dim"]
    schema = client.get("/openapi.json").json()["components"]["schemas"]["EmbedResponse"]["properties"]
    assert schema["dim"].get("deprecated") is True and not schema["dimension"].get("deprecated")
    assert client.get("/v2/info").json()["hidden_size"] == 384  # the model's width keeps transformers' name


@pytest.fixture(scope="module")
def st_folder(tmp_path_factory: pytest.TempPathFactory) -> Path:
    """A sentence-transformers folder that saves a default prompt, a truncate_dim and a dot similarity."""
    from sentence_transformers import SentenceTransformer
    from sentence_transformers.sentence_transformer.modules import Pooling, Transformer

    made = tmp_path_factory.mktemp("names20")
    transformer = Transformer(str(build_tiny_model("bert", made / "bert")), max_seq_length=24)
    modules = [transformer, Pooling(transformer.get_embedding_dimension(), pooling_mode="mean")]
    settings = {"prompts": {"query": "query: "}, "default_prompt_name": "query", "truncate_dim": 8}
    SentenceTransformer(modules=modules, device="cpu", similarity_fn_name="dot", **settings).save(
        str(made / "st")
    )
    return made / "st"


def test_info_and_v2_info_list_sentence_transformers_attributes(st_folder: Path) -> None:
    from sentence_transformers import SentenceTransformer

    st = SentenceTransformer(str(st_folder), device="cpu")
    want = {
        "default_prompt_name": st.default_prompt_name,
        "truncate_dim": st.truncate_dim,
        "similarity_fn_name": st.similarity_fn_name,
    }
    assert want == {"default_prompt_name": "query", "truncate_dim": 8, "similarity_fn_name": "dot"}
    code, out, err = run_main("info", "-m", str(st_folder), "--json")
    assert code == 0, err
    assert {key: json.loads(out)[key] for key in want} == want
    code, out, err = run_main("info", "-m", str(st_folder))
    assert code == 0 and "truncate_dim" in out and "similarity_fn_name" in out and "dot" in out
    with TestClient(create_app(bertscope.load(st_folder))) as client:
        served = client.get("/v2/info").json()
        assert {key: served[key] for key in want} == want
        schema = client.get("/openapi.json").json()["components"]["schemas"]
        assert set(want) <= set(schema["ServiceInfo"]["properties"])


def test_vocab_add_and_save_keep_sentence_transformers_attributes(st_folder: Path, tmp_path: Path) -> None:
    """vocab add wrote no config_sentence_transformers.json: the copy lost its prompts, default prompt,
    similarity function and truncate_dim, so an e5-style model's copy stopped putting "query: " first."""
    from sentence_transformers import SentenceTransformer

    out = tmp_path / "extended"
    code, _, err = run_main("vocab", "add", "thecoast", "-m", str(st_folder), "-o", str(out))
    assert code == 0, err
    st = SentenceTransformer(str(out), device="cpu")
    assert (st.prompts["query"], st.default_prompt_name, st.similarity_fn_name) == ("query: ", "query", "dot")
    assert st.truncate_dim == 8
    model = bertscope.load(out)
    assert (model.default_prompt_name, model.similarity_fn_name, model.truncate_dim) == ("query", "dot", 8)
    # what is set in code is what is saved, as sentence-transformers' save writes its attributes
    model.prompts = {"passage": "passage: "}
    model.similarity_fn_name = "cosine"
    model.truncate_dim = None
    saved = bertscope.load(model.save(tmp_path / "saved"))
    assert dict(saved.prompts) == {"passage": "passage: "} and saved.default_prompt_name is None
    assert (saved.similarity_fn_name, saved.truncate_dim) == ("cosine", None)
