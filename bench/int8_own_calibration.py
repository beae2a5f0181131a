"""int8 fitted on your own calibration texts: which loads pass int8's gate (backends/int8_gate.py).

`python bench/int8_own_calibration.py`: each line is `bertscope.load(quantize=..., calibration=...)` on the
bundled model (with backend="openvino" where it says so), in a fresh cache under /tmp, and what the gate
said: loads, or refused with the min cosine to float32 and the text it fell on.
"""

from __future__ import annotations

import os
import re
import tempfile
import warnings

NEWS = [
    "The council approved the budget on Tuesday.",
    "Heavy rain closed two roads overnight.",
    "Shares fell sharply after the earnings report.",
    "The team won the final in extra time.",
    "Scientists found a new species of frog in the rainforest.",
]


def main() -> None:
    """Print one line per load: the way, the calibration texts, the gate's answer."""
    os.environ["BERTSCOPE_CACHE"] = tempfile.mkdtemp(prefix="int8-own-")
    import bertscope
    from bertscope.backends.quantize import calibration_texts

    warnings.simplefilter("ignore")
    three = [NEWS[1], NEWS[0], "Thanks!"]
    twenty = calibration_texts()[:20]
    cases = [
        ("int8_static", '["x"]', ["x"]),
        ("int8_static", "5 news sentences", NEWS),
        ("int8", "5 news sentences", NEWS),
        ("int8", '3 texts (2 news, "Thanks!")', three),
        ("int8_fused", "5 news sentences", NEWS),
        ("openvino int8_static", "the 3 texts", three),
        ("openvino int8_static", "5 news sentences", NEWS),
        ("int8_static", "first 20 shipped sentences", twenty),
        ("int8", "first 20 shipped sentences", twenty),
        ("openvino int8_static", "first 20 shipped sentences", twenty),
    ]
    for way, label, texts in cases:
        runtime = {"backend": "openvino"} if way.startswith("openvino") else {}
        try:
            bertscope.load(quantize=way.split()[-1], calibration=list(texts), **runtime)
            said = "loads"
        except bertscope.InvalidSpec as exc:
            found = re.search(r"min cosine of ([0-9.]+) to float32 \(lowest on (.*?), over", str(exc))
            said = f"refused: {found.group(1)} ({found.group(2)})" if found else f"refused: {exc}"
        print(f"{way:25s} {label:26s} {said}", flush=True)


if __name__ == "__main__":
    main()
