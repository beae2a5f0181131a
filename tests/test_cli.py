"""The command line, run as a user runs it: outputs, --json, exit codes and one-line errors."""

from __future__ import annotations

import functools
import io
import json
import subprocess
import sys
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import numpy as np
import pytest
import typer
import typer.testing
from typer.testing import CliRunner

import bertscope
from bertscope.cli import app
from console import run_main


@functools.cache
def _built() -> typer.core.TyperGroup:
    """The app's click command tree, built once: typer builds it anew on every invoke (~0.3 s)."""
    return typer.main.get_command(app)  # type: ignore[return-value]


class _Runner(CliRunner):
    """typer's CliRunner on the command tree built once (the same tree a console run builds)."""

    def invoke(self, app: typer.Typer, args: Any = None, **extra: Any) -> Any:  # type: ignore[override]
        """Invoke as typer's runner does, without building the tree again."""
        with pytest.MonkeyPatch.context() as patch:
            patch.setattr(typer.testing, "_get_command", lambda _: _built())
            return super().invoke(app, args, **extra)


runner = _Runner()


def run_ok(*args: str) -> str:
    """Invoke the app in-process and return stdout, failing the test on a non-zero exit."""
    result = runner.invoke(app, list(args))
    assert result.exit_code == 0, (result.output, result.exception)
    return result.stdout


def run_cli(*args: str) -> subprocess.CompletedProcess[str]:
    """Run `python -m bertscope` in a subprocess, as a user would."""
    return subprocess.run(
        [sys.executable, "-m", "bertscope", *args], capture_output=True, text=True, timeout=300
    )


def test_info_json_describes_the_bundled_model() -> None:
    info = json.loads(run_ok("info", "--json"))
    assert info["family"] == "bert" and info["n_layers"] == 6 and info["hidden_size"] == 384
    assert info["vocab_size"] == 30522 and info["pooling"] == "mean" and info["normalize"] is True


def test_tokens_table_and_json() -> None:
    table = run_ok("tokens", "I like eating bread")
    assert "7852" in table and "[CLS]" in table
    records = json.loads(run_ok("tokens", "I like eating bread", "--json"))["items"][0]["tokens"]
    bread = [r for r in records if r["token"] == "bread"][0]
    assert bread["id"] == 7852 and (bread["start"], bread["end"]) == (14, 19)


def test_tokens_pad_shows_the_batch_the_model_receives() -> None:
    batch = json.loads(run_ok("tokens", "a", "b c d", "--pad", "--json"))
    assert batch["attention_mask"] == [[1, 1, 1, 0, 0], [1, 1, 1, 1, 1]]
    assert batch["input_ids"][0][-2:] == [batch["pad_id"]] * 2


def test_static_neighbors_and_ids(bundled) -> None:
    records = json.loads(run_ok("static", "bread", "cake", "-k", "3", "--json"))["items"]
    assert [r["id"] for r in records] == [7852, 9850]
    assert len(records[0]["neighbors"]) == 3
    np.testing.assert_array_equal(
        np.array(records[0]["vector"], dtype=np.float32), bundled.static("bread")[0]
    )
    by_id = json.loads(run_ok("static", "--ids", "7852", "--json"))["items"]
    assert by_id[0]["token"] == "bread"


def test_static_rows_are_read_from_the_folder_without_torch_and_equal_a_load(tmp_path: Path) -> None:
    args = ["static", "bread", "cake", "-k", "3", "--json"]
    light = subprocess.run(
        [sys.executable, "-c", LIGHT_MAIN, *args], capture_output=True, text=True, timeout=300
    )
    assert light.returncode == 0, light.stderr
    # --device cpu is not the default load option, so this one loads the model through torch
    assert json.loads(light.stdout) == json.loads(run_ok(*args, "--device", "cpu"))
    words = ["static", "bread", "unbelievable", "--word", "--json"]
    assert run_ok(*words) == run_ok(*words, "--device", "cpu")
    exports = [tmp_path / "light.npy", tmp_path / "loaded.npy"]
    run_ok("static", "bread", "##ing", "-o", str(exports[0]))
    run_ok("static", "bread", "##ing", "-o", str(exports[1]), "--device", "cpu")
    np.testing.assert_array_equal(np.load(exports[0]), np.load(exports[1]))


