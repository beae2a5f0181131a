"""The static engine: model2vec's `encode` arithmetic (the pieces a text averages, and their rows' mean),
with the methods corpus jobs and the service call on a model's `engine`.

A text's pieces are the tokenizer's without specials, [UNK] left out, cut as model2vec cuts (the text at
max_length x the median piece length in characters, then at max_length pieces); the mean is taken in the
rows' own dtype and unit-scaled in float32 where the spec says normalize, then rounded back to that dtype,
as model2vec does, so the vectors equal `StaticModel.encode`'s to the last bit. No torch.
"""

from __future__ import annotations

import copy
import json
from collections.abc import Callable, Iterable, Iterator, Sequence
from dataclasses import replace
from typing import TYPE_CHECKING, Any

import numpy as np

from .core._enums import LongText, Pooling
from .core.prompts import prepend
from .core.results import SentenceEmbeddings
from .core.spec import EmbedSpec
from .core.text_pieces import cuts_for
from .core.texts_given import text_named
from .core.tokens import Tokens
from .errors import BertscopeError, InputTooLong, InvalidSpec

if TYPE_CHECKING:
    from tokenizers import Encoding, Tokenizer

__all__ = ["StaticEngine"]

# What the layer engine's methods give, named for the one line that refuses them.
_LAYER_METHODS = {
    "token_matrices": "token vectors of each layer (layer sweeps such as eval pairs)",
    "fitted_token_matrices": "token vectors of each layer",
    "token_blocks": "token vectors of each layer",
    "sentence_views": "several layer x pooling views",
    "token_sentences": "sentence vectors pooled from token vectors",
}


