"""Audit 19f: counts in the research outputs are named as docs/names.md says (`n_texts`, `n_tokens`, ...;
`texts`, `tokens` would be the lists), the width as collections say it (`dimension`); the pages say which
field holds each route's texts and which command reads a pair file under the older --pairs."""

from __future__ import annotations

import json
import re
from pathlib import Path
from typing import Any

import pytest

import bertscope
from bertscope.research.contextuality import contextuality
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


def _hidden() -> dict[str, set[str]]:
    """Each command's hidden options and arguments (its older spellings), by its name as typed."""
    import typer.main

    from bertscope.cli import app

    found: dict[str, set[str]] = {}

    def walk(command: Any, name: str) -> None:
        for sub, child in getattr(command, "commands", {}).items():
            walk(child, f"{name} {sub}".strip())
        if not hasattr(command, "commands"):
            found[name] = {
                p.opts[0] if p.param_type_name == "option" else "ARG"
                for p in command.params
                if getattr(p, "hidden", False)
            }

    walk(typer.main.get_command(app), "")
    return found


def test_older_file_flags_are_named_on_the_commands_that_read_them() -> None:
    """The page said the older `--pairs FILE` works for contextuality, fit-post, eval pairs and calibrate:
    only `eval words` reads it, and calibrate and eval pairs read the pairs file as an argument."""
    hidden = _hidden()
    page = Path(__file__).resolve().parent.parent / "docs" / "tokens-and-layers.md"
    text = " ".join(page.read_text(encoding="utf-8").split())
    said = text.split("The older spellings", 1)[1].split("still work", 1)[0]
    for flag in ("--pairs", "--contexts"):
        readers = sorted(name for name, old in hidden.items() if flag in old)
        named = re.findall(rf"`([a-z -]+) {flag} FILE`", said)
        assert named == readers, (flag, named, readers)
    plots = said.split("`--plot FILE` of ", 1)[1].split(" (now", 1)[0]
    assert sorted(plots.strip("`").split("`/`")) == sorted(n for n, old in hidden.items() if "--plot" in old)
    as_argument = said.split("a file as an argument where `-i/--input` names it now (", 1)[1].split(")", 1)[0]
    assert sorted(re.findall(r"`([a-z -]+)`", as_argument)) == sorted(
        n for n, old in hidden.items() if "ARG" in old
    )


CONTEXTS = [
    "The bank is open today.",
    "The bank is open today.",
    "We sat on the river bank.",
    "The river rose.",
    "The bank raised its rates.",
]


def test_contextuality_counts_each_words_occurrences_as_n_occurrences(
    bundled: bertscope.Model, tmp_path: Path
) -> None:
    """`occurrences` was a dict of counts ({"bank": 3}), the name docs/names.md keeps for a list: the
    counts are `n_occurrences` in the result and in --json; the old attribute still reads, warning."""
    result = contextuality(bundled, CONTEXTS, words=["bank", "river"], baseline_pairs=20)
    assert result.n_occurrences == {"bank": 3, "river": 2}
    assert "occurrences" not in result.to_dict() and result.to_dict()["n_occurrences"] == result.n_occurrences
    with pytest.warns(
        DeprecationWarning, match=r"Contextuality.occurrences is deprecated; use .n_occurrences"
    ):
        assert result.occurrences == result.n_occurrences
    corpus = tmp_path / "contexts.txt"
    corpus.write_text("\n".join(CONTEXTS) + "\n")
    args = ("contextuality", "-i", str(corpus), "--words", "bank,river", "--baseline-pairs", "20", "--json")
    ran = run_main(*args)
    assert ran.code == 0, ran.stderr
    data = json.loads(ran.stdout)
    assert data["n_occurrences"] == {"bank": 3, "river": 2} and "occurrences" not in data


