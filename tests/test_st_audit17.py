"""Audit 17: a sentence-transformers folder's settings that bertscope did not do as the folder says
(a Normalize module elsewhere than after Pooling, processing_kwargs, query_length / document_length, a
Router pipeline, `info` on a pipeline it does not reproduce), against sentence-transformers 6."""

from __future__ import annotations

import json
from pathlib import Path
from typing import Any

import numpy as np
import pytest

import bertscope
from bertscope.errors import BertscopeError, InvalidSpec

TEXT = "The quick brown fox jumps over the lazy dog near the quiet river bank on a cold morning."


def st_folder(bundled: Path, folder: Path, files: dict[str, Any]) -> Path:
    """The bundled folder at `folder` (links to its files) with `files` (relative path -> JSON) written."""
    folder.mkdir(parents=True)
    written = {name.split("/", 1)[0] for name in files}
    for entry in bundled.iterdir():
        if entry.name not in written:
            (folder / entry.name).symlink_to(entry)
        elif entry.is_dir():  # a module folder one of whose files is rewritten: link the others
            (folder / entry.name).mkdir()
            for inner in entry.iterdir():
                if f"{entry.name}/{inner.name}" not in files:
                    (folder / entry.name / inner.name).symlink_to(inner)
    for name, data in files.items():
        (folder / name).parent.mkdir(parents=True, exist_ok=True)
        (folder / name).write_text(json.dumps(data))
    return folder


def modules(*kinds: tuple[str, str]) -> list[dict[str, Any]]:
    """modules.json's entries for (type, path) pairs, in order."""
    return [
        {"idx": n, "name": str(n), "path": path, "type": f"sentence_transformers.models.{kind}"}
        for n, (kind, path) in enumerate(kinds)
    ]


def one_line_refusal(model: bertscope.Model, match: str) -> str:
    """encode's refusal of `model`'s pipeline, checked to be one line matching `match`; pooling='auto'
    refuses it too."""
    with pytest.raises(InvalidSpec, match=match) as caught:
        model.encode(TEXT)
    with pytest.raises(InvalidSpec, match=match):
        model.embed(TEXT, pooling="auto")
    assert "\n" not in str(caught.value)
    return str(caught.value)


# --- 3: a Normalize module is applied only where it normalizes the pooled sentence vector ---------------


def test_normalize_before_pooling_is_refused(bundled_path: Path, tmp_path: Path) -> None:
    """modules.json Transformer, Normalize, Pooling: bertscope gave unit vectors where sentence-transformers'
    Normalize (before any sentence vector) does nothing (norm 3.49)."""
    order = modules(("Transformer", ""), ("Normalize", "2_Normalize"), ("Pooling", "1_Pooling"))
    folder = st_folder(bundled_path, tmp_path / "pre", {"modules.json": order})
    model = bertscope.load(folder, device="cpu")
    said = one_line_refusal(model, r"Normalize module \(2_Normalize\) before the Pooling module")
    assert "pooling='mean'" in said
    assert model.embed(TEXT, pooling="mean").vectors.shape == (1, 384)  # a named pooling still answers


@pytest.mark.parametrize(
    "names",
    [{"module_input_name": "token_embeddings"}, {"module_output_name": "normalized"}],
    ids=["token_embeddings", "normalized"],
)
def test_normalize_of_another_feature_is_refused(
    bundled_path: Path, tmp_path: Path, names: dict[str, str]
) -> None:
    """A sentence-transformers 6 Normalize whose config.json normalizes token_embeddings, or writes the unit
    vector under "normalized": the sentence vector stays as pooled there (1.12 from bertscope's)."""
    folder = st_folder(bundled_path, tmp_path / "st6", {"2_Normalize/config.json": names})
    model = bertscope.load(folder, device="cpu")
    one_line_refusal(model, r"Normalize module \(2_Normalize\) normalizing .*its config\.json")
    assert model.loaded.st_normalize is False


def test_normalize_with_its_default_names_still_applies(bundled_path: Path, tmp_path: Path) -> None:
    """The default names written out (as sentence-transformers 6 saves them) are the Normalize bertscope
    applies: the vector is the bundled model's."""
    names = {"module_input_name": "sentence_embedding", "module_output_name": "sentence_embedding"}
    folder = st_folder(bundled_path, tmp_path / "named", {"2_Normalize/config.json": names})
    got = bertscope.load(folder, device="cpu").encode([TEXT])
    want = bertscope.load(bundled_path, device="cpu").encode([TEXT])
    np.testing.assert_allclose(got, want, atol=1e-6)
    assert abs(float(np.linalg.norm(got)) - 1) < 1e-5


