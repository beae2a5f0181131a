"""One concept, one name, round 2 (audit 6 names F2-F7): texts cut are `n_truncated` and tokens dropped
`n_dropped` in every --json and research settings dict; a text's token-to-token cosines per layer are
`cosines` (`LayerCosines.cosines`, `plot layers --json`, as `/explore/layers`); a count of what the
library holds as a list is `n_occurrences` / `n_words` / `n_texts`; `static_from_corpus`'s cut is said at
the caller's line; the command line and the explorer pass the new spellings (`top_k=`, level "tokens");
`word_senses(k=)` warns; and `info()` after a runtime switch says what now runs."""

from __future__ import annotations

import re
from pathlib import Path
from typing import Any

import numpy as np
import pytest

import bertscope
from bertscope.errors import InvalidInput, TruncatedTextsWarning
from bertscope.research.analysis import evaluate_pairs, evaluate_words, sweep
from bertscope.research.plots import LayerCosines, layer_cosines
from bertscope.research.senses import word_senses
from bertscope.research.static_kinds import compare_kinds
from console import json_of, no_deprecation

DATA = Path(__file__).parent / "data"
APP_JS = Path(bertscope.__file__).parent / "server" / "static" / "app.js"
LONG = "the cat sat on a mat " * 60  # 361 tokens: over the 256 the bundled model takes
LEFT = [LONG + "and then it slept", "a storm hit the coast", "prices rose again", "the team won"]
RIGHT = ["it slept today", "a storm today", "prices today", "the team today"]
GOLD = [1.0, 0.0, 0.5, 0.2]


# F2: texts cut and tokens dropped ---------------------------------------------------------------------


def test_sweep_and_eval_pairs_say_n_truncated_and_n_dropped(bundled: bertscope.Model, tmp_path: Path) -> None:
    with no_deprecation("deprecated"):
        found = sweep(bundled, LEFT, RIGHT, GOLD, layers="6", poolings=["mean"]).settings
    assert found["n_truncated"] == 1 and found["n_dropped"] > 100 and found["n_texts"] == 8
    assert not {"truncated", "dropped_tokens", "texts"} & set(found)
    pairs = tmp_path / "pairs.tsv"
    pairs.write_text("".join(f"{a}\t{b}\t{g}\n" for a, b, g in zip(LEFT, RIGHT, GOLD, strict=True)))
    said = json_of("eval", "pairs", "-i", str(pairs), "--layers", "6", "--pooling", "mean", "--no-plot")
    assert said["settings"] == {**found, "model": said["settings"]["model"]}
    with pytest.warns(TruncatedTextsWarning):
        one = evaluate_pairs(bundled, LEFT, RIGHT, GOLD, layers=-1, pooling="mean", long="truncate")
    assert one["n_truncated"] == 1 and "truncated" not in one


def test_eval_docsim_json_says_n_truncated() -> None:
    pytest.importorskip("gensim")
    said = json_of("eval", "docsim", "--layers", "-1", "--pooling", "mean")
    assert said["n_truncated"] >= 0 and "truncated" not in said and said["n_documents"] == 50


def test_static_corpus_says_counts_with_n(bundled: bertscope.Model, tmp_path: Path) -> None:
    corpus = tmp_path / "corpus.txt"
    corpus.write_text("The bank raised its rates.\nThe bank of the river.\n" + "river " * 300 + "tail\n")
    with pytest.warns(TruncatedTextsWarning):
        agg = bundled.static_from_corpus(str(corpus), long="truncate")
    assert agg.settings["n_truncated"] == 1 and agg.settings["n_texts"] == 3
    assert not {"truncated", "texts"} & set(agg.settings)
    assert agg.to_dict()["n_words"] == len(agg.words) and "words" not in agg.to_dict()
    out = tmp_path / "agg.txt"
    said = json_of("static", "--corpus", str(corpus), "-o", str(out), "--long", "truncate")
    assert said["n_truncated"] == 1 and said["n_texts"] == 3 and said["n_words"] == len(agg.words)
    assert not {"truncated", "texts", "words"} & set(said)


# F3: a text's token-to-token cosines per layer -----------------------------------------------------------


def test_layer_cosines_are_cosines_everywhere(bundled: bertscope.Model, tmp_path: Path) -> None:
    from bertscope.server.explorer import layer_cosines as explored

    with no_deprecation("deprecated"):
        found = layer_cosines(bundled, "a cat sat", layers="0,6")
        said = json_of("plot", "layers", "a cat sat", "-l", "0,6", "-o", str(tmp_path / "l.png"))
    assert "cosine" not in {f for f in LayerCosines.__dataclass_fields__}
    assert found.cosines.shape == (2, 5, 5) and found.to_dict()["cosines"] == found.cosines.tolist()
    assert "cosine" not in said and np.allclose(said["cosines"], found.cosines, atol=1e-6)
    served = np.asarray(explored(bundled, "a cat sat")["cosines"])  # what /explore/layers answers
    np.testing.assert_allclose(served[[0, 6]], found.cosines, atol=1e-4)
    with pytest.warns(DeprecationWarning, match=r"LayerCosines\.cosine is deprecated; use \.cosines") as w:
        old = found.cosine
    assert w[0].filename == __file__ and old is found.cosines


