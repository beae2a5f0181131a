"""Per-family anatomy of the input embedding and access to the encoder layers.

One adapter per `config.model_type`; nothing outside this module asks which family a model is.
Each adapter names the parts of the embedding layer (`word`, `position`, `token_type`,
`projection`, `layernorm`), says which parts the family lacks, and where positions enter instead
when they are not an embedding row: `relative` (DeBERTa's attention biases) or `rotary` (ModernBERT
turns queries and keys by their positions inside every attention layer).
"""

from __future__ import annotations

import ast
import sys
from collections.abc import Callable
from dataclasses import dataclass
from functools import cache
from importlib.util import find_spec
from pathlib import Path
from typing import TYPE_CHECKING, Any

import numpy as np

from ..errors import ModelLoadError, UnsupportedArchitecture

if TYPE_CHECKING:
    # torch is imported where a model runs, so `bertscope tokens` and `info` can name a family without it
    import torch
    from torch import nn

# decoder_note and known_activations are the loader's and verify's (bertscope.families keeps these)
__all__ = ["EmbeddingParts", "Family", "PoolerLayout", "family_for", "SUPPORTED"]

PoolerFn = Callable[["torch.Tensor"], "torch.Tensor"]


@dataclass(frozen=True)
class EmbeddingParts:
    """The modules of one model's embedding layer, in the order the model applies them."""

    word: nn.Embedding
    position: nn.Embedding | None
    token_type: nn.Embedding | None
    projection_before_norm: nn.Module | None
    layernorm: nn.Module | None  # None: layer 0 is the rows as they are (EuroBERT)
    projection_after_norm: nn.Module | None
    zero_padding: bool
    lacks: tuple[str, ...]
    positions_in_attention: str | None = None  # "relative" or "rotary": positions enter inside attention
    notes: tuple[str, ...] = ()  # what else a learner should know about this embedding layer


@dataclass(frozen=True)
class PoolerLayout:
    """A trained pooler known exactly: `activation(hidden[:, 0] @ weight.T + bias)`, one dense layer
    (hidden, hidden) over the first token's last-layer vector, as transformers' AutoModel of the family
    runs it. `weight` and `bias` are the state-dict key suffixes of its tensors."""

    weight: str
    bias: str
    activation: str = "tanh"


# BertPooler, RobertaPooler, CamembertPooler, XLMRobertaPooler, MPNetPooler, JinaEmbeddingsV3Pooler:
# `dense` (nn.Linear(hidden, hidden)) then nn.Tanh() over hidden_states[:, 0] (transformers 5)
_DENSE_TANH = PoolerLayout("pooler.dense.weight", "pooler.dense.bias")


