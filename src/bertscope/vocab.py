"""Adding whole-word tokens to a model, with informed initial rows, and saving the result as a model folder.

init="pieces"            the mean of the rows of the pieces the old tokenizer split the word into
init="mean"              the mean of every row of the input embedding matrix
init="random"            normal(0, std of the existing rows), seeded
init={"covid19": ["virus", "disease"]}   the mean of the listed words' rows (a word the vocabulary splits:
                                         its pieces' mean, with a warning naming them)
"""

from __future__ import annotations

import copy
import dataclasses
import json
import shutil
import tempfile
import warnings
from collections.abc import Mapping, Sequence
from pathlib import Path
from typing import TYPE_CHECKING, Any, TypeVar

import numpy as np
import torch
from tokenizers import AddedToken

from .core._enums import StrEnum
from .core.folder import read_json_object
from .errors import InvalidInput, InvalidSpec, caller_level
from .research.states import layered
from .static import several_words, spelled_pieces, static_word

if TYPE_CHECKING:
    from .core.encoder import Encoder

__all__ = [
    "Init", "add_tokens", "check_save_folder", "new_words", "normalised_forms", "pieces_refusal", "save",
    "unspelled",
]  # fmt: skip

InitSpec = str | Mapping[str, Sequence[str]]
E = TypeVar("E", bound="Encoder")
# What a static model is refused (its own add_tokens says the same words)
ADD_TOKENS_NEEDS = "new tokens with rows initialised for a transformer (add_tokens)"


class Init(StrEnum):
    """How a new token's row is initialised."""

    PIECES = "pieces"
    MEAN = "mean"
    RANDOM = "random"


def add_tokens(model: E, words: Sequence[str], *, init: InitSpec = "pieces", seed: int = 0) -> E:
    """A new Model whose tokenizer keeps each word whole, with initialised rows; `model` is left unchanged.

    Words the tokenizer already keeps as one piece (after its own normalisation, e.g. lowercasing, or a
    special token such as "[MASK]", matched as written) are left as they are. The new tokens match whole
    words only (`single_word`), so "covid19x" still splits. Words one token once normalised ("covid19",
    "COVID19" on an uncased model) are added once. A tokenizer that would not keep the word one token after
    a space (byte-level BPE: 'Ġ' is a piece of its own before an added token) is refused.
    """
    new = new_words(model, words)
    if not new:
        return model
    given = normalised_forms(model, words)
    forms = {w: given[w] for w in new}
    rows = _initial_rows(model, new, init, seed, same=_same_token(given))
    tokenizer = copy.deepcopy(model.loaded.tokenizer)
    tokenizer.add_tokens([AddedToken(forms[w], single_word=True, normalized=True) for w in new])
    _check_whole_in_text(tokenizer, new, forms)
    hf_model = copy.deepcopy(model.hf_model)
    ids = [tokenizer.convert_tokens_to_ids(forms[w]) for w in new]
    size = max(int(hf_model.get_input_embeddings().weight.shape[0]), len(tokenizer), max(ids) + 1)
    hf_model.resize_token_embeddings(size, mean_resizing=False)
    weight = hf_model.get_input_embeddings().weight
    with torch.no_grad():
        weight[ids] = torch.from_numpy(rows).to(weight.dtype).to(weight.device)
    loaded = model.loaded
    extended = dataclasses.replace(
        loaded,
        source=f"{loaded.source} + {len(new)} tokens",
        path=None,
        torch_model=hf_model,
        hf_tokenizer=tokenizer,
        view=None,
    )
    # the caller's own class (bertscope.Model from the facade), without this module importing it
    made = type(model)(
        extended, device=model.device, max_tokens=model.max_tokens, token_budget=model.engine.token_budget
    )
    # Its sentence-transformers attributes as the source's are now: it has no folder to read them from
    # (path None), and without them an e5-style model's extension would embed without its "query: ".
    made.__dict__["_prompts"] = model.prompts
    for name in ("truncate_dim", "similarity_fn_name"):
        if hasattr(model, name):
            setattr(made, name, getattr(model, name))
    return made