def test_unreadable_normalize_config_is_named(bundled_path: Path, tmp_path: Path) -> None:
    """A Normalize config.json that is not an object is named in one line, not guessed at."""
    folder = st_folder(bundled_path, tmp_path / "bad", {"2_Normalize/config.json": ["x"]})
    with pytest.raises(BertscopeError, match=r"2_Normalize/config\.json: holds a list"):
        bertscope.load(folder, device="cpu")


# --- 1: sentence_bert_config.json's processing_kwargs ----------------------------------------------------


def st_config(**extra: Any) -> dict[str, Any]:
    """The bundled model's sentence_bert_config.json with `extra` keys."""
    return {"max_seq_length": 256, "do_lower_case": False, **extra}


@pytest.fixture(scope="module")
def cut_at_16(bundled_path: Path, tmp_path_factory: pytest.TempPathFactory) -> Path:
    """The bundled folder whose sentence_bert_config.json says processing_kwargs text max_length 16."""
    config = st_config(processing_kwargs={"text": {"max_length": 16}})
    return st_folder(
        bundled_path, tmp_path_factory.mktemp("pk") / "pk16", {"sentence_bert_config.json": config}
    )


def test_processing_kwargs_text_max_length_is_the_token_limit(cut_at_16: Path) -> None:
    """processing_kwargs {"text": {"max_length": 16}} was ignored: bertscope embedded every token of a long
    text where sentence-transformers cuts at 16 (vectors 0.325 apart); the limit is now 16, as there."""
    from sentence_transformers import SentenceTransformer

    model = bertscope.load(cut_at_16, device="cpu")
    assert model.max_tokens == 16
    want = SentenceTransformer(str(cut_at_16), device="cpu").encode([TEXT])
    with pytest.warns(UserWarning):  # a text cut is said, as encode says it
        got = model.encode([TEXT])
    np.testing.assert_allclose(got, want, atol=1e-5)


def test_processing_kwargs_max_length_wins_over_max_seq_length(bundled_path: Path, tmp_path: Path) -> None:
    """sentence-transformers calls the tokenizer with the text max_length, past max_seq_length too."""
    config = st_config(processing_kwargs={"text": {"max_length": 300}, "image": {"size": 4}})
    folder = st_folder(bundled_path, tmp_path / "pk300", {"sentence_bert_config.json": config})
    assert bertscope.load(folder, device="cpu").max_tokens == 300
    config = st_config(processing_kwargs={"text": {"max_length": None}})  # null: as if not written
    folder = st_folder(bundled_path, tmp_path / "pknull", {"sentence_bert_config.json": config})
    assert bertscope.load(folder, device="cpu").max_tokens == 256


def test_processing_kwargs_bertscope_does_not_apply_are_refused(bundled_path: Path, tmp_path: Path) -> None:
    """Any other tokenizer setting (padding, common ones) is refused by encode in one line naming it."""
    kwargs = {"text": {"max_length": 32, "padding": "max_length"}, "common": {"truncation": "only_first"}}
    folder = st_folder(
        bundled_path, tmp_path / "pkpad", {"sentence_bert_config.json": st_config(processing_kwargs=kwargs)}
    )
    model = bertscope.load(folder, device="cpu")
    one_line_refusal(model, r"processing_kwargs text\.padding, common\.truncation for the tokenizer")


@pytest.mark.parametrize(
    "kwargs",
    [
        {"text": {"max_length": "16"}},
        {"text": {"max_length": 1}},
        {"text": {"max_length": True}},
        {"text": [16]},
    ],
    ids=["string", "one", "bool", "list"],
)
def test_malformed_processing_kwargs_are_named(bundled_path: Path, tmp_path: Path, kwargs: Any) -> None:
    """A max_length that is no token count, or a text entry that is no object, is named in one line."""
    config = st_config(processing_kwargs=kwargs)
    folder = st_folder(bundled_path, tmp_path / "pkbad", {"sentence_bert_config.json": config})
    said = r"sentence_bert_config\.json: its processing_kwargs\.text"
    with pytest.raises(BertscopeError, match=said) as caught:
        bertscope.load(folder, device="cpu")
    assert "\n" not in str(caught.value)


# --- 2: query_length / document_length ------------------------------------------------------------------


@pytest.fixture(scope="module")
def role_lengths(bundled_path: Path, tmp_path_factory: pytest.TempPathFactory) -> Path:
    """The bundled folder whose sentence_bert_config.json cuts queries at 8 tokens and documents at 12."""
    config = st_config(query_length=8, document_length=12)
    return st_folder(
        bundled_path, tmp_path_factory.mktemp("ql") / "ql8", {"sentence_bert_config.json": config}
    )


