"""Audit 25f of the light engine: a plain embed imports no pyarrow; cached graphs the runtime refuses, or
another model's IR under this model's name, are made again; BERTSCOPE_CACHE naming a file is refused in
the one line every command says."""

from __future__ import annotations

import subprocess
import sys

# The console entry point in a fresh interpreter, printing whether the command imported pyarrow.
PYARROW_AFTER = """
import sys
from bertscope.cli import main
sys.argv[0] = "bertscope"
try:
    main()
except SystemExit as stop:
    assert not stop.code, stop.code
print("pyarrow" in sys.modules, file=sys.stderr)
"""


def test_a_plain_embed_imports_no_pyarrow() -> None:
    """The corpus levels' pyarrow (40 MB of peak memory) is imported only where rows are built."""
    args = ["embed", "hello world", "--backend", "onnxruntime", "--json"]
    run = subprocess.run(
        [sys.executable, "-c", PYARROW_AFTER, *args], capture_output=True, text=True, timeout=300
    )
    assert run.returncode == 0, run.stderr
    assert run.stderr.strip().splitlines()[-1] == "False", run.stderr


def test_the_level_table_reads_the_chunks_row_on_demand() -> None:
    from bertscope import Level
    from bertscope.io.chunk_level import ChunkLevel
    from bertscope.io.level_table import LEVELS, level_of

    assert list(LEVELS) == [Level.SENTENCE, Level.TOKENS, Level.WORDS, Level.CHUNKS]
    assert LEVELS[Level.CHUNKS] is ChunkLevel and level_of("chunks") is ChunkLevel and len(LEVELS) == 4
