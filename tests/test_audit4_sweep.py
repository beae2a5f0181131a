"""Audit 4 (a bad-input sweep of the command line and the library): each finding with the test that failed
before its fix. The command line runs in-process (tests/console.run_main, its one-line errors included);
every refusal here comes before a model loads, and the library cases share the session's bundled model."""

from __future__ import annotations

from pathlib import Path

import numpy as np
import pytest

import bertscope
from bertscope.errors import InvalidInput, InvalidSpec
from console import Ran, run_main

BANK = [
    "We sat on the bank of the river.",
    "The bank charged interest on the loan.",
    "She paid the bank back last year.",
    "The river bank was muddy after rain.",
    "He walked along the bank at dawn.",
    "The bank opened a new branch downtown.",
]


def one_error(ran: Ran, code: int = 1) -> str:
    """The one `error:` line a refused command printed (no traceback, no usage box), with its exit code."""
    lines = ran.stderr.strip().splitlines()
    assert ran.code == code and len(lines) == 1 and lines[0].startswith("error: "), ran
    assert "Traceback" not in ran.stderr and "╭" not in ran.stderr, ran
    return lines[0]


@pytest.fixture(scope="module")
def files(tmp_path_factory: pytest.TempPathFactory, bundled: bertscope.Model) -> dict[str, Path]:
    """A corpus, an empty file, a folder, a file where a folder is needed, a token store and a sentence
    store (both of the bundled model, written once for the module)."""
    root = tmp_path_factory.mktemp("audit4")
    corpus = root / "corpus.txt"
    corpus.write_text("\n".join(BANK) + "\n")
    (root / "empty.txt").write_text("")
    (root / "adir").mkdir()
    (root / "afile").write_text("x\n")
    tokens, sentences = root / "tok.parquet", root / "store.parquet"
    bertscope.embed_corpus(corpus, tokens, model=bundled, level="tokens")
    bertscope.embed_corpus(corpus, sentences, model=bundled)
    return {
        "corpus": corpus, "empty": root / "empty.txt", "adir": root / "adir", "afile": root / "afile",
        "tokens": tokens, "store": sentences,
    }  # fmt: skip


# D1: senses --seed out of numpy's range ------------------------------------------------------------------


@pytest.mark.parametrize("seed", ["-1", "4294967296"])
def test_senses_seed_out_of_range_is_one_line(files: dict[str, Path], seed: str) -> None:
    line = one_error(run_main("senses", "bank", "--store", str(files["tokens"]), "--seed", seed))
    assert f"--seed {seed}: a seed is a whole number from 0 to 4294967295" in line, line


def test_word_senses_checks_its_seed_and_examples(files: dict[str, Path]) -> None:
    with pytest.raises(InvalidInput, match="seed=-1: a seed is a whole number"):
        bertscope.word_senses(files["tokens"], "bank", seed=-1)
    with pytest.raises(InvalidInput, match="examples=-1"):
        bertscope.word_senses(files["tokens"], "bank", examples=-1)


# D2: contextuality --baseline-pairs bounded --------------------------------------------------------------


def test_baseline_pairs_past_the_most_is_refused_naming_it(files: dict[str, Path]) -> None:
    from bertscope.research.contextuality import MAX_BASELINE_PAIRS

    args = ("contextuality", "-i", str(files["corpus"]), "-w", "bank", "--no-plot")
    line = one_error(run_main(*args, "--baseline-pairs", str(10**12)))
    assert f"--baseline-pairs must be a whole number of at least 1 and at most {MAX_BASELINE_PAIRS}" in line
    assert "memory" in line, line


def test_library_baseline_pairs_bounded(bundled: bertscope.Model) -> None:
    from bertscope.research.contextuality import MAX_BASELINE_PAIRS, contextuality

    with pytest.raises(InvalidSpec, match=f"baseline_pairs must be .* at most {MAX_BASELINE_PAIRS}"):
        contextuality(bundled, BANK, words=["bank"], baseline_pairs=MAX_BASELINE_PAIRS + 1)


