"""Every layer's token vectors of many texts, a few texts at a time: the one forward pass per batch that
probes, CKA and model comparison share (the engine's own batching, all layers at once)."""

from __future__ import annotations

import hashlib
import os
from collections.abc import Iterable, Iterator, Sequence
from itertools import islice
from typing import TYPE_CHECKING

import numpy as np

from ..core.engine import LONG_TOKENS
from ..core.progress import progress_callback
from ..core.texts_given import text_items
from ..core.tokens import Tokens, check_text
from ..errors import InvalidInput

if TYPE_CHECKING:
    from ..core.encoder import Encoder
    from ..core.engine import OnBatch
    from ..core.spec import EmbedSpec

__all__ = [
    "check_seed", "chunked_token_matrices", "layer_blocks", "layered", "layer_states", "static_rows", "CHUNK",
    "LONG_TOKENS",
]  # fmt: skip

# Texts handed to the engine at once: it holds each chunk's token vectors of every layer, so the chunk
# (not the corpus) bounds memory: 256 texts of 64 tokens x 7 layers x 384 floats is ~170 MB at most.
CHUNK = 256


def layer_states(
    model: Encoder,
    texts: Iterable[str],
    *,
    long: str = "window",
    progress: bool | None = None,
    total: int | None = None,
) -> Iterator[tuple[Tokens, np.ndarray]]:
    """Each text's Tokens and its hidden states (L+1, tokens, d) float32, in input order, pad trimmed.

    One forward per batch gives every layer (0 = the embedding layer's output); long texts are
    windowed by default, so no token is lost.
    """
    spec = model.spec(layers="all", combine="concat", pooling="mean", long=long)
    count = model.n_layers + 1
    with progress_callback(total, enabled=progress) as on_batch:
        for tok, matrix in chunked_token_matrices(model, _checked(texts), spec, on_batch=on_batch):
            yield tok, matrix.reshape(len(matrix), count, -1).transpose(1, 0, 2)


def chunked_token_matrices(
    model: Encoder, texts: Iterable[str], spec: EmbedSpec, *, on_batch: OnBatch | None = None
) -> Iterator[tuple[Tokens, np.ndarray]]:
    """Each text's Tokens and token matrix under `spec` (the engine's `token_matrices`), in input order,
    the engine given CHUNK texts at a time: it holds one chunk's token vectors, never the corpus's."""
    iterator = iter(texts)
    while chunk := list(islice(iterator, CHUNK)):
        yield from model.engine.token_matrices(chunk, spec, on_batch=on_batch)


def layer_blocks(
    model: Encoder,
    texts: Iterable[str],
    *,
    long: str = "window",
    progress: bool | None = None,
    total: int | None = None,
) -> Iterator[tuple[int, Tokens, np.ndarray, bool]]:
    """(text number, its Tokens, hidden states (L+1, rows, d) of consecutive tokens, whether the text
    ends here): `layer_states` with a long text given a few windows at a time, so memory is bounded by
    the windows, not by the text (CKA over a book-length line)."""
    spec = model.spec(layers="all", combine="concat", pooling="mean", long=long)
    count = model.n_layers + 1
    number = 0
    iterator = _checked(texts)
    with progress_callback(total, enabled=progress) as on_batch:
        while chunk := list(islice(iterator, CHUNK)):
            fitted = model.engine.prepare(chunk, spec)
            short = [tok for tok in fitted if len(tok) <= LONG_TOKENS]
            matrices = iter(model.engine.fitted_token_matrices(short, spec, on_batch=on_batch))
            for tok in fitted:
                if len(tok) <= LONG_TOKENS:
                    _, matrix = next(matrices)
                    yield number, tok, matrix.reshape(len(matrix), count, -1).transpose(1, 0, 2), True
                else:
                    blocks = model.engine.token_blocks(tok, spec)
                    block = next(blocks)
                    for following in blocks:
                        yield number, tok, block.reshape(len(block), count, -1).transpose(1, 0, 2), False
                        block = following
                    yield number, tok, block.reshape(len(block), count, -1).transpose(1, 0, 2), True
                    if on_batch is not None:
                        on_batch(1, len(tok))
                number += 1


def check_seed(seed: object, name: str = "seed") -> None:
    """Refuse a seed numpy cannot take (negative, above 2**32 - 1, not a whole number) in one line: the
    check that probes, contextuality and geometry share."""
    if not isinstance(seed, int) or isinstance(seed, bool) or not 0 <= seed < 2**32:
        raise InvalidInput(f"{name}={seed!r}: a seed is a whole number from 0 to {2**32 - 1}")


def static_rows(model: Encoder, ids: Sequence[int]) -> np.ndarray:
    """(len(ids), embedding width) float32 rows of the input embedding matrix: no position, no segment."""
    return model.embedding_rows(list(ids))


def text_stream(texts: Iterable[str] | str) -> Iterable[str]:
    """`texts` to stream: a lone string is one text (as `embed` reads it), never its characters; what embed
    refuses (None, a dict, a set, bytes, a table, anything not iterable) is refused in the same line."""
    return text_items(texts)


def tokens_key(ids: Sequence[int]) -> bytes:
    """A 16-byte digest of a text's token ids: texts with the same key (given twice, or in another case
    to an uncased model) have the same vectors at every layer, so the measures count them once."""
    return hashlib.blake2b(np.asarray(ids, dtype=np.int64).tobytes(), digest_size=16).digest()


def special_pieces(model: Encoder) -> str:
    """The special tokens the model puts around a text ("[CLS], [SEP]", "<s>, </s>"), for a refusal."""
    probe = model.tokenize(["a"])[0]
    named = dict.fromkeys(
        t for t, special in zip(probe.tokens, probe.special_tokens_mask, strict=True) if special
    )
    return ", ".join(named) or "the model's special tokens"


def layered(model: object, feature: str, *, plural: bool = False) -> None:
    """Refuse a static model (model2vec: rows, no layers) in its own line naming `feature`, before any
    layer is parsed or read: the CLI calls the research functions with it directly, and the first layer
    read named `layers='all'`, an option nobody gave."""
    refusal = getattr(model, "refusal", None)  # StaticModel's; an Encoder has none
    if callable(refusal) and getattr(model, "n_layers", None) == 0:
        raise refusal(feature, plural=plural)


def model_given(value: object, name: str) -> None:
    """Refuse a model's name where a loaded model is taken (`other='bundled'`), naming the call to make."""
    from ..core.encoder import Encoder

    # A static model (model2vec) is loaded but has no layers: it says so itself, in its own one line, by
    # its name (the keyword, other= or b=, is no name the command line has: --model-b, MODEL_B)
    layered(value, "comparing its layers with another model's")
    if not isinstance(value, Encoder):
        # a name or folder loads as it is; None or 123 names nothing to load, so the call shows a placeholder
        named = repr(value) if isinstance(value, (str, os.PathLike)) else "'model name or folder'"
        raise InvalidInput(
            f"{name}={value!r} is not a loaded model: give one, {name}=bertscope.load({named})"
        )


def _checked(texts: Iterable[str]) -> Iterator[str]:
    """The texts, stopping at the first that is not a non-empty string: named as every text check names
    it (`core.tokens.check_text`: "text 1 is empty: ...", numbered from 0 as a list's index)."""
    for index, text in enumerate(texts):
        yield check_text(text, index)