class StaticEngine:
    """Pieces and row means for a (vocabulary, d) matrix; `refusal(feature)` makes the one line."""

    has_pooler = False

    def __init__(
        self,
        backend: Tokenizer,
        tensors: dict[str, np.ndarray],
        *,
        max_length: int | None,
        token_budget: int | None,
        refusal: Callable[..., BertscopeError],
    ) -> None:
        self.rows = tensors["embeddings"]
        self.weights = tensors.get("weights")
        self.mapping = tensors.get("mapping")
        self.max_length = max_length
        self.token_budget = token_budget or 65536
        self.refusal = refusal
        vocab = sorted(backend.get_vocab().items(), key=lambda item: item[1])
        self.id_to_token = {i: token for token, i in vocab}
        self._median_length = int(np.median([len(token) for token, _ in vocab]))
        self._unk = _unk_id(backend)
        backend.no_padding()
        backend.encode_special_tokens = True  # text is text: "[CLS]" typed in a text is characters
        self._whole = copy.deepcopy(backend)
        self._whole.no_truncation()
        self._whole_cuts = cuts_for(self._whole)  # a long text's pieces counted a group at a time
        self._cut = copy.deepcopy(backend)
        if max_length is not None:
            self._cut.enable_truncation(max_length)

    # Pieces --------------------------------------------------------------------------------------

    def pieces(self, text: str) -> Encoding:
        """The tokenizer's `Encoding` of `text` without special tokens, never cut."""
        return self._whole.encode(text, add_special_tokens=False)

    def pieces_of(self, texts: Sequence[str], *, whole: bool = False) -> list[Tokens]:
        """Per text the pieces averaged, cut as model2vec cuts unless `whole`, with their character
        offsets and how many pieces the cut dropped (`n_dropped`)."""
        if whole or self.max_length is None:
            every = self._whole.encode_batch(list(texts), add_special_tokens=False)
            return [self._tokens(t, e) for t, e in zip(texts, every, strict=True)]
        chars = self.max_length * self._median_length
        cut = self._cut.encode_batch([t[:chars] for t in texts], add_special_tokens=False)
        found = [self._tokens(t, e) for t, e in zip(texts, cut, strict=True)]
        for index, text in enumerate(texts):
            if len(text) > chars or len(found[index]) >= self.max_length:
                every_piece = self._count(text)
                found[index] = replace(found[index], n_dropped=every_piece - len(found[index]))
        return found

    def _count(self, text: str) -> int:
        """Pieces of the whole text besides [UNK] (in bounded memory where the tokenizer splits at spaces)."""
        if self._whole_cuts is not None:
            return self._whole_cuts.count(self._whole, text, skip_id=self._unk)
        return sum(1 for i in self.pieces(text).ids if i != self._unk)

    def _tokens(self, text: str, encoding: Encoding) -> Tokens:
        keep = [k for k, i in enumerate(encoding.ids) if i != self._unk]
        return Tokens(
            text=text, tokens=[encoding.tokens[k] for k in keep], ids=[encoding.ids[k] for k in keep],
            offsets=[encoding.offsets[k] for k in keep], word_ids=[encoding.word_ids[k] for k in keep],
            special_tokens_mask=[False] * len(keep), token_type_ids=[0] * len(keep),
        )  # fmt: skip

    # Means ---------------------------------------------------------------------------------------

    def checked(self, spec: EmbedSpec) -> EmbedSpec:
        """`spec`, or the one line when it asks for what rows cannot give (layers, another pooling)."""
        if spec.layers != (0,) or spec.pooling is not Pooling.MEAN:
            raise self.refusal(f"layers {list(spec.layers)} with {spec.pooling.value} pooling")
        if spec.prompt and spec.prompt_length:
            # A row mean counts every piece it is given: it cannot leave the prompt's pieces out.
            raise InvalidSpec(
                "this static model (model2vec): its Pooling config says include_prompt false, "
                "but a row mean counts every piece of the text it is given; set include_prompt true there "
                "or put the prompt in the texts yourself"
            )
        return spec

    def prepare(self, texts: Sequence[str], spec: EmbedSpec) -> list[Tokens]:
        """The checked spec, then each text's pieces (long="window": all of them; "error": none cut),
        the spec's prompt put before each text and counted in its mean, as sentence-transformers'
        StaticEmbedding does."""
        self.checked(spec)
        texts = prepend(spec.prompt, texts) if spec.prompt else texts
        tokens = self.pieces_of(texts, whole=spec.long is LongText.WINDOW)
        if spec.long is LongText.ERROR:
            for index, t in enumerate(tokens):
                if t.n_dropped:
                    raise InputTooLong(
                        f"{text_named('text', index)} has {len(t) + t.n_dropped} pieces but the static model "
                        f"averages at most {self.max_length}; use long='truncate' or long='window'"
                    )
        return tokens

    def rows_of(self, ids: Sequence[int]) -> np.ndarray:
        """(len(ids), d) rows in the folder's dtype, mapped and weighted as model2vec reads them."""
        rows = self.rows[self.mapping[list(ids)] if self.mapping is not None else list(ids)]
        return rows * self.weights[list(ids)][:, None] if self.weights is not None else rows

    def fitted_sentences(
        self, tokens: Sequence[Tokens], spec: EmbedSpec, *, on_batch: Any = None
    ) -> SentenceEmbeddings:
        """(n, d) float32 means of the tokens' rows (zero for a text with no known piece)."""
        dtype = np.float32 if self.rows.dtype == np.int8 else self.rows.dtype
        out = np.zeros((len(tokens), self.rows.shape[1]), dtype=dtype)
        for i, t in enumerate(tokens):
            if t.ids:
                out[i] = self.rows_of(t.ids).mean(axis=0)
        if spec.normalize:
            wide = out.astype(np.float32)
            out = (wide / (np.linalg.norm(wide, axis=1, keepdims=True) + 1e-32)).astype(out.dtype)
        if on_batch is not None:
            on_batch(len(tokens), sum(map(len, tokens)))
        return SentenceEmbeddings(
            vectors=out.astype(np.float32),
            n_tokens=np.array([len(t) for t in tokens], dtype=np.int64),
            n_dropped=np.array([t.n_dropped for t in tokens], dtype=np.int64),
            spec=spec.as_dict(),
        )

    def sentences_once(
        self, texts: Sequence[str], spec: EmbedSpec, *, on_batch: Any = None
    ) -> SentenceEmbeddings:
        """(n, d) sentence vectors of a list of texts."""
        return self.fitted_sentences(self.prepare(texts, spec), spec, on_batch=on_batch)

    def sentences(
        self, texts: Iterable[str], spec: EmbedSpec, *, on_batch: Any = None, chunk: int = 1024
    ) -> Iterator[SentenceEmbeddings]:
        """Sentence vectors of a stream of texts, `chunk` texts at a time, in order."""
        batch: list[str] = []
        for text in texts:
            batch.append(text)
            if len(batch) == chunk:
                yield self.sentences_once(batch, spec, on_batch=on_batch)
                batch = []
        if batch:
            yield self.sentences_once(batch, spec, on_batch=on_batch)

    def forward(self, *args: Any, **options: Any) -> Any:
        """Refused: no layers to run (the service's worker wraps this name)."""
        raise self.refusal("a forward pass")

    def __getattr__(self, name: str) -> Any:
        if name.startswith("__"):
            raise AttributeError(name)
        # every named feature is plural ("token vectors ... need"); an unnamed one is "the engine's x"
        feature = _LAYER_METHODS.get(name)
        raise self.refusal(
            feature or f"the engine's {name.strip('_').replace('_', ' ')}", plural=bool(feature)
        )


def _unk_id(backend: Any) -> int | None:
    """The [UNK] id model2vec leaves out of every mean (WordPiece, BPE, WordLevel; Unigram's unk_id)."""
    model = backend.model
    if hasattr(model, "unk_token"):
        return None if model.unk_token is None else backend.token_to_id(model.unk_token)
    found = json.loads(backend.to_str())["model"].get("unk_id")
    return None if found is None else int(found)