def new_words(model: Encoder, words: Sequence[str]) -> list[str]:
    """The words `add_tokens` adds: those whose normalised form (e.g. "mRNA" -> "mrna") is not yet one
    token of the vocabulary; the others are already single pieces and are left as they are."""
    # a special token ("[MASK]") is matched as written, before normalisation: it is one piece already,
    # and its lowercased form added beside it would be a second token the tokenizer never reaches
    forms = normalised_forms(model, words)  # first: a static model is refused there, in its own line
    added = set(model.loaded.tokenizer.get_added_vocab())
    # words one token once normalised ("covid19", "COVID19" on an uncased model) are added once, as the first
    firsts = list({form: w for w, form in reversed(forms.items())}.values())[::-1]
    return [w for w in firsts if forms[w] not in model.vocab and w not in added]


def _same_token(forms: Mapping[str, str]) -> dict[str, list[str]]:
    """Each normalised form with the words given that become it (one token, whatever they spell)."""
    same: dict[str, list[str]] = {}
    for w, form in forms.items():
        same.setdefault(form, []).append(w)
    return same


def _check_whole_in_text(tokenizer: Any, words: Sequence[str], forms: Mapping[str, str]) -> None:
    """Refuse a tokenizer that keeps a new token whole alone but not after a space (byte-level BPE reads
    the space as a piece of its own, 'Ġ', before the added token): the row would never be the word's."""
    alone = tokenizer("x", add_special_tokens=False)["input_ids"]
    for w in words:
        ids = tokenizer(f"x {w}", add_special_tokens=False)["input_ids"]
        if len(ids) != len(alone) + 1:
            pieces = tokenizer.convert_ids_to_tokens(ids[len(alone) :])
            raise InvalidInput(
                f"{w!r} cannot be added as one token of running text: this tokenizer (byte-level BPE or "
                f"similar) reads ' {forms[w]}' as {pieces}, the space a piece of its own; vocab add "
                "supports WordPiece tokenizers (BERT's)"
            )


def normalised_forms(model: Encoder, words: Sequence[str]) -> dict[str, str]:
    """Each word's form after the tokenizer's normalisation (words of one form are one token), checked to be
    one word."""
    # a static model first, in its own line, as its add_tokens says
    layered(model, ADD_TOKENS_NEEDS, plural=True)
    if isinstance(words, str) or not words:
        raise InvalidInput("add_tokens takes a non-empty list of words, e.g. ['covid19', 'mRNA']")
    normalizer = model.loaded.tokenizer.backend_tokenizer.normalizer
    if empty := [w for w in words if not w.strip()]:
        raise InvalidInput(f"{empty[0]!r} is empty: give a word, e.g. 'covid19'")
    forms = {w: (normalizer.normalize_str(w) if normalizer else w).strip() for w in words}
    if spaced := next(filter(None, map(several_words, words)), None):
        raise InvalidInput(spaced)
    if gone := [w for w, form in forms.items() if not form]:
        raise InvalidInput(f"{gone[0]!r} is nothing once the tokenizer normalises it: give a word it keeps")
    if split := [w for w, form in forms.items() if any(c.isspace() for c in form)]:
        # BERT's normaliser puts spaces around each CJK character: a token holding several never matches
        raise InvalidInput(
            f"{split[0]!r} cannot be added as one token: this tokenizer's normaliser splits it apart "
            f"({forms[split[0]]!r}: each CJK character is a word of its own), so no text would ever match it"
        )
    return forms


def _initial_rows(
    model: Encoder,
    words: Sequence[str],
    init: InitSpec,
    seed: int,
    *,
    same: Mapping[str, Sequence[str]] | None = None,
) -> np.ndarray:
    """(len(words), d) float32 initial rows, computed from the old model's matrix."""
    matrix = model.input_embeddings.detach().float().cpu().numpy()
    if isinstance(init, Mapping):
        missing = [w for w in words if not init.get(w)]
        if missing:
            raise InvalidSpec(f"init lists no words for {missing}; give e.g. {{{missing[0]!r}: ['virus']}}")
        _check_one_row_each(init, same or {})
        return np.stack([np.mean([_source_row(model, w, s) for s in init[w]], axis=0) for w in words])
    how = Init.parse(init, what="init")
    if how is Init.PIECES:
        if bad := unspelled(model, words):
            word, pieces = next(iter(bad.items()))
            raise InvalidInput(pieces_refusal(word, pieces))
        return np.stack([static_word(model, w).vector for w in words]).astype(np.float32)
    if how is Init.MEAN:
        return np.repeat(matrix.mean(axis=0, keepdims=True), len(words), axis=0)
    rng = np.random.default_rng(seed)
    return rng.normal(0.0, float(matrix.std()), size=(len(words), matrix.shape[1])).astype(np.float32)


