"""Static kinds: aggregated over a corpus (vs the Hugging Face forward; killed and resumed), decontextualised,
distilled into a folder the real model2vec loads, compared in `eval words`; bad input in one line."""

from __future__ import annotations

import json
import unicodedata
from collections import defaultdict
from pathlib import Path

import numpy as np
import pyarrow.parquet as pq
import pytest
import torch
from transformers import AutoModel, AutoTokenizer
from typer.testing import CliRunner

import bertscope
from bertscope.cli import app
from console import run_main
from test_io import LIGHT, stop_and_resume, write_txt

TEXTS = [
    "The Bank of the river was muddy.",
    "I went to the bank to get money, and the bank was closed.",
    "Tokenization of the café's menu is hard.",
    "A cat sat on the bank.",
]
runner = CliRunner()


def _key(word: str) -> str:
    """An uncased BERT's word key, written out: lowercased, accents stripped."""
    return "".join(c for c in unicodedata.normalize("NFD", word.lower()) if unicodedata.category(c) != "Mn")


def _hf_means(path: Path, texts: list[str], layer: int) -> tuple[dict[str, np.ndarray], dict[str, int]]:
    """Each word's mean layer-`layer` vector (its pieces' mean per occurrence) from the plain HF forward."""
    tokenizer = AutoTokenizer.from_pretrained(path)
    model = AutoModel.from_pretrained(path).eval()
    found: dict[str, list[np.ndarray]] = defaultdict(list)
    for text in texts:
        enc = tokenizer(text, return_tensors="pt", return_offsets_mapping=True)
        offsets = enc.pop("offset_mapping")[0].tolist()
        with torch.no_grad():
            hidden = model(**enc, output_hidden_states=True).hidden_states[layer][0].numpy()
        word_ids = enc.word_ids(0)
        for word in sorted({w for w in word_ids if w is not None}):
            rows = [i for i, w in enumerate(word_ids) if w == word]
            found[_key(text[offsets[rows[0]][0] : offsets[rows[-1]][1]])].append(hidden[rows].mean(axis=0))
    return {k: np.mean(v, axis=0) for k, v in found.items()}, {k: len(v) for k, v in found.items()}


def test_aggregated_equals_the_mean_of_hugging_face_layer_vectors(bundled, bundled_path: Path) -> None:
    result = bundled.static_from_corpus(TEXTS, layers="2,-1", batch_size=2)
    for layer in (2, 6):
        means, counts = _hf_means(bundled_path, TEXTS, layer)
        assert set(result.words) == set(means) and {"bank", "cafe", "tokenization"} <= set(means)
        for word in means:
            got = result.layer(layer)[result.index[word]]
            np.testing.assert_allclose(got, means[word], atol=1e-5)
            assert result.counts[result.index[word]] == counts[word]
    assert result.counts[result.index["bank"]] == 4 and result.words[0] == "the"  # commonest first
    kept = bundled.static_from_corpus(TEXTS, layers=1, min_count=3)
    assert kept.words == ["the", "bank", "."] and kept.settings["n_words_seen"] == len(means)


def test_export_keeps_counts(bundled, tmp_path: Path) -> None:
    target = tmp_path / "agg.parquet"
    result = runner.invoke(
        app, ["static", "--from-corpus", str(write_txt(tmp_path, TEXTS)), "--layers", "1", "--min-count", "2",
              "-o", str(target), "--json"],
    )  # fmt: skip
    assert result.exit_code == 0, result.output
    table = pq.read_table(target).to_pydict()
    assert table["word"] == ["the", "bank", ".", "of", "was", "to"] and table["count"] == [6, 4, 4, 2, 2, 2]
    assert (
        json.loads(result.stdout)["n_words_seen"] > 4 and not target.with_name("agg.parquet.parts").exists()
    )
    vectors = bundled.static_from_corpus(TEXTS, layers=1, min_count=2)
    np.testing.assert_allclose(np.array(table["vector"]), vectors.vectors[:, 0], atol=1e-6)


