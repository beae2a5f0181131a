"""Finding and loading a model: the bundled default, a local folder, or a hub id where reachable.

`load_parts` loads the PyTorch module and transformers' tokenizer. `open_light` opens a local folder
without either (a `FolderView`: config, tokenizer.json, safetensors): its `Loaded` loads the PyTorch
module only when a feature first asks for it (`Loaded.model`), with a notice (logging, INFO) when that
takes seconds.
"""

from __future__ import annotations

import json
import logging
import os
import re
import sys
import threading
import time
import warnings
from contextlib import AbstractContextManager
from contextvars import ContextVar
from dataclasses import dataclass
from pathlib import Path
from typing import TYPE_CHECKING, Any, TypeGuard

from ..errors import BackendUnavailable, ModelLoadError, caller_level
from ._enums import DType
from .context_vars import set_within
from .cpu import cpu_flags, has_native_bf16, has_vnni
from .families import Family, decoder_note, family_for, transformers_version, wrong_type
from .folder import (
    BUNDLED,
    DEFAULT_MODEL,
    ENV_MODEL,
    FolderView,
    bundled_path,
    local_folder,
    pooling_config,
    read_json_object,
    sentence_transformers_settings,
)
from .safetensors_header import misshaped, safetensors_tensors
from .st_settings import lowercase_first

if TYPE_CHECKING:
    import torch

__all__ = [
    "DEFAULT_MODEL", "Loaded", "asked_mode", "device_kind", "faster_than_bfloat16", "is_model2vec",
    "load_parts", "mode_asked", "modes_spelled", "open_light", "require_torch", "spelled_mode",
    "torch_load_reason", "torch_loaded_for", "torch_missing", "warn_slow_bfloat16",
    "pooling_config", "resolve_device", "resolve_dtype",
]  # fmt: skip

# Loading the PyTorch module for a feature that needs it: a notice when it takes this long, logged at INFO
# (a Python caller sees it where it turns logging on; the command line says it on stderr, not under -q).
_SAY_AFTER_S = 1.0
_log = logging.getLogger(__name__)
_TORCH_LOAD = threading.Lock()
# Why the PyTorch module is loaded now, where the code that asks for it knows (`torch_loaded_for`): the
# notice gives that reason alone; unset, it gives both that it may be.
torch_load_reason: ContextVar[str | None] = ContextVar("bertscope_torch_load_reason", default=None)
FIRST_EXPORT = "for a first export, made once (the exported graph then computes the vectors)"
GRAPH_LACKS = "for a feature the exported graph does not serve, which runs on the PyTorch module"
# The torch the Makefile installs (TORCH_VERSION; tests/test_cli_audit19.py holds them equal): what an
# install without it is told to add.
TORCH_PIN = "2.13.0"
_INSTALL = {"torch": f"pip install 'torch=={TORCH_PIN}'", "transformers": "pip install 'transformers>=4.48'"}
# The fix every refusal for want of torch names.
TORCH_INSTALL = f"{_INSTALL['torch']} (the version bertscope's Makefile installs)"


def torch_missing(
    missing: str, what: str, *, needs: str = "the model's PyTorch module", instead: str | None = None
) -> BackendUnavailable:
    """The one-line error of `what` (a feature, a command) that runs on the PyTorch module (or `needs`
    torch for something else: its tensors) where `missing` (torch or transformers) cannot be imported: an
    install without it answers from exported graphs only. `instead`: what else gives it without torch."""
    fix = _INSTALL.get(missing, f"pip install {missing}")
    return BackendUnavailable(
        f"{what} needs {needs}, and {missing} is not installed here: {fix} (the version bertscope's "
        f"Makefile installs){f', or {instead}' if instead else ''}"
    )


def require_torch(what: str, *, needs: str = "the model's PyTorch module", instead: str | None = None) -> Any:
    """The torch module, or `torch_missing`'s one-line error for `what` where it cannot be imported."""
    try:
        import torch
    except ImportError:
        raise torch_missing("torch", what, needs=needs, instead=instead) from None
    return torch


