"""The command line on files (audit 21e): a closed stdin, UTF-16 and latin-1 files, empty corpora, stdout
given as an output, and --ids given a value that is no token id."""

from __future__ import annotations

import io
import sys
from collections.abc import Iterator
from pathlib import Path

import pytest

from bertscope.errors import CorpusError
from bertscope.io.readers import read_corpus
from console import run_main


def _one_error_line(stderr: str) -> str:
    """The single `error: ...` line a refusal prints (no traceback), its wrapping undone."""
    assert "Traceback" not in stderr, stderr
    said = " ".join(stderr.split())
    assert said.startswith("error: ") and said.count("error: ") == 1, stderr
    return said


def test_a_closed_stdin_is_named_not_a_traceback(monkeypatch: pytest.MonkeyPatch, tmp_path: Path) -> None:
    """A closed stdin (`<&-`) leaves sys.stdin None: reading `-` raised TypeError from `with None`."""
    monkeypatch.setattr(sys, "stdin", None)
    with pytest.raises(CorpusError, match=r"^<stdin> is closed: nothing can be read from it"):
        list(read_corpus("-"))
    for args in (
        ["embed", "-i", "-", "-o", str(tmp_path / "x.parquet")],
        ["geometry", "-i", "-"],
        ["probe", "-i", "-"],  # the probes' and eval's own reader (research/probe_data.py)
        ["eval", "pairs", "-i", "-"],
    ):
        ran = run_main(*args)
        assert ran.code == 1, ran
        assert _one_error_line(ran.stderr).startswith("error: <stdin> is closed: "), ran
    assert not (tmp_path / "x.parquet").exists()


def test_stdin_is_named_alike_by_every_reader(monkeypatch: pytest.MonkeyPatch) -> None:
    """eval pairs named a bad line of stdin `-:2` where the corpus readers (and docs/corpus.md) say
    `<stdin>:2`."""
    monkeypatch.setattr(sys, "stdin", io.TextIOWrapper(io.BytesIO(b"a\tb\t1\nc\xe9\td\t0\n")))
    ran = run_main("eval", "pairs", "-i", "-")
    assert ran.code == 1, ran
    assert _one_error_line(ran.stderr).startswith("error: <stdin>:2: not UTF-8 text"), ran


@pytest.mark.parametrize(
    ("name", "encoding", "said"), [("u16.txt", "utf-16", "UTF-16"), ("u32.csv", "utf-32", "UTF-32")]
)
def test_a_utf16_or_utf32_file_is_named_with_its_conversion(
    tmp_path: Path, name: str, encoding: str, said: str
) -> None:
    """It said `u16.txt:1: not UTF-8 text (invalid start byte); convert the file to UTF-8`."""
    corpus = tmp_path / name
    corpus.write_bytes("text\na cat\na dog\n".encode(encoding))  # Python writes the byte-order mark
    fix = f"iconv -f {encoding} -t utf-8 {corpus} > {corpus.with_name(corpus.stem + '.utf8' + corpus.suffix)}"
    expected = (
        f"{corpus}:1: {said} text (it begins with a {said} byte-order mark), not UTF-8; convert it: {fix}"
    )
    for skip_bad in (False, True):  # the whole file is refused: no line of it is text to keep
        with pytest.raises(CorpusError) as refused:
            list(read_corpus(corpus, skip_bad=skip_bad))
        assert str(refused.value) == expected
    ran = run_main("embed", "-i", str(corpus), "-o", str(tmp_path / "x.parquet"))
    assert ran.code == 1 and _one_error_line(ran.stderr) == f"error: {expected}", ran


def test_latin1_bytes_are_named_with_an_iconv_example(tmp_path: Path) -> None:
    corpus = tmp_path / "latin.txt"
    corpus.write_bytes("fine\ncaf\xe9\n".encode("latin-1"))
    with pytest.raises(CorpusError) as refused:
        list(read_corpus(corpus))
    assert str(refused.value) == (
        f"{corpus}:2: not UTF-8 text (invalid continuation byte); convert the file to UTF-8 "
        "(e.g. iconv -f latin1 -t utf-8)"
    )


@pytest.mark.parametrize(
    ("lines", "said"),
    [
        ("", "the corpus is empty (no text in it): give a file with one text or more"),
        ("\n  \n\n", "every line is empty (no text in it): give a file with one text or more"),
    ],
)
def test_an_empty_file_and_one_of_blank_lines_are_told_apart(tmp_path: Path, lines: str, said: str) -> None:
    """geometry (and every -i FILE) said `empty.txt holds no text: every line is empty` of a 0-byte file,
    where embed said `empty.txt: the corpus is empty (no text in it)`: one wording, each case its own."""
    corpus = tmp_path / "in.txt"
    corpus.write_text(lines, encoding="utf-8")
    for args in (["geometry", "-i", str(corpus)], ["embed", "-i", str(corpus)]):
        ran = run_main(*args)
        assert ran.code == 1 and _one_error_line(ran.stderr) == f"error: {corpus}: {said}", ran


def test_static_corpus_names_its_output_not_the_checkpoint_folder(tmp_path: Path) -> None:
    """It ended `nothing was written to agg.vec.parts`, the checkpoint folder, not the file asked for."""
    corpus = tmp_path / "empty.txt"
    corpus.write_text("", encoding="utf-8")
    output = tmp_path / "agg.vec"
    ran = run_main("static", "--corpus", str(corpus), "-o", str(output))
    said = _one_error_line(ran.stderr)
    assert ran.code == 1 and said.endswith(f"; nothing was written to {output}"), ran
    assert ".parts" not in said and sorted(p.name for p in tmp_path.iterdir()) == ["empty.txt"]