def test_baseline_in_blocks_is_the_baseline_at_once(
    bundled: bertscope.Model, monkeypatch: pytest.MonkeyPatch
) -> None:
    """The baseline summed a block of pairs at a time gives the figures of one block."""
    import bertscope.research.contextuality as module

    whole = module.contextuality(bundled, BANK, words=["bank"], baseline_pairs=50)
    monkeypatch.setattr(module, "_PAIR_BLOCK", 7)
    blocks = module.contextuality(bundled, BANK, words=["bank"], baseline_pairs=50)
    a = [r["baseline"] for r in whole.records]
    b = [r["baseline"] for r in blocks.records]
    np.testing.assert_allclose(a, b, rtol=0, atol=1e-12)


def test_memory_error_is_one_line(files: dict[str, Path], monkeypatch: pytest.MonkeyPatch) -> None:
    import bertscope.research.senses as senses

    def exhausted(*args: object, **kwargs: object) -> None:
        raise MemoryError

    monkeypatch.setattr(senses, "word_senses", exhausted)
    line = one_error(run_main("senses", "bank", "--store", str(files["tokens"])))
    assert "out of memory" in line and "ask for less" in line, line


# D3 / R4: an empty path --------------------------------------------------------------------------------


@pytest.mark.parametrize(
    "args",
    [
        ("embed", "-i", "{corpus}", "-o", ""),
        ("static", "bread", "-o", ""),
        ("collections", ""),
        ("similar", "a", "--store", ""),
        ("similar", "a", "--store", "{store}", "--threshold-file", ""),
        ("similarity", "a", "b", "--reference", ""),
    ],
)
def test_an_empty_path_is_refused_as_one(files: dict[str, Path], args: tuple[str, ...]) -> None:
    typed = [a.format(**{k: str(v) for k, v in files.items()}) for a in args]
    line = one_error(run_main(*typed), code=2)
    assert "'' is an empty path: give a file name" in line, line
    assert "cannot read ." not in line and "(none)" not in line, line


# D4: iter_embed reads a string as one text --------------------------------------------------------------


def test_iter_embed_reads_a_string_as_one_text(bundled: bertscope.Model) -> None:
    chunks = list(bundled.iter_embed("hello"))
    assert [c.vectors.shape for c in chunks] == [(1, 384)]
    np.testing.assert_allclose(chunks[0].vectors, bundled.embed("hello").vectors, atol=1e-6)


@pytest.mark.parametrize("bad", [123, b"hello", {"a", "b"}, ("a", "b")])
def test_iter_embed_refuses_what_embed_refuses(bundled: bertscope.Model, bad: object) -> None:
    with pytest.raises(InvalidInput) as embed_said:
        bundled.embed(bad)  # type: ignore[arg-type]
    with pytest.raises(InvalidInput) as iter_said:
        list(bundled.iter_embed(bad))  # type: ignore[arg-type]
    assert str(iter_said.value) == str(embed_said.value)


# D5: probe --punct and --rank given but falsy ----------------------------------------------------------


CONLLU = "1\tThe\tthe\tDET\tDT\t_\t2\tdet\t_\t_\n2\tcat\tcat\tNOUN\tNN\t_\t0\troot\t_\t_\n\n"


@pytest.fixture(scope="module")
def conllu(tmp_path_factory: pytest.TempPathFactory) -> Path:
    path = tmp_path_factory.mktemp("audit4c") / "train.conllu"
    path.write_text(CONLLU * 4)
    return path


def test_probe_punct_on_a_label_probe_names_the_option(conllu: Path) -> None:
    line = one_error(run_main("probe", "-i", str(conllu), "--layers", "0", "--punct", "xpos"))
    assert line.startswith("error: --punct: for structural probes"), line