@dataclass
class Loaded:
    """What a model folder holds: the encoder, its tokenizer, family and sentence-transformers settings.

    Opened light (`view` set, `torch_model` None), the PyTorch module and transformers' tokenizer are
    loaded on first use of `model` or `tokenizer`; the engine answers from an exported graph without them.
    """

    source: str
    path: Path | None
    torch_model: Any
    hf_tokenizer: Any
    family: Family
    st_pooling: str | None
    st_normalize: bool
    st_max_seq_length: int | None
    st_unsupported: str | None = None
    trust_remote_code: bool = False
    view: FolderView | None = None  # the folder read without torch, where it was opened light
    st_lower_case: bool = False  # sentence_bert_config.json's do_lower_case: every tokenizer lowercases first
    # sentence_bert_config.json's query_length, document_length and query_expansion: st_settings.role_refusal
    st_query_length: int | None = None
    st_document_length: int | None = None
    st_query_expansion: bool = False

    @property
    def model(self) -> Any:
        """The PyTorch module (float32 on the CPU where the folder was opened light)."""
        if self.torch_model is None:
            with _TORCH_LOAD:  # the service's threads may ask at once: one load
                if self.torch_model is None:
                    self._load_torch()
        return self.torch_model

    @property
    def tokenizer(self) -> Any:
        """transformers' tokenizer of the folder (loaded on first use where the folder was opened light)."""
        if self.hf_tokenizer is None:
            try:
                import transformers
            except ImportError:
                raise torch_missing("transformers", f"{self.source}: transformers' tokenizer") from None
            assert self.path is not None
            _quiet(transformers)
            tokenizer = transformers.AutoTokenizer.from_pretrained(str(self.path))
            if self.st_lower_case:
                lowercase_first(tokenizer.backend_tokenizer)
            self.hf_tokenizer = tokenizer
        return self.hf_tokenizer

    @property
    def has_torch(self) -> bool:
        """Whether the PyTorch module is loaded."""
        return self.torch_model is not None

    def _load_torch(self) -> None:
        what = (
            f"{self.source}: what was asked (a first export, or a feature the exported graph does not serve)"
        )
        torch = require_torch(what)
        fresh = "transformers" not in sys.modules
        start = time.perf_counter()
        try:
            import transformers
        except ImportError:
            raise torch_missing("transformers", what) from None
        # The folder passed `open_light`'s checks (a known family, no model code); the module alone is
        # loaded: transformers' tokenizer only if something asks for it (`tokenizer`).
        _quiet(transformers)
        module, loading = _pretrained(
            transformers, self.source, self.path, str(self.path), {"dtype": torch.float32}
        )
        _check_weights(self.source, module, loading)
        self.torch_model = module.eval()
        if fresh:  # a process that had transformers loaded paid for it before: nothing to say
            say_torch_loaded(time.perf_counter() - start)


def say_decoder(source: str, family: Family, config: Any) -> None:
    """Warn once, at the caller's line, where config.json sets is_decoder on a family whose layers read it:
    bertscope runs the config as transformers does (a causal mask), in `verify`'s words."""
    if family.decoder_settings and (note := decoder_note(config)) is not None:
        warnings.warn(f"{source}: {note}", UserWarning, stacklevel=caller_level())


def torch_loaded_for(reason: str) -> AbstractContextManager[None]:
    """Within the block, a PyTorch module loaded on first need is said to be loaded `reason` (the words
    after "loaded PyTorch and the model in N s: ", as `FIRST_EXPORT`)."""
    return set_within(torch_load_reason, reason)


def say_torch_loaded(took: float) -> None:
    """The notice for a PyTorch module that took `took` seconds to load, where that is long enough to say:
    logged at INFO under `bertscope.core.loading`, never printed (the command line shows it on stderr)."""
    if took >= _SAY_AFTER_S:
        reason = torch_load_reason.get() or f"{FIRST_EXPORT}, or {GRAPH_LACKS}"
        _log.info("loaded PyTorch and the model in %.1f s: %s", took, reason)


