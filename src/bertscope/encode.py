"""`Model.encode`: sentence-transformers' `encode` signature and results over bertscope's engine.

A user switches with one line (`bertscope.load(path)` for `SentenceTransformer(path)`) and keeps their
code: a str gives a 1-D array, a list a 2-D array; `convert_to_tensor` a torch tensor; neither numpy nor
tensor a list of 1-D tensors; `output_value="token_embeddings"` a list of (tokens, d) tensors of the last
layer, pad trimmed. Vectors use the model's own pooling and normalisation (`pooling="auto"`), so they
equal sentence-transformers' within 1e-5. Texts are batched by a token budget, not by `batch_size`;
the vectors do not depend on it. A text over the model's limit is truncated there, as
sentence-transformers truncates at max_seq_length, with a `TruncatedTextsWarning` saying how many were;
a pair over it is refused, where sentence-transformers cuts its longer part first (bertscope cuts no pair).
`Model.encode_query` / `encode_document`, `similarity` of vectors and `similarity_pairwise` (by the
model's `similarity_fn_name`: cosine, dot, euclidean or manhattan), `get_sentence_embedding_dimension()`,
`max_seq_length` and `similarity_fn_name` answer as sentence-transformers' (5+) do; a keyword of its
`encode` that bertscope has no use for (task, tokenizer_kwargs, pool) is refused by name.
"""

from __future__ import annotations

import warnings
from collections.abc import Mapping, Sequence
from typing import Any

import numpy as np

from .core._enums import Pooling
from .core.finite import refuse_non_finite
from .core.given import given_vectors
from .core.loading import device_kind, require_torch
from .core.prompts import Prompts
from .core.similarity import cos_sim, pairwise_cos_sim, unit, vectors_given
from .core.spec import EmbedOptions, auto_refusal, resolve, unknown_option, whole_number
from .core.st_attributes import ENCODE_INSTEAD
from .core.texts_given import refuse_unusable, text_items
from .core.tokens import check_texts, cut_warning
from .errors import InputTooLong, InvalidInput, InvalidSpec, UnknownOption, caller_level

__all__ = [
    "DOCUMENT_PROMPTS", "OUTPUT_VALUES", "PRECISIONS", "QUERY_PROMPTS", "encode", "encode_role",
    "max_seq_length_refusal", "role_prompt", "say_truncated", "similarity_operands", "similarity_pairwise",
    "st_prompt", "texts_as_list", "vector_similarity", "warn_truncated",
]  # fmt: skip

OUTPUT_VALUES = ("sentence_embedding", "token_embeddings")
# sentence-transformers' encode precisions: encode gives float32, the others are quantize_embeddings'
PRECISIONS = ("float32", "int8", "uint8", "binary", "ubinary")
# The prompts sentence-transformers' encode_query / encode_document try, in order, where none is named,
# and the (empty) ones it gives every model at load (sentence_transformers/base/model.py, 5+), which
# `model.prompts = {...}` replaces with the dict set.
QUERY_PROMPTS = ("query",)
DOCUMENT_PROMPTS = ("document", "passage", "corpus")
_ST_ROLE_PROMPTS = {"query": "", "document": ""}
# What keeps every token of a long text, said in the truncation warning.
_ST_CUT = "cut as sentence-transformers cuts at max_seq_length"
_WINDOW = f"{_ST_CUT}; model.embed(texts, long='window') keeps every token"
_TOKENS_WINDOW = f"{_ST_CUT}; model.embed_tokens(texts, long='window') keeps every token"