def test_contextuality_settings_count_the_sentences_as_n(bundled: bertscope.Model, tmp_path: Path) -> None:
    """The settings said "sentences": 5 and "distinct_sentences", counts under the names of lists: they
    are n_sentences and n_distinct_sentences, in the result, in --json and in the merge's note."""
    s = contextuality(bundled, CONTEXTS, words=["bank", "river"], baseline_pairs=20).settings
    assert (s["n_sentences"], s["n_distinct_sentences"], s["repeats_merged"]) == (5, 4, 1)
    assert not {"sentences", "distinct_sentences"} & set(s)
    corpus = tmp_path / "contexts.txt"
    corpus.write_text("\n".join(CONTEXTS) + "\n")
    args = ("contextuality", "-i", str(corpus), "--words", "bank,river", "--baseline-pairs", "20")
    ran = run_main(*args, "--json")
    assert ran.code == 0, ran.stderr
    assert json.loads(ran.stdout)["settings"]["n_distinct_sentences"] == 4
    assert "(of 5 sentences, 4 distinct)" in " ".join(ran.stderr.split())
    table = run_main(*args)
    assert table.code == 0 and "words (occurrences): bank (3), river (2)" in table.stdout
    assert "deprecated" not in table.stderr  # the command reads n_occurrences, not the old name


def test_a_senses_number_is_sense_as_its_json_says(tmp_path: Path) -> None:
    """senses --json named each sense 'sense' while the library's field was Sense.number (review)."""
    import warnings

    from bertscope.research.senses import Sense

    made = Sense(sense=2, size=5, examples=[])
    with warnings.catch_warnings(record=True) as caught:
        warnings.simplefilter("always")
        assert made.number == 2
    assert any(issubclass(w.category, DeprecationWarning) and "use .sense" in str(w.message) for w in caught)


def test_bench_json_counts_its_texts_as_n_texts(
    monkeypatch: pytest.MonkeyPatch, tiny_dirs: dict[str, Path]
) -> None:
    """bench --json wrote "texts": 5, a count under a list's name (audit 19h)."""
    import warnings

    from bertscope.backends import modes
    from console import run_main

    def compare(texts: object, names: list[str], **kwargs: object) -> list[modes.ModeReport]:
        figures = {"n_texts": 8, "seconds": 1.0, "texts_per_s": 8.0, "vs_float32": 1.0}
        return [modes.ModeReport(n, **figures, cos_min=0.99, cos_mean=0.999, max_abs=0.1) for n in names]

    monkeypatch.setattr(modes, "compare_modes", compare)
    ran = run_main("bench", "-m", str(tiny_dirs["bert"]), "--modes", "int8", "--json")
    (row,) = json.loads(ran.stdout)
    assert row["n_texts"] == 8 and "texts" not in row, row
    report = compare([], ["int8"])[0]
    with warnings.catch_warnings(record=True) as caught:
        warnings.simplefilter("always")
        assert report.texts == 8  # the old attribute still reads, with a DeprecationWarning
    assert any(issubclass(w.category, DeprecationWarning) for w in caught)


def test_the_explorer_sends_the_fields_its_routes_name(bundled: Any) -> None:
    """The explorer's Attention tab posted {text: ...}, /attention's older name of inputs (audit 19h): every
    body the explorer builds in place names fields of its route's request schema."""
    from fastapi.testclient import TestClient

    from bertscope.server import create_app

    app_js = (Path(bertscope.__file__).parent / "server" / "static" / "app.js").read_text(encoding="utf-8")
    sent = re.findall(r'api\("(/[\w/]+)", \{ ?(\w+):', app_js)
    sent += [("/attention", key) for key in re.findall(r"const body = \{ (\w+): state\.source", app_js)]
    with TestClient(create_app(bundled)) as http:
        spec = http.get("/openapi.json").json()
    schemas = spec["components"]["schemas"]
    assert ("/attention", "inputs") in sent, sent
    for route, key in sent:
        ref = spec["paths"][route]["post"]["requestBody"]["content"]["application/json"]["schema"]["$ref"]
        properties = schemas[ref.rsplit("/", 1)[1]]["properties"]
        assert key in properties and not properties[key].get("deprecated"), (route, key)