def _check_one_row_each(init: Mapping[str, Sequence[str]], same: Mapping[str, Sequence[str]]) -> None:
    """Refuse words that become one token (after normalisation) but are given different source words."""
    for form, spelled in same.items():
        given = {w: list(init[w]) for w in spelled if w in init}
        if len({tuple(v) for v in given.values()}) > 1:
            raise InvalidSpec(
                f"{' and '.join(map(repr, given))} are one token ({form!r}) but init gives them different "
                f"words ({', '.join(f'{w}: {v}' for w, v in given.items())}): give one list for the token"
            )


def _source_row(model: Encoder, word: str, source: str) -> np.ndarray:
    """The row of `source`: its own where the vocabulary keeps it whole, else the mean of its pieces' rows
    (as init="pieces" makes a new word's), said in a warning naming the pieces, so a misspelt source
    ('zzqqxx': z ##z ##q ...) is seen, not averaged in silence."""
    found = static_word(model, source)
    if len(found.ids) != 1:
        warnings.warn(
            f"{source!r}, a word to initialise {word!r} from, is not one piece of the vocabulary: its row is "
            f"the mean of its pieces {found.pieces}; check its spelling (`bertscope tokens` shows a word's "
            "pieces)",
            UserWarning,
            stacklevel=caller_level(),
        )
    return found.vector


def unspelled(model: Encoder, words: Sequence[str]) -> dict[str, list[str]]:
    """The words whose pieces give no row of their own (the unknown token stands in, or none), each with its
    pieces: init="pieces" has nothing of theirs to average."""
    bad = {}
    for word in words:
        try:
            spelled_pieces(model, word)
        except InvalidInput:
            bad[word] = list(model.pieces(word).tokens)
    return bad


def pieces_refusal(word: str, pieces: Sequence[str], *, option: str = "init") -> str:
    """Why `word`'s row cannot come from its pieces, and the other inits, as the caller spells them
    (`init=` in Python, `--init` on the command line)."""
    if option.startswith("--"):
        asked, fix = f"{option} pieces", f"{option} mean or {option} random, or --init-from {word}=a,b"
    else:
        asked = f'{option}="pieces"'
        fix = f'{option}="mean" or {option}="random", or ' + f"{option}={{{word!r}: ['a', 'b']}}"
    return (
        f"{word!r} cannot take its row from its pieces ({asked}): they are {list(pieces)}, which are not the "
        f"word's; give {fix} (the row from words a and b)"
    )


def save(model: Encoder, folder: str | Path, *, overwrite: bool = False) -> Path:
    """Write a model folder (weights, config, tokenizer, sentence-transformers pooling) that others load.

    An existing non-empty folder is refused unless `overwrite`, and replaced then only when it holds
    nothing but what this save writes (an earlier save's folder, compared in every subfolder): anything
    else is left alone.
    """
    folder = Path(folder)
    if not check_save_folder(folder, overwrite=overwrite):
        folder.mkdir(exist_ok=True)
        _write_folder(model, folder)
        return folder
    # Written beside it first: the old folder is replaced only once the new one is whole, and only when
    # it holds nothing this save would not write (a user's other files are never deleted).
    staged = Path(tempfile.mkdtemp(prefix=f".{folder.name}.", dir=folder.parent))
    try:
        _write_folder(model, staged)
        # compared recursively: a user's file inside 1_Pooling/ is as much theirs as one beside config.json
        others = sorted(_entries(folder) - _entries(staged))
        if others:
            held = ", ".join(others[:3]) + (", ..." if len(others) > 3 else "")
            raise InvalidInput(
                f"{folder} is not a model folder a save wrote ({held}), so overwrite=True leaves it alone: "
                "name another folder, or remove it yourself"
            )
        old = Path(tempfile.mkdtemp(prefix=f".{folder.name}.old.", dir=folder.parent))
        folder.rename(old / folder.name)
        staged.rename(folder)
        shutil.rmtree(old)
    finally:
        shutil.rmtree(staged, ignore_errors=True)  # gone already when it became the folder
    return folder


