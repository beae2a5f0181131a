"""Audit 20 of static vectors: a word cut at the limit is no corpus word, exports are replaced only when
asked, the static plot counts distinct pieces, distilled vectors are of the model evaluated."""

from __future__ import annotations

import warnings
from pathlib import Path

import pytest
from tokenizers import Tokenizer, models, pre_tokenizers, processors
from typer.testing import CliRunner

import bertscope
from bertscope.cli import app
from bertscope.core._enums import LongText
from bertscope.core.pooling import whole_words
from bertscope.core.tokens import TextTokenizer
from bertscope.errors import InvalidSpec
from bertscope.research.aggregate import static_from_corpus
from console import run_main

runner = CliRunner()


def test_a_word_cut_by_truncate_is_not_aggregated(tiny_models: dict[str, bertscope.Model]) -> None:
    # 62 pieces of content: four times the 14 of "storm coast power", a fifth "storm" and the "c" of "coast"
    with warnings.catch_warnings():
        warnings.simplefilter("ignore")
        cut = static_from_corpus(
            tiny_models["bert"], ["storm coast power " * 70], long="truncate", layers=[1], progress=False
        )
    assert sorted(cut.words) == ["coast", "power", "storm"]
    assert [cut.counts[cut.index[w]] for w in ("storm", "coast", "power")] == [5, 4, 4]


def _tokenizer(pre_tokenizer: pre_tokenizers.PreTokenizer, pieces: list[str]) -> TextTokenizer:
    vocab = {piece: i for i, piece in enumerate(["[UNK]", "[CLS]", "[SEP]", *pieces])}
    backend = Tokenizer(models.WordPiece(vocab, unk_token="[UNK]"))
    backend.pre_tokenizer = pre_tokenizer
    backend.post_processor = processors.TemplateProcessing(
        single="[CLS] $A [SEP]", special_tokens=[("[CLS]", 1), ("[SEP]", 2)]
    )
    return TextTokenizer(backend, max_tokens=4)


@pytest.mark.parametrize(
    ("pre_tokenizer", "pieces", "text", "kept"),
    [
        # SentencePiece splits at spaces only: "coast," is one word, so a cut before "," cuts the word
        (pre_tokenizers.Metaspace(), ["▁cold", "▁coast", "##,", "▁storm"], "cold coast, storm", ["cold"]),
        # WordPiece's "," is a word of its own: "coast" before a cut "," is whole
        (
            pre_tokenizers.BertPreTokenizer(),
            ["cold", "coast", ",", "storm"],
            "cold coast, storm",
            ["cold", "coast"],
        ),
        # a cut inside a word's pieces ("st" of st ##orm) on either
        (pre_tokenizers.BertPreTokenizer(), ["cold", "st", "##orm"], "cold storm", ["cold"]),
    ],
)
def test_whole_words_asks_the_tokenizer_where_a_word_ends(
    pre_tokenizer: pre_tokenizers.PreTokenizer, pieces: list[str], text: str, kept: list[str]
) -> None:
    tok = _tokenizer(pre_tokenizer, pieces).encode_fitted([text], LongText.TRUNCATE)[0]
    assert tok.n_dropped > 0
    assert [text[a:b] for a, b in whole_words(tok)[1]] == kept


def test_an_untruncated_text_keeps_every_word() -> None:
    tokenizer = _tokenizer(pre_tokenizers.Metaspace(), ["▁cold", "▁coast", "##,"])
    tok = tokenizer.encode_fitted(["coast,"], LongText.TRUNCATE)[0]
    assert tok.n_dropped == 0 and not tok.last_word_cut
    assert [tok.text[a:b] for a, b in whole_words(tok)[1]] == ["coast,"]


@pytest.mark.parametrize(
    ("name", "fmt", "kept"),
    [("proj", "projector", "proj.metadata.tsv"), ("rows.npy", "npy", "rows.vocab.txt")],
)
def test_a_static_export_replaces_no_side_file_unasked(
    tmp_path: Path, tiny_dirs: dict[str, Path], name: str, fmt: str, kept: str
) -> None:
    out, args = tmp_path / name, ["static", "-m", str(tiny_dirs["bert"]), "--format", fmt]
    assert runner.invoke(app, [*args, "s", "t", "-o", str(out)]).exit_code == 0
    (tmp_path / kept).write_text("mine\n")
    for file in tmp_path.iterdir():
        if file.name != kept:
            file.unlink()
    again = run_main(*args, "s", "-o", str(out))
    assert again.code == 1
    assert again.stderr == f"error: {tmp_path / kept} exists; pass --overwrite to replace it\n"
    assert (tmp_path / kept).read_text() == "mine\n" and list(tmp_path.iterdir()) == [tmp_path / kept]
    assert runner.invoke(app, [*args, "s", "-o", str(out), "--overwrite"]).exit_code == 0