def test_stdout_is_no_output_of_a_corpus_job_or_static_vectors(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    """`static --corpus ... -o - --format word2vec` wrote a file named `-` (and `-.counts.tsv`); `embed -o -`
    advised a file named `-.parquet`."""
    from bertscope.io.formats import open_sink
    from bertscope.research.aggregate import check_export

    monkeypatch.chdir(tmp_path)
    corpus = tmp_path / "in.txt"
    corpus.write_text("a cat\na dog\n", encoding="utf-8")
    static = "-: stdout is not an output: static vectors are written to a file; give a file name such as "
    static += "vectors.vec"
    job = "-: stdout is not an output: a corpus job writes its vectors to a file; give a file name with a "
    job += "known type"
    with pytest.raises(CorpusError) as refused:
        check_export("-", [1], format="word2vec", resume=False, overwrite=True)
    assert str(refused.value) == static
    with pytest.raises(CorpusError, match=f"^{job} such as vectors.parquet "):
        open_sink("-", settings={})
    ran = run_main("static", "--corpus", str(corpus), "-o", "-", "--format", "word2vec")
    assert ran.code == 1 and _one_error_line(ran.stderr) == f"error: {static}", ran
    ran = run_main("static", "-o", "-", "--format", "word2vec")  # the rows alone, no corpus
    assert ran.code == 1 and _one_error_line(ran.stderr) == f"error: {static}", ran
    ran = run_main("embed", "-i", str(corpus), "-o", "-")
    assert ran.code == 1 and _one_error_line(ran.stderr).startswith(f"error: {job}"), ran
    assert "-.parquet" not in ran.stderr
    assert sorted(p.name for p in tmp_path.iterdir()) == ["in.txt"]


def test_an_ids_item_that_is_no_whole_number_is_a_usage_error(monkeypatch: pytest.MonkeyPatch) -> None:
    """`static --ids abc` exited 1 (after loading the model) where `--batch-size abc` exits 2."""
    import bertscope.cli.basics as basics

    def no_load(*args: object, **kwargs: object) -> None:
        raise AssertionError("the model was loaded before the refusal")

    monkeypatch.setattr(basics, "load_model", no_load)
    monkeypatch.setattr(basics.FolderView, "open", no_load)  # the rows read from the folder, without torch
    for args in (["static", "--ids", "abc"], ["static", "--ids", "7852", "1.5", "-k", "3"]):
        ran = run_main(*args)
        bad = args[3] if len(args) > 3 else args[2]
        said = f"error: --ids takes token ids (whole numbers), not {bad!r}; see `bertscope static --help`"
        assert ran.code == 2 and _one_error_line(ran.stderr) == said, ran


class _ClosedPipe(io.StringIO):
    """A stdout whose reader went away (`| head -1`): every write raises what the OS says then."""

    def write(self, text: str) -> int:
        raise BrokenPipeError(32, "Broken pipe")


@pytest.mark.parametrize("as_json", [False, True])
def test_a_closed_pipe_ends_quietly_with_sigpipes_status(
    monkeypatch: pytest.MonkeyPatch, as_json: bool
) -> None:
    """A table exited 1 (rich's) and --json 1 (click's) or 0 by chance: both said failure or nothing of the
    reader's choice. Now 141 (128 + SIGPIPE, as coreutils' tools end), nothing on stderr."""
    from bertscope.cli import main

    monkeypatch.setattr(sys, "argv", ["bertscope", "tokens", "a b c", *(["--json"] if as_json else [])])
    monkeypatch.setattr(sys, "stdout", _ClosedPipe())
    stderr = io.StringIO()
    monkeypatch.setattr(sys, "stderr", stderr)
    with pytest.raises(SystemExit) as ended:
        main()
    assert ended.value.code == 141
    assert stderr.getvalue() == ""


def test_sigterm_in_a_corpus_job_says_what_is_saved(tmp_path: Path, tiny_dirs: dict[str, Path]) -> None:
    """SIGTERM (the command line raises Terminated) stopped a job mid-batch saying only 'terminated', though
    its batches were saved and --resume goes on from them: it says so, as a Ctrl-C's stop does."""
    import bertscope
    from bertscope.errors import JobInterrupted, Terminated

    def texts() -> Iterator[str]:
        for number in range(6):
            if number == 4:
                raise Terminated
            yield f"text number {number}"

    out = tmp_path / "t.parquet"
    with pytest.raises(JobInterrupted) as stopped:
        bertscope.embed_corpus(texts(), out, model=str(tiny_dirs["bert"]), batch_size=2, progress=False)
    assert str(stopped.value) == (
        "interrupted after 4 texts; everything up to there is saved. Run it again with resume=True "
        "(--resume) to continue"
    )
    done = bertscope.embed_corpus(
        [f"text number {n}" for n in range(6)], out, model=str(tiny_dirs["bert"]), batch_size=2, resume=True,
        progress=False,
    )  # fmt: skip
    assert done.resumed_from == 4 and done.embedded == 2


def test_a_closed_pipe_leaves_the_next_command_its_output(monkeypatch: pytest.MonkeyPatch) -> None:
    """rich's on_broken_pipe made the process's output console quiet for good: every table after one closed
    pipe in the same process (tests, a notebook) printed nothing."""
    from bertscope.cli import main

    monkeypatch.setattr(sys, "argv", ["bertscope", "tokens", "a b c"])
    with monkeypatch.context() as closed:
        closed.setattr(sys, "stdout", _ClosedPipe())
        with pytest.raises(SystemExit):
            main()
    ran = run_main("tokens", "a b c")
    assert ran.code == 0 and "[CLS]" in ran.stdout