def test_role_lengths_are_refused_where_the_limit_differs(role_lengths: Path) -> None:
    """encode_query / encode_document embedded up to 256 tokens where sentence-transformers cuts queries at
    query_length 8 and documents at document_length 12 (vectors 0.50 and 0.25 apart): role_refusal, which
    those calls ask, gives the one line saying so and the load that matches."""
    from bertscope.core.st_settings import role_refusal

    model = bertscope.load(role_lengths, device="cpu")
    for role, texts, length in (("query", "queries", 8), ("document", "documents", 12)):
        refused = role_refusal(model, role)
        assert isinstance(refused, InvalidSpec) and "\n" not in str(refused)
        assert f"cuts {texts} at {length} tokens ({role}_length)" in str(refused)
        assert f"max_tokens={length}" in str(refused)


def test_role_length_matched_by_max_tokens_is_sentence_transformers_answer(role_lengths: Path) -> None:
    """Loaded with max_tokens=8, as the line says, the model encodes queries as encode_query does there."""
    from sentence_transformers import SentenceTransformer

    from bertscope.core.st_settings import role_refusal

    model = bertscope.load(role_lengths, device="cpu", max_tokens=8)
    assert role_refusal(model, "query") is None and role_refusal(model, "document") is not None
    want = SentenceTransformer(str(role_lengths), device="cpu").encode_query([TEXT])
    with pytest.warns(UserWarning):
        got = model.encode([TEXT])
    np.testing.assert_allclose(got, want, atol=1e-5)


def test_processing_kwargs_max_length_wins_over_role_lengths(bundled_path: Path, tmp_path: Path) -> None:
    """sentence-transformers lets processing_kwargs' text max_length override query_length and
    document_length: with it, every role is cut at that limit, and nothing is refused."""
    from bertscope.core.st_settings import role_refusal

    config = st_config(query_length=8, document_length=12, processing_kwargs={"text": {"max_length": 20}})
    folder = st_folder(bundled_path, tmp_path / "both", {"sentence_bert_config.json": config})
    model = bertscope.load(folder, device="cpu")
    assert model.max_tokens == 20
    assert role_refusal(model, "query") is None and role_refusal(model, "document") is None


def test_encode_query_refuses_a_query_length_it_does_not_apply(role_lengths: Path) -> None:
    """The user-facing call: encode_query refuses in one line rather than answer 0.50 from there."""
    model = bertscope.load(role_lengths, device="cpu")
    with pytest.raises(InvalidSpec, match=r"query_length"):
        model.encode_query(TEXT)
    with pytest.raises(InvalidSpec, match=r"document_length"):
        model.encode_document(TEXT)


def test_malformed_role_length_is_named(bundled_path: Path, tmp_path: Path) -> None:
    """A query_length that is no token count is a one-line load error naming the file."""
    config = st_config(query_length="8")
    folder = st_folder(bundled_path, tmp_path / "qlbad", {"sentence_bert_config.json": config})
    with pytest.raises(BertscopeError, match=r"sentence_bert_config\.json: its query_length '8' is not"):
        bertscope.load(folder, device="cpu")


def test_query_expansion_is_refused_for_queries(bundled_path: Path, tmp_path: Path) -> None:
    """query_expansion pads queries out with mask tokens in encode_query: refused for queries only."""
    from bertscope.core.st_settings import role_refusal

    config = st_config(query_expansion={"strategy": "fixed", "length": 32})
    folder = st_folder(bundled_path, tmp_path / "qx", {"sentence_bert_config.json": config})
    model = bertscope.load(folder, device="cpu")
    refused = role_refusal(model, "query")
    assert refused is not None and "query_expansion" in str(refused)
    assert role_refusal(model, "document") is None


# --- 4: a Router folder ----------------------------------------------------------------------------------


@pytest.mark.parametrize("with_config", [True, False], ids=["router_config", "no_router_config"])
def test_router_folder_is_named_as_such(bundled_path: Path, tmp_path: Path, with_config: bool) -> None:
    """Router.for_query_document(...) saved: "is a folder but not a model: it has no config.json"; now the
    line names the Router pipeline and its routes."""
    folder = tmp_path / "router"
    st_folder(bundled_path, folder / "query_0_Transformer", {})
    router = {"idx": 0, "name": "0", "path": "", "type": "sentence_transformers.base.modules.router.Router"}
    (folder / "modules.json").write_text(json.dumps([router]))
    structure = {"query": ["query_0_Transformer", "query_1_Pooling"], "document": ["query_0_Transformer"]}
    if with_config:
        (folder / "router_config.json").write_text(json.dumps({"structure": structure}))
    routes = "query: query_0_Transformer, query_1_Pooling; document: query_0_Transformer"
    with pytest.raises(BertscopeError, match="sentence-transformers Router folder") as caught:
        bertscope.load(folder, device="cpu")
    said = str(caught.value)
    assert "\n" not in said and (routes if with_config else "query and document") in said
    assert "not a model" not in said


