"""Audit 17h: fit-post read the whole corpus into memory (peak 448 MB at 5,000 lines, 607 MB at 100,000
with a 32-wide model). It reads a stream and fits on a uniform sample of at most --max-texts texts."""

from __future__ import annotations

import json
from collections import Counter
from pathlib import Path

from bertscope.cli.research import uniform_sample
from console import run_main


def test_a_stream_no_longer_than_the_sample_is_kept_whole_and_in_order() -> None:
    assert uniform_sample(iter(["a", "b", "c"]), 3) == (["a", "b", "c"], 3)
    assert uniform_sample(iter([]), 3) == ([], 0)


def test_a_longer_stream_is_sampled_uniformly_and_the_same_for_a_seed() -> None:
    kept, seen = uniform_sample(iter(range(1000)), 10, seed=1)
    assert seen == 1000 and len(kept) == 10 and len(set(kept)) == 10
    assert uniform_sample(iter(range(1000)), 10, seed=1) == (kept, seen)
    # each of 20 items kept in 5 of them over 4,000 seeds: about a quarter of the time each, the last too
    counts = Counter(x for seed in range(4000) for x in uniform_sample(iter(range(20)), 5, seed=seed)[0])
    assert all(800 < counts[x] < 1200 for x in range(20)), counts


def test_fit_post_fits_on_a_sample_of_at_most_max_texts(tiny_dirs: dict[str, Path], tmp_path: Path) -> None:
    corpus = tmp_path / "corpus.txt"
    corpus.write_text("".join(f"the {w} sat on mat number {i}\n" for i, w in enumerate("abcdefghij")))
    out = tmp_path / "pca.safetensors"
    args = ["fit-post", "-i", str(corpus), "--kind", "pca", "--dim", "2", "-m", str(tiny_dirs["bert"])]
    ran = run_main(*args, "--max-texts", "4", "-o", str(out), "--json")
    assert ran.code == 0, ran.stderr
    assert "fitting on a uniform sample of 4 of 10 texts (--max-texts)" in ran.stderr
    assert json.loads(ran.stdout)["n_fit"] == 4
    whole = run_main(*args, "-o", str(tmp_path / "all.safetensors"), "--json")
    assert json.loads(whole.stdout)["n_fit"] == 10 and "uniform sample" not in whole.stderr