def open_light(name: str | os.PathLike[str] | None) -> Loaded | None:
    """`name`'s folder opened without torch or transformers, or None where only a full load can open it
    (no tokenizer.json or safetensors matrix, model code shipped with it, a family not known); a folder
    whose config or weights the load refuses is refused so here (ModelLoadError)."""
    view = FolderView.open(name)
    if view is None or view.info() is None:
        return None
    if (why := view.family.unsupported(view.config)) is not None:
        raise ModelLoadError(f"{view.source}: {why}")
    say_decoder(view.source, view.family, view.config)
    # the weights held against config.json, as the load refuses them (`bertscope info` says what the
    # loaded model would, and a folder no load takes is refused here in the same words)
    misfits = view.misfits()
    if misfits.extra:
        raise weights_dropped(view.source, misfits.extra)
    if misfits.left_out:
        raise weights_left_out(view.source, misfits.left_out)
    st = sentence_transformers_settings(view.path)
    return Loaded(
        view.source, view.path, None, None, view.family, st.pooling, st.normalize, st.max_seq_length,
        st.unsupported, False, view, st.lower_case, st.query_length, st.document_length, st.query_expansion,
    )  # fmt: skip


def device_kind(device: torch.device | str) -> str:
    """ "cpu" or "cuda" (or another torch device type) of a torch.device or a device name ("cuda:1"), read
    without torch: a model opened light holds the name "cpu"."""
    return str(getattr(device, "type", device)).split(":")[0]


def resolve_device(device: str | torch.device | None) -> torch.device:
    """`auto` (or None) is CUDA where present, else CPU; a device this machine lacks is refused by name."""
    import torch

    from ..errors import InvalidSpec

    if device is None or str(device) == "auto":
        return torch.device("cuda" if torch.cuda.is_available() else "cpu")
    try:
        resolved = torch.device(device)
    except (RuntimeError, TypeError) as exc:
        raise InvalidSpec(f"unknown device {str(device)!r}; use auto, cpu, cuda or cuda:N") from exc
    here = machine_devices()
    if resolved.type == "cuda" and not torch.cuda.is_available():
        raise InvalidSpec(
            f"device {str(device)!r} asked, but torch {torch.__version__} sees no CUDA GPU here (this "
            f"machine has: {', '.join(here)}); use device='cpu' (or 'auto')"
        )
    if resolved.type == "cuda" and resolved.index is not None and resolved.index >= torch.cuda.device_count():
        raise InvalidSpec(
            f"device {str(device)!r} asked, but this machine has {', '.join(here)}; "
            "use one of those (or 'auto')"
        )
    if resolved.type not in ("cpu", "cuda") and resolved.type not in here:
        raise InvalidSpec(
            f"device {str(device)!r} asked, but torch {torch.__version__} sees no {resolved.type} device "
            f"here; this machine has: {', '.join(here)}; use device='cpu' (or 'auto')"
        )
    return resolved


def machine_devices() -> list[str]:
    """The torch devices this machine runs: cpu, each CUDA GPU (cuda:N), mps and xpu where present."""
    import torch

    found = ["cpu"]
    if torch.cuda.is_available():
        found += [f"cuda:{i}" for i in range(torch.cuda.device_count())]
    mps = getattr(torch.backends, "mps", None)
    if mps is not None and mps.is_available():
        found.append("mps")
    xpu = getattr(torch, "xpu", None)
    if xpu is not None and xpu.is_available():
        found.append("xpu")
    return found


def resolve_dtype(
    dtype: DType | str | torch.dtype, device: torch.device | str, *, warn: bool = True
) -> torch.dtype:
    """A torch dtype from its name; float16 only where the device runs it well (CUDA); with `warn`,
    `warn_slow_bfloat16` too (a caller that may still refuse the load warns itself, after)."""
    import torch

    from ..errors import InvalidSpec

    names = {DType.FLOAT32: torch.float32, DType.BFLOAT16: torch.bfloat16, DType.FLOAT16: torch.float16}
    if isinstance(dtype, torch.dtype):
        if dtype not in names.values():  # float64, int8, ...: as the name "float64" is refused
            note = "" if dtype.is_floating_point else " (int8 is quantize='int8', not a dtype)"
            raise InvalidSpec(
                f"unknown dtype {dtype!r}; choose one of: {', '.join(m.value for m in DType)}{note}"
            )
        resolved = dtype
    else:
        resolved = names[DType.parse(dtype, what="dtype")]
    kind = device_kind(device)
    if resolved is torch.float16 and kind != "cuda":
        raise InvalidSpec("float16 runs on CUDA only; on CPU use dtype='bfloat16' or 'float32'")
    if warn:
        warn_slow_bfloat16(resolved, device)
    return resolved


