"""`attention --json` answers in the service's /attention fields: head null means the mean over heads only
with mean_heads true, and the tokens carry their cut, segments and specials as the service's do."""

from __future__ import annotations

import json

import numpy as np

import bertscope
from bertscope.server.response_schemas import AttentionResponse


def test_the_command_s_json_has_the_service_s_fields(bundled: bertscope.Model) -> None:
    from console import run_main

    ran = run_main("attention", "a cat", "--pair", "a dog", "--layer", "2", "--json", "--backend", "torch")
    assert ran.code == 0, ran.stderr
    answer = json.loads(ran.stdout)
    assert set(answer) == set(AttentionResponse.model_fields) - {"type_ids"}  # its deprecated old name
    assert (answer["layer"], answer["head"], answer["mean_heads"]) == (2, None, True)
    assert answer["token_type_ids"] == [0, 0, 0, 0, 1, 1, 1] and answer["n_dropped"] == 0
    assert answer["special"] == [True, False, False, True, False, False, True]
    weights = bundled.attentions(("a cat", "a dog"))
    assert (answer["n_layers"], answer["n_heads"]) == weights.shape[:2]
    np.testing.assert_allclose(answer["attention"], weights[1].mean(axis=0), rtol=0, atol=1e-5)


def test_one_head_is_that_head_not_the_mean(bundled: bertscope.Model) -> None:
    from console import run_main

    ran = run_main("attention", "a cat sat", "--head", "3", "--json", "--backend", "torch")
    assert ran.code == 0, ran.stderr
    answer = json.loads(ran.stdout)
    assert (answer["layer"], answer["head"], answer["mean_heads"]) == (bundled.n_layers, 3, False)
    np.testing.assert_allclose(answer["attention"], bundled.attentions("a cat sat")[-1, 3], rtol=0, atol=1e-5)