# The console entry point in a fresh interpreter, failing if the command imported torch.
LIGHT_MAIN = """
import sys
from bertscope.cli import main
sys.argv[0] = "bertscope"
try:
    main()
except SystemExit as stop:
    assert not stop.code, stop.code
assert "torch" not in sys.modules, "the command imported torch"
"""


def test_static_export_word2vec(tmp_path: Path) -> None:
    target = tmp_path / "vocab.vec"
    run_ok("static", "-o", str(target), "--format", "word2vec")
    with target.open() as handle:
        assert handle.readline().split() == ["30522", "384"]


def test_anatomy_prints_the_proof_line() -> None:
    text = run_ok("anatomy", "I am Sinan")
    assert "proof: LayerNorm(word + token_type + position)" in text and "holds" in text
    data = json.loads(run_ok("anatomy", "I am Sinan", "--json"))
    assert data["max_abs_error"] < 1e-5 and data["tokens"][0] == "[CLS]"


def test_embed_json_and_npy(tmp_path: Path, bundled) -> None:
    texts = ["I like eating bread", "The banana bread was horrible"]
    data = json.loads(run_ok("embed", *texts, "--layers", "-2", "--pooling", "mean", "--json"))
    expected = bundled.embed(texts, layers="-2", pooling="mean").vectors
    np.testing.assert_allclose(np.array(data["vectors"]), expected, atol=1e-6)
    source = tmp_path / "texts.txt"
    source.write_text("\n".join(texts) + "\n")
    target = tmp_path / "vectors.npy"
    run_ok("embed", "-i", str(source), "-o", str(target))
    np.testing.assert_allclose(np.load(target), bundled.embed(texts).vectors, atol=1e-6)


def test_embed_threads_option(bundled) -> None:
    import torch

    before = torch.get_num_threads()
    try:
        # --backend torch: the thread count is the question, not the runtimes a fresh cache would measure
        # at one thread (22 s of a clean clone's suite)
        data = json.loads(run_ok("embed", "a cat", "--threads", "1", "--backend", "torch", "--json"))
        assert torch.get_num_threads() == 1
        np.testing.assert_allclose(np.array(data["vectors"]), bundled.embed(["a cat"]).vectors, atol=1e-6)
    finally:
        torch.set_num_threads(before)


def test_embed_tokens_and_words() -> None:
    tokens = json.loads(run_ok("embed", "tokenization rocks", "--tokens", "--layers", "0", "--json"))[
        "items"
    ][0]
    assert tokens["tokens"] == ["[CLS]", "token", "##ization", "rocks", "[SEP]"]
    words = json.loads(run_ok("embed", "tokenization rocks", "--words", "--json"))["items"][0]
    assert words["words"] == ["tokenization", "rocks"] and len(words["vectors"]) == 2


def test_embed_level_names_a_row_of_the_level_table(tmp_path: Path) -> None:
    """`--level words -o` is `--words -o`; a level beside another level's flag, or an unknown one: refused."""
    by_flag, by_name = tmp_path / "flag.parquet", tmp_path / "name.parquet"
    run_ok("embed", "tokenization rocks", "a cat", "-o", str(by_flag), "--words", "--layers", "0", "-q")
    run_ok(
        "embed", "tokenization rocks", "a cat", "-o", str(by_name), "--level", "words", "--layers", "0", "-q"
    )
    import pyarrow.parquet as pq

    assert pq.read_table(by_flag).equals(pq.read_table(by_name))
    both = runner.invoke(app, ["embed", "a cat", "--level", "tokens", "--words"])
    assert both.exit_code != 0 and "--chunks and --level" in str(both.exception)
    unknown = runner.invoke(app, ["embed", "a cat", "--level", "pages"])
    assert unknown.exit_code != 0 and "sentence, tokens, words, chunks" in str(unknown.exception)


def test_similarity_matrix() -> None:
    data = json.loads(run_ok("similarity", "a cat", "a dog", "a car", "--json"))
    matrix = np.array(data["scores"])
    assert matrix.shape == (3, 3) and np.allclose(np.diag(matrix), 1.0, atol=1e-5)
    assert matrix[0, 1] > matrix[0, 2]