# The mode compare_modes is loading by its name (None: a load asked by keywords), and how its caller spells
# a mode (bench: `--modes bfloat16`): a slow way's warning names the mode asked, and a mode in its advice,
# where load's keywords would name options the caller never gave.
_MODE_ASKED: ContextVar[str | None] = ContextVar("mode_asked", default=None)
_MODE_SPELLED: ContextVar[str] = ContextVar("mode_spelled", default="mode '{}'")


def mode_asked(name: str) -> AbstractContextManager[None]:
    """Within: the way loading is the mode `name`, as compare_modes asks it; its warnings say so."""
    return set_within(_MODE_ASKED, name)


def modes_spelled(form: str) -> AbstractContextManager[None]:
    """Within: a mode named in a warning is spelled `form` with its name (bench: `--modes {}`)."""
    return set_within(_MODE_SPELLED, form)


def asked_mode() -> str | None:
    """The mode being loaded by name (`mode_asked`), spelled as its caller spells one; None for a load."""
    mode = _MODE_ASKED.get()
    return None if mode is None else spelled_mode(mode)


def spelled_mode(name: str) -> str:
    """The mode `name` as the caller comparing modes spells one: `mode 'int8'`, bench's `--modes int8`."""
    return _MODE_SPELLED.get().format(name)


def warn_slow_bfloat16(dtype: torch.dtype, device: torch.device | str) -> None:
    """Warn, at the caller's line, where bfloat16 is asked of a CPU that does not multiply it natively."""
    import torch

    if dtype is torch.bfloat16 and device_kind(device) == "cpu" and cpu_flags() and not has_native_bf16():
        asked = asked_mode() or "dtype='bfloat16'"
        warnings.warn(
            f"this CPU has no native bfloat16 (AVX-512 BF16 or AMX): {asked} runs several times slower "
            f"than float32 here; for speed on this CPU use {faster_than_bfloat16()}",
            UserWarning,
            stacklevel=caller_level(),
        )


def faster_than_bfloat16() -> str:
    """What runs fastest on a CPU without native bfloat16: int8 where it has VNNI (fast.candidates offers
    it there), else float32 (without VNNI int8's dot products lose to float32, bench/BENCHMARKS.md); as a
    mode where modes are compared (`mode_asked`)."""
    if _MODE_ASKED.get() is not None:
        return spelled_mode("int8" if has_vnni() else "float32")
    return "quantize='int8'" if has_vnni() else "dtype='float32' (the default)"