def test_a_killed_aggregation_resumes_exactly(tmp_path: Path, tiny_dirs: dict[str, Path]) -> None:
    rng = np.random.default_rng(0)
    words = "i like eating bread the banana was horrible a cat dog car am tokenization".split()
    lines = [" ".join(rng.choice(words, size=rng.integers(2, 16))) for _ in range(2000)]
    corpus = write_txt(tmp_path, lines, "big.txt")
    common = ["--from-corpus", str(corpus), "--layers", "0,1", "--model", str(tiny_dirs["bert"])]
    common += ["--batch-size", "125", "-q", *LIGHT]

    def three_batches(parts: Path) -> bool:
        try:
            with np.load(parts / "state.npz") as state:
                return int(state["done"]) >= 375
        except (OSError, ValueError, KeyError):
            return False

    # Loaded first: its export is the one the stopped job opens light (test_io.LIGHT)
    model = bertscope.load(tiny_dirs["bert"], device="cpu", backend="onnxruntime")
    target = tmp_path / "resumed.npy"
    stop_and_resume(common, target, command="static", ready=three_batches)
    whole = model.static_from_corpus(lines, layers="0,1", batch_size=125)
    for k, layer in enumerate(whole.layers):
        again = np.load(target.with_name(f"resumed.layer{layer}.npy"))
        vocab = target.with_name(f"resumed.layer{layer}.vocab.tsv").read_text().splitlines()
        assert [line.split("\t")[0] for line in vocab] == whole.words
        assert [int(line.split("\t")[1]) for line in vocab] == whole.counts.tolist()
        np.testing.assert_array_equal(again, whole.vectors[:, k])


def test_decontextualized_is_the_word_alone_through_the_model(bundled) -> None:
    found = bundled.static_decontextualized(["bread", "tokenization"], layers="0,-1")
    assert found.pieces == [["bread"], ["token", "##ization"]] and found.layers == (0, 6)
    alone = bundled.hidden_states("tokenization")  # [CLS] token ##ization [SEP]
    np.testing.assert_allclose(found.layer(6)[1], alone[6][1:3].mean(axis=0), atol=1e-6)
    piece = bundled.static_decontextualized("##ing", layers=6, pieces=True)
    assert piece.pieces == [["##ing"]] and piece.vectors.shape == (1, 1, 384)


def test_distilled_folder_loads_in_model2vec(tmp_path: Path, tiny_dirs: dict[str, Path]) -> None:
    from model2vec import StaticModel

    folder = tmp_path / "static"
    result = runner.invoke(
        app, ["distill", "-o", str(folder), "--dim", "8", "--model", str(tiny_dirs["bert"])]
    )
    assert result.exit_code == 0, result.output
    static = StaticModel.from_pretrained(str(folder))
    vectors = static.encode(["i like bread", "a cat"])
    assert vectors.shape == (2, 8) and np.isfinite(vectors).all() and not np.allclose(vectors[0], vectors[1])
    again = runner.invoke(app, ["distill", "-o", str(folder), "--model", str(tiny_dirs["bert"])])
    assert isinstance(again.exception, bertscope.InvalidInput) and "--overwrite" in str(again.exception)


