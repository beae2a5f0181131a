"""Options -> resolved spec, post-processing and provenance: the one recipe every entry point uses."""

from __future__ import annotations

import json
from pathlib import Path
from typing import Any

import httpx
import numpy as np
import pyarrow.parquet as pq
import pytest

import bertscope
from bertscope.core import spec as spec_module
from bertscope.core.post import fit_post
from bertscope.core.spec import EmbedOptions, EmbedSpec, Recipe, reload_arg, resolve, whole_number
from bertscope.errors import InvalidSpec

TEXTS = ["I like eating bread", "a cat sat on the mat", "The banana bread was horrible", "rain again"]


def test_embed_spec_stays_public_at_the_top_and_in_the_engine() -> None:
    from bertscope.core import engine

    assert bertscope.EmbedSpec is EmbedSpec
    assert engine.EmbedSpec is EmbedSpec


def test_resolve_gives_the_models_own_pooling_and_model_specs_spec(
    bundled: bertscope.Model,
) -> None:
    recipe = resolve(bundled, EmbedOptions())
    assert recipe.spec.pooling is bertscope.Pooling.MEAN  # all-MiniLM-L6-v2 ships mean + Normalize
    assert recipe.spec.normalize is True
    assert recipe.spec.layers == (bundled.n_layers,)
    assert recipe.post is None
    options = EmbedOptions(
        layers="-2,-1", combine="sum", pooling="max", mask_special=True, long="window", stride=64
    )
    assert resolve(bundled, options).spec == bundled.spec(
        layers="-2,-1", combine="sum", pooling="max", mask_special=True, long="window", stride=64
    )


def test_resolve_refuses_what_model_spec_refuses(bundled: bertscope.Model) -> None:
    with pytest.raises(InvalidSpec, match="first_last_avg uses layers 1 and -1"):
        resolve(bundled, EmbedOptions(pooling="first_last_avg", layers="2"))
    with pytest.raises(InvalidSpec, match="unknown pooling"):
        resolve(bundled, EmbedOptions(pooling="median"))


@pytest.mark.parametrize("pooling", ["cls", "pooler"])
def test_mask_special_with_first_token_pooling_is_refused_not_dropped(
    bundled: bertscope.Model, pooling: str
) -> None:
    with pytest.raises(InvalidSpec, match=f"pooling {pooling} reads the first token.*leave mask_special out"):
        bundled.embed(["a cat"], pooling=pooling, mask_special=True)
    assert bundled.embed(["a cat"], pooling=pooling).spec["mask_special"] is False


@pytest.mark.parametrize("combine", ["sum", "concat"])
def test_an_explicit_combine_with_one_layer_is_refused_and_the_default_taken(
    bundled: bertscope.Model, combine: str
) -> None:
    with pytest.raises(InvalidSpec, match=f"combine={combine!r} joins several layers.*leave combine out"):
        bundled.embed(["a cat"], layers="-1", combine=combine)
    with pytest.raises(InvalidSpec, match="joins several layers"):
        bundled.embed_tokens(["a cat"], combine=combine)  # layers left out: the last one
    # The default (mean, as the command line and the service pass it) with one layer is that layer.
    for options in (EmbedOptions(layers="-1"), EmbedOptions(layers="-1", combine="mean"), EmbedOptions()):
        assert resolve(bundled, options).spec.combine is bertscope.Combine.MEAN
    # stack keeps one layer as its own column: the aggregations' word level asks for it.
    assert resolve(bundled, EmbedOptions(layers="-1", combine="stack")).spec.layers == (bundled.n_layers,)
    # A store recorded with it before the refusal still reloads: it changed no vector.
    settings = {"layers": [bundled.n_layers], "combine": combine, "pooling": "mean"}
    assert resolve(bundled, EmbedOptions.from_settings(settings)).spec.combine is bertscope.Combine.MEAN


@pytest.mark.parametrize("combine", ["sum", "concat", "stack"])
def test_first_last_avg_refuses_a_combine_but_mean(bundled: bertscope.Model, combine: str) -> None:
    with pytest.raises(InvalidSpec, match=f"first_last_avg is the mean.*combine={combine!r}"):
        bundled.embed(["a cat"], pooling="first_last_avg", combine=combine)
    spec = bundled.embed(["a cat"], pooling="first_last_avg", combine="mean").spec
    assert spec["combine"] == "mean" and tuple(spec["layers"]) == (1, bundled.n_layers)


