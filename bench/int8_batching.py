"""How far a text's int8 vector moves with the texts it is batched with (docs/fast-modes.md, int8).

`python bench/int8_batching.py`: the bundled model's sentence vectors of each text embedded alone (a
batch of one) and inside a batch of every text below (the engine sorts by length, so its companions are
texts of about its length), for ONNX Runtime's int8 graphs (activation scales set per batch: `int8`,
`int8_fused`), the calibrated `int8_static` and OpenVINO's int8 (scales per row group) where installed.
Prints, per way, the min and median cosine between the two batchings (what a search of a stored text's own
wording scores), and the min cosine of each to torch float32. The texts are the shipped held-out
sentences, short chat texts, non-English, code and emoji: none of them is a calibration text.
"""

from __future__ import annotations

import importlib.util
import warnings

import numpy as np

import bertscope
from bertscope.backends.quantize import heldout_texts
from bertscope.core.cpu import cpu_name

SHORT = ["thanks!", "Ok.", "lol", "see you soon", "🔥🔥🔥 lol 😂😂", "why?", "no", "great job team"]
OTHER = [
    "Der Zug nach Berlin hatte heute zwanzig Minuten Verspätung.",
    "東京の天気は明日晴れるでしょう。",
    "Привет, как дела?",
    "def add(a, b):\n    return a + b",
    "SELECT name FROM users WHERE id = 42;",
    "https://example.com/search?q=bert+embeddings",
]
TEXTS = [*heldout_texts(), *SHORT, *OTHER]


def unit(vectors: np.ndarray) -> np.ndarray:
    return vectors / np.linalg.norm(vectors, axis=1, keepdims=True)


def main() -> None:
    warnings.simplefilter("ignore")
    reference = unit(np.asarray(bertscope.load(device="cpu", backend="torch").embed(TEXTS).vectors))
    ways = {
        "onnxruntime int8": {"quantize": "int8"},
        "onnxruntime int8_fused": {"quantize": "int8_fused"},
        "onnxruntime int8_static": {"quantize": "int8_static"},
    }
    if importlib.util.find_spec("openvino") and importlib.util.find_spec("nncf"):
        ways["openvino int8"] = {"backend": "openvino", "quantize": "int8"}
    print(f"{len(TEXTS)} texts; CPU: {cpu_name()}")
    print(f"{'way':<26} {'alone vs batched: min':>22} {'median':>8} {'text at min':<18} "
          f"{'batched vs f32 min':>19} {'alone vs f32 min':>17}")  # fmt: skip
    for label, options in ways.items():
        model = bertscope.load(device="cpu", **options)
        batched = unit(np.asarray(model.embed(TEXTS).vectors))
        alone = unit(np.concatenate([np.asarray(model.embed([t]).vectors) for t in TEXTS]))
        between = (batched * alone).sum(axis=1)
        worst = int(between.argmin())
        print(
            f"{label:<26} {between.min():>22.5f} {np.median(between):>8.5f} {TEXTS[worst][:16]!r:<18} "
            f"{(batched * reference).sum(axis=1).min():>19.5f} {(alone * reference).sum(axis=1).min():>17.5f}"
        )


if __name__ == "__main__":
    main()
