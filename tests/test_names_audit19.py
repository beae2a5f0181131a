"""Audit 19f: counts in the research outputs are named as docs/names.md says (`n_texts`, `n_tokens`, ...;
`texts`, `tokens` would be the lists), the width as collections say it (`dimension`); the pages say which
field holds each route's texts and which command reads a pair file under the older --pairs."""

from __future__ import annotations

import json
import re
from pathlib import Path

import bertscope
from bertscope.research.geometry import geometry
from console import run_main
from sample_texts import TEXTS

SERVICE_PAGE = Path(__file__).resolve().parent.parent / "docs" / "service.md"
ROUTE = re.compile(r"`(?:POST )?(/[a-z0-9_/]*)`")


def test_geometry_settings_name_counts_n_and_the_width_dimension(bundled: bertscope.Model) -> None:
    """The settings said "texts": 6, "distinct_texts", "tokens" and "dimensions": 384, counts under the
    names of lists, and the width in OpenAI's plural."""
    result = geometry(bundled, TEXTS + TEXTS[:2], layers="-1")
    s = result.settings
    assert (s["n_texts"], s["n_distinct_texts"], s["repeats_merged"]) == (len(TEXTS) + 2, len(TEXTS), 2)
    assert s["dimension"] == 384 and s["tokens_per_dimension"] == round(s["n_tokens"] / 384, 3)
    assert not {"texts", "distinct_texts", "tokens", "dimensions"} & set(s)


def test_geometry_json_and_note_name_the_counts(tmp_path: Path) -> None:
    corpus = tmp_path / "news.txt"
    corpus.write_text("\n".join(TEXTS + TEXTS[:1]) + "\n")
    ran = run_main("geometry", "-i", str(corpus), "--layers", "-1", "--json")
    assert ran.code == 0, ran.stderr
    s = json.loads(ran.stdout)["settings"]
    assert (s["n_texts"], s["n_distinct_texts"], s["dimension"]) == (len(TEXTS) + 1, len(TEXTS), 384)
    assert not {"texts", "distinct_texts", "tokens", "dimensions"} & set(s)
    said = " ".join(ran.stderr.split())
    assert f"(of {len(TEXTS) + 1} texts, {len(TEXTS)} distinct)" in said
    table = run_main("geometry", "-i", str(corpus), "--layers", "-1")
    assert table.code == 0 and f"{s['n_tokens']} tokens, " in table.stdout


def _bodies(model: bertscope.Model) -> dict[str, set[str]]:
    """Each POST route's request body: its top-level fields, from the served OpenAPI schema."""
    from bertscope.server import create_app

    schema = create_app(model).openapi()
    parts = schema["components"]["schemas"]
    bodies = {}
    for path, operations in schema["paths"].items():
        body = operations.get("post", {}).get("requestBody")
        if body:
            ref = body["content"]["application/json"]["schema"]["$ref"].split("/")[-1]
            bodies[path] = set(parts[ref]["properties"])
    return bodies


def test_service_page_says_which_field_holds_each_routes_texts(bundled: bertscope.Model) -> None:
    """The page said every endpoint takes its texts as `inputs`, where /explain takes a and b and
    /v2/similarity source and sentences: each route it names with `inputs` has that field, every other
    route is named with the fields it does take, and no route with a body goes unsaid."""
    bodies = _bodies(bundled)
    text = " ".join(SERVICE_PAGE.read_text(encoding="utf-8").split())
    said = text.split("takes the texts as `inputs` on the routes", 1)[1].split("takes `ids`.", 1)[0]
    listed, others = said.split("; `/static` also accepts", 1)[0], said.split("The routes that compare", 1)[1]
    with_inputs = ROUTE.findall(listed)
    assert {"/explain", "/v2/similarity"}.isdisjoint(with_inputs) and len(with_inputs) >= 10
    assert all("inputs" in bodies[route] for route in with_inputs), with_inputs
    clauses = re.split(r"(?=`(?:POST )?/)", others + "takes `ids`.")[1:]
    for clause in clauses:
        route = ROUTE.match(clause)
        assert route is not None, clause
        fields = set(re.findall(r"`([a-z_]+)`", clause))
        assert fields & bodies[route[1]], clause
    named = set(with_inputs) | {ROUTE.match(c)[1] for c in clauses}  # type: ignore[index]
    assert named == set(bodies), set(bodies) ^ named
    assert {"a", "b"} <= bodies["/explain"] and {"source", "sentences"} <= bodies["/v2/similarity"]
    assert (
        "`/explain` takes `a` and `b`" in others
        and "`/v2/similarity` a `source` and its `sentences`" in others
    )