def test_embed_from_stdin_warns_once_on_truncation(monkeypatch: pytest.MonkeyPatch) -> None:
    long_text = "word " * 400
    monkeypatch.setattr(sys, "stdin", io.StringIO(f"short text\n{long_text}\n"))
    result = run_main("embed", "-i", "-", "--json")
    assert result.code == 0, result.stderr
    assert json.loads(result.stdout)["n_dropped"][1] == 400 + 2 - 256
    assert result.stderr.count("truncated") == 1


@pytest.mark.parametrize(
    ("args", "needle"),
    [
        (["info", "--model", "/no/such/folder"], "does not exist"),
        (["embed", "a text", "--layers", "9"], "layer 9 does not exist"),
        (["embed", "a text", "--pooling", "median"], "choose one of"),
        (["anatomy", ""], "empty"),
        (["static", "zzzqqq"], "use --as-words"),
        (["static", "--ids", "999999"], "out of range"),
        (["embed", "-i", "/no/such/file.txt"], "no such file"),
    ],
)
def test_bad_input_is_one_line_without_traceback(args: list[str], needle: str) -> None:
    code, _, stderr = run_main(*args)
    assert code == 1
    assert stderr.startswith("error: ") and needle in stderr
    assert "Traceback" not in stderr and stderr.count("\n") == 1


def test_debug_shows_the_traceback() -> None:
    result = run_cli("--debug", "info", "--model", "/no/such/folder")
    assert result.returncode != 0 and "Traceback" in result.stderr


def test_env_var_sets_the_default_model(tiny_dirs) -> None:
    result = runner.invoke(app, ["info", "--json"], env={"BERTSCOPE_MODEL": str(tiny_dirs["roberta"])})
    assert result.exit_code == 0 and json.loads(result.stdout)["family"] == "roberta"


HEAVY = ("torch", "transformers", "sklearn", "matplotlib", "fastapi")
LIGHT_COMMANDS = [("--help",), ("tokens", "x"), ("info",), ("tokens", "--pad", "a", "b")]
# Runs each of LIGHT_COMMANDS in turn in one fresh interpreter, and prints what each wrote on stdout and
# the heavy modules imported by the time it finished: a command's list is empty only where it and every
# command before it imported none of them. `vocab add` runs last, in the same interpreter (one start
# less): what it imports is its own, as the commands before it imported none.
_EACH_IMPORTED = """
import contextlib, io, json, sys
from bertscope.cli import main
done = []
for args in {commands!r}:
    sys.argv = ["bertscope", *args]
    out = io.StringIO()
    with contextlib.redirect_stdout(out):
        try:
            main()
        except SystemExit as exc:
            assert not exc.code, (args, exc.code)
    done.append({{"stdout": out.getvalue(), "heavy": [m for m in {heavy!r} if m in sys.modules]}})
print(json.dumps(done))
"""


@pytest.fixture(scope="module")
def light_commands(
    bundled: bertscope.Model, tiny_dirs: dict[str, Path], tmp_path_factory: pytest.TempPathFactory
) -> list[dict[str, Any]]:
    """LIGHT_COMMANDS, then a `vocab add` on the tiny BERT, run in one fresh interpreter (after the bundled
    model's load recorded its runtime)."""
    extended = tmp_path_factory.mktemp("vocab") / "extended"
    vocab_add = ("vocab", "add", "covid19", "-m", str(tiny_dirs["bert"]), "-o", str(extended), "--json")
    code = _EACH_IMPORTED.format(commands=[*LIGHT_COMMANDS, vocab_add], heavy=HEAVY)
    done = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True, timeout=300)
    assert done.returncode == 0, done.stderr
    ran: list[dict[str, Any]] = json.loads(done.stdout)
    return ran


@pytest.mark.parametrize("args", LIGHT_COMMANDS)
def test_help_tokens_and_info_import_no_torch(
    args: tuple[str, ...], light_commands: list[dict[str, Any]]
) -> None:
    """`--help`, `tokens` and `info` answer from the tokenizer and config alone: no torch, no transformers.

    `info` also says the runtime a load runs, which a load of the same folder recorded (the fixture's).
    """
    ran = light_commands[LIGHT_COMMANDS.index(args)]
    assert ran["heavy"] == []
    assert ran["stdout"].strip()