# --- 5: info on a folder whose pipeline pooling auto refuses ---------------------------------------------


def info_of(folder: Path) -> tuple[dict[str, Any], dict[str, str]]:
    """`bertscope info -m FOLDER --json`'s answer and its table's rows (first word -> the rest)."""
    from console import run_main

    answer = json.loads(run_main("info", "-m", str(folder), "--json").stdout)
    ran = run_main("info", "-m", str(folder))
    assert ran.code == 0
    pairs = [line.split(None, 1) for line in ran.stdout.splitlines()]
    return answer, {pair[0]: pair[1].strip() for pair in pairs if len(pair) == 2}


@pytest.mark.parametrize("light", [True, False], ids=["light", "loaded"])
def test_info_says_the_pipeline_pooling_auto_refuses(
    bundled_path: Path, tmp_path: Path, light: bool, monkeypatch: pytest.MonkeyPatch
) -> None:
    """info on a folder whose pipeline embed refuses (Pooling mean then Dense) said `pooling mean` and
    nothing more; for weightedmean `pooling -`. It now says why --pooling auto refuses it, --json too."""
    if not light:  # the full load answers where the folder cannot be opened light
        monkeypatch.setattr("bertscope.core.folder.FolderView.open", classmethod(lambda cls, name: None))
    dense = {"idx": 3, "name": "3", "path": "3_Dense", "type": "sentence_transformers.models.Dense"}
    order = [*json.loads((bundled_path / "modules.json").read_text()), dense]
    answer, rows = info_of(st_folder(bundled_path, tmp_path / "dense", {"modules.json": order}))
    assert answer["pooling"] == "mean"
    assert answer["auto_refused"].startswith("its sentence-transformers pipeline has a Dense module")
    assert rows["auto_refused"].startswith("its sentence-transformers pipeline has a Dense module")
    assert "--pooling auto (the default) and encode refuse it" in answer["auto_refused"]
    weighted = {"word_embedding_dimension": 384, "pooling_mode_weightedmean_tokens": True}
    answer, rows = info_of(st_folder(bundled_path, tmp_path / "wmean", {"1_Pooling/config.json": weighted}))
    assert answer["pooling"] is None and answer["auto_refused"].startswith(
        "its Pooling module asks for weightedmean"
    )
    answer, rows = info_of(bundled_path)
    assert answer["auto_refused"] is None and rows["auto_refused"] == "-"


def test_the_service_info_says_the_pipeline_pooling_auto_refuses(bundled_path: Path, tmp_path: Path) -> None:
    """/v2/info carries info's auto_refused (one concept, one name on the command line and the service)."""
    from fastapi.testclient import TestClient

    from bertscope.server import create_app

    dense = {"idx": 3, "name": "3", "path": "3_Dense", "type": "sentence_transformers.models.Dense"}
    order = [*json.loads((bundled_path / "modules.json").read_text()), dense]
    folder = st_folder(bundled_path, tmp_path / "dense", {"modules.json": order})
    with TestClient(create_app(bertscope.load(folder, device="cpu"))) as client:
        said = client.get("/v2/info").json()["auto_refused"]
    assert said.startswith("its sentence-transformers pipeline has a Dense module")
    assert "pooling 'auto' (the default) and encode refuse it" in said
    with TestClient(create_app(bertscope.load(bundled_path, device="cpu"))) as client:
        assert client.get("/v2/info").json()["auto_refused"] is None


# --- audit 19a: a Pooling config naming no mode sentence-transformers knows ------------------------------


@pytest.mark.parametrize(
    "config",
    [
        {"word_embedding_dimension": 384, "pooling_mode_cls": True},  # a misspelt legacy key
        {"word_embedding_dimension": 384, "pooling_mode_mean_tokens": False},  # no mode at all
    ],
)
def test_a_pooling_config_naming_no_mode_is_not_mean_pooled_by_auto(
    bundled_path: Path, tmp_path: Path, config: dict[str, Any]
) -> None:
    """sentence-transformers refuses such a config; 'auto' mean-pooled it in silence."""
    folder = st_folder(bundled_path, tmp_path / "odd", {"1_Pooling/config.json": config})
    model = bertscope.load(folder, device="cpu")
    said = one_line_refusal(model, r"its Pooling module's config.json \(1_Pooling\) names no pooling mode")
    assert ("pooling_mode_cls: no sentence-transformers option" in said) == ("pooling_mode_cls" in config)
    assert model.embed(TEXT, pooling="mean").vectors.shape == (1, 384)  # a named pooling still answers
