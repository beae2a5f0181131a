"""The command line as a new user meets it (audit 26g): refusals before the model loads, help examples
that run, Ctrl-C's line, settings printed as embed prints them, exit codes and help pointers."""

from __future__ import annotations

from pathlib import Path
from typing import Any

import pytest

from bertscope.errors import InvalidInput
from console import Ran, run_main


def _one_error(ran: Ran, code: int = 1) -> str:
    """The one error line of a refused run, checked to be one line with no traceback."""
    assert ran.code == code, ran
    assert ran.stderr.count("\n") == 1 and ran.stderr.startswith("error: "), ran.stderr
    return ran.stderr.strip()


@pytest.fixture
def no_model(monkeypatch: pytest.MonkeyPatch) -> None:
    """Loading a model fails the test: what is refused here is refused before any model loads."""
    from bertscope.cli import embed, evaluate

    def never(*args: Any, **kwargs: Any) -> None:
        raise AssertionError("the model loaded before the refusal")

    for module in (embed, evaluate):
        monkeypatch.setattr(module, "load_model", never)


def test_embed_refuses_its_output_before_the_model_loads(tmp_path: Path, no_model: None) -> None:
    """`embed -i corpus.txt -o corpus.parquet` with corpus.parquet there loaded the model (a fresh cache's
    timing, an int8 export: seconds to minutes) before it refused in one line."""
    corpus = tmp_path / "corpus.txt"
    corpus.write_text("a cat\na dog\n")
    for name in ("corpus.parquet", "corpus.npy"):
        kept = tmp_path / name
        kept.write_bytes(b"an older job")
        said = _one_error(run_main("embed", "-i", str(corpus), "-o", str(kept)))
        assert said == f"error: {kept} exists; pass --overwrite to replace it"
        assert kept.read_bytes() == b"an older job"
    missing = tmp_path / "nowhere" / "x.parquet"
    said = _one_error(run_main("embed", "-i", str(corpus), "-o", str(missing)))
    assert said == f"error: cannot write {missing}: the folder {missing.parent} does not exist"
    said = _one_error(run_main("embed", "-i", str(corpus), "-o", str(tmp_path / "x.txt")))
    assert "unknown output type .txt" in said
    said = _one_error(run_main("embed", "-i", str(corpus), "-o", "/proc/x.parquet"))
    assert said.startswith(
        "error: cannot write /proc/x.parquet: its lock file x.parquet.lock cannot be created"
    )
    (tmp_path / "afile").write_text("")
    said = _one_error(run_main("embed", "-i", str(corpus), "-o", str(tmp_path / "afile" / "o.db")))
    assert said == f"error: {tmp_path / 'afile'} is a file, not a folder: give a path inside a folder"
    said = _one_error(run_main("embed", "-i", str(corpus), "-o", str(tmp_path / "w.db"), "--level", "words"))
    assert "SQLite stores hold sentence rows only" in said
    said = _one_error(run_main("embed", "a", "-i", str(corpus), "-o", str(tmp_path / "y.parquet")))
    assert said == "error: give texts as arguments or with -i/--input, not both"
    said = _one_error(run_main("embed", "-o", str(tmp_path / "y.parquet")), code=2)
    assert said.startswith("error: no texts given") and "`bertscope embed --help`" in said
    assert sorted(p.name for p in tmp_path.iterdir()) == [
        "afile",
        "corpus.npy",
        "corpus.parquet",
        "corpus.txt",
    ]