@dataclass(frozen=True)
class Family:
    """How one family builds its input embedding and where its encoder layers live."""

    name: str
    model_types: tuple[str, ...]
    layers_path: str = "encoder.layer"
    positions_after_padding: bool = False
    uses_token_types: bool = True
    # Where the embedding modules live: `model.embeddings` for most, the model itself (None) for EuroBERT.
    embeddings_attr: str | None = "embeddings"
    word_attr: str = "word_embeddings"
    norm_attr: str | None = "LayerNorm"  # None: no norm in the embedding layer
    # A norm the model applies after its last layer and reports as the last hidden state (ModernBERT's
    # final_norm): a forward stopped early must skip it, or layer k would come out normalised.
    final_norm_attr: str | None = None
    # "rotary" where every attention layer turns queries and keys by position (no position row is added).
    rotary: bool = False
    # MPNet: besides its absolute position rows, every attention layer adds a learned bias per head for
    # the bucketed distance between query and key (MPNetEncoder.relative_attention_bias).
    relative_bias: bool = False
    # The trained pooler of the family's AutoModel, read from the folder's weights and run without torch
    # (core/pooler_weights.py; weights of another shape leave it to the module); None: AutoModel builds no
    # pooler, whatever the weights hold (tests/test_light_pooler.py holds both against transformers)
    pooler_layout: PoolerLayout | None = None
    # The padding_idx RoBERTa-style position ids count from where the family fixes it whatever the config
    # says (MPNetEmbeddings: 1); None: the config's pad_token_id (RoBERTa, XLM-R, CamemBERT), as transformers
    position_pad_fixed: int | None = None
    # Whether type_vocab_size 0 builds no token-type table (DeBERTa-v2, GTE); the others build one of 0 rows
    # and look a row up for every token, which no forward can do
    type_rows_optional: bool = False
    # The order the embedding layer adds its rows in (those it has): BertEmbeddings.forward and its kin add
    # the segment row, then the position row; DeBERTa-v2 the position row first. Another order differs by
    # rounding (a bfloat16 step after LayerNorm), so the anatomy's proof adds them as the model does.
    sum_order: tuple[str, ...] = ("word", "token_type", "position")
    # The config keys naming an activation the encoder's own modules look up in transformers' ACT2FN
    # (DistilBERT's `activation`, ModernBERT's `hidden_activation`, DeBERTa's convolution's `conv_act`)
    activation_settings: tuple[str, ...] = ("hidden_act",)
    # Whether the family's layers read is_decoder and add_cross_attention (BertLayer and its copies):
    # a causal mask, and cross-attention layers that transformers builds for a decoder only
    decoder_settings: bool = False

    @property
    def builds_pooler(self) -> bool:
        """Whether the family's AutoModel builds a trained pooler (GTE's and Nomic BERT's build none even
        where their weights hold one): a folder's pooler weights count only then (FolderView.has_pooler)."""
        return self.pooler_layout is not None

    @property
    def word_weight(self) -> str:
        """The state-dict key (suffix) of the word-piece embedding matrix."""
        prefix = f"{self.embeddings_attr}." if self.embeddings_attr else ""
        return f"{prefix}{self.word_attr}.weight"

    def positions_in_attention(self, config: Any) -> str | None:
        """`relative` or `rotary` where positions enter inside attention, else None (a config or its dict)."""
        if self.rotary:
            return "rotary"
        if self.relative_bias:
            return "relative"
        relative = config.get("relative_attention") if isinstance(config, dict) else None
        if not isinstance(config, dict):
            relative = getattr(config, "relative_attention", None)
        return "relative" if relative else None

    def unsupported(self, config: Any) -> str | None:
        """Why bertscope cannot run `config` (a config or its dict) as the model's own code says, or None."""
        kind = _setting(config, "position_embedding_type")
        if kind in _DROPPED_POSITION_KINDS:
            return (
                f"its config asks for position_embedding_type={kind}, which transformers 5 no longer runs "
                "(it would drop the trained distance_embedding weights and answer with absolute positions "
                "alone, silently wrong); bertscope refuses it: use a checkpoint with "
                "position_embedding_type=absolute"
            )
        key = "n_layers" if _setting(config, "num_hidden_layers") is None else "num_hidden_layers"
        if _setting(config, key) == 0:  # transformers 5 returns no hidden state then
            return (
                f"its config has {key}=0: no encoder layer, and transformers returns no hidden state for it "
                "(not even the embedding output), so there is no vector to read; give a model with layers"
            )
        if self.uses_token_types and not self.type_rows_optional and _setting(config, "type_vocab_size") == 0:
            return (
                f"its config has type_vocab_size=0, but the {self.name} embedding layer adds a segment "
                "(token type) row to every token, from a table of 0 rows, so no forward can run "
                "(transformers' own fails too); set type_vocab_size in config.json to the rows the "
                "checkpoint was trained with"
            )
        return self._unread_settings(config)

    def _unread_settings(self, config: Any) -> str | None:
        """Why no forward of this family can run `config` (a config or its dict), read from config.json
        alone: a position count with no pad id, cross-attention without a decoder, an unknown activation."""
        if self.positions_after_padding and self.position_pad_fixed is None:
            if _pad_unset(config):
                return self._no_position_pad(config)
        if (
            self.decoder_settings
            and _setting(config, "add_cross_attention")
            and not _setting(config, "is_decoder")
        ):
            return (
                "its config sets add_cross_attention without is_decoder, and transformers builds "
                "cross-attention layers for a decoder only (it refuses the model: 'should be used as a "
                "decoder model if cross attention is added'); remove add_cross_attention from config.json"
            )
        known = known_activations() or frozenset()  # unread: the load's own failure says it
        for key in self.activation_settings if known else ():
            value = _setting(config, key)
            if value is not None and not callable(value) and not isinstance(value, str):
                return wrong_type(key, f" is {value!r}", f"expected str, got {type(value).__name__}")
            if isinstance(value, str) and value not in known:
                return (
                    f"its config sets {key}={value!r}, an activation transformers does not know (it knows: "
                    f"{', '.join(sorted(known))}); correct {key} in config.json to the one the checkpoint "
                    "was trained with"
                )
        return None

    def _no_position_pad(self, config: Any) -> str:
        # named as the config names its type (camembert, xlm-roberta), not the family that runs it (roberta)
        named = _setting(config, "model_type") or self.name
        return (
            f"the {named} embedding layer counts positions from the config's pad_token_id, which "
            "config.json leaves unset (null), so no forward can run (transformers' own fails at the first "
            "text); set pad_token_id in config.json to the tokenizer's pad id"
        )

    def position_pad(self, config: Any) -> int:
        """The id RoBERTa-style position ids count from (`padding_idx` of transformers' embedding layer): the
        family's fixed one (MPNet: 1), else the config's pad_token_id (a config or its dict), whatever the
        tokenizer pads with; ModelLoadError where the config leaves it unset, as `unsupported` says."""
        if self.position_pad_fixed is not None:
            return self.position_pad_fixed
        if _pad_unset(config):
            raise ModelLoadError(self._no_position_pad(config))
        pad = _setting(config, "pad_token_id")
        return 1 if pad is None else int(pad)  # a dict without it: the config class's default, 1

    def parts(self, model: Any) -> EmbeddingParts:
        """The embedding-layer modules of `model` (the bare encoder, e.g. BertModel)."""
        emb = getattr(model, self.embeddings_attr) if self.embeddings_attr else model
        position = getattr(emb, "position_embeddings", None)
        token_type = getattr(emb, "token_type_embeddings", None) if self.uses_token_types else None
        before = getattr(emb, "embed_proj", None)
        after = getattr(model, "embeddings_project", None)
        encoder = getattr(model, "encoder", None)
        after = after if after is not None else getattr(encoder, "embedding_hidden_mapping_in", None)
        lacks = tuple(
            name
            for name, part in (
                ("position", position),
                ("token_type", token_type),
                ("projection", before or after),
                ("layernorm", self.norm_attr),
            )
            if part is None
        )
        layernorm = getattr(emb, self.norm_attr) if self.norm_attr else None
        return EmbeddingParts(
            word=getattr(emb, self.word_attr),
            position=position,
            token_type=token_type,
            projection_before_norm=before,
            layernorm=layernorm,
            projection_after_norm=after,
            zero_padding=self.name == "deberta-v2",
            lacks=lacks,
            positions_in_attention=self.positions_in_attention(model.config),
            notes=self.notes(
                model.config, layernorm is not None, getattr(layernorm, "bias", True) is not None
            ),
        )

    def notes(self, config: Any, has_norm: bool, norm_has_bias: bool) -> tuple[str, ...]:
        """Plain sentences on what this embedding layer does that the parts alone do not show."""
        notes = []
        where = self.positions_in_attention(config)
        if where == "rotary":
            notes.append(
                "positions are rotary: each attention layer turns queries and keys by the token's position "
                "(0, 1, 2, ...); no position row is added here"
            )
        elif where == "relative" and self.relative_bias:
            notes.append(
                "positions enter twice: the absolute position rows added here, and in each attention layer a "
                "learned bias per head for the distance between query and key (bucketed, "
                f"relative_attention_num_buckets={_setting(config, 'relative_attention_num_buckets')})"
            )
        elif where == "relative" and _setting(config, "position_biased_input"):
            notes.append(
                "positions enter twice: the absolute position rows added here (position_biased_input), and "
                "in each attention layer position-to-content biases"
            )
        elif where == "relative":
            notes.append("positions are relative: each attention layer adds position-to-content biases")
        if not has_norm:
            notes.append(
                "no norm here: layer 0 is the word rows themselves; each layer normalises its own input"
            )
        elif not norm_has_bias:
            notes.append("the LayerNorm has no bias: it scales, it does not shift")
        return tuple(notes)

    def position_ids(self, input_ids: torch.Tensor, pad: int) -> torch.Tensor:
        """Position ids the model itself uses for `input_ids` (batch, tokens); `pad` is `position_pad`."""
        import torch

        positions = self.position_id_array(input_ids.cpu().numpy(), pad)
        return torch.from_numpy(np.array(positions)).to(
            input_ids.device
        )  # a copy: broadcast views are read-only

    def position_id_array(self, input_ids: np.ndarray, pad: int) -> np.ndarray:
        """`position_ids` for a NumPy (batch, tokens) array, without torch; `pad` is `position_pad` of the
        config (not the tokenizer's pad id, where the two differ)."""
        if self.positions_after_padding:
            # RoBERTa-style: tokens other than the pad id count from pad + 1, the pad id keeps pad.
            real = (input_ids != pad).astype(np.int64)
            return np.cumsum(real, axis=1) * real + pad
        return np.broadcast_to(np.arange(input_ids.shape[1], dtype=np.int64), input_ids.shape)

    def num_layers(self, model: Any) -> int:
        """The number of encoder layers (hidden states are this plus one)."""
        return int(model.config.num_hidden_layers)

    def stopped_after(self, model: Any, n_layers: int) -> Any:
        """`model` running only its first `n_layers` encoder layers (at least one), for one forward.

        A view: a copy of each module on the way to the layer list (and of the model, where a final norm
        is skipped) sharing every weight, buffer and hook; `model` itself is never changed, so forwards on
        it in other threads, early-stopped or not, run the whole network as they asked.
        """
        n_layers = max(1, n_layers)
        if n_layers >= self.num_layers(model):
            return model
        from torch import nn

        full = model.get_submodule(self.layers_path)
        swaps: dict[str, nn.Module] = {self.layers_path: nn.ModuleList(list(full)[:n_layers])}
        if self.final_norm_attr is not None and getattr(model, self.final_norm_attr, None) is not None:
            swaps[self.final_norm_attr] = nn.Identity()
        return _view(model, swaps)

    def pooler(self, model: Any) -> PoolerFn | None:
        """The model's own trained pooler over the first token, or None if it has none."""
        pooler = getattr(model, "pooler", None)
        if pooler is None:
            return None
        activation = getattr(model, "pooler_activation", None)
        if activation is not None:
            return lambda hidden: activation(pooler(hidden[:, 0]))
        return pooler