WORD_PAIRS = [("cat", "dog", 7.0), ("bank", "river", 3.0), ("cake", "bread", 6.0), ("sun", "moon", 5.0)]


def test_eval_words_refuses_vectors_distilled_from_another_tokenizer(
    tiny_models: dict[str, bertscope.Model], bundled: bertscope.Model, m2v_folder: Path
) -> None:
    from bertscope.errors import InvalidInput
    from bertscope.research.static_kinds import compare_kinds

    own = compare_kinds(tiny_models["bert"], WORD_PAIRS, layers=[1], distilled=m2v_folder)
    assert "distilled" in [r["kind"] for r in own.records]
    with pytest.raises(InvalidInput, match=r"was distilled from bert \(another tokenizer\) but the model"):
        compare_kinds(bundled, WORD_PAIRS, layers=[1], distilled=m2v_folder)


def test_eval_words_warns_of_vectors_distilled_from_a_model_of_the_same_vocabulary(
    tiny_models: dict[str, bertscope.Model], m2v_folder: Path
) -> None:
    from bertscope.research.static_kinds import compare_kinds

    # the tiny families share one vocabulary: RoBERTa's tokenizer has every piece of BERT's
    with pytest.warns(
        UserWarning, match="distilled from bert \\(the same vocabulary\\) but the model evaluated is"
    ):
        compare_kinds(tiny_models["roberta"], WORD_PAIRS, layers=[1], distilled=m2v_folder)


def test_eval_words_tells_the_distilled_source_by_its_weights_not_its_folder_name(
    tiny_dirs: dict[str, Path], m2v_folder: Path, tmp_path: Path
) -> None:
    """The check went by the recorded name alone (a local folder's last part): the same model in a folder
    of another name was warned of as another model, and another model in a folder named alike passed."""
    import shutil
    import warnings

    from bertscope.research.static_kinds import compare_kinds

    renamed = shutil.copytree(tiny_dirs["bert"], tmp_path / "renamed")
    with warnings.catch_warnings():
        warnings.simplefilter("error")  # the same weights: no warning
        own = compare_kinds(bertscope.load(renamed), WORD_PAIRS, layers=[1], distilled=m2v_folder)
    assert "distilled" in [r["kind"] for r in own.records]
    other = shutil.copytree(tiny_dirs["bert"], tmp_path / "other" / "bert")  # named as the source was
    (other / "config.json").write_text(
        (other / "config.json").read_text().replace('"layer_norm_eps": 1e-12', '"layer_norm_eps": 1e-05')
    )
    with pytest.warns(UserWarning, match=r"distilled from bert \(other weights of that name\) \(the same"):
        compare_kinds(bertscope.load(other), WORD_PAIRS, layers=[1], distilled=m2v_folder)


def test_the_docs_say_as_words_with_o_is_refused(tiny_dirs: dict[str, Path]) -> None:
    refused = run_main("static", "-m", str(tiny_dirs["bert"]), "cat", "--as-words", "-o", "w.vec")
    assert refused.code == 1 and refused.stderr.startswith("error: ")
    docs = " ".join((Path(__file__).parents[1] / "docs" / "static-vectors.md").read_text().split())
    said = f"refused (`{refused.stderr.strip()}`); a file of word vectors is `static --corpus FILE -o w.vec`"
    assert said in docs


def test_distill_warns_of_a_vocabulary_line_of_several_words(
    tmp_path: Path, tiny_dirs: dict[str, Path]
) -> None:
    vocabulary = tmp_path / "words.txt"
    vocabulary.write_text("storm\nnew york\n")
    ran = run_main(
        "distill", "-m", str(tiny_dirs["bert"]), "-o", str(tmp_path / "s"), "--dim", "8", "--vocabulary",
        str(vocabulary),
    )  # fmt: skip
    assert ran.code == 0, ran
    warned = [line for line in ran.stderr.splitlines() if "new york" in line]
    assert len(warned) == 1 and "'new york': several words to the tokenizer" in warned[0]
    assert "storm" not in ran.stderr


def test_plot_static_refuses_a_piece_named_twice(
    tmp_path: Path, tiny_models: dict[str, bertscope.Model]
) -> None:
    from bertscope.errors import InvalidInput
    from bertscope.research.plots import plot_static

    twice = run_main("plot", "static", "king", "king", "queen", "-o", str(tmp_path / "p.png"))
    assert twice.code == 1 and twice.stderr.startswith("error: 'king' is named twice: "), twice.stderr
    assert not (tmp_path / "p.png").exists()
    model = tiny_models["bert"]
    ids = [model.static_ids(["[CLS]"])[0], *model.static_ids(["[SEP]", "[CLS]"])]
    with pytest.raises(InvalidInput, match=r"^'\[CLS\]' is named twice: "):
        plot_static(model, ids, tmp_path / "q.png")