def test_what_the_job_may_do_still_reaches_the_model(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    """The early check refuses only what the job would: a new collection in an existing .db, --overwrite
    and --resume of an existing output go on to load the model."""
    from bertscope.cli import embed

    def loaded(*args: Any, **kwargs: Any) -> None:
        raise InvalidInput("the model loads here")

    monkeypatch.setattr(embed, "load_model", loaded)
    corpus = tmp_path / "corpus.txt"
    corpus.write_text("a cat\na dog\n")
    (tmp_path / "news.db").write_bytes(b"")
    (tmp_path / "old.parquet").write_bytes(b"an older job")
    for extra in (
        ["-o", str(tmp_path / "news.db"), "--collection", "new"],
        ["-o", str(tmp_path / "old.parquet"), "--overwrite"],
        ["-o", str(tmp_path / "old.parquet"), "--resume"],
    ):
        assert _one_error(run_main("embed", "-i", str(corpus), *extra)) == "error: the model loads here", (
            extra
        )


def test_serve_says_interrupted_once_while_loading(monkeypatch: pytest.MonkeyPatch) -> None:
    """Ctrl-C while serve loads its model says `interrupted` once (uvicorn, not yet running, says nothing);
    once uvicorn runs, its own shutdown lines end it and main adds none."""
    from bertscope.cli import serve

    def interrupted(*args: Any, **kwargs: Any) -> None:
        raise KeyboardInterrupt

    monkeypatch.setattr(serve, "load_model", interrupted)
    ran = run_main("serve", "--port", "0")
    assert (ran.code, ran.stderr) == (130, "interrupted\n")


def test_eval_words_refuses_a_missing_distilled_folder_before_the_model_loads(
    tmp_path: Path, no_model: None
) -> None:
    """`eval words --distilled ./static-minilm` loaded the model (19 s) before saying the folder is not
    there."""
    missing = tmp_path / "static-minilm"
    ran = run_main("eval", "words", "--dataset", "wordsim353", "--distilled", str(missing), "--no-plot")
    assert _one_error(ran) == f"error: {missing} does not exist: give the folder bertscope distill wrote (-o)"
    missing.mkdir()
    ran = run_main("eval", "words", "--dataset", "wordsim353", "--distilled", str(missing), "--no-plot")
    assert "is not a model2vec folder (no config.json)" in _one_error(ran)


ROOT = Path(__file__).resolve().parent.parent


def _help_examples(command: str, doc: str) -> list[list[str]]:
    """The `bertscope COMMAND ...` examples of a help text, each as the words typed."""
    import re
    import shlex

    return [
        shlex.split(" ".join(found.split())) for found in re.findall(rf"`(bertscope {command} [^`]*)`", doc)
    ]


def test_probe_help_examples_read_shipped_files_that_fit_their_flags() -> None:
    """The last example of `probe --help` (`--punct xpos` on examples/trees.conllu, which has no XPOS)
    failed as printed. Each example's shipped inputs exist; each structural one runs as printed (one
    epoch: the files and flags are what is checked, not the training)."""
    from bertscope.cli.layers import probe_command

    examples = _help_examples("probe", probe_command.__doc__ or "")
    assert len(examples) >= 7, examples
    structural = 0
    for words in examples:
        args = words[1:]
        for flag in ("-i", "--test"):
            if flag in args:
                shipped = ROOT / args[args.index(flag) + 1]
                assert shipped.is_file(), f"{' '.join(words)}: {shipped} is not shipped"
                args[args.index(flag) + 1] = str(shipped)
        if "--task" not in args:
            continue
        structural += 1
        ran = run_main(*args, "--epochs", "1")
        assert ran.code == 0 and "error" not in ran.stderr, (words, ran.stderr)
    assert structural == 2


def test_ctrl_c_in_a_command_says_interrupted_and_exits_130(monkeypatch: pytest.MonkeyPatch) -> None:
    """Ctrl-C while a command ran (loading, printing) left no line at all, where SIGTERM says `terminated`.
    A KeyboardInterrupt raised by the command stands in for the signal."""
    from bertscope.cli import embed

    def interrupted(*args: Any, **kwargs: Any) -> None:
        raise KeyboardInterrupt

    monkeypatch.setattr(embed, "load_model", interrupted)
    ran = run_main("embed", "a cat")
    assert (ran.code, ran.stdout, ran.stderr) == (130, "", "interrupted\n")


PAIRS = "a cat\ta kitten\t1\na cat\ta car\t0\na dog\ta puppy\t1\na dog\ta truck\t0\n"


def test_calibrate_prints_its_settings_as_embed_does_and_names_stdin(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    """calibrate printed `settings: {'layers': [6], 'combine': 'mean', ...}` (a Python dict) and
    `calibrated on -` for pairs read from stdin."""
    import io
    import sys

    stdin = io.TextIOWrapper(io.BytesIO(PAIRS.encode()), encoding="utf-8")
    monkeypatch.setattr(sys, "stdin", stdin)
    ran = run_main("calibrate", "-i", "-", "-p", "mean", "-o", str(tmp_path / "threshold.json"))
    assert ran.code == 0, ran
    assert "calibrated on <stdin>" in ran.stdout
    assert "settings: layers 6, pooling mean, normalize off, long truncate\n" in ran.stdout


def test_a_second_model_that_is_no_folder_is_named_without_leaving_it_out(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    """`cka --model-b ./finetuned` and `compare bundled ./finetuned` said "... or leave the model out to use
    the bundled all-MiniLM-L6-v2": leaving --model-b out changes the run, and FINETUNED is required."""
    from bertscope.cli import layers

    def never(*args: Any, **kwargs: Any) -> None:
        raise AssertionError("a model loaded before the refusal")

    monkeypatch.setattr(layers, "load_model", never)
    news, missing = str(ROOT / "examples" / "news.txt"), str(tmp_path / "finetuned")
    fix = "give a folder holding config.json, the weights and the tokenizer, or a hub id"
    said = _one_error(run_main("cka", "-i", news, "--model-b", missing, "--level", "sentence"))
    assert said == f"error: no model folder at {missing} (--model-b): the path does not exist; {fix}"
    said = _one_error(run_main("compare", "bundled", missing, "-i", news))
    assert said == f"error: no model folder at {missing} (FINETUNED): the path does not exist; {fix}"
    said = _one_error(run_main("compare", news, "bundled", "-i", news))
    assert said == f"error: no model folder at {news} (BASE): it is a file, not a folder; {fix}"


def test_usage_errors_exit_2_in_one_line_naming_the_help(monkeypatch: pytest.MonkeyPatch) -> None:
    """`static` with no pieces and no -o exited 1 (after reading the rows) without the help; an option typed
    without its value said no `see ... --help`; `index` or `eval` alone printed the whole help on stdout."""
    from bertscope.cli import basics

    def never(*args: Any, **kwargs: Any) -> None:
        raise AssertionError("the model was read before the refusal")

    monkeypatch.setattr(basics, "load_model", never)
    monkeypatch.setattr(basics.FolderView, "open", never)
    said = _one_error(run_main("static"), code=2)
    assert said == (
        "error: name at least one word piece (e.g. `bertscope static bread`), or -o FILE; "
        "see `bertscope static --help`"
    )
    said = _one_error(run_main("geometry", "--input"), code=2)
    assert said == "error: Option '--input' requires an argument; see `bertscope geometry --help`"
    said = _one_error(run_main("embed", "-l"), code=2)
    assert said == "error: Option '-l' requires an argument; see `bertscope embed --help`"
    for group, commands in (("index", "build, info"), ("eval", "pairs, words, docsim")):
        ran = run_main(group)
        said = _one_error(ran, code=2)
        assert said == f"error: Missing command: give one of {commands}; see `bertscope {group} --help`"
        assert ran.stdout == ""
    alone = run_main()  # `bertscope` alone: the help is the answer, as before
    assert alone.code == 2 and "Usage: bertscope" in alone.stdout and alone.stderr == ""


def test_static_rows_written_print_one_json_object_and_nothing_with_quiet(tmp_path: Path) -> None:
    """`static cat -o one.vec --json` printed a bare list (`["one.vec"]`) where `static --corpus` and
    `distill` print an object; `-q` ("no progress and no summary") still printed `wrote one.vec (1 row)`."""
    import json

    one = tmp_path / "one.vec"
    ran = run_main("static", "cat", "-o", str(one), "--json")
    assert ran.code == 0, ran
    assert json.loads(ran.stdout) == {"output": str(one), "files": [str(one)]}
    npy = tmp_path / "sub.npy"
    ran = run_main("static", "cat", "dog", "-o", str(npy), "--json")
    assert json.loads(ran.stdout) == {
        "output": str(npy),
        "files": [str(npy), str(tmp_path / "sub.vocab.txt")],
    }
    ran = run_main("static", "cat", "-o", str(one), "-q", "--overwrite")
    assert (ran.code, ran.stdout, ran.stderr) == (0, "", "")
    assert one.read_text(encoding="utf-8").startswith("1 ")


def test_a_log_says_the_last_step_once(
    monkeypatch: pytest.MonkeyPatch, capfd: pytest.CaptureFixture[str]
) -> None:
    """`geometry --layers -1` in a log wrote `TwoNN: 1/1 (100%), 14 s elapsed` and then `TwoNN: 1/1 (100%),
    done in 14 s`: the step that ends the work is said by the last line alone. (The clock is stepped by
    hand, as tests/test_progress.py steps it.)"""
    from bertscope.core import progress

    readings = iter([0.0, 14.0, 14.0, 0.0, 12.0, 25.0, 25.0])
    monkeypatch.setattr(progress, "_clock", lambda: next(readings))
    one = progress.LogLines("TwoNN", 1)
    one.advance()
    one.close()
    assert capfd.readouterr().err.splitlines() == ["TwoNN: 1/1 (100%), done in 14 s"]
    two = progress.LogLines("TwoNN", 2)
    two.advance()
    two.advance()
    two.close()
    assert capfd.readouterr().err.splitlines() == [
        "TwoNN: 1/2 (50%), 12 s elapsed, about 12 s left",
        "TwoNN: 2/2 (100%), done in 25 s",
    ]


def test_info_text_has_the_default_prompt_and_says_what_the_speed_ratio_is(
    monkeypatch: pytest.MonkeyPatch,
) -> None:
    """`info` lacked the default_prompt_name `info --json` has, and printed `exact chosen=onnxruntime
    float32, vs_float32=5.603` without saying 5.603 is a speed against torch float32."""
    from bertscope.backends import recorded

    measured = {
        "chosen": "onnxruntime float32",
        "vs_float32": 5.603,
        "max_abs": 5.36e-06,
        "measured": "m.json",
    }
    read = recorded.folder_info
    monkeypatch.setattr(
        recorded,
        "folder_info",
        lambda view: {**(read(view) or recorded.unchosen_info(view) or {}), "exact": measured},
    )
    rows = {
        line.split()[0]: " ".join(line.split()[1:])
        for line in run_main("info").stdout.splitlines()
        if line.strip()
    }
    assert rows["default_prompt_name"] == "-"
    assert rows["exact"].startswith("chosen=onnxruntime float32, vs_float32=5.60x torch float32, max_abs=")
    assert run_main("info", "--json").stdout.count('"vs_float32": 5.603') == 1  # the JSON keeps the number