def load_parts(
    name: str | os.PathLike[str] | None,
    *,
    dtype: torch.dtype,
    device: torch.device,
    trust_remote_code: bool = False,
) -> Loaded:
    """Load the model and tokenizer behind `name` (None: the bundled default).

    A folder whose config.json maps AutoModel to code it ships (`auto_map`) is refused unless
    `trust_remote_code`: without it transformers would prompt, or run its own class of the same
    model_type on weights made for another (Jina BERT's config says "bert").
    """
    import transformers

    _quiet(transformers)
    if name is None or name == BUNDLED:
        path: Path | None = bundled_path()
        source = DEFAULT_MODEL
    else:
        source = str(name)
        path = local_folder(source)
    target = str(path) if path is not None else source
    remote = {"trust_remote_code": trust_remote_code}
    if path is not None and is_model2vec(path):
        raise ModelLoadError(  # transformers would call its own version out of date
            f"{source} is a static model (model2vec) with no layers: it has no forward to run; open it "
            "with bertscope.load() (a StaticModel: embed, similarity, encode) or pass the model it was "
            "distilled from"
        )
    shipped = _shipped_code(path)
    if shipped is not None and not trust_remote_code:
        raise _needs_remote_code(source, shipped)
    written = read_json_object(path / "config.json") if path is not None else {}
    if isinstance(written.get("model_type"), str):  # transformers would name its own types, not ours
        family_for(written["model_type"])
    try:
        config = transformers.AutoConfig.from_pretrained(target, **remote)
    except (OSError, ValueError, _strict_error()) as exc:
        if "trust_remote_code" in str(exc):
            raise _needs_remote_code(source, "its config's model type") from None
        raise _not_loadable(source, path, exc) from None
    shipped = _auto_model(getattr(config, "auto_map", None), config.model_type)
    if shipped is not None and not trust_remote_code:  # a hub id: its config.json is read only now
        raise _needs_remote_code(source, shipped)
    family = family_for(config.model_type)
    if (why := family.unsupported(config)) is not None:
        raise ModelLoadError(f"{source}: {why}")
    say_decoder(source, family, config)
    model, loading = _pretrained(transformers, source, path, target, {"dtype": dtype, **remote})
    try:
        tokenizer = _auto_tokenizer(transformers, target, remote)
    except (OSError, ValueError, RuntimeError) as exc:
        raise _not_loadable(source, path, exc) from None
    _check_weights(source, model, loading)
    if getattr(tokenizer, "backend_tokenizer", None) is None:
        raise ModelLoadError(f"{source}: bertscope needs a fast (tokenizers) tokenizer; this folder has none")
    rows = int(getattr(config, "vocab_size", 0) or 0)
    if len(tokenizer) < rows // 2:
        # transformers builds an empty tokenizer when the files are missing: every word would be [UNK].
        raise ModelLoadError(
            f"{source}: its tokenizer has {len(tokenizer)} entries for a vocabulary of {rows} rows, so the "
            "tokenizer files are missing (tokenizer.json, vocab.txt, ...); copy them from the model's source"
        )
    model.eval().to(device)
    st = sentence_transformers_settings(path)
    if st.lower_case:  # sentence_bert_config.json's do_lower_case, as sentence-transformers reads it
        lowercase_first(tokenizer.backend_tokenizer)
    return Loaded(
        source, path, model, tokenizer, family, st.pooling, st.normalize, st.max_seq_length, st.unsupported,
        trust_remote_code, st_lower_case=st.lower_case, st_query_length=st.query_length,
        st_document_length=st.document_length, st_query_expansion=st.query_expansion,
    )  # fmt: skip


def _auto_tokenizer(transformers: Any, target: str, remote: dict[str, Any]) -> Any:
    """transformers' tokenizer of `target`. Tokenizer files that are JSON but hold no tokenizer (a
    tokenizer.json of `{}`) raise KeyError or TypeError in transformers and a bare Exception in tokenizers:
    a ValueError saying so here, which the load turns into its one line; a class that needs a package not
    installed (RoFormer's rjieba) raises ImportError: the ValueError names the package to install."""
    try:
        return transformers.AutoTokenizer.from_pretrained(target, **remote)
    except (OSError, ValueError, RuntimeError):
        raise
    except ImportError as exc:
        # the tokenizer's class needs a package (RoFormer's rjieba): the files are fine, install it
        said = " ".join(str(exc).split())
        wanted = re.search(r"install (?:the )?`?([A-Za-z0-9_.-]+)", said)
        fix = f"pip install {wanted.group(1).rstrip('.')}" if wanted else "install the package it names"
        raise ValueError(
            f"its tokenizer needs a package that is not installed here ({said}); {fix}"
        ) from None
    except Exception as exc:
        said = str(exc).strip().splitlines()[0] if str(exc).strip() else ""
        raise ValueError(
            f"its tokenizer files hold no tokenizer ({type(exc).__name__}: {said}); copy tokenizer.json "
            "and tokenizer_config.json again from the model's source"
        ) from None


def _pretrained(
    transformers: Any, source: str, path: Path | None, target: str, options: dict[str, Any]
) -> tuple[Any, dict[str, Any]]:
    """transformers' AutoModel of `target` and its loading info, or the load's one-line refusal: a damaged
    safetensors file named as the light path names it, tensors shaped otherwise than the config named
    (`_refuse_misshaped`), else transformers' reason (`_not_loadable`)."""
    from safetensors import SafetensorError

    try:
        return transformers.AutoModel.from_pretrained(target, output_loading_info=True, **options)
    # corrupt weights raise RuntimeError or SafetensorError; a config field of the wrong type, the strict one
    except (OSError, ValueError, RuntimeError, SafetensorError, _strict_error()) as exc:
        if path is not None and isinstance(exc, (RuntimeError, SafetensorError)):
            safetensors_tensors(path)  # a damaged safetensors file: named as the light path names it
        misshaped = "ignore_mismatched_sizes" in str(exc)
        failed = _not_loadable(source, path, exc)
        # its traceback holds from_pretrained's frames and the model they built: let them go now
        exc.__traceback__ = None
    # outside `except`: neither the first model nor its error stays alive
    if misshaped:
        _refuse_misshaped(transformers, source, target, options)
    raise failed