def test_recipe_applies_and_records_its_post_processing(bundled: bertscope.Model) -> None:
    base = bundled.embed(TEXTS, pooling="mean", normalize=False)
    processor = fit_post(base.vectors, "pca", dim=3, model="bundled", spec=base.spec)
    recipe = resolve(bundled, EmbedOptions(pooling="mean", normalize=False, post=processor))
    assert recipe.provenance() == {**base.spec, "post": processor.describe()}
    done = bundled.embed_with(TEXTS, recipe)
    np.testing.assert_allclose(done.vectors, processor.apply(base.vectors), atol=1e-5)
    assert done.spec == recipe.provenance()
    # A processor fitted on other options is refused when resolving, before anything runs.
    with pytest.raises(InvalidSpec, match="was fitted on"):
        resolve(bundled, EmbedOptions(pooling="cls", post=processor))


def test_settings_round_trip_to_the_same_spec(bundled: bertscope.Model) -> None:
    for options in (
        EmbedOptions(layers="0,6", combine="concat", pooling="max"),
        EmbedOptions(pooling="first_last_avg"),
        EmbedOptions(),
    ):
        recipe = resolve(bundled, options)
        settings = recipe.settings(bundled, reload_arg(bundled))
        assert settings["model_arg"] is None and settings["dtype"] == "float32"
        assert settings["layers"] == list(recipe.spec.layers)  # JSON-plain, as stored
        assert resolve(bundled, EmbedOptions.from_settings(settings)).spec == recipe.spec


def test_the_service_resolves_a_request_once(
    bundled: bertscope.Model, monkeypatch: pytest.MonkeyPatch
) -> None:
    from test_server import serving

    calls: list[EmbedOptions | None] = []
    original = spec_module.resolve

    def counting(model: Any, options: EmbedOptions | None = None) -> Recipe:
        calls.append(options)
        return original(model, options)

    monkeypatch.setattr("bertscope.server.service.resolve", counting)
    with serving(bundled) as base, httpx.Client(base_url=base, timeout=60) as client:
        answer = client.post("/v2/embed", json={"inputs": TEXTS[:2], "layers": "-2", "pooling": "mean"})
        assert answer.status_code == 200, answer.text
        assert len(calls) == 1
        windowed = client.post("/v2/embed", json={"inputs": ["word " * 700], "long": "window", "stride": 100})
        assert windowed.status_code == 200, windowed.text
    assert windowed.json()["spec"]["stride"] == 100
    expected = bundled.embed(["word " * 700], long="window", stride=100)
    np.testing.assert_allclose(windowed.json()["vectors"], expected.vectors, atol=1e-5)
    resolved = bundled.spec(layers="-2", pooling="mean").as_dict()
    assert answer.json()["spec"] == {**resolved, "layers": list(resolved["layers"])}


def test_search_embeds_its_query_with_the_stores_recipe(bundled: bertscope.Model, tmp_path: Path) -> None:
    out = tmp_path / "c.parquet"
    bertscope.embed_corpus(TEXTS, out, model=bundled, layers="-3", pooling="max", progress=False)
    hits = bertscope.search("bread", out, model=bundled, k=4)
    query = bundled.embed(["bread"], layers="-3", pooling="max").vectors[0]
    stored = bundled.embed(TEXTS, layers="-3", pooling="max").vectors
    scores = stored @ query / np.linalg.norm(stored, axis=1) / np.linalg.norm(query)
    assert [h.id for h in hits] == [str(i + 1) for i in np.argsort(-scores)]
    np.testing.assert_allclose([h.score for h in hits], np.sort(scores)[::-1], atol=1e-5)


def test_a_stride_is_refused_without_long_window(bundled: bertscope.Model, tmp_path: Path) -> None:
    """A stride beside long='truncate' (or 'error') changed nothing and was recorded as if it had."""
    from console import run_main

    for long in ("truncate", "error"):
        with pytest.raises(InvalidSpec, match="stride applies to long='window'"):
            bundled.embed("word " * 300, long=long, stride=3)
    with pytest.raises(InvalidSpec, match="stride applies to long='window'"):
        bundled.embed_tokens("word word", stride=3)
    with pytest.raises(InvalidSpec, match="stride must be a whole number of at least 1, got '3'"):
        bundled.embed("word word", long="window", stride="3")  # type: ignore[arg-type]
    refused = run_main("embed", "word word", "--stride", "3", "--json")
    # The command line names the flags typed (cli/wording.py): --long window, not long='window'.
    assert refused.code == 1 and "stride applies to --long window" in refused.stderr
    assert len(refused.stderr.strip().splitlines()) == 1 and not refused.stdout
    with pytest.raises(InvalidSpec, match="stride applies to long='window'"):
        bertscope.embed_corpus(TEXTS, tmp_path / "no.parquet", model=bundled, stride=3, progress=False)
    # With long='window' the stride is read and recorded; left out, none is recorded.
    windowed = run_main("embed", "word " * 300, "--long", "window", "--stride", "50", "--json")
    assert windowed.code == 0, windowed.stderr
    assert json.loads(windowed.stdout)["spec"]["stride"] == 50
    assert bundled.embed("word " * 300, long="window").spec["stride"] is None
    for stride in (None, 50):
        out = tmp_path / f"w{stride}.parquet"
        bertscope.embed_corpus(["word " * 300], out, model=bundled, long="window", stride=stride)
        assert json.loads(pq.read_table(out).schema.metadata[b"bertscope"])["stride"] == stride
    # A store recorded with a stride beside long='truncate' (once taken) reloads: it changed nothing.
    old = {"layers": [6], "pooling": "mean", "long": "truncate", "stride": 3}
    assert resolve(bundled, EmbedOptions.from_settings(old)).spec.stride is None


