"""`bertscope info` on a machine where no load has chosen the model's runtime: light, and says so."""

from __future__ import annotations

import json
import subprocess
import sys
from pathlib import Path

HEAVY = ("torch", "transformers", "onnxruntime", "openvino")
_RUN = """
import contextlib, io, json, sys
from bertscope.cli import main
sys.argv = ["bertscope", "info", "--json"]
out = io.StringIO()
with contextlib.redirect_stdout(out):
    try:
        main()
    except SystemExit as exc:
        assert not exc.code, exc.code
print(json.dumps({"info": json.loads(out.getvalue()), "heavy": [m for m in %r if m in sys.modules]}))
"""


def test_the_first_info_on_a_machine_imports_no_torch_and_says_the_runtime_is_not_chosen(
    tmp_path: Path,
) -> None:
    """With an empty cache, `info` timed every exact runtime first (torch, an ONNX export: 8.9 s and 1 GB,
    audit 18i), where the docs promise the tokenizer and config alone; it says the runtime is unchosen."""
    env = {"BERTSCOPE_CACHE": str(tmp_path / "cache"), "HF_HUB_OFFLINE": "1", "PATH": "/usr/bin:/bin"}
    done = subprocess.run(
        [sys.executable, "-c", _RUN % (HEAVY,)], capture_output=True, text=True, timeout=300, env=env
    )
    assert done.returncode == 0, done.stderr
    ran = json.loads(done.stdout)
    assert ran["heavy"] == [] and "timing" not in done.stderr, done.stderr
    info = ran["info"]
    assert info["backend"] is None and info["exact"]["chosen"] is None
    assert info["exact"]["why"].startswith(
        "not chosen on this machine yet: the first load that runs the model"
    )
    assert info["family"] == "bert" and info["n_layers"] == 6 and len(info["fingerprint"]["id"]) == 16
    assert not (tmp_path / "cache" / "onnx").exists()  # nothing exported
