"""The command line audit's findings 7, 9, 10, 11, 12 and 24: --threads above the CPUs is refused before
any work; library messages read in flags (--as-words, --mask-special, --debiased, a settings dict); a bad
BERTSCOPE_MODEL names the variable; a command line the parser cannot read is one `error:` line (exit 2,
docs/errors.md), never suggesting a hidden option; --backend's help says what auto does; the notice of a
slow PyTorch load is logging (INFO), said on the command line unless -q."""

from __future__ import annotations

import logging
import subprocess
import sys
from pathlib import Path
from typing import Any

import pytest
import typer

import bertscope
from bertscope.cli.wording import as_flags
from bertscope.core._enums import Backend
from bertscope.core.cpu import usable_cpus as machine_cpus
from bertscope.errors import InvalidInput, ModelLoadError
from console import run_main


def _one_error_line(stderr: str) -> str:
    lines = stderr.strip().splitlines()
    assert len(lines) == 1 and lines[0].startswith("error: "), stderr
    assert "╭" not in stderr and "Usage:" not in stderr and "Traceback" not in stderr, stderr
    return lines[0]


# 7: --threads ---------------------------------------------------------------------------------------------


def test_threads_above_the_cpus_is_refused_naming_the_count() -> None:
    cpus = machine_cpus()
    ran = run_main("embed", "a cat", "--threads", str(cpus + 1), "--json")
    line = _one_error_line(ran.stderr)
    assert ran.code == 2 and ran.stdout == "", ran
    assert f"{cpus + 1}: this machine has {cpus} CPU" in line and f"give at most {cpus}" in line, line
    # no measurement was started: the refusal is the only thing said
    assert "timing" not in ran.stderr


def test_threads_with_the_ray_engine_are_each_actors_cpus(
    monkeypatch: pytest.MonkeyPatch, tmp_path: Path
) -> None:
    import bertscope.distributed as distributed
    from bertscope.io.job import JobSummary

    asked: list[dict[str, Any]] = []

    def recorded(source: Any, output: Any, **kwargs: Any) -> JobSummary:
        asked.append(kwargs)
        return JobSummary(output=Path(output))

    monkeypatch.setattr(distributed, "run_ray_job", recorded)
    many = str(machine_cpus() + 1)  # --threads before --engine: read all the same
    ran = run_main("embed", "a text", "-o", str(tmp_path / "out"), "--threads", many, "--engine", "ray", "-q")
    assert ran.code == 0, ran
    assert asked[0]["cpus_per_worker"] == int(many)


def test_threads_up_to_the_cpus_passes_the_check() -> None:
    from bertscope.cli.app import _threads_here, app

    command = typer.main.get_command(app)
    with command.make_context("bertscope", ["info"]) as ctx:
        assert _threads_here(ctx, machine_cpus()) == machine_cpus()  # type: ignore[arg-type]
        assert _threads_here(ctx, None) is None  # type: ignore[arg-type]


# 11: usage errors ----------------------------------------------------------------------------------------


@pytest.mark.parametrize(
    ("args", "says"),
    [
        (("embed", "a cat", "--threads", "0"), "Invalid value for '--threads'"),
        (("tokens",), "no texts given"),
        (("no-such-command",), "No such command 'no-such-command'"),
        (("attention", "a cat", "--layers", "5"), "No such option: --layers (did you mean --layer?)"),
        (("embed", "a cat", "--pooling"), "'--pooling' requires an argument"),
    ],
    ids=lambda value: " ".join(value) if isinstance(value, tuple) else "",
)
def test_a_usage_error_is_one_line_with_exit_code_2(args: tuple[str, ...], says: str) -> None:
    ran = run_main(*args)
    line = _one_error_line(ran.stderr)
    assert ran.code == 2, ran
    assert says in line, line


def test_a_usage_error_names_the_commands_help() -> None:
    line = _one_error_line(run_main("embed", "a cat", "--threads", "0").stderr)
    assert line.endswith("see `bertscope embed --help`"), line