@dataclass(frozen=True)
class _Albert(Family):
    """ALBERT shares layer groups; its loop runs `config.num_hidden_layers` times."""

    def unsupported(self, config: Any) -> str | None:
        """ALBERT with several layers in a group reports a hidden state per inner layer (transformers 5:
        1 + layers x inner_group_num of them), which the layer numbering by num_hidden_layers would
        cut halfway through the network; released ALBERTs have one."""
        if (why := super().unsupported(config)) is not None:
            return why
        inner = _setting(config, "inner_group_num")
        if inner in (None, 1):
            return None
        return (
            f"this ALBERT's config has inner_group_num={inner}: its layers report {inner} hidden states "
            "each, and bertscope numbers one a layer (num_hidden_layers), so its last layer would not be "
            "the model's output; only inner_group_num=1 (every released ALBERT) is supported"
        )

    def stopped_after(self, model: Any, n_layers: int) -> Any:
        """`model` running only its first `n_layers` layer applications (at least one), for one forward: a
        view whose encoder reads a copy of the config with fewer layers; `model` is never changed."""
        import copy

        # The group index is i / (layers / groups): keep the spacing by leaving groups as they are.
        if model.config.num_hidden_groups != 1 or n_layers >= model.config.num_hidden_layers:
            return model
        config = copy.copy(model.encoder.config)
        config.num_hidden_layers = max(1, n_layers)
        return _view(model, {}, settings={"encoder": {"config": config}})