def test_probe_empty_punct_is_refused_not_upos(conllu: Path) -> None:
    for task in ("label", "depth"):
        ran = run_main("probe", "-i", str(conllu), "--layers", "0", "--task", task, "--punct", "")
        assert "--punct" in one_error(ran, code=2) and "empty" in ran.stderr, ran


# R1: an empty value is refused, never read as the default -----------------------------------------------


@pytest.mark.parametrize("option", ["--model", "--device", "--dtype", "--backend", "--quantize"])
def test_similar_empty_load_option_is_refused(files: dict[str, Path], option: str) -> None:
    line = one_error(run_main("similar", "a", "--store", str(files["store"]), option, ""), code=2)
    assert f"'{option}'" in line and "'' is an empty value" in line, line


@pytest.mark.parametrize(
    "args",
    [
        ("embed", "hello", "--device", ""),
        ("embed", "hello", "--collection", ""),
        ("index", "info", "{store}", "--column", ""),
        ("contextuality", "-i", "{corpus}", "-w", "", "--no-plot"),
        ("probe", "-i", "{corpus}", "--label-field", ""),
    ],
)
def test_empty_values_are_refused_everywhere(files: dict[str, Path], args: tuple[str, ...]) -> None:
    typed = [a.format(**{k: str(v) for k, v in files.items()}) for a in args]
    assert "'' is an empty value" in one_error(run_main(*typed), code=2)


def test_an_empty_prompt_still_asks_for_none(files: dict[str, Path]) -> None:
    """--prompt '' means something: no prompt, even where the model has a default one."""
    ran = run_main("similar", "a river", "--store", str(files["store"]), "--prompt", "", "-k", "1")
    assert ran.code == 0 and "error" not in ran.stderr, ran


def test_library_empty_device_is_refused() -> None:
    with pytest.raises(InvalidSpec, match="the device '' is empty"):
        bertscope.load(device="")


# R3: an empty input file is named, as embed -i names it -------------------------------------------------


@pytest.mark.parametrize(
    "args",
    [
        ("contextuality", "-i", "{empty}", "-w", "bank", "--no-plot"),
        ("fit-post", "-i", "{empty}", "-o", "{adir}/w.safetensors"),
        ("geometry", "-i", "{empty}"),
        ("cka", "-i", "{empty}"),
        ("plot", "words", "bank", "-i", "{empty}", "-o", "{adir}/x.png"),
        ("embed", "-i", "{empty}"),
    ],
)
def test_an_empty_input_file_is_named(files: dict[str, Path], args: tuple[str, ...]) -> None:
    typed = [a.format(**{k: str(v) for k, v in files.items()}) for a in args]
    line = one_error(run_main(*typed))
    assert f"{files['empty']}: the corpus is empty (no text in it)" in line, line


# R4: a folder where a file is asked, a file where a folder is needed ------------------------------------


def test_a_folder_is_called_a_folder(files: dict[str, Path]) -> None:
    cases = ((("collections", str(files["adir"])), 1), (("verify", "-i", str(files["adir"])), 2))
    for args, code in cases:  # verify's exit code for what it cannot check is 2 (docs/errors.md)
        line = one_error(run_main(*args), code=code)
        assert f"{files['adir']}: it is a folder: give the file inside it" in line, line
        assert "no such file" not in line


def test_a_file_in_the_way_of_an_output_is_named(files: dict[str, Path]) -> None:
    line = one_error(run_main("embed", "-i", str(files["corpus"]), "-o", f"{files['afile']}/x.parquet"))
    assert line == f"error: {files['afile']} is a file, not a folder: give a path inside a folder", line


# R2: an option that acts only with another is refused alone ---------------------------------------------