def _check_weights(source: str, model: Any, loading: dict[str, Any]) -> None:
    """Refuse a checkpoint that leaves weights out (transformers would fill them with random values, and
    every load would answer differently) or holds weights of the encoder that transformers drops (a
    setting it no longer reads: the model would run without them); a missing pooler only means the model
    has none, and a head's weights (`cls.`, a classifier) are not the encoder's."""
    dropped = _dropped_weights(model, loading.get("unexpected_keys") or ())
    if dropped:
        raise weights_dropped(source, dropped)
    wrong = _wrong_weights(loading)
    if wrong:
        raise weights_left_out(source, wrong)
    if loading.get("missing_keys"):  # only the pooler's: it is random, not trained
        model.pooler = None  # pooling="pooler" is refused as on a model without one


def _wrong_weights(loading: dict[str, Any]) -> list[str]:
    """The weights a load left out (a missing pooler aside: the model has none) or misshaped, named as
    `weights_left_out` names them; a pooler missing beside misshaped weights hides none of them."""
    missing = sorted(key for key in loading.get("missing_keys") or () if not _unread_weight(key))
    return missing + sorted(map(_misshaped_key, loading.get("mismatched_keys") or ()))


def _unread_weight(key: str) -> bool:
    """A weight the model's forward never reads, so one left out runs nothing at random: the pooler (the
    model has none), and the cross-attention layers of an is_decoder + add_cross_attention config, which
    read an encoder's states that an encoder forward never passes (as in transformers)."""
    return key.startswith("pooler.") or ".crossattention." in key


def weights_dropped(source: str, dropped: list[str]) -> ModelLoadError:
    """The one line refusing a checkpoint that holds encoder weights transformers builds no place for."""
    more = f" and {len(dropped) - 3} more" if len(dropped) > 3 else ""
    return ModelLoadError(
        f"{source}: the checkpoint holds {', '.join(dropped[:3])}{more}, which transformers "
        f"{transformers_version()} builds no place for from this config.json, so the model would run "
        "without them (silently another model); bertscope refuses it: use a checkpoint whose config "
        "matches its weights"
    )


def weights_left_out(source: str, wrong: list[str]) -> ModelLoadError:
    """The one line refusing a checkpoint that leaves out or misshapes weights the config asks for
    (`wrong`: names, a misshaped one with its shape in the file and the shape the config gives it)."""
    more = f" and {len(wrong) - 3} more" if len(wrong) > 3 else ""
    return ModelLoadError(
        f"{source}: the weights leave out or misshape {', '.join(wrong[:3])}{more}; the model would run "
        "them at random values (another answer at every load): copy the whole checkpoint"
    )


def _misshaped_key(entry: Any) -> str:
    """A mismatched key of transformers' loading info, `(name, shape in the file, shape in the model)`
    in transformers 4.48 to 5, as `name (37x32 in the file, 40x32 by config.json)`."""
    if isinstance(entry, (tuple, list)) and len(entry) == 3:
        name, stored, asked = entry
        return misshaped(name, stored, asked)
    return str(entry)


def _refuse_misshaped(transformers: Any, source: str, target: str, options: dict[str, Any]) -> None:
    """Where transformers refused tensors shaped otherwise than the config asks (its error names only
    `ignore_mismatched_sizes`, the shapes went to a log bertscope keeps quiet), load again letting them
    through to read which (`mismatched_keys`), and refuse with them named, as a missing weight is. Called
    once the first load's model is gone; the second is dropped before the refusal is raised (its
    traceback would keep it)."""
    try:
        model, loading = transformers.AutoModel.from_pretrained(
            target, output_loading_info=True, ignore_mismatched_sizes=True, **options
        )
    except Exception:  # the second load fails otherwise: the first error's line says what it can
        return
    del model
    wrong = _wrong_weights(loading)
    if wrong:
        raise weights_left_out(source, wrong)