def test_eval_words_compares_the_kinds(bundled, tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    from bertscope.cli import research

    monkeypatch.setattr(research, "load_model", lambda *a, **k: bundled)
    pairs = tmp_path / "words.tsv"
    pairs.write_text(
        "bank\tmoney\t7\nbank\triver\t6\ncat\tbank\t1\nriver\tmoney\t2\ncat\tmenu\t1\nzebra\tcat\t5\n"
    )
    corpus = write_txt(tmp_path, TEXTS)
    args = ["eval", "words", "-i", str(pairs), "--corpus", str(corpus), "--layers", "1,6", "--json"]
    result = runner.invoke(app, [*args, "-o", str(tmp_path / "kinds.png")])
    assert result.exit_code == 0, result.output
    records = json.loads(result.stdout)["records"]
    assert [(r["kind"], r["layer"]) for r in records] == [
        ("rows", None), ("decontextualized", 1), ("decontextualized", 6), ("aggregated", 1), ("aggregated", 6)
    ]  # fmt: skip
    assert [r["n_pairs_covered"] for r in records] == [6, 6, 6, 5, 5]  # zebra is not in the corpus
    assert {r["n_pairs_common"] for r in records} == {5}
    assert records[3]["spearman_common"] == records[3]["spearman"]
    assert (tmp_path / "kinds.png").stat().st_size > 5000


@pytest.mark.parametrize(
    ("args", "error", "needle"),
    [
        (["--min-count", "9"], bertscope.CorpusError, "no word occurs 9 times"),
        (["--layers", "7"], bertscope.InvalidSpec, "layer 7 does not exist"),
        (["--empty"], bertscope.CorpusError, "every line is empty"),
    ],
)
def test_bad_aggregations_are_one_line(
    bundled, tmp_path: Path, monkeypatch: pytest.MonkeyPatch, args: list[str], error: type, needle: str
) -> None:
    from bertscope.cli import basics

    monkeypatch.setattr(basics, "load_model", lambda *a, **k: bundled)
    corpus = write_txt(tmp_path, ["", " "] if args == ["--empty"] else TEXTS)
    given = [] if args == ["--empty"] else args
    result = runner.invoke(
        app, ["static", "--from-corpus", str(corpus), "-o", str(tmp_path / "a.vec"), *given]
    )
    assert isinstance(result.exception, error) and needle in str(result.exception)
    assert "\n" not in str(result.exception) and not (tmp_path / "a.vec").exists()


# What a user of `static --from-corpus` and `eval words --corpus` is told (issue 39, items 8 and 9) -------


def test_a_text_corpus_of_any_suffix_is_read_as_lines(bundled, tmp_path: Path) -> None:
    """gensim's lee_background.cor is plain text: a .cor (or no suffix) reads as one text per line."""
    as_txt = bundled.static_from_corpus(str(write_txt(tmp_path, TEXTS)), layers=1)
    for name in ("lee_background.cor", "corpus"):
        other = bundled.static_from_corpus(str(write_txt(tmp_path, TEXTS, name)), layers=1)
        assert other.words == as_txt.words and other.counts.tolist() == as_txt.counts.tolist()
    binary = tmp_path / "vectors.bin"
    binary.write_bytes(b"\x00\x01\xfe\xff" * 64)
    with pytest.raises(bertscope.CorpusError, match="unknown corpus type .bin and not UTF-8 text"):
        bundled.static_from_corpus(str(binary))
    array = tmp_path / "texts.json"
    array.write_text('[{"text": "a cat"}]')
    with pytest.raises(bertscope.CorpusError, match="read one object per line: write it as .jsonl"):
        bundled.static_from_corpus(str(array))


def test_eval_words_takes_a_cor_corpus(bundled, tmp_path: Path) -> None:
    pairs = tmp_path / "pairs.tsv"
    pairs.write_text("bank\tmoney\t7.5\ncat\tdog\t6\nbank\triver\t5\nthe\tcat\t1\n")
    corpus = write_txt(tmp_path, TEXTS + ["The dog and the cat and the money."], "lee_background.cor")
    done = run_main(
        "eval", "words", "-i", str(pairs), "--corpus", str(corpus), "--layers", "1", "--json", "--no-plot"
    )
    assert done.code == 0, done.stderr
    kinds = {r["kind"] for r in json.loads(done.stdout)["records"]}
    assert "aggregated" in kinds


def test_from_corpus_windows_long_texts_and_says_when_it_truncates(bundled, tmp_path: Path) -> None:
    """Windowed by default, every word of a long text is aggregated (as `eval words` does); with
    --long truncate the cut is said on stderr with its count. No "0 seen fewer than 1" line."""
    long_text = " ".join(f"word{i % 150}" for i in range(300))  # 2+ pieces a word: far past 256 tokens
    corpus = write_txt(tmp_path, [long_text, "a short text"])
    target = tmp_path / "agg.vec"
    windowed = run_main("static", "--from-corpus", str(corpus), "-o", str(target))
    assert windowed.code == 0, windowed.stderr
    whole = bundled.static_from_corpus([long_text, "a short text"], layers=1, long="window")
    assert int(target.read_text().split()[0]) == len(whole.words)
    assert "truncated (--long truncate)" not in windowed.stderr and "seen fewer" not in windowed.stderr
    cut = run_main("static", "--from-corpus", str(corpus), "-o", str(target), "--overwrite",
                   "--long", "truncate", "-q")  # fmt: skip
    assert cut.code == 0, cut.stderr
    assert "warning: 1 text(s) ran past the model's 256 tokens and were truncated" in cut.stderr
    assert cut.stderr.count("were truncated") == 1  # once, in the command line's words (--long truncate)
    assert int(target.read_text().split()[0]) < len(whole.words)
    rare = run_main("static", "--from-corpus", str(corpus), "-o", str(target), "--overwrite",
                    "--min-count", "2")  # fmt: skip
    assert rare.code == 0 and "seen fewer than 2 times left out" in rare.stderr


def test_an_unknown_export_suffix_is_refused_before_any_work(bundled, tmp_path: Path) -> None:
    corpus = write_txt(tmp_path, TEXTS)
    done = run_main("static", "--from-corpus", str(corpus), "-o", str(tmp_path / "o.weird"))
    assert (
        done.code != 0 and not (tmp_path / "o.weird.parts").exists() and not (tmp_path / "o.weird").exists()
    )
    line = done.stderr.strip()
    assert line.count("\n") == 0 and "the suffix .weird names no export format" in line
    assert all(name in line for name in (".vec", ".npy", ".parquet", "word2vec", "projector"))
    named = run_main("static", "--from-corpus", str(corpus), "-o", str(tmp_path / "o.weird"),
                     "--format", "word2vec")  # fmt: skip
    assert named.code == 0, named.stderr


@pytest.mark.parametrize("score", ["nan", "inf", "-inf", "NaN"])
def test_eval_words_refuses_a_gold_score_that_is_not_finite(bundled, tmp_path: Path, score: str) -> None:
    """A NaN gold score once made every correlation nan and exited 0; now the line is named."""
    pairs = tmp_path / "pairs.tsv"
    pairs.write_text(
        f"word1\tword2\tscore\nbank\tmoney\t7.5\ncat\tdog\t{score}\nbank\triver\t5\nthe\tcat\t1\n"
    )
    done = run_main("eval", "words", "-i", str(pairs), "--layers", "1", "--no-plot")
    assert done.code == 1 and done.stdout == ""
    assert done.stderr.strip() == (
        f"error: {pairs}:3: the gold score {score!r} is not a finite number; give a real score"
    )
    from bertscope.research.static_kinds import compare_kinds

    with pytest.raises(bertscope.InvalidInput, match=r"pair 1 \('cat', 'dog'\) has the gold score"):
        compare_kinds(bundled, [("bank", "money", 7.5), ("cat", "dog", float(score)), ("a", "b", 1.0)])


def test_an_empty_corpus_is_said_to_be_empty(bundled, tmp_path: Path) -> None:
    empty = tmp_path / "empty.txt"
    empty.write_text("")
    with pytest.raises(bertscope.CorpusError) as refused:
        bundled.static_from_corpus(str(empty))
    assert (
        str(refused.value)
        == f"{empty}: the corpus is empty (no text in it): give a file with one text or more"
    )
    pairs = tmp_path / "pairs.tsv"
    pairs.write_text("bank\tmoney\t7.5\ncat\tdog\t6\nbank\triver\t5\n")
    done = run_main("eval", "words", "-i", str(pairs), "--corpus", str(empty), "--no-plot")
    assert done.code == 1 and "the corpus is empty" in done.stderr and "memory" not in done.stderr


@pytest.mark.parametrize(
    "given",
    [
        ["--subword", "bogus"],
        ["--long", "truncate"],
        ["--engine", "ray"],
        ["--workers", "9"],
        ["--batch-size", "3"],
        ["--layers", "1", "--resume"],
        ["--quantize", "int8"],
        ["--backend", "openvino", "--threads", "1"],
    ],
)
def test_aggregation_options_without_from_corpus_are_refused(given: list[str]) -> None:
    """They were taken and ignored (even --subword bogus): the rows printed as if they were not there."""
    done = run_main("static", "bread", *given)
    flags = ", ".join(flag for flag in given if flag.startswith("--"))
    assert done.code == 1 and done.stdout == ""
    them = "them" if len(flags.split(", ")) > 1 else "it"
    assert done.stderr.strip() == f"error: {flags}: for --corpus only; leave {them} out here"


def test_static_names_an_id_by_its_piece_and_refuses_include_special_without_neighbours() -> None:
    done = run_main("static", "--ids", "7852")
    assert done.code == 0 and done.stdout.startswith("7852 'bread': id 7852")
    refused = run_main("static", "bread", "--include-special")
    assert refused.code == 1 and refused.stderr.strip() == (
        "error: --include-special lets neighbours be special pieces; add -k N or drop it"
    )


def test_static_on_ray_takes_the_batch_size(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    """--batch-size was dropped under --engine ray: the actors ran their default batch."""
    from bertscope.research import aggregate_ray

    asked: dict[str, object] = {}

    def record(corpus: str, **options: object) -> None:
        asked.update(options)
        raise bertscope.CorpusError("stop here")  # no Ray needed to see what it was given

    monkeypatch.setattr(aggregate_ray, "aggregate_on_ray", record)
    corpus = tmp_path / "c.txt"
    corpus.write_text("the bank of the river\n")
    out = tmp_path / "v.npy"
    done = run_main(
        "static", "--from-corpus", str(corpus), "-o", str(out), "--engine", "ray", "--batch-size", "7"
    )
    assert done.code == 1 and "stop here" in done.stderr and asked["batch_size"] == 7


def test_the_library_windows_long_texts_by_default_and_says_when_it_truncates(bundled) -> None:
    """static_from_corpus truncated by default, silently, where the CLI and the docs window."""
    import warnings

    from bertscope.research.aggregate import TruncatedTextsWarning

    corpus = ["The bank raised its rates.", "river " * 300 + "bank tail"]
    with warnings.catch_warnings():
        warnings.simplefilter("error", TruncatedTextsWarning)
        whole = bundled.static_from_corpus(corpus)
    assert whole.settings["long"] == "window" and whole.settings["n_truncated"] == 0
    assert "tail" in whole.index and int(whole.counts[whole.index["bank"]]) == 2
    said = "^1 of 2 text\\(s\\) ran past the model's 256 tokens and were truncated: their ends are not in "
    with pytest.warns(TruncatedTextsWarning, match=said + "the vectors; long='window' keeps every word$"):
        cut = bundled.static_from_corpus(corpus, long="truncate")
    assert cut.settings["long"] == "truncate" and cut.settings["n_truncated"] == 1 and "tail" not in cut.index
    assert cut.summary is not None and cut.summary.n_truncated == 1


def test_tables_reduced_from_elsewhere_count_their_truncated_texts(bundled) -> None:
    """The Ray path: word tables that carry the `truncated` column say what was cut."""
    from bertscope.io.readers import Record
    from bertscope.research.aggregate import TruncatedTextsWarning, aggregated, reduce_tables, word_level

    level, settings = word_level(bundled, aggregated(long="truncate"), "mean")
    records = [Record("1", "a short text", 1), Record("2", "river " * 300 + "tail", 2)]
    table = level.embed(records).table
    with pytest.warns(TruncatedTextsWarning, match="^1 of 2 text\\(s\\) ran past the model's 256 tokens"):
        cut = reduce_tables(bundled, level, settings, [table], min_count=1, corpus="texts")
    assert cut.settings["n_truncated"] == 1 and cut.summary is not None and cut.summary.n_truncated == 1


def test_results_count_layers_from_the_end_say_to_dict_and_keep_short_reprs(bundled: bertscope.Model) -> None:
    """-1 is the last layer computed in both static kinds; each has to_dict; reprs stay short."""
    found = bundled.static_decontextualized(["bank", "tokenization"], layers="0,-1")
    np.testing.assert_array_equal(found.layer(-1), found.layer(6))
    with pytest.raises(bertscope.InvalidInput, match=r"^layer -2: give the layer's absolute number, or -1"):
        found.layer(-2)  # layers= reads -2 from the model's last layer: not a column's place
    with pytest.raises(bertscope.InvalidInput, match=r"^layer 3 was not computed; these were: \[0, 6\]$"):
        found.layer(3)
    assert found.to_dict() == {"items": ["bank", "tokenization"], "pieces": found.pieces, "layers": [0, 6]}
    assert repr(found) == "DecontextualizedStatic(2 items x 2 layers [0, 6])"
    texts = ["the bank of the river", "a bank loan"]
    aggregated = bundled.static_from_corpus(texts, layers="6", progress=False)
    assert repr(aggregated).startswith("AggregatedStatic(") and len(repr(aggregated)) < 80
