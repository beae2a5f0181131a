"""An output (a picture, static rows, a fitted post-processing, verify --save) in a folder that exists but
takes no file (/proc here: for every user, root too) is refused before any model loads, in one line naming
the folder, not after the work with the OS's words."""

from __future__ import annotations

from pathlib import Path

import pytest

from bertscope.errors import InvalidInput
from bertscope.explain import picture_file


def test_the_library_refuses_a_folder_that_takes_no_file() -> None:
    with pytest.raises(InvalidInput, match=r"picture /proc/x\.png: no file can be created in /proc"):
        picture_file("/proc/x.png")


def test_a_writable_folder_is_left_as_it_was(tmp_path: Path) -> None:
    assert picture_file(tmp_path / "x.png") == tmp_path / "x.png"
    assert list(tmp_path.iterdir()) == []  # the write test leaves nothing behind


@pytest.mark.parametrize(
    "command",
    [["plot", "static", "king", "queen"], ["plot", "words", "bank"], ["explain", "a cat", "a dog"]],
)
def test_the_commands_refuse_it_before_the_model_loads(command: list[str], tmp_path: Path) -> None:
    from console import run_main

    corpus = tmp_path / "c.txt"
    corpus.write_text("the bank\na bank\n")
    extra = ["-i", str(corpus)] if command[:2] == ["plot", "words"] else []
    ran = run_main(*command, *extra, "-o", "/proc/x.png", "--model", str(tmp_path / "no-such-model"))
    assert ran.code == 1 and ran.stderr.count("\n") == 1, ran.stderr
    assert "no file can be created in /proc" in ran.stderr and "no-such-model" not in ran.stderr


@pytest.mark.parametrize(
    "command",
    [
        ["static", "king", "-o", "/proc/x.npy"],
        ["fit-post", "-i", "CORPUS", "-o", "/proc/p.safetensors"],
        ["verify", "--save", "/proc/f.json"],
    ],
)
def test_other_outputs_are_refused_alike(command: list[str], tmp_path: Path) -> None:
    from console import run_main

    corpus = tmp_path / "c.txt"
    corpus.write_text("the bank\na bank\n")
    ran = run_main(*[str(corpus) if part == "CORPUS" else part for part in command])
    refused = 2 if command[0] == "verify" else 1  # verify: 1 is a check that failed, 2 one it could not make
    assert ran.code == refused and ran.stderr.count("\n") == 1, ran.stderr
    assert "its file system takes no new files" in ran.stderr