def _dropped_weights(model: Any, unexpected: Any) -> list[str]:
    """The unexpected keys of a load that belong to a module the encoder runs (its embeddings, layers,
    norms), after the head model's prefix (`bert.`); a pooler the family does not build (GTE) and a
    head's weights are left to it."""
    prefix = f"{getattr(model, 'base_model_prefix', '') or ''}."
    runs = {name for name, _ in model.named_children()} - {"pooler"}
    found = []
    for key in sorted(map(str, unexpected)):
        bare = key.removeprefix(prefix) if prefix != "." else key
        if bare.split(".", 1)[0] in runs:
            found.append(key)
    return found


def _nested_transformer(path: Path) -> str | None:
    """The subfolder (`0_Transformer`) of a sentence-transformers folder's Transformer module, or None."""
    try:
        modules = json.loads((path / "modules.json").read_text(encoding="utf-8"))
    except (OSError, ValueError):
        return None
    for module in modules if isinstance(modules, list) else ():
        inner = str(module.get("path") or "") if isinstance(module, dict) else ""
        if str(module.get("type", "")).endswith("Transformer") and inner and (path / inner).is_dir():
            return inner
    return None


def _router_routes(path: Path) -> str | None:
    """The routes of a sentence-transformers Router folder (modules.json names a Router module), each with
    its modules' folders as router_config.json's `structure` lists them ("query: query_0_Transformer,
    query_1_Pooling; ..."), "query and document" where it cannot be read; None for any other folder."""
    try:
        modules = json.loads((path / "modules.json").read_text(encoding="utf-8"))
    except (OSError, ValueError):
        return None
    entries = modules if isinstance(modules, list) else []
    kinds = [str(m.get("type", "")).rsplit(".", 1)[-1] for m in entries if isinstance(m, dict)]
    if "Router" not in kinds:
        return None
    structure = read_json_object(path / "router_config.json").get("structure")
    if not isinstance(structure, dict) or not structure:
        return "query and document"
    return "; ".join(
        f"{route}: {', '.join(map(str, folders)) if isinstance(folders, list) else folders}"
        for route, folders in structure.items()
    )


def _quiet(transformers: Any) -> None:
    """transformers' warnings and progress bars off: bertscope says what matters in its own words."""
    transformers.utils.logging.set_verbosity_error()
    transformers.utils.logging.disable_progress_bar()


def is_model2vec(name: str | os.PathLike[str] | None) -> TypeGuard[str | os.PathLike[str]]:
    """Whether `name` is a local folder whose config.json says `"model_type": "model2vec"` (a static
    model: rows, no forward)."""
    return name is not None and read_json_object(Path(name) / "config.json").get("model_type") == "model2vec"


def _shipped_code(path: Path | None) -> str | None:
    """The class a local folder's config.json maps AutoModel to in code it ships, or None."""
    if path is None:
        return None
    config = read_json_object(path / "config.json")  # unreadable: transformers' own reading says why
    if not config:
        return None
    return _auto_model(config.get("auto_map"), str(config.get("model_type")))


def _auto_model(auto_map: Any, model_type: str) -> str | None:
    """auto_map's AutoModel (or AutoConfig) entry, unless it names transformers' own class of the type.

    transformers ports some remote-code encoders (Nomic BERT) under their original class names and
    converts their weights on load: those run transformers' own code, so nothing shipped is needed.
    """
    if not isinstance(auto_map, dict):
        return None
    entry = auto_map.get("AutoModel") or auto_map.get("AutoConfig")
    if isinstance(entry, (list, tuple)):
        entry = entry[0]
    if not entry:
        return None
    from transformers.models.auto.modeling_auto import MODEL_MAPPING_NAMES

    native = MODEL_MAPPING_NAMES.get(model_type)
    if "AutoModel" in auto_map and native == str(entry).rsplit(".", 1)[-1]:
        return None
    return str(entry)


def _needs_remote_code(source: str, shipped: str) -> ModelLoadError:
    return ModelLoadError(
        f"{source} needs the model code it ships ({shipped}, config.json auto_map), which bertscope does "
        "not run unless asked: if you trust its source, pass trust_remote_code=True to load() "
        "(command line: bertscope --trust-remote-code ...)"
    )


def _strict_error() -> type[Exception]:
    """huggingface_hub's refusal of a config field by type (transformers 5's strict config classes),
    imported where transformers is (it costs a tenth of a second); a class nothing raises where the
    installed huggingface_hub has none."""
    try:
        from huggingface_hub.errors import StrictDataclassError
    except ImportError:
        return _NeverRaised
    return StrictDataclassError


