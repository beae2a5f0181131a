"""Pictures are the same bytes every time they are drawn, so `make docs` leaves docs/img/ as it was.

The docs' t-SNE picture (docs/img/static.png) differed between machines: its layout followed the last bits
of BLAS (AVX-512 and AVX2 kernels sum in other orders), which reached t-SNE's start in float32.
OpenBLAS's OPENBLAS_CORETYPE picks its kernel on one machine, so the test below compares two kernels.
"""

from __future__ import annotations

import contextlib
import io
import json
import os
import platform
import subprocess
import sys
from pathlib import Path

import pytest

import bertscope
from bertscope.research.layer_plots import plot_probe
from bertscope.research.plots import plot_static
from bertscope.research.probe_score import ProbeResult
from bertscope.static import first_words


def _chunks(png: bytes) -> list[bytes]:
    """The chunk types of a PNG file, in order."""
    assert png[:8] == b"\x89PNG\r\n\x1a\n"
    found, at = [], 8
    while at < len(png):
        length = int.from_bytes(png[at : at + 4], "big")
        found.append(png[at + 4 : at + 8])
        at += 12 + length
    return found


def test_the_tsne_picture_drawn_twice_is_the_same_bytes(bundled: bertscope.Model, tmp_path: Path) -> None:
    ids = first_words(bundled, 40)
    first = plot_static(bundled, ids, tmp_path / "a.png", method="tsne").read_bytes()
    second = plot_static(bundled, ids, tmp_path / "b.png", method="tsne").read_bytes()
    assert first == second
    # no time in the file: no tIME chunk, and no text chunk but matplotlib's Software line
    chunks = _chunks(first)
    assert b"tIME" not in chunks and chunks.count(b"tEXt") <= 1
    assert b"Creation Time" not in first and b"Software" in first


def test_the_probe_picture_drawn_twice_is_the_same_bytes(tmp_path: Path) -> None:
    rows = [
        {
            "layer": layer,
            "probe": "linear",
            "capacity": None,
            "accuracy": accuracy,
            "accuracy_ci": [accuracy - 0.03, accuracy + 0.02],
            "control_accuracy": 0.6,
            "selectivity": accuracy - 0.6,
        }
        for layer, accuracy in [("static", 0.8), (0, 0.82), (1, 0.9), (2, 0.93)]
    ]
    result = ProbeResult(
        level="word", n_items=100, n_groups=20, folds=5, labels={"A": 60, "B": 40}, majority=0.6, rows=rows
    )
    first = plot_probe(result, tmp_path / "a.png", title="probe").read_bytes()
    assert plot_probe(result, tmp_path / "b.png", title="probe").read_bytes() == first


_LAYOUT = """
import hashlib, json
import numpy as np
from threadpoolctl import threadpool_info
from bertscope.research.plots import Projection, _project
points = np.random.default_rng(0).normal(size=(120, 48)).astype(np.float32)
kernels = [i.get("architecture") for i in threadpool_info() if i["internal_api"] == "openblas"]
layout = _project(points, Projection.TSNE, 0)
print(json.dumps({"kernels": kernels, "layout": hashlib.sha256(layout.tobytes()).hexdigest()}))
"""


def _flags() -> set[str]:
    try:
        text = Path("/proc/cpuinfo").read_text()
    except OSError:
        return set()
    return {flag for line in text.splitlines() if line.startswith("flags") for flag in line.split()[2:]}


@pytest.mark.skipif(
    platform.machine() != "x86_64" or not {"avx2", "fma"} <= _flags(),
    reason="compares OpenBLAS's x86-64 kernels (Haswell needs AVX2 and FMA)",
)
def test_the_tsne_layout_is_the_same_on_every_blas_kernel() -> None:
    # One layout drawn here, on the kernel OpenBLAS chose for this CPU (SkylakeX on AVX-512, Haswell on
    # AVX2), the other in a process made to take another kernel: a process of its own for each cost ~2 s,
    # most of it importing scikit-learn and matplotlib, which this process has done already.
    printed = io.StringIO()
    with contextlib.redirect_stdout(printed):
        exec(_LAYOUT, {})  # the same script, here
    here = json.loads(printed.getvalue())
    if not here["kernels"]:
        pytest.skip("numpy here does not run on OpenBLAS")
    kernel = "Haswell" if here["kernels"][0].lower() == "sandybridge" else "Sandybridge"
    env = {**os.environ, "OPENBLAS_CORETYPE": kernel, "OMP_NUM_THREADS": "2"}
    ran = subprocess.run([sys.executable, "-c", _LAYOUT], env=env, capture_output=True, text=True)
    assert ran.returncode == 0, ran.stderr[-2000:]
    answer = json.loads(ran.stdout.strip().splitlines()[-1])
    if not answer["kernels"] or any(k.lower() != kernel.lower() for k in answer["kernels"]):
        pytest.skip(f"OpenBLAS did not take OPENBLAS_CORETYPE={kernel} here ({answer['kernels']})")
    assert {k.lower() for k in here["kernels"]} != {kernel.lower()}  # two kernels compared
    assert here["layout"] == answer["layout"], (here["kernels"], kernel)