def test_no_hidden_option_is_suggested() -> None:
    # verify still reads --lines (the old spelling of --limit), but --help does not show it
    ran = run_main("verify", "--layers", "9")
    line = _one_error_line(ran.stderr)
    assert ran.code == 2 and "No such option: --layers" in line, line
    assert "--lines" not in line, line


def test_a_negative_number_read_as_an_option_says_how_to_give_it() -> None:
    ran = run_main("static", "--ids", "-1")
    line = _one_error_line(ran.stderr)
    assert ran.code == 2 and "-- -1" in line, line
    # the way the line gives reaches the command's own check of the id
    given = run_main("static", "--ids", "--", "-1")
    assert given.code == 1 and "token id -1 is out of range" in _one_error_line(given.stderr), given


def test_a_bertscope_refusal_is_exit_code_1() -> None:
    ran = run_main("embed", "a cat", "--dtype", "float64")
    assert ran.code == 1 and "unknown dtype" in _one_error_line(ran.stderr), ran


# 10: BERTSCOPE_MODEL ---------------------------------------------------------------------------------------


def test_a_missing_folder_in_bertscope_model_names_the_variable(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    missing = tmp_path / "nope"
    monkeypatch.setenv("BERTSCOPE_MODEL", str(missing))
    ran = run_main("info")
    line = _one_error_line(ran.stderr)
    assert ran.code == 1, ran
    assert f"{missing} (from BERTSCOPE_MODEL)" in line and "unset it" in line, line
    assert "leave the model out" not in line, line  # the user left it out already
    with pytest.raises(ModelLoadError, match=r"\(from BERTSCOPE_MODEL\).*fix BERTSCOPE_MODEL"):
        bertscope.load()


def test_a_file_in_bertscope_model_names_the_variable(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    a_file = tmp_path / "model.txt"
    a_file.write_text("not a model")
    monkeypatch.setenv("BERTSCOPE_MODEL", str(a_file))
    line = _one_error_line(run_main("tokens", "a cat").stderr)
    assert "(from BERTSCOPE_MODEL): it is a file" in line and "unset it" in line, line


def test_a_hub_id_in_bertscope_model_that_cannot_load_names_the_variable(
    monkeypatch: pytest.MonkeyPatch,
) -> None:
    monkeypatch.setenv("HF_HUB_OFFLINE", "1")
    monkeypatch.setenv("BERTSCOPE_MODEL", "no-such-org/no-such-model-xyz")
    with pytest.raises(ModelLoadError, match=r"\(from BERTSCOPE_MODEL\).*unset BERTSCOPE_MODEL"):
        bertscope.load()


def test_a_typed_model_keeps_its_own_wording(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.delenv("BERTSCOPE_MODEL", raising=False)
    line = _one_error_line(run_main("info", "-m", str(tmp_path / "nope")).stderr)
    assert "BERTSCOPE_MODEL" not in line and "leave the model out" in line, line


# 12: --backend auto ----------------------------------------------------------------------------------------


def test_backend_help_says_what_auto_does() -> None:
    shown = run_main("embed", "--help")
    flat = " ".join(shown.stdout.replace("│", " ").split())
    assert "fastest runtime measured exact on this machine" in flat, flat
    assert "auto (torch; onnxruntime for int8)" not in flat
    assert Backend.__doc__ is not None and "fastest measured exact" in Backend.__doc__


# 9: library messages in flags ----------------------------------------------------------------------------


@pytest.mark.parametrize(
    ("message", "reads"),
    [
        ("'breadmaker' is not a single word piece; use static_word('breadmaker') for the mean of its pieces",
         "'breadmaker' is not a single word piece; use --as-words for the mean of its pieces"),
        ('use static_word("it\'s") for it', "use --as-words for it"),
        ("tokens rows are not pooled, so mask_special would be ignored: leave mask_special out",
         "tokens rows are not pooled, so --mask-special would be ignored: leave --mask-special out"),
        ("fewer than 2x); --debiased (debiased=True) corrects it", "fewer than 2x); --debiased corrects it"),
        ("debiased=True corrects it", "--debiased corrects it"),
        ("this whitening was fitted on {'layers': [6]}, not {'layers': (2,)}; embed with those options",
         "this whitening was fitted on --layers 6, not --layers 2; embed with those options"),
        ("fitted on {'pooling': 'mean', 'normalize': True}, not {'pooling': 'cls', 'normalize': False}",
         "fitted on --pooling mean --normalize, not --pooling cls --no-normalize"),
        # left as written: a view's own option list, a dict with a key no flag gives, a value None
        ("view 'a=-1/x': unknown option 'x'; allowed: concat, mean, sum, mask_special, normalize",
         "view 'a=-1/x': unknown option 'x'; allowed: concat, mean, sum, mask_special, normalize"),
        ("got {'weights': 3}", "got {'weights': 3}"),
        ("got {'post': None}", "got {'post': None}"),
    ],
)  # fmt: skip
def test_library_words_read_as_flags(message: str, reads: str) -> None:
    assert as_flags(message) == reads


def test_static_names_as_words_for_a_word_of_several_pieces() -> None:
    ran = run_main("static", "breadmaker")
    line = _one_error_line(ran.stderr)
    assert ran.code == 1 and "use --as-words" in line and "static_word" not in line, line


def test_tokens_with_mask_special_names_the_flag() -> None:
    line = _one_error_line(run_main("embed", "a cat", "--tokens", "--mask-special").stderr)
    assert "leave --mask-special out" in line and "mask_special" not in line, line


# 24: the notice of a slow PyTorch load ---------------------------------------------------------------------


def _python(code: str) -> subprocess.CompletedProcess[str]:
    return subprocess.run([sys.executable, "-c", code], capture_output=True, text=True, timeout=120)


def test_a_python_caller_is_not_told_unasked() -> None:
    said = "from bertscope.core.loading import say_torch_loaded; say_torch_loaded(5.0)"
    quiet = _python(said)
    assert quiet.returncode == 0 and quiet.stderr == "", quiet.stderr
    asked = _python(f"import logging; logging.basicConfig(level=logging.INFO); {said}")
    assert "loaded PyTorch and the model in 5.0 s" in asked.stderr, asked.stderr


def test_the_notice_is_an_info_record_only_past_the_threshold() -> None:
    from bertscope.core.loading import say_torch_loaded

    records: list[logging.LogRecord] = []

    class Kept(logging.Handler):
        def emit(self, record: logging.LogRecord) -> None:
            records.append(record)

    handler = Kept(logging.INFO)
    logger = logging.getLogger("bertscope.core.loading")
    level = logger.level
    logger.addHandler(handler)
    # its own level: run alone, no earlier test (a command's) has set the package's logger to INFO
    logger.setLevel(logging.INFO)
    try:
        say_torch_loaded(0.2)
        assert records == []
        say_torch_loaded(5.0)
    finally:
        logger.removeHandler(handler)
        logger.setLevel(level)
    assert [r.levelno for r in records] == [logging.INFO]


@pytest.fixture
def slow_torch_load(monkeypatch: pytest.MonkeyPatch) -> None:
    """embed's model load stands in for one that loaded PyTorch in 5 s, then stops the command."""
    from bertscope.cli import embed
    from bertscope.core.loading import say_torch_loaded

    def load(*args: Any, **kwargs: Any) -> Any:
        say_torch_loaded(5.0)
        raise InvalidInput("stopped here")

    monkeypatch.setattr(embed, "load_model", load)


@pytest.mark.usefixtures("slow_torch_load")
def test_the_command_line_says_the_notice_unless_quiet() -> None:
    said = run_main("embed", "a cat")
    assert "note: loaded PyTorch and the model in 5.0 s" in said.stderr, said.stderr
    assert said.stderr.index("note: loaded PyTorch") < said.stderr.index("error: stopped here")
    quiet = run_main("embed", "a cat", "-q")
    assert "loaded PyTorch" not in quiet.stderr and "error: stopped here" in quiet.stderr, quiet.stderr