class _NeverRaised(Exception):
    pass


def _not_loadable(source: str, path: Path | None, exc: Exception) -> ModelLoadError:
    if path is not None and isinstance(exc, _strict_error()):
        return _wrong_field(source, path, exc)
    if path is None:
        offline = os.environ.get("HF_HUB_OFFLINE", "") not in ("", "0")
        why = "the hub is switched off here (HF_HUB_OFFLINE)" if offline else "the hub could not be reached"
        from_env = os.environ.get(ENV_MODEL) == source  # named by the variable, not typed
        named = f"{source} (from {ENV_MODEL})" if from_env else source
        use = f"set {ENV_MODEL} to it, or unset {ENV_MODEL}" if from_env else "pass that folder"
        return ModelLoadError(
            f"{named} is not a local folder and {why}. Download it where the hub is reachable "
            f"(`hf download {source} --local-dir DIR`), copy DIR here and {use}"
        )
    if not (path / "config.json").exists() and (routes := _router_routes(path)) is not None:
        return ModelLoadError(
            f"{source} is a sentence-transformers Router folder (router_config.json), whose texts take "
            f"different modules by route ({routes}), which bertscope does not run: load the Transformer "
            "folder of the route you want with the pooling its modules name, or use sentence-transformers"
        )
    if not (path / "config.json").exists() and (inner := _nested_transformer(path)) is not None:
        return ModelLoadError(
            f"{source} is a sentence-transformers folder whose Transformer module sits in {inner}/ (an "
            "older layout), which bertscope does not read as one model: load "
            f"{path / inner} with the pooling and normalize its modules.json names, or save the model "
            "again with sentence-transformers 3 or later"
        )
    if not (path / "config.json").exists():
        return ModelLoadError(
            f"{source} is a folder but not a model: it has no config.json. A model folder holds "
            "config.json, model.safetensors (or pytorch_model.bin) and the tokenizer files"
        )
    if (damaged := _unreadable_json(path / "config.json")) is not None:
        # transformers says only that it is not valid JSON: where, and the fix, as for the folder's other
        # settings files (st_settings)
        return ModelLoadError(
            f"{source} could not be loaded as a model: its config.json is not valid JSON ({damaged}); fix "
            "it, or copy it again from the model's source"
        )
    return ModelLoadError(f"{source} could not be loaded as a model: {_reason(exc)}")


def _reason(exc: Exception) -> str:
    """transformers' reason in one line: its first line, or where that opens a module's repr (`BertLayer(`,
    then the module, then `) should be used as a decoder ...`), the module's name and the line after it."""
    lines = [line.strip() for line in str(exc).strip().splitlines() if line.strip()]
    if not lines:
        return type(exc).__name__
    if len(lines) > 1 and re.fullmatch(r"[A-Za-z_][\w.]*\(", lines[0]) and lines[-1].startswith(")"):
        return f"{lines[0][:-1]} {lines[-1][1:].strip()}"
    return lines[0]


def _wrong_field(source: str, path: Path, exc: Exception) -> ModelLoadError:
    """The one line of a config.json field transformers' config class refuses by type (huggingface_hub's
    StrictDataclassFieldValidationError): the field, its value, the type expected, and the fix."""
    said = " ".join(str(exc).split())
    field = re.search(r"field '([^']+)'", said)
    name = field.group(1) if field else "a field"
    written = read_json_object(path / "config.json")
    value = f" is {written[name]!r}" if name in written else " (left to its default)"
    expected = re.search(r"(expected [^;(]+?)(?: \(value:|;|$)", said)
    why = expected.group(1).strip() if expected else said
    return ModelLoadError(f"{source}: {wrong_type(name, value, why)}")


def _unreadable_json(file: Path) -> str | None:
    """Why `file` is not JSON (where it breaks), or None where it reads."""
    try:
        json.loads(file.read_bytes())
    except UnicodeDecodeError as exc:
        return f"not UTF-8 at byte {exc.start}"
    except ValueError as exc:
        return str(exc)
    except OSError:
        return None  # unreadable is another matter: transformers' own reason says it
    return None
