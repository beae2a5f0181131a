"""How far each exact runtime's hidden states sit from the Hugging Face forward, by kind of text.

`python bench/exact_inputs.py`: the bundled model's every hidden state through torch, ONNX Runtime and
OpenVINO float32 against `AutoModel(..., output_hidden_states=True)`, on natural sentences and on runs of
one repeated character (ill-conditioned: near-identical rows, where float32 sums in another order part
most), with the sentence vectors (mean pooling) beside them. The figures depend on the CPU's kernels.
"""

from __future__ import annotations

import warnings

import numpy as np
import torch
from transformers import AutoModel, AutoTokenizer

import bertscope
from bertscope.core.cpu import cpu_flags, cpu_name
from bertscope.core.loading import bundled_path

TEXTS = {
    "a news sentence": "The central bank raised interest rates by a quarter point on Wednesday.",
    "natural text x60": "This is a sentence. " * 60,
    "random words (256 tokens)": " ".join(["river", "bank", "loan", "music", "green", "of", "the"] * 40),
    "'1234567890 ' x20": "1234567890 " * 20,
    "'a ' x254": "a " * 254,
    "'? ' x127": "? " * 127,
    "'.' x200": "." * 200,
    "'.' x300 (cut at 256)": "." * 300,
}


def main() -> None:
    """Print, per text, each runtime's largest |difference| to the reference: hidden states, sentence."""
    warnings.simplefilter("ignore")
    path = bundled_path()
    tokenizer = AutoTokenizer.from_pretrained(path)
    reference = AutoModel.from_pretrained(path).eval()
    runtimes = {name: bertscope.load(backend=name) for name in ("torch", "onnxruntime", "openvino")}
    flags = " ".join(
        sorted(f for f in cpu_flags() if f.startswith(("avx512_bf16", "avx512_vnni", "avx2", "amx")))
    )
    print(
        f"# {cpu_name()}; flags: {flags}; torch {torch.__version__}; "
        f"the default runs {bertscope.load().info().backend}"
    )
    print(f"{'text':28s} {'tokens':>6s}  " + "  ".join(f"{n:>24s}" for n in runtimes))
    for label, text in TEXTS.items():
        encoded = tokenizer([text], return_tensors="pt", truncation=True, max_length=256)
        with torch.no_grad():
            states = reference(**encoded, output_hidden_states=True).hidden_states
        want = torch.stack(states).squeeze(1).numpy()  # (layers, tokens, width)
        cells = []
        for model in runtimes.values():
            rows = model.embed_tokens([text], layers="all", combine="concat")[0].vectors
            got = np.asarray(rows).reshape(want.shape[1], want.shape[0], -1).transpose(1, 0, 2)
            sentence = np.abs(got[-1].mean(0) - want[-1].mean(0)).max()
            cells.append(f"{np.abs(got - want).max():.1e} (sentence {sentence:.0e})")
        print(f"{label:28s} {want.shape[1]:6d}  " + "  ".join(f"{c:>24s}" for c in cells))


if __name__ == "__main__":
    main()