def test_plot_static_with_neither_pieces_nor_limit_asks_for_one(tmp_path: Path) -> None:
    neither = run_main("plot", "static", "-o", str(tmp_path / "p0.png"))
    assert neither.code == 1
    assert neither.stderr == "error: name word pieces (e.g. king queen bread), or give --limit N\n"
    both = run_main("plot", "static", "king", "queen", "man", "--limit", "3", "-o", str(tmp_path / "p1.png"))
    assert both.code == 1 and both.stderr == "error: name word pieces, or give --limit N (not both)\n"


def test_static_corpus_checks_its_file_before_the_model_loads(tmp_path: Path) -> None:
    # a model that is nowhere: the corpus is refused before any load is tried
    args = ["static", "-m", str(tmp_path / "no-model"), "-o", str(tmp_path / "a.vec")]
    missing = run_main(*args, "--corpus", str(tmp_path / "nofile.txt"))
    assert missing.code == 1
    assert missing.stderr == f"error: cannot read {tmp_path / 'nofile.txt'}: no such file\n"
    folder = run_main(*args, "--corpus", str(tmp_path))
    assert folder.code == 1 and folder.stderr.startswith(f"error: cannot read {tmp_path}: a folder")


def test_static_as_words_with_o_is_refused_with_or_without_words(
    tmp_path: Path, tiny_dirs: dict[str, Path]
) -> None:
    args = ["static", "-m", str(tiny_dirs["bert"]), "--as-words", "-o", str(tmp_path / "x.vec")]
    named, every = run_main(*args[:3], "cat", *args[3:]), run_main(*args)
    assert (
        every.code == 1 and every.stderr == named.stderr and named.stderr.startswith("error: --output writes")
    )
    assert not (tmp_path / "x.vec").exists()
    shown = " ".join(run_main("static", "--help").stdout.replace("│", " ").split())
    assert "refused with -o" in shown and "static --corpus FILE -o w.vec" in shown


def test_static_o_counts_one_row_in_the_singular(tmp_path: Path, tiny_dirs: dict[str, Path]) -> None:
    one = run_main("static", "-m", str(tiny_dirs["bert"]), "[CLS]", "-o", str(tmp_path / "one.vec"))
    assert one.code == 0 and one.stderr == f"wrote {tmp_path / 'one.vec'} (1 row)\n", one.stderr


def test_a_static_models_plural_feature_needs_a_transformer_in_the_plural(m2v_folder: Path) -> None:
    from bertscope.errors import InvalidSpec

    static = bertscope.load(m2v_folder)
    with pytest.raises(InvalidSpec, match="contextual vectors aggregated over a corpus need a transformer; "):
        static.static_from_corpus(["a cat"])
    with pytest.raises(InvalidSpec, match="with no layers: attention needs a transformer; "):
        static.attentions("a cat")


def test_every_plural_refusal_of_a_static_model_says_need(m2v_folder: Path) -> None:
    """ "token vectors of each layer needs a transformer": plural features read "need" wherever refused."""
    model = bertscope.load(m2v_folder)
    from bertscope.research.states import layered

    refusals = []
    for call in (
        lambda: model.engine.token_matrices,
        lambda: layered(model, "structural probes", plural=True),
        lambda: model.add_tokens(["zorblax"]),
    ):
        with pytest.raises(InvalidSpec) as refused:
            call()
        refusals.append(str(refused.value))
    assert all(" need a transformer" in said and "needs" not in said for said in refusals), refusals


def test_a_load_option_on_a_static_model_is_said_as_typed(m2v_folder: Path) -> None:
    """The command line said 'dtype=bfloat16 does not apply ...; leave --dtype out', half a keyword."""
    ran = run_main("embed", "-m", str(m2v_folder), "a cat", "--dtype", "bfloat16")
    assert ran.code == 1 and "--dtype bfloat16 does not apply, there is no forward to run; leave it out" in (
        ran.stderr
    ), ran.stderr
    with pytest.raises(InvalidSpec, match=r"dtype='bfloat16' does not apply, .*; leave it out$"):
        bertscope.load(m2v_folder, dtype="bfloat16")


def test_static_corpus_counts_one_word_in_the_singular(tmp_path: Path, tiny_dirs: dict[str, Path]) -> None:
    corpus = tmp_path / "c.txt"
    corpus.write_text("cat cat\ncat\n", encoding="utf-8")
    args = ["static", "-m", str(tiny_dirs["bert"]), "--corpus", str(corpus), "-o", str(tmp_path / "w.vec")]
    ran = run_main(*args, "--layers", "1")
    assert ran.code == 0 and ": 1 word at layer(s) 1" in ran.stderr, ran.stderr