@pytest.mark.parametrize(
    ("value", "least", "ok"),
    [(1, 1, True), (np.int64(4), 1, True), (0, 0, True), (0, 1, False), (-5, 1, False), ("5", 1, False),
     (2.0, 1, False), (True, 1, False), (None, 1, False), (1, 2, False)],
)  # fmt: skip
def test_one_whole_number_check_for_every_count_option(value: object, least: int, ok: bool) -> None:
    if ok:
        checked = whole_number(value, "k", least=least)
        assert checked == value and type(checked) is int
    else:
        with pytest.raises(InvalidSpec, match=f"k must be a whole number of at least {least}, got "):
            whole_number(value, "k", least=least)


def test_a_misspelled_option_is_one_line_naming_the_options(bundled: bertscope.Model, tmp_path: Path) -> None:
    """embed(poolng=...) was a raw TypeError from EmbedOptions.__init__; it names the option and the fix,
    and stays a TypeError as Python's own for an unexpected keyword."""
    calls = {
        "did you mean pooling": lambda: bundled.embed("x", poolng="mean"),
        r"chunks are embed_chunks' \(or a corpus job's, with level='chunks'\)": lambda: bundled.embed(
            "One. Two.", chunk_size=4
        ),
        "did you mean normalize.*chunk_overlap": lambda: bertscope.embed_corpus(
            ["a"], tmp_path / "x.parquet", normalise=True
        ),
        "embed_chunks and a corpus job call it chunk_size": lambda: bertscope.embed_corpus(
            ["a"], tmp_path / "x.parquet", chunks="tokens", size=4
        ),
    }
    for said, call in calls.items():
        with pytest.raises(bertscope.UnknownOption, match=said) as raised:
            call()
        assert isinstance(raised.value, TypeError) and "\n" not in str(raised.value)
    assert not (tmp_path / "x.parquet").exists()


@pytest.mark.parametrize(
    ("options", "noted"),
    [
        (EmbedOptions(pooling="mean"), True),  # the model's own pooling, named: no Normalize
        (EmbedOptions(pooling="mean", normalize=False), False),  # asked for as it is
        (EmbedOptions(pooling="mean", normalize=True), False),
        (EmbedOptions(), False),  # auto: the model's own pooling and Normalize
        (EmbedOptions(pooling="cls"), False),  # not the model's own
        (EmbedOptions(pooling="mean", layers="-1"), True),
        (EmbedOptions(pooling="mean", layers="-2"), False),  # not the model's own layer
    ],
)
def test_naming_the_models_own_pooling_says_its_normalize_is_off(
    bundled: bertscope.Model, options: EmbedOptions, noted: bool
) -> None:
    note = spec_module.unnormalized_own_pooling(bundled, options)
    assert (note is not None) is noted
    vectors = bundled.embed_with(["I like eating bread"], resolve(bundled, options)).vectors
    # The note tells the truth: noted vectors are the model's own direction but not unit length.
    unit = abs(float(np.linalg.norm(vectors[0])) - 1.0) < 1e-5
    if noted:
        assert not unit
    if options.normalize or options.pooling == "auto":
        assert unit
    if noted:
        own = bundled.embed(["I like eating bread"]).vectors[0]
        np.testing.assert_allclose(vectors[0] / np.linalg.norm(vectors[0]), own, atol=1e-5)


def test_the_command_line_notes_an_unnormalized_own_pooling() -> None:
    from console import run_main

    code, stdout, stderr = run_main("embed", "I like bread", "--pooling", "mean", "--json")
    assert code == 0 and "--normalize" in stderr and "not unit length" in stderr
    vector = np.asarray(json.loads(stdout)["vectors"][0])
    assert abs(float(np.linalg.norm(vector)) - 1.0) > 1e-3
    code, _, stderr = run_main("embed", "I like bread", "--pooling", "mean", "--normalize", "--json")
    assert code == 0 and "unit length" not in stderr