@pytest.mark.parametrize(
    ("args", "says"),
    [
        (("static", "bread", "--format", "zzz"), "--format names the format of -o FILE"),
        (("static", "bread", "-k", "3", "--format", "npy"), "add -o FILE or drop it"),
        (("eval", "pairs", "-i", "{corpus}", "--post-dim", "7"), "--post-dim is the dimensions --post"),
        (("eval", "words", "-i", "{corpus}", "--min-count", "5"), "add --corpus FILE or drop it"),
        (("similar", "--id", "1", "--store", "{store}", "--nprobe", "4"), "has no index (every row is read)"),
    ],
)
def test_an_option_alone_is_refused(files: dict[str, Path], args: tuple[str, ...], says: str) -> None:
    typed = [a.format(**{k: str(v) for k, v in files.items()}) for a in args]
    line = one_error(run_main(*typed))
    assert says in line, line


# R7: the option as typed, never the library's keyword ----------------------------------------------------


def test_stride_refusals_name_the_flag_and_the_reason(files: dict[str, Path]) -> None:
    for stride in ("5", str(10**12)):  # with --long truncate a stride is refused for that, whatever its size
        line = one_error(run_main("embed", "hello", "--stride", stride))
        assert "not --long truncate" in line and "leave --stride out" in line, line
    line = one_error(run_main("embed", "hello", "--long", "window", "--stride", str(10**12)))
    assert f"--stride {10**12}: a window's stride must be between 1 and" in line, line
    # the fix named as the library and the service name it (audit 18g: the CLI's line had none)
    assert line.endswith("tokens; leave --stride out for half a window"), line


# R8: one name for one concept: -k/--top-k counts results, -n/--n-clusters senses -------------------------


def test_top_k_in_every_command_that_counts_results(files: dict[str, Path]) -> None:
    import typer

    from bertscope.cli import app

    command = typer.main.get_command(app)
    for path in (["explain"], ["geometry"], ["compare"], ["contextuality"], ["static"], ["similar"]):
        sub = command.commands[path[0]]  # type: ignore[attr-defined]
        shown = {o for p in sub.params if not getattr(p, "hidden", False) for o in p.opts}
        assert {"-k", "--top-k"} <= shown and "--top" not in shown, (path, shown)
    args = ("contextuality", "-i", str(files["corpus"]), "-w", "bank")
    under = one_error(run_main(*args, "-k", "0"), code=2)  # click's range error, as every -k
    assert "'--top-k' / '-k': Input should be greater than or equal to 1" in under
    assert "--top must be" in one_error(run_main(*args, "--top", "0"))  # the older spelling, as typed


@pytest.mark.parametrize("typed", ["10", "3"])
def test_both_spellings_typed_are_refused_even_at_the_default(typed: str) -> None:
    """`-k 10 --top 2` (10: explain's default) kept the 2 and dropped the 10 typed; `-k 3 --top 2` was
    refused. Both are refused before the model loads."""
    line = one_error(run_main("explain", "a cat", "a dog", "-k", typed, "--top", "2"))
    assert line == "error: --top is the old spelling of --top-k; give --top-k only", line


def test_senses_n_clusters(files: dict[str, Path]) -> None:
    args = ("senses", "bank", "--store", str(files["tokens"]), "--json")
    new, old = run_main(*args, "-n", "2"), run_main(*args, "-k", "2")
    assert new.code == 0 and new.stdout == old.stdout and '"n_clusters": 2' in new.stdout, (new, old)
    line = one_error(run_main(*args, "--n-clusters", "100"))
    assert line.startswith("error: --n-clusters 100: give a number of senses between 1 and"), line
    assert bertscope.word_senses(files["tokens"], "bank", n_clusters=2).n_clusters == 2
    with pytest.raises(InvalidInput, match="old name of n_clusters=; give n_clusters= only"):
        bertscope.word_senses(files["tokens"], "bank", n_clusters=2, k=2)


# R9: probe --n-jobs bounded by the CPUs, as --threads is -------------------------------------------------


def test_n_jobs_past_the_cpus_is_refused(conllu: Path, bundled: bertscope.Model) -> None:
    from bertscope.core.cpu import usable_cpus
    from bertscope.research.probe import probe

    many = usable_cpus() + 1
    line = one_error(run_main("probe", "-i", str(conllu), "--layers", "0", "--n-jobs", str(many)), code=2)
    assert f"{many}: this machine has {usable_cpus()} CPU" in line, line
    with pytest.raises(InvalidInput, match=f"n_jobs={many}: this machine has"):
        probe(bundled, conllu, layers="0", n_jobs=many)