def test_vocab_add_still_loads_the_module_it_needs(light_commands: list[dict[str, Any]]) -> None:
    """The check above can fail: a command that changes the PyTorch module (vocab add resizes its embedding
    matrix and saves it) does import torch (embed, anatomy and attention do not where an export serves:
    tests/test_light.py, tests/test_attention_light.py)."""
    ran = light_commands[len(LIGHT_COMMANDS)]
    assert json.loads(ran["stdout"])["added"] == ["covid19"]
    assert "torch" in ran["heavy"]


def test_a_byte_order_mark_is_read_alike_with_and_without_output(tmp_path: Path) -> None:
    """`embed -i f.txt` and `embed -i f.txt -o f.parquet` read the same first text: no BOM, no CR."""
    import pyarrow.parquet as pq

    source = tmp_path / "bom.txt"
    source.write_bytes("\ufeffbread and butter\r\n\r\n  \nsecond line\n".encode())
    printed = json.loads(run_ok("embed", "-i", str(source), "--tokens", "--json"))
    run_ok("embed", "-i", str(source), "-o", str(tmp_path / "f.parquet"), "--quiet")
    stored = pq.read_table(tmp_path / "f.parquet").column("text").to_pylist()
    assert [r["text"] for r in printed["items"]] == stored == ["bread and butter", "second line"]


def _commands(command: object, path: tuple[str, ...] = ()) -> Iterator[tuple[tuple[str, ...], object]]:
    yield path, command
    for name, sub in getattr(command, "commands", {}).items():
        yield from _commands(sub, (*path, name))


def test_every_help_has_an_example_and_keeps_its_brackets() -> None:
    """`bertscope --help`, each group's and each command's: an example, and no text eaten as markup."""
    import re

    for path, command in _commands(_built()):
        result = runner.invoke(app, [*path, "--help"], env={"COLUMNS": "250"})
        assert result.exit_code == 0, (path, result.output)
        assert "Example" in result.output, f"bertscope {' '.join(path)} --help shows no example"
        shown = re.sub(r"\s+", " ", result.output.replace("│", " "))
        raw = [command.help or ""] + [getattr(p, "help", None) or "" for p in command.params]  # type: ignore[attr-defined]
        for text in raw:
            for piece in re.findall(r"\S*[<\[*_\\]\S*", text):
                kept = piece.replace("`", "").strip(".,;:()")
                assert kept in shown, f"bertscope {' '.join(path)} --help lost {piece!r}"
    mask = runner.invoke(app, ["embed", "--help"], env={"COLUMNS": "250"}).output
    assert "(<s>, </s>)" in mask


def test_texts_and_pieces_with_brackets_are_printed_as_written() -> None:
    """Rich read '[unused0]' and '[bold]' as markup: the piece printed as '' and titles lost words."""
    assert "'[unused0]': id 1" in run_ok("static", "[unused0]")
    assert "'[unused0] hi [bold]'" in run_ok("tokens", "[unused0] hi [bold]")
    result = run_main("static", "[foo]")
    assert result.code == 1 and "'[foo]' is not a single word piece" in result.stderr


def test_eval_words_draws_only_the_picture_it_is_asked_for(
    bundled, tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    """`eval words` wrote words.png into the working folder unannounced, the name `plot words` writes; it
    now draws with -o only, and says where."""
    from bertscope.cli import research

    monkeypatch.setattr(research, "load_model", lambda *a, **k: bundled)
    monkeypatch.chdir(tmp_path)
    pairs = tmp_path / "words.tsv"
    pairs.write_text("cat\tdog\t8.0\ncar\tbread\t1.0\nbank\tmoney\t6.5\nriver\tstream\t9.0\n")
    result = runner.invoke(app, ["eval", "words", "-i", str(pairs)])
    assert result.exit_code == 0, result.output
    assert "wrote" not in result.output and not list(tmp_path.glob("*.png"))
    result = runner.invoke(app, ["eval", "words", "-i", str(pairs), "-o", "eval.png"])
    assert result.exit_code == 0, result.output
    assert "wrote eval.png" in result.output
    assert (tmp_path / "eval.png").stat().st_size > 1000 and not (tmp_path / "words.png").exists()
