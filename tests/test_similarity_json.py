"""`similarity --json` carries what /v2/similarity sends beside the scores: the model, the spec the
vectors were made with (post-processing included), and with --baseline the baseline's figures."""

from __future__ import annotations

import json

import numpy as np

import bertscope
from bertscope.server.response_schemas import SimilarityResponse


def test_the_json_has_the_route_s_fields(bundled: bertscope.Model) -> None:
    from console import run_main

    ran = run_main("similarity", "a cat", "a dog", "a car", "-p", "cls", "--baseline", "--json")
    assert ran.code == 0, ran.stderr
    answer = json.loads(ran.stdout)
    assert set(SimilarityResponse.model_fields) <= set(answer)
    assert answer["model"] == bundled.loaded.source
    made = bundled.embed(["a cat"], pooling="cls")
    assert answer["spec"] == json.loads(json.dumps(made.spec)) and answer["spec"]["pooling"] == "cls"
    scores = bundled.similarity(["a cat", "a dog", "a car"], pooling="cls")
    np.testing.assert_allclose(answer["scores"], scores)
    fitted = bundled.baseline(pooling="cls").describe()
    assert answer["baseline"] == json.loads(json.dumps(fitted)) and answer["baseline"]["pooling"] == "cls"
    assert np.asarray(answer["percentile"]).shape == (3, 3)


def test_without_baseline_there_is_no_baseline_field(bundled: bertscope.Model) -> None:
    from console import run_main

    ran = run_main("similarity", "a cat", "a dog", "--json")
    assert ran.code == 0, ran.stderr
    answer = json.loads(ran.stdout)
    assert "baseline" not in answer and "percentile" not in answer
    assert answer["spec"]["pooling"] == "mean" and answer["spec"]["normalize"] is True