# R10: faiss's training line in bertscope's words ----------------------------------------------------------


def test_a_tiny_index_is_said_once_in_bertscopes_words(
    files: dict[str, Path], tmp_path: Path, capfd: pytest.CaptureFixture[str]
) -> None:
    import shutil

    store = tmp_path / "small.parquet"
    shutil.copy(files["store"], store)
    ran = run_main("index", "build", str(store))
    lines = ran.stderr.strip().splitlines()
    assert ran.code == 0 and len(lines) == 2 and "indexed" in lines[1], ran
    assert lines[0].startswith("warning: 6 rows train 1 index cell(s)"), ran
    assert "searched as fast exactly" in lines[0], ran
    assert "WARNING clustering" not in capfd.readouterr().err  # faiss writes to the process's stderr


# R5 / R6: the library's own one-line errors where Python's were -----------------------------------------


def test_library_refusals_are_bertscope_errors(bundled: bertscope.Model, files: dict[str, Path]) -> None:
    cases = [
        (lambda: bundled.embed("a", post=123), "post=123 is no post-processing"),
        (lambda: bundled.similarity_pairwise("a", "b"), "similarity_pairwise takes vectors"),
        (lambda: bundled.save(files["afile"]), "is a file; give a new folder"),
        (lambda: bundled.static_word(5), "5 is not a word (int)"),
        (lambda: list(bundled.iter_embed(["a"], total=-1)), "total=-1"),
        (lambda: bundled.embed("a", progress="x"), "progress='x'"),
    ]
    for call, says in cases:
        with pytest.raises(InvalidInput) as said:
            call()
        assert says in str(said.value), (says, str(said.value))


def test_search_tells_python_view_not_the_flag(bundled: bertscope.Model, files: dict[str, Path]) -> None:
    from bertscope.errors import CorpusError

    with pytest.raises(CorpusError, match="no views; leave view= out"):
        bertscope.search("a", files["store"], model=bundled, view="zzz")


# R7: messages in the flags typed --------------------------------------------------------------------------


@pytest.mark.parametrize(
    ("args", "says"),
    [
        (("embed", "hello", "--fast-min-cosine", "nan"), "'--fast-min-cosine': nan is not a number"),
        (("verify", "--store", "{store}", "--min-cosine", "nan"), "'--min-cosine': nan is not a number"),
        (("verify", "--rows", "5"), "--rows: with --store FILE only; add --store or leave it out"),
        (  # the corpus's fields, given without it, were read nowhere
            ("verify", "--store", "{store}", "--text-field", "body", "--id-field", "key"),
            "--text-field, --id-field: the fields of --corpus FILE; add --corpus or leave them out",
        ),
        (
            ("vocab", "add", "breadmaker", "-o", "{adir}/m", "--init-from", "zzz"),
            "--init-from 'zzz' is malformed",
        ),
        (
            ("vocab", "add", "breadmaker", "-o", "{adir}/m", "--init-from", "x=virus"),
            "no words for breadmaker",
        ),
    ],
)
def test_messages_name_the_flags(files: dict[str, Path], args: tuple[str, ...], says: str) -> None:
    typed = [a.format(**{k: str(v) for k, v in files.items()}) for a in args]
    ran = run_main(*typed)
    line = one_error(ran, code=ran.code)
    assert ran.code in (1, 2) and says in line, line
    assert "{'" not in line and "(corpus=)" not in line, line


def test_corpus_keyword_reads_as_the_flag() -> None:
    from bertscope.cli.wording import as_flags

    said = as_flags("the store was made from another corpus; pass that one with --corpus (corpus=)")
    assert said.endswith("pass that one with --corpus"), said