def encode(
    model: Any,
    sentences: str | Sequence[str] | None,
    *,
    prompt_name: str | None,
    prompt: str | None,
    batch_size: int,
    show_progress_bar: bool | None,
    output_value: str | None,
    precision: str,
    convert_to_numpy: bool,
    convert_to_tensor: bool,
    device: str | None,
    normalize_embeddings: bool,
    truncate_dim: int | None,
    unsupported: dict[str, Any] | None = None,
) -> Any:
    """See `Model.encode`; the options are checked here, then one embed (or embed_tokens) runs.
    `unsupported`: sentence-transformers' keywords bertscope has no use for, refused by name
    (`inputs`, sentence-transformers 6's name of `sentences`, taken in its place)."""
    sentences, unsupported = _texts_given(sentences, unsupported or {})
    if unsupported:
        raise _unsupported(next(iter(unsupported)))
    _check(model, batch_size, output_value, precision, device, truncate_dim)
    _check_flags(
        show_progress_bar=show_progress_bar, convert_to_numpy=convert_to_numpy,
        convert_to_tensor=convert_to_tensor, normalize_embeddings=normalize_embeddings,
    )  # fmt: skip
    prompt_name, prompt = st_prompt(model.prompts, prompt_name, prompt)
    model.prompts.resolve(prompt_name=prompt_name, prompt=prompt)  # refused before the texts are read
    single = isinstance(sentences, str)
    texts = [sentences] if single else _as_list(sentences)
    torch = _torch_for_tensors(output_value, convert_to_tensor, convert_to_numpy)
    if not texts:  # before the texts are checked, which refuse an empty list: sentence-transformers' answers
        return (
            [] if output_value == "token_embeddings" else _empty(torch, convert_to_tensor, convert_to_numpy)
        )
    # The model's own prompts (and its default one) apply as in sentence-transformers, its tokens kept.
    if output_value == "token_embeddings":
        asked = EmbedOptions(layers="-1", pooling=Pooling.MEAN, prompt_name=prompt_name, prompt=prompt)
        # pairs too, as [CLS] A [SEP] B [SEP], as sentence-transformers gives their tokens
        items = check_texts(texts, pairs=True)
        try:
            rows = model.token_vectors(items, resolve(model, asked).spec, bool(show_progress_bar))
        except InputTooLong as exc:
            raise _pair_too_long(exc) from None
        refuse_non_finite([row.vectors for row in rows])
        warn_truncated([row.n_dropped for row in rows], model.max_tokens, _TOKENS_WINDOW)
        tensors = [torch.from_numpy(np.ascontiguousarray(row.vectors)) for row in rows]
        return tensors[0] if single else tensors
    if model.loaded.st_unsupported:  # said here: embed's line sends the caller to pooling=, refused here
        raise auto_refusal(model.loaded, "encode", f"{ENCODE_INSTEAD}, or use sentence-transformers for it")
    try:
        found = model.embed(
            texts, pooling="auto", prompt_name=prompt_name, prompt=prompt, progress=bool(show_progress_bar)
        )
    except InputTooLong as exc:
        raise _pair_too_long(exc) from None
    warn_truncated(found.n_dropped, model.max_tokens, _WINDOW)
    vectors = found.vectors
    if truncate_dim is not None:
        vectors = np.ascontiguousarray(vectors[:, :truncate_dim])
    if normalize_embeddings:
        vectors = unit(vectors)
    result: Any = vectors
    if torch is not None:  # sentence-transformers' tensor and list-of-tensor outputs
        result = torch.from_numpy(vectors) if convert_to_tensor else list(torch.from_numpy(vectors))
    return result[0] if single else result


def _pair_too_long(exc: InputTooLong) -> InputTooLong:
    """Under truncation only a pair is too long: say where encode parts from sentence-transformers."""
    return InputTooLong(
        f"{exc}; encode refuses it too, where sentence-transformers cuts the longer part first"
    )


def encode_role(
    model: Any,
    names: Sequence[str],
    sentences: str | Sequence[str] | None,
    prompt_name: str | None,
    prompt: str | None,
    options: dict[str, Any],
    positional: Sequence[Any] = (),
) -> Any:
    """sentence-transformers' `encode_query` (names `QUERY_PROMPTS`) or `encode_document`
    (`DOCUMENT_PROMPTS`): `model.encode` with the role's prompt where none is named (`role_prompt`);
    `positional`: encode's arguments after `prompt` given in order (batch_size, show_progress_bar, ...)."""
    from .core.st_settings import role_refusal

    # a folder's query_length / document_length cut the role's texts there; bertscope has one limit a model
    if (refused := role_refusal(model, names[0])) is not None:
        raise refused
    if prompt_name is None and prompt is None:
        prompt_name = role_prompt(model.prompts, names)
    return model.encode(sentences, prompt_name, prompt, *positional, **options)


def role_prompt(prompts: Prompts, names: Sequence[str]) -> str | None:
    """The prompt_name sentence-transformers' encode_query/encode_document pass: the first of `names`
    among the model's `prompts` (and its own {"query": "", "document": ""} while they are the ones
    loaded), else None: encode's default prompt."""
    roles = _ST_ROLE_PROMPTS if prompts.st_roles else {}
    return next((name for name in names if name in prompts or name in roles), None)


