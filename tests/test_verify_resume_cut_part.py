"""A job resumed over a saved part that was cut short (a full disk, a crash while the part was copied):
one line naming the part and the fix, as for a Parquet part, never a traceback."""

from __future__ import annotations

from pathlib import Path

import pytest

import bertscope
from console import run_main
from test_resume_checks import BATCH, TEXTS, _stopped, _txt


@pytest.mark.parametrize("suffix", [".npy", ".parquet"])
def test_resume_over_a_part_cut_short_is_one_line(
    suffix: str, tmp_path: Path, bundled: bertscope.Model
) -> None:
    source, target = _txt(tmp_path / "in.txt", TEXTS), tmp_path / f"out{suffix}"
    _stopped(source, target, bundled)
    part = target.with_name(target.name + ".parts") / f"part-000001{suffix}"
    part.write_bytes(part.read_bytes()[: part.stat().st_size // 2])
    ran = run_main(
        "embed", "-i", str(source), "-o", str(target), "--batch-size", str(BATCH), "-q", "--resume"
    )
    assert ran.code == 1 and "Traceback" not in ran.stderr, ran
    line = ran.stderr.strip()
    assert len(line.splitlines()) == 1 and line.startswith(f"error: {part} is not a "), line
    assert line.endswith("the file is corrupt; start the job again with --overwrite"), line
    with pytest.raises(
        bertscope.CorpusError, match="the file is corrupt; start the job again with overwrite=True"
    ):
        bertscope.embed_corpus(source, target, model=bundled, batch_size=BATCH, resume=True)