def _entries(folder: Path) -> set[str]:
    """Every file and folder under `folder`, as paths relative to it."""
    return {p.relative_to(folder).as_posix() for p in folder.rglob("*")}


def check_save_folder(folder: Path, *, overwrite: bool) -> bool:
    """Refuse, before any work, a folder `save` must not write into; True when it would replace one."""
    if blocking := next((p for p in (folder, *folder.parents) if p.is_file()), None):
        raise InvalidInput(f"cannot write the model into {folder}: {blocking} is a file; give a new folder")
    if not folder.parent.exists():  # as distill and static refuse it: a mistyped path is not made
        raise InvalidInput(f"cannot write {folder}: the folder {folder.parent} does not exist")
    if not (folder.is_dir() and any(folder.iterdir())):
        return False
    if not overwrite:
        raise InvalidInput(
            f"{folder} exists and is not empty; choose a new folder, or pass overwrite=True to replace it"
        )
    if not (folder / "config.json").is_file():
        raise InvalidInput(
            f"{folder} is not a model folder (no config.json), so overwrite=True leaves it alone: "
            "name another folder, or remove it yourself"
        )
    return True


def _write_folder(model: Encoder, folder: Path) -> None:
    """The weights, config, tokenizer and sentence-transformers modules of `model`, into `folder`."""
    model.hf_model.save_pretrained(folder)
    model.loaded.tokenizer.save_pretrained(folder)
    loaded = model.loaded
    if loaded.st_pooling:
        _write_sentence_transformers(
            folder, loaded, int(getattr(model.config, "hidden_size", 0) or model.config.dim)
        )
    _write_st_attributes(model, folder)


def _write_st_attributes(model: Any, folder: Path) -> None:
    """config_sentence_transformers.json with the model's prompts, default prompt, similarity function
    and truncate_dim as they are now (the source folder's other keys kept), where the source had one or
    any differs from sentence-transformers' defaults: without it an e5-style model's saved copy stops
    putting "query: " before its texts."""
    source = model.loaded.path
    kept = read_json_object(Path(source) / _ST_CONFIG) if source is not None else {}
    prompts = model.prompts
    now = {
        "prompts": dict(prompts.prompts),
        "default_prompt_name": prompts.default_name,
        "similarity_fn_name": getattr(model, "similarity_fn_name", "cosine"),
    }
    truncate_dim = getattr(model, "truncate_dim", None)
    if truncate_dim is not None:
        now["truncate_dim"] = truncate_dim
    default = (
        not now["prompts"] and now["default_prompt_name"] is None and now["similarity_fn_name"] == "cosine"
    )
    if kept or not default or truncate_dim is not None:
        kept.pop("truncate_dim", None)  # the model's own now, set or cleared
        (folder / _ST_CONFIG).write_text(json.dumps({**kept, **now}, indent=2), encoding="utf-8")


_ST_CONFIG = "config_sentence_transformers.json"


def _write_sentence_transformers(folder: Path, loaded: Any, width: int) -> None:
    """The modules.json, pooling and normalize configs that carry the model's own sentence pooling."""
    modules: list[dict[str, Any]] = [
        {"idx": 0, "name": "0", "path": "", "type": "sentence_transformers.models.Transformer"},
        {"idx": 1, "name": "1", "path": "1_Pooling", "type": "sentence_transformers.models.Pooling"},
    ]
    if loaded.st_normalize:
        modules.append(
            {"idx": 2, "name": "2", "path": "2_Normalize", "type": "sentence_transformers.models.Normalize"}
        )
        (folder / "2_Normalize").mkdir()
    from .core.loading import pooling_config

    pooling = pooling_config(loaded.st_pooling, width)
    (folder / "1_Pooling").mkdir()
    (folder / "1_Pooling" / "config.json").write_text(json.dumps(pooling, indent=2))
    (folder / "modules.json").write_text(json.dumps(modules, indent=2))
    if loaded.st_max_seq_length:
        settings = {"max_seq_length": loaded.st_max_seq_length, "do_lower_case": False}
        (folder / "sentence_bert_config.json").write_text(json.dumps(settings, indent=2))