def _view(model: Any, swaps: dict[str, Any], settings: dict[str, dict[str, Any]] | None = None) -> Any:
    """A shallow copy of `model` with the submodules at the dotted paths of `swaps` replaced and the plain
    attributes of `settings` ({module path: {name: value}}) set, each on copies of the modules on the way
    there; every other module, weight, buffer and hook is `model`'s own, and `model` is left as it was."""
    copies: dict[str, Any] = {}

    def copied(path: str) -> Any:
        if path not in copies:
            parent_path, _, name = path.rpartition(".")
            original = model.get_submodule(path)
            twin = object.__new__(type(original))
            twin.__dict__.update(original.__dict__)
            twin.__dict__["_modules"] = dict(original._modules)  # its own children, the same modules
            copies[path] = twin
            if path:
                copied(parent_path)._modules[name] = twin
        return copies[path]

    copied("")
    for path, module in swaps.items():
        parent_path, _, name = path.rpartition(".")
        copied(parent_path)._modules[name] = module
    for path, values in (settings or {}).items():
        copied(path).__dict__.update(values)
    return copies[""]


def _pad_unset(config: Any) -> bool:
    """Whether `config` (a config or its dict) sets pad_token_id null: a dict without the key takes the
    config class's default (1 for RoBERTa, XLM-R and CamemBERT), as transformers reads it."""
    if isinstance(config, dict):
        return "pad_token_id" in config and config["pad_token_id"] is None
    return getattr(config, "pad_token_id", 1) is None


