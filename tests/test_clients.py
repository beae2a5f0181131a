"""The service's real clients, unchanged, against a real uvicorn on 127.0.0.1: each gets `Model.embed`'s
vectors, or the clear 422 that says what to change (a client-side tokenizer's ids).

Haystack's TEI embedders are huggingface_hub's InferenceClient underneath too, called by Haystack itself.
Loopback only, no network: huggingface_hub blocks every request while HF_HUB_OFFLINE=1, local ones too,
so its tests lift that for themselves alone. langchain-huggingface is not installed (it pins
huggingface-hub<2); its HuggingFaceEndpointEmbeddings is huggingface_hub's InferenceClient.feature_extraction
underneath, and `_hf_endpoint_embed_documents` below makes exactly its calls.
"""

from __future__ import annotations

import os
from collections.abc import Iterator
from typing import Any

import numpy as np
import pytest

import bertscope
from test_server import serving

ATOL = 1e-5
TEXTS = ["I like eating bread", "The banana bread was horrible"]
# cl100k ids (tiktoken, OpenAI's embedding models): what LangChain's OpenAIEmbeddings sends by default.
CL100K = {
    "I like eating bread": [40, 1093, 12459, 16385],
    "The banana bread was horrible": [791, 44196, 16385, 574, 28201],
}
FIX = "check_embedding_ctx_length=False"


@pytest.fixture(scope="module")
def url(bundled: bertscope.Model) -> Iterator[str]:
    """The service on the bundled model with its defaults (token ids refused)."""
    with serving(bundled) as base:
        yield base


@pytest.fixture(scope="module")
def want(bundled: bertscope.Model) -> np.ndarray:
    """The library's own vectors of TEXTS (computed before any request, so the model is idle)."""
    return bundled.embed(TEXTS).vectors


@pytest.fixture
def hub_online(monkeypatch: pytest.MonkeyPatch) -> Any:
    """huggingface_hub with offline mode lifted for this test only (it reads the flag once, at import)."""
    hub = pytest.importorskip("huggingface_hub")
    import huggingface_hub.constants

    monkeypatch.delenv("HF_HUB_OFFLINE", raising=False)
    monkeypatch.delenv("TRANSFORMERS_OFFLINE", raising=False)
    monkeypatch.setattr(huggingface_hub.constants, "HF_HUB_OFFLINE", False)
    return hub


def test_huggingface_hub_inference_client(
    url: str, want: np.ndarray, bundled: bertscope.Model, hub_online: Any
) -> None:
    by_model = hub_online.InferenceClient(model=f"{url}/embed").feature_extraction(TEXTS[0])
    assert by_model.shape == (1, want.shape[1]) and by_model.dtype == np.float32
    np.testing.assert_allclose(by_model[0], want[0], atol=ATOL)
    # base_url posts to `/`, TEI's embed route.
    by_base = hub_online.InferenceClient(base_url=url).feature_extraction(TEXTS)
    np.testing.assert_allclose(by_base, want, atol=ATOL)
    raw = hub_online.InferenceClient(model=url).feature_extraction(TEXTS[1], normalize=False, truncate=True)
    np.testing.assert_allclose(raw[0], bundled.embed(TEXTS[1], normalize=False).vectors[0], atol=ATOL)
    with pytest.raises(hub_online.errors.HfHubHTTPError, match=FIX) as refused:
        hub_online.InferenceClient(model=url).feature_extraction(CL100K[TEXTS[0]])
    assert refused.value.response.status_code == 422