# F4: counts of what the library holds as lists -----------------------------------------------------------


@pytest.fixture(scope="module")
def store(tmp_path_factory: pytest.TempPathFactory, bundled: bertscope.Model) -> Path:
    path = tmp_path_factory.mktemp("round2") / "words.parquet"
    bertscope.embed_corpus(DATA / "bank_senses.txt", path, model=bundled, level="words")
    return path


def test_senses_count_their_occurrences_as_n_occurrences(store: Path) -> None:
    with no_deprecation("deprecated"):
        found = word_senses(store, "bank", n_clusters=2)
        said = json_of("senses", "bank", "--store", str(store), "-n", "2", "--examples", "1")
    assert found.to_dict()["n_occurrences"] == len(found.occurrences) == said["n_occurrences"] == 20
    assert "occurrences" not in found.to_dict() and "occurrences" not in said


def test_word_evaluations_count_their_words_as_n_words(bundled: bertscope.Model) -> None:
    pairs = [("cat", "dog", 8.0), ("bread", "butter", 7.0), ("car", "idea", 1.0), ("river", "bank", 6.0)]
    alone = evaluate_words(bundled, pairs).coverage
    kinds = compare_kinds(bundled, pairs, layers="6")
    assert alone["n_words"] == kinds.coverage["n_words"] == kinds.settings["n_words"] == 8
    assert "words" not in alone and "words" not in kinds.coverage and "words" not in kinds.settings


# F5: static_from_corpus's cut at the caller's line --------------------------------------------------------


def test_static_from_corpus_says_its_cut_at_the_callers_line(bundled: bertscope.Model) -> None:
    with pytest.warns(TruncatedTextsWarning, match="^1 of 2 text") as said:
        bundled.static_from_corpus(["a bank", "river " * 300 + "tail"], long="truncate")
    cut = [w for w in said if issubclass(w.category, TruncatedTextsWarning)]
    assert len(cut) == 1 and cut[0].filename == __file__, [(w.filename, w.lineno) for w in cut]


# F6: the new spellings passed inside -----------------------------------------------------------------------


def test_the_command_line_passes_top_k(store: Path, tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    import bertscope.io.occurrences as occurrences
    import bertscope.io.search as search
    import bertscope.static as static

    given: list[set[str]] = []

    def watched(function: Any) -> Any:
        def call(*args: Any, **kwargs: Any) -> Any:
            given.append(set(kwargs))
            return function(*args, **kwargs)

        return call

    for module, name in ((static, "lookup"), (search, "search"), (occurrences, "search_occurrences")):
        monkeypatch.setattr(module, name, watched(getattr(module, name)))
    sentences = tmp_path / "s.parquet"
    bertscope.embed_corpus(["a cat", "a dog", "a car"], sentences)
    json_of("static", "bread", "-k", "2")
    json_of("similar", "a kitten", "--store", str(sentences), "-k", "2")
    json_of("similar", "--word", "bank", "--store", str(store), "-k", "2")
    assert len(given) == 3 and all("top_k" in g and "k" not in g for g in given), given


def test_the_explorer_asks_cka_for_a_level_the_schema_lists(bundled: bertscope.Model) -> None:
    from fastapi.testclient import TestClient

    from bertscope.server import create_app

    sent = re.findall(r'api\("/v2/cka", \{[^}]*level: "(\w+)"', APP_JS.read_text())
    with TestClient(create_app(bundled)) as http:
        schema = http.get("/openapi.json").json()["components"]["schemas"]
    assert sent == ["tokens"] and set(sent) <= set(schema["CkaLevel"]["enum"])


# F7: word_senses(k=) -------------------------------------------------------------------------------------


def test_word_senses_k_is_a_deprecated_name_of_n_clusters(store: Path) -> None:
    with pytest.warns(
        DeprecationWarning, match=r"^word_senses\(k=\.\.\.\) is deprecated; use n_clusters="
    ) as w:
        old = word_senses(store, "bank", k=3)
    assert w[0].filename == __file__ and old.n_clusters == 3
    with pytest.raises(InvalidInput, match=r"^k= is the old name of n_clusters=; give n_clusters= only$"):
        word_senses(store, "bank", k=3, n_clusters=3)


# info() after a runtime switch -----------------------------------------------------------------------------


@pytest.mark.parametrize("switch", ["onnxruntime", "openvino", "torch"])
def test_info_after_a_switch_says_what_now_runs(switch: str) -> None:
    if switch == "openvino":
        pytest.importorskip("openvino")
    model = bertscope.load(device="cpu", backend="torch")
    # What load chose (the exact default, or mode="fast"), as a load that chose it records it
    model.mode, model.fast_choice = "fast", {"chosen": "onnxruntime int8", "min_cosine": 0.99}
    model.exact_choice = {"chosen": "onnxruntime float32", "vs_torch": 5.0}
    {"onnxruntime": model.use_onnxruntime, "openvino": model.use_openvino, "torch": model.use_torch}[switch]()
    info = model.info()
    assert (info.backend, info.mode, info.exact, info.fast) == (switch, "exact", None, None)
    asked = bertscope.load(device="cpu", backend=switch).info()  # the same as a load that asked for it
    assert (asked.backend, asked.mode, asked.exact, asked.fast) == (switch, "exact", None, None)