def decoder_note(config: Any) -> str | None:
    """What a config with is_decoder (a config or its dict) makes the family's layers do, in one line (the
    load's warning, verify's problem), or None where it sets none."""
    if not _setting(config, "is_decoder"):
        return None
    cross = (
        "; its cross-attention layers (add_cross_attention) run only on an encoder's states, which an "
        "encoder forward never passes, so they are unused, as in transformers"
        if _setting(config, "add_cross_attention")
        else ""
    )
    also = " (and add_cross_attention)" if cross else ""
    return (
        "config.json sets is_decoder: every layer runs a causal mask (each token sees only the tokens "
        f"before it), which no BERT-family encoder was trained with{cross}; remove is_decoder{also}"
    )


@cache
def known_activations() -> frozenset[str] | None:
    """The activation names transformers' ACT2FN knows, read without importing torch (its activations.py's
    ACT2CLS keys, where transformers.activations is not imported yet); None where they cannot be read."""
    module = sys.modules.get("transformers.activations")
    if module is not None:
        return frozenset(module.ACT2FN)
    spec = find_spec("transformers")
    if spec is None or not spec.submodule_search_locations:
        return None
    try:
        tree = ast.parse((Path(next(iter(spec.submodule_search_locations))) / "activations.py").read_text())
    except (OSError, SyntaxError, ValueError):
        return None
    for node in tree.body:
        if not isinstance(node, ast.Assign) or not isinstance(node.value, ast.Dict):
            continue
        if any(isinstance(t, ast.Name) and t.id == "ACT2CLS" for t in node.targets):
            keys = node.value.keys
            return frozenset(
                k.value for k in keys if isinstance(k, ast.Constant) and isinstance(k.value, str)
            )
    return None


def _setting(config: Any, key: str) -> Any:
    """`key` of a config or its dict (None where unset)."""
    return config.get(key) if isinstance(config, dict) else getattr(config, key, None)


# BERT's relative position keys (transformers 4), which no family of transformers 5 builds: such a config
# loads, and its distance_embedding weights are dropped as unexpected
_DROPPED_POSITION_KINDS = frozenset({"relative_key", "relative_key_query"})

