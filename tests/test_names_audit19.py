"""Audit 19f: counts in the research outputs are named as docs/names.md says (`n_texts`, `n_tokens`, ...;
`texts`, `tokens` would be the lists), the width as collections say it (`dimension`)."""

from __future__ import annotations

import json
from pathlib import Path

import bertscope
from bertscope.research.geometry import geometry
from console import run_main
from sample_texts import TEXTS


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