def test_haystack_tei_embedders(
    url: str, want: np.ndarray, bundled: bertscope.Model, hub_online: Any, monkeypatch: pytest.MonkeyPatch
) -> None:
    """Haystack's HuggingFaceAPI{Text,Document}Embedder with api_type text_embeddings_inference."""
    monkeypatch.setenv("HAYSTACK_TELEMETRY_ENABLED", "False")  # no posthog calls from a test
    from haystack import Document
    from haystack_integrations.components.embedders import huggingface_api as haystack_tei

    where = {"url": url}
    # Haystack's default is normalize=False: TEI's flag, which the service honours.
    text = haystack_tei.HuggingFaceAPITextEmbedder(api_type="text_embeddings_inference", api_params=where)
    raw = bundled.embed(TEXTS[0], normalize=False).vectors[0]
    np.testing.assert_allclose(text.run(TEXTS[0])["embedding"], raw, atol=ATOL)
    documents = haystack_tei.HuggingFaceAPIDocumentEmbedder(
        api_type="text_embeddings_inference", api_params=where, normalize=True, progress_bar=False
    )
    embedded = documents.run([Document(content=t) for t in TEXTS])["documents"]
    np.testing.assert_allclose([d.embedding for d in embedded], want, atol=ATOL)


def _hf_endpoint_embed_documents(client: Any, texts: list[str], **model_kwargs: Any) -> list[list[float]]:
    """langchain-huggingface 1.2.3's HuggingFaceEndpointEmbeddings.embed_documents, line for line."""
    texts = [text.replace("\n", " ") for text in texts]
    responses = client.feature_extraction(text=texts, **model_kwargs)
    return responses.tolist()


def test_langchain_huggingface_endpoint_embeddings_calls(url: str, want: np.ndarray, hub_online: Any) -> None:
    # Its `client` is InferenceClient(model=...): 1.x refuses a URL as `model`, so a user sets the client.
    client = hub_online.InferenceClient(model=url)
    np.testing.assert_allclose(_hf_endpoint_embed_documents(client, TEXTS), want, atol=ATOL)
    query = _hf_endpoint_embed_documents(client, [TEXTS[1]], normalize=True, truncate=True)[0]
    np.testing.assert_allclose(query, want[1], atol=ATOL)


def test_openai_client(url: str, want: np.ndarray) -> None:
    openai = pytest.importorskip("openai")
    api = openai.OpenAI(base_url=f"{url}/v1", api_key="unused", max_retries=0)
    # The openai client asks for base64 unless told otherwise, and decodes it.
    got = api.embeddings.create(model="any", input=TEXTS)
    np.testing.assert_allclose([d.embedding for d in got.data], want, atol=ATOL)
    floats = api.embeddings.create(model="any", input=TEXTS[0], encoding_format="float", dimensions=64)
    cut = want[0, :64] / np.linalg.norm(want[0, :64])
    np.testing.assert_allclose(floats.data[0].embedding, cut, atol=ATOL)
    with pytest.raises(openai.BadRequestError, match=FIX):
        api.embeddings.create(model="any", input=[CL100K[TEXTS[0]]])


def test_langchain_openai_embeddings(url: str, want: np.ndarray, monkeypatch: pytest.MonkeyPatch) -> None:
    langchain_openai = pytest.importorskip("langchain_openai")
    openai = pytest.importorskip("openai")
    common = {"base_url": f"{url}/v1", "api_key": "unused", "max_retries": 0}
    texts_sent = langchain_openai.OpenAIEmbeddings(**common, check_embedding_ctx_length=False)
    np.testing.assert_allclose(texts_sent.embed_documents(TEXTS), want, atol=ATOL)
    np.testing.assert_allclose(texts_sent.embed_query(TEXTS[1]), want[1], atol=ATOL)
    # Its default tokenizes with tiktoken and sends cl100k ids. tiktoken downloads its table unless cached:
    # the ids it sends are fed from CL100K, and where llama-index-core's copy of the table is installed,
    # tiktoken itself runs too.
    default = langchain_openai.OpenAIEmbeddings(**common)
    fed = langchain_openai.OpenAIEmbeddings(**common)
    object.__setattr__(fed, "_tokenize", _fixture_tokenize)
    clients = [fed]
    cache = _tiktoken_cache()
    if cache is not None:
        monkeypatch.setenv("TIKTOKEN_CACHE_DIR", cache)
        import tiktoken

        assert tiktoken.get_encoding("cl100k_base").encode_ordinary(TEXTS[1]) == CL100K[TEXTS[1]]
        clients.append(default)
    for client in clients:
        with pytest.raises(openai.BadRequestError, match=FIX) as refused:
            client.embed_documents(TEXTS)
        assert "token ids are refused" in str(refused.value)
    assert len(clients) == 2 or cache is None