_FAMILIES: tuple[Family, ...] = (
    Family("bert", ("bert",), pooler_layout=_DENSE_TANH, decoder_settings=True),
    Family(
        "roberta",
        ("roberta", "camembert"),
        positions_after_padding=True,
        pooler_layout=_DENSE_TANH,
        decoder_settings=True,
    ),
    Family(
        "xlm-roberta",
        ("xlm-roberta",),
        positions_after_padding=True,
        pooler_layout=_DENSE_TANH,
        decoder_settings=True,
    ),
    Family(
        "distilbert",
        ("distilbert",),
        layers_path="transformer.layer",
        uses_token_types=False,
        activation_settings=("activation",),
    ),
    # AlbertModel: `pooler` (nn.Linear(hidden, hidden)) and `pooler_activation` (nn.Tanh()) over [:, 0]
    _Albert("albert", ("albert",), pooler_layout=PoolerLayout("pooler.weight", "pooler.bias")),
    Family("electra", ("electra",), decoder_settings=True),
    Family(
        "deberta-v2",
        ("deberta-v2",),
        type_rows_optional=True,
        sum_order=("word", "position", "token_type"),
        activation_settings=("hidden_act", "conv_act"),
    ),
    Family(
        "mpnet",
        ("mpnet",),
        positions_after_padding=True,
        uses_token_types=False,
        pooler_layout=_DENSE_TANH,
        position_pad_fixed=1,
        relative_bias=True,
    ),
    # ModernBERT: word rows and a bias-free LayerNorm; its layers alternate global and local (sliding
    # window) attention, and the last hidden state is the final LayerNorm of the last layer's output.
    Family(
        "modernbert",
        ("modernbert",),
        layers_path="layers",
        uses_token_types=False,
        word_attr="tok_embeddings",
        norm_attr="norm",
        final_norm_attr="final_norm",
        rotary=True,
        activation_settings=("hidden_activation",),
    ),
    # BERT's embedding layer without the position rows; rotary attention (GTE-en v1.5, Nomic BERT). GteModel
    # and NomicBertModel build no pooler (add_pooling_layer=False) even where the weights hold one.
    Family("gte", ("gte",), layers_path="layers", rotary=True, type_rows_optional=True),
    Family("nomic_bert", ("nomic_bert",), layers_path="layers", rotary=True),
    Family("roformer", ("roformer",), rotary=True, decoder_settings=True),
    # Jina embeddings v3 as transformers ports it: XLM-R's embedding layer without position rows; the task
    # LoRA adapters of the original code are not part of it.
    Family(
        "jina_embeddings_v3",
        ("jina_embeddings_v3",),
        layers_path="layers",
        rotary=True,
        pooler_layout=_DENSE_TANH,
    ),
    # EuroBERT: word rows straight into pre-norm (RMSNorm) layers; its last hidden state is the final norm's.
    Family(
        "eurobert",
        ("eurobert",),
        layers_path="layers",
        uses_token_types=False,
        embeddings_attr=None,
        word_attr="embed_tokens",
        norm_attr=None,
        final_norm_attr="norm",
        rotary=True,
    ),
)

SUPPORTED: tuple[str, ...] = tuple(t for family in _FAMILIES for t in family.model_types)


def family_for(model_type: str) -> Family:
    """The adapter for a `config.model_type`, or UnsupportedArchitecture naming the supported ones."""
    for family in _FAMILIES:
        if model_type in family.model_types:
            return family
    raise UnsupportedArchitecture(
        f"model type {model_type!r} is not a BERT-family encoder bertscope supports; "
        f"supported: {', '.join(SUPPORTED)}"
    )


def wrong_type(key: str, value_said: str, why: str) -> str:
    """The one line of a config.json field of a type transformers refuses, said by the folder view and the
    load alike (core/loading.py's from huggingface_hub's own refusal): the field, `value_said` (' is 5'),
    `why` ('expected str, got int') and the fix."""
    return (
        f"config.json's {key}{value_said}, which transformers {transformers_version()} refuses ({why}); "
        f"correct {key} in config.json"
    )


def transformers_version() -> str:
    """transformers' version, read from its install without importing it (the light path has no torch)."""
    from importlib.metadata import PackageNotFoundError, version

    try:
        return version("transformers")
    except PackageNotFoundError:
        return "(not installed)"