def st_prompt(prompts: Prompts, prompt_name: object, prompt: object) -> tuple[Any, Any]:
    """The (prompt_name, prompt) to embed with for encode's: sentence-transformers (5+) gives every model
    a "query" and a "document" prompt at load, "" unless it sets them, so such a name the model's
    `prompts` lack is no prompt (prompt="", not the model's default one) until `model.prompts = {...}`
    replaces them (then it is unknown, as there); anything else as given."""
    roles = _ST_ROLE_PROMPTS if prompts.st_roles else {}
    if prompt is None and isinstance(prompt_name, str) and prompt_name in roles:
        if prompt_name not in prompts:
            return None, roles[prompt_name]
    return prompt_name, prompt


def vector_similarity(function: str, a: Any, b: Any, options: Mapping[str, object]) -> np.ndarray:
    """sentence-transformers' `similarity(embeddings1, embeddings2)` with the similarity function named
    `function` (one of SIMILARITY_FUNCTIONS): the (n, m) matrix of every row of a with every row of b (b
    None: a again), as NumPy float32. cosine is `cos_sim`; dot the dot product; euclidean and manhattan
    the negative distance, as sentence-transformers' `dot_score`, `euclidean_sim`, `manhattan_sim`."""
    left, right = (np.atleast_2d(e) for e in given_vectors(a, b, options))
    if function == "cosine":
        return np.asarray(cos_sim(left, right), dtype=np.float32)
    left64, right64 = left.astype(np.float64), right.astype(np.float64)
    if function == "dot":
        return np.asarray(left64 @ right64.T, dtype=np.float32)
    # a block of a's rows at a time against every row of b: (block, m, d) differences, ~32 MB at most
    block = max(1, _DIFFERENCES // max(1, right64.size))
    found = np.empty((len(left64), len(right64)), dtype=np.float32)
    for start in range(0, len(left64), block):
        found[start : start + block] = _negative_distance(
            function, left64[start : start + block, None, :], right64[None, :, :]
        )
    return found


def similarity_operands(a: Any, b: Any, embeddings1: Any, embeddings2: Any) -> tuple[Any, Any]:
    """`similarity`'s (a, b), given as a and b or under sentence-transformers' names embeddings1 and
    embeddings2, so its `model.similarity(embeddings1=e, embeddings2=f)` runs unchanged; a side given under
    both names is refused in one line, and a missing `a` too."""
    sides = []
    given = (("a", a, "embeddings1", embeddings1), ("b", b, "embeddings2", embeddings2))
    for name, value, st_name, st_value in given:
        if value is not None and st_value is not None:
            raise InvalidInput(
                f"give {name}= or {st_name}= (sentence-transformers' name of it), not both: they are one "
                "argument"
            )
        sides.append(value if st_value is None else st_value)
    if sides[0] is None:
        raise InvalidInput(
            "similarity needs a: texts or vectors, similarity(a, b) (or embeddings1=, embeddings2=); "
            "b defaults to a"
        )
    return sides[0], sides[1]


def similarity_pairwise(embeddings1: Any, embeddings2: Any, function: str = "cosine") -> np.ndarray:
    """sentence-transformers' `similarity_pairwise`: (n,) similarity of row i with row i of two (n, d)
    arrays (or (d,) for one) by the function named `function` (SIMILARITY_FUNCTIONS: cosine, dot product,
    negative euclidean or manhattan distance, as its `pairwise_*` functions), as NumPy float32
    (sentence-transformers answers a tensor)."""
    given = (
        vectors_given(e, f"embeddings{n}", "similarity_pairwise")
        for n, e in ((1, embeddings1), (2, embeddings2))
    )
    # (d,) with (d,) gives one score, 0-d, as sentence-transformers' tensor
    left, right = (np.asarray(e, dtype=np.float32) for e in given)
    try:
        np.broadcast_shapes(left.shape, right.shape)
    except ValueError:
        raise InvalidInput(
            f"similarity_pairwise: embeddings1 is {left.shape} and embeddings2 {right.shape}; it pairs row i "
            "with row i, so give arrays of one shape (similarity compares every row with every row)"
        ) from None
    if function == "cosine":
        return np.asarray(pairwise_cos_sim(left, right), dtype=np.float32)
    left64, right64 = left.astype(np.float64), right.astype(np.float64)
    if function == "dot":
        return np.asarray(np.sum(left64 * right64, axis=-1), dtype=np.float32)
    return np.asarray(_negative_distance(function, left64, right64), dtype=np.float32)


# the differences one block of vector_similarity holds at once (float64: 32 MB)
_DIFFERENCES = 1 << 22


def _negative_distance(function: str, left: np.ndarray, right: np.ndarray) -> np.ndarray:
    """-(euclidean or manhattan distance) of `left` and `right` (broadcast) over their last axis."""
    difference = np.abs(left - right)
    if function == "manhattan":
        return -difference.sum(axis=-1)
    return -np.sqrt(np.square(difference).sum(axis=-1))


def max_seq_length_refusal(value: Any) -> InvalidSpec:
    """The one line for setting `max_seq_length`: the token limit is set when loading."""
    return InvalidSpec(
        f"max_seq_length={value!r}: the token limit is set when loading: "
        "bertscope.load(..., max_tokens=N); long='window' keeps every token of a longer text"
    )


ENCODE_OPTIONS = (
    "prompt_name", "prompt", "batch_size", "show_progress_bar", "output_value", "precision",
    "convert_to_numpy", "convert_to_tensor", "device", "normalize_embeddings", "truncate_dim",
)  # fmt: skip
# sentence-transformers' encode keywords bertscope does not take, with what to do instead.
_ST_ONLY = {
    "task": "bertscope models have no Router to route by task: use encode_query / encode_document (or "
    "prompt_name=...)",
    "tokenizer_kwargs": "the tokenizer's limit is set when loading: bertscope.load(..., max_tokens=N)",
    "pool": "no multi-process pool is needed: encode batches by tokens in one process (embed_corpus, or "
    "the Ray runner, for a cluster)",
    "chunk_size": "that chunks a pool's work; for chunks of a document use embed_chunks",
}


def _unsupported(name: str) -> UnknownOption:
    """The one-line refusal of a keyword `encode` does not take, with what to do where one is known."""
    if name in _ST_ONLY:
        return UnknownOption(
            f"encode does not take {name!r}: {_ST_ONLY[name]}; its options are: {', '.join(ENCODE_OPTIONS)}"
        )
    refused = unknown_option(name, ENCODE_OPTIONS)
    return UnknownOption(f"encode: {refused}")


def _check(
    model: Any,
    batch_size: int,
    output_value: str | None,
    precision: str,
    device: str | None,
    truncate_dim: int | None,
) -> None:
    whole_number(batch_size, "batch_size", meaning="texts per batch, such as 32")
    if output_value is None:  # its rows are padded to a batch of batch_size texts: bertscope's differ
        raise InvalidSpec(
            "output_value=None (sentence-transformers' every feature per text, padded to its batch) is not "
            "offered: output_value='token_embeddings' gives the token embeddings, model.batch(texts) the "
            "input_ids and attention_mask"
        )
    if output_value not in OUTPUT_VALUES:
        raise InvalidSpec(
            f"output_value={output_value!r} is not supported; choose one of: {', '.join(OUTPUT_VALUES)}"
        )
    # one line for every other precision: int8 listed as a choice, then refused, misled
    if precision != "float32":
        quantized = ", ".join(p for p in PRECISIONS if p != "float32")
        raise InvalidSpec(
            f"precision={precision!r}: encode returns float32 only (precision='float32'); quantize the "
            f"result with sentence_transformers.quantization.quantize_embeddings ({quantized})"
        )
    if device is not None and not (isinstance(device, str) or type(device).__module__ == "torch"):
        raise InvalidSpec(
            f"device={device!r}: give one device, a str or a torch.device, such as 'cpu' (a list is "
            "sentence-transformers' multi-process pool: encode batches by tokens in one process)"
        )
    if device is not None and not _same_device(device, model.device):
        raise InvalidSpec(
            f"device={device!r}, but the model runs on {model.device}; "
            "load it there with bertscope.load(device=...)"
        )
    if truncate_dim is not None:
        whole_number(
            truncate_dim, "truncate_dim", meaning="the dimensions to keep, such as 128; or None for all"
        )


def _check_flags(**flags: object) -> None:
    """Refuse a flag that is not a bool (show_progress_bar may be None, its default): "no" and "0" are
    truthy, and a silent normalize_embeddings or tensor output would be wrong, as `embed(normalize=)` says."""
    for name, flag in flags.items():
        if not (isinstance(flag, (bool, np.bool_)) or (flag is None and name == "show_progress_bar")):
            raise InvalidSpec(f"{name} must be True or False, not {flag!r}")


def warn_truncated(n_dropped: Sequence[int] | np.ndarray, max_tokens: int, instead: str) -> None:
    """`say_truncated` for per-text counts of dropped tokens (n_texts,): truncation as sentence-transformers
    does it at max_seq_length, never in silence; `instead` says what keeps all."""
    dropped = np.asarray(n_dropped, dtype=np.int64)
    cut = int(np.count_nonzero(dropped > 0))
    # the caller's own line, however it came in (encode, encode_query, StaticModel's, an integration)
    level = caller_level() + 1
    say_truncated(cut, len(dropped), max_tokens, instead, tokens=int(dropped.sum()), stacklevel=level)


def say_truncated(
    cut: int, texts: int, max_tokens: int, instead: str, *, tokens: int | None = None, stacklevel: int = 3
) -> None:
    """The one TruncatedTextsWarning for `cut` of `texts` texts cut at the model's limit (with the `tokens`
    dropped where the caller counted them), if any were; `instead` says what keeps every token.
    `stacklevel` counts from this function, as `warnings.warn`'s does."""
    if cut:
        warnings.warn(cut_warning(cut, texts, max_tokens, instead, tokens), stacklevel=stacklevel)


def _same_device(asked: Any, running: Any) -> bool:
    """Whether `asked` ("cpu", "cuda:1", a torch.device) names the device the model runs on, read without
    torch (a light model answers without it); a kind with no index ("cuda") stands for any of its kind."""
    if device_kind(asked) != device_kind(running):
        return False
    indices = {_device_index(asked), _device_index(running)}
    return None in indices or len(indices) == 1


def _device_index(device: Any) -> int | None:
    index = getattr(device, "index", None)  # a torch.device
    _, _, given = str(device).partition(":")
    if index is None and given.isdigit():
        index = int(given)
    return index if isinstance(index, int) else None


def _texts_given(sentences: Any, options: dict[str, Any]) -> tuple[Any, dict[str, Any]]:
    """The texts, given as `sentences` (the first argument) or as `inputs=` (sentence-transformers 6's
    name), and the other keywords; both, or neither, refused in one line."""
    if "inputs" not in options:
        if sentences is None:
            raise InvalidInput("encode needs texts: encode(texts), a str or a list of str")
        return sentences, options
    rest = dict(options)
    inputs = rest.pop("inputs")
    if sentences is not None:
        raise InvalidSpec(
            "give the texts once: as the first argument (sentences=) or as inputs= (sentence-transformers "
            "6's name), not both"
        )
    if inputs is None:
        raise InvalidInput("encode needs texts: inputs=None; give a str or a list of str")
    return inputs, rest


_ENCODE_TAKES = "encode takes a str or a list of str"


def _as_list(sentences: Any) -> list[Any]:
    """The texts of `sentences` as a list, read as embed reads them (`text_items`: never an item's printed
    form; an (n, 2) array of strings as n (A, B) pairs, as sentence-transformers reads one)."""
    if isinstance(sentences, np.ndarray):
        return list(text_items(sentences, pairs=True, takes=_ENCODE_TAKES))  # other arrays: one line
    return texts_as_list(sentences, _ENCODE_TAKES)


def texts_as_list(texts: Any, takes: str) -> list[Any]:
    """`texts` as a list, or one line refusing what would embed the wrong texts (a dict's keys, a set in
    its hashes' order) or is no list; `takes` says what the caller takes ("encode takes a str or ...").
    The framework integrations read their texts through it too, so they refuse what encode refuses."""
    refuse_unusable(texts, takes)
    return list(texts)


def _torch_for_tensors(output_value: str | None, convert_to_tensor: bool, convert_to_numpy: bool) -> Any:
    """torch where the answer is torch tensors (sentence-transformers' token embeddings, its tensor and
    list-of-tensor outputs), else None: asked before anything runs, so an install without torch is told
    in one line (core/loading.py `require_torch`) what to install, or how to get NumPy arrays instead."""
    if output_value == "token_embeddings":
        return require_torch(
            "encode(output_value='token_embeddings')", needs="torch (its answer is torch tensors)",
            instead="model.embed_tokens(texts) for NumPy arrays",
        )  # fmt: skip
    if convert_to_tensor:
        return require_torch(
            "encode(convert_to_tensor=True)", needs="torch (its answer is a torch tensor)",
            instead="leave convert_to_tensor out for a NumPy array",
        )  # fmt: skip
    if not convert_to_numpy:
        return require_torch(
            "encode(convert_to_numpy=False)", needs="torch (its answer is a list of torch tensors)",
            instead="leave convert_to_numpy out for a NumPy array",
        )  # fmt: skip
    return None


def _empty(torch: Any, convert_to_tensor: bool, convert_to_numpy: bool) -> Any:
    if convert_to_tensor:
        return torch.tensor([])
    return np.array([]) if convert_to_numpy else []