def _tiktoken_cache() -> str | None:
    """llama-index-core's copy of tiktoken's cl100k table, if it is installed."""
    try:
        import llama_index.core
    except ImportError:
        return None
    folder = os.path.join(os.path.dirname(llama_index.core.__file__), "_static", "tiktoken_cache")
    return folder if os.path.isdir(folder) else None


def _fixture_tokenize(texts: list[str], chunk_size: int) -> tuple[Any, list[Any], list[int], list[int]]:
    """OpenAIEmbeddings._tokenize's answer for TEXTS, from the real cl100k ids above."""
    tokens = [CL100K[t] for t in texts]
    return range(0, len(tokens), chunk_size), tokens, list(range(len(texts))), [len(t) for t in tokens]


def test_llamaindex_clients(url: str, want: np.ndarray) -> None:
    tei = pytest.importorskip("llama_index.embeddings.text_embeddings_inference")
    openai_embedding = pytest.importorskip("llama_index.embeddings.openai")
    # TextEmbeddingsInference posts {"inputs": texts, "truncate": true} to /embed.
    by_tei = tei.TextEmbeddingsInference(model_name="all-MiniLM-L6-v2", base_url=url)
    np.testing.assert_allclose(by_tei.get_text_embedding_batch(TEXTS), want, atol=ATOL)
    np.testing.assert_allclose(by_tei.get_query_embedding(TEXTS[0]), want[0], atol=ATOL)
    by_openai = openai_embedding.OpenAIEmbedding(
        model_name="all-MiniLM-L6-v2", api_base=f"{url}/v1", api_key="unused", max_retries=0
    )
    np.testing.assert_allclose(by_openai.get_text_embedding_batch(TEXTS), want, atol=ATOL)
    np.testing.assert_allclose(by_openai.get_query_embedding(TEXTS[1]), want[1], atol=ATOL)


def test_each_client_sends_the_api_key_its_own_way(
    bundled: bertscope.Model, want: np.ndarray, hub_online: Any, monkeypatch: pytest.MonkeyPatch
) -> None:
    openai = pytest.importorskip("openai")
    tei = pytest.importorskip("llama_index.embeddings.text_embeddings_inference")
    monkeypatch.setenv("HAYSTACK_TELEMETRY_ENABLED", "False")
    from haystack.utils import Secret
    from haystack_integrations.components.embedders import huggingface_api as haystack_tei

    key = "s3cret"
    with serving(bundled, api_key=key) as base:
        by_hub = hub_online.InferenceClient(model=f"{base}/embed", token=key).feature_extraction(TEXTS)
        by_llama = tei.TextEmbeddingsInference(model_name="m", base_url=base, auth_token=key)
        api = openai.OpenAI(base_url=f"{base}/v1", api_key=key, max_retries=0)
        by_openai = [d.embedding for d in api.embeddings.create(model="m", input=TEXTS).data]
        by_haystack = haystack_tei.HuggingFaceAPITextEmbedder(
            api_type="text_embeddings_inference", api_params={"url": base}, token=Secret.from_token(key),
            normalize=True,
        )  # fmt: skip
        np.testing.assert_allclose(by_haystack.run(TEXTS[0])["embedding"], want[0], atol=ATOL)
        for got in (by_hub, by_llama.get_text_embedding_batch(TEXTS), by_openai):
            np.testing.assert_allclose(got, want, atol=ATOL)
        # POST / is TEI's embed route, not the open page at GET /: it takes the key too.
        with pytest.raises(hub_online.errors.HfHubHTTPError, match="API key") as refused:
            hub_online.InferenceClient(base_url=base, token="wrong").feature_extraction(TEXTS[0])
        assert refused.value.response.status_code == 401
