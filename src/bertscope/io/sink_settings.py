"""A stored job's settings against the asked ones: whether they forbid going on, and how they differ."""

from __future__ import annotations

from typing import Any

from ..core.fingerprint_facts import flatten
from .checksums import ROW_CHECKS_KEY

__all__ = ["going_on", "settings_diff", "settings_differ"]


def settings_differ(stored: dict[str, Any], asked: dict[str, Any]) -> bool:
    """Whether a stored job's settings forbid going on with the asked ones.

    The exact runtimes (float32, unquantised torch, ONNX Runtime, OpenVINO) give vectors equal within
    1e-5, so a job started on one goes on on another: the exact default may choose again (`--remeasure`,
    another machine), and stores made before it existed say torch. A store written before stores carried
    the model's fingerprint, or whether it keeps the texts, goes on without them (its other settings
    still compared, the model's name and path among them); with a fingerprint, the model is the one its
    fingerprint names, however it was loaded.
    """
    return _comparable(stored) != _comparable(asked, like=stored)


def _comparable(settings: dict[str, Any], *, like: dict[str, Any] | None = None) -> dict[str, Any]:
    # which row checksums a store keeps is the writer's, not an option a job is asked with
    settings = {k: v for k, v in settings.items() if k != ROW_CHECKS_KEY}
    if like is not None:
        settings = {k: v for k, v in settings.items() if k not in _LATER or k in like}
    if "fingerprint" in settings:
        # the model is compared by its fingerprint (its files' hashes and settings), not by the name or
        # path it was loaded by: './copy', 'copy' and the bundled folder's full path are one model
        settings = {k: v for k, v in settings.items() if k not in ("model", "model_arg")}
    exact = (
        settings.get("mode", "exact") == "exact"
        and settings.get("dtype") == "float32"
        and settings.get("quantize") is None
        and settings.get("backend") in _EXACT_RUNTIMES
    )
    if not exact:
        return settings
    return {**{k: v for k, v in settings.items() if k != "backend"}, "mode": "exact"}


def _filled(settings: dict[str, Any]) -> dict[str, Any]:
    # a sentence job records its level and precision only where not the defaults (as older stores did):
    # beside another job's they are the defaults it ran with, not None (both sides get them, so settings
    # that hold neither, such as file maps, show no difference)
    return {**_DEFAULTS, **settings}


_DEFAULTS = {"level": "sentence", "precision": "float32"}  # io.levels' defaults


_EXACT_RUNTIMES = ("torch", "onnxruntime", "openvino")
# Rules a store records that no option sets: what the difference means, for a store made before them
# (the same options cannot reproduce it; only a new output can).
_RULES = {"whole_words": " (the older rows keep a word the truncation cut; rows made now leave it out)"}
_RULE_FIX = (
    "the rest cannot be made as the older rows were: start again with overwrite=True (--overwrite), "
    "or write to a new output"
)


_RESUME_FIX = "resume with the same options, or start again with overwrite=True (--overwrite)"


def going_on(stored: dict[str, Any], asked: dict[str, Any], fix: str = _RESUME_FIX) -> str:
    """How to go on where settings differ: `fix` (the same options, --overwrite), or where a rule that no
    option sets differs (`_RULES`: an older store's), only a new start, since no option makes it again."""
    same_level = stored.get("level") == asked.get("level")
    return _RULE_FIX if same_level and any(stored.get(k) != asked.get(k) for k in _RULES) else fix


# Settings that stores carry since a later version: a store made before goes on without comparing them.
_LATER = ("fingerprint", "keep_text")


def settings_diff(stored: dict[str, Any], asked: dict[str, Any]) -> str:
    """Each setting that differs, as `key: stored then, asked now`, the model's name first; the model's
    fingerprint by the keys inside it that differ (`fingerprint files.model.safetensors: ...`; its id
    follows from them), last: they follow from the model."""
    models = stored.get("model"), asked.get("model")
    stored, asked = _filled(_comparable(stored)), _filled(_comparable(asked, like=stored))
    views = [settings.pop("views", None) for settings in (stored, asked)]
    for settings, these, other in ((stored, *views), (asked, *views[::-1])):
        inner = {k: v for k, v in (settings.pop("fingerprint", None) or {}).items() if k != "id"}
        settings.update({f"fingerprint {k}": v for k, v in flatten(inner).items() if inner})
        # a view on both sides said by the settings that differ ('view cls4 layers: ...'), one on one side
        # whole ('view cls: None then, {...} now'), never both whole dicts
        if not isinstance(these, dict) or not isinstance(other, dict):
            if these is not None:
                settings["views"] = these
            continue
        for name, view in these.items():
            if isinstance(view, dict) and isinstance(other.get(name), dict):
                settings.update({f"view {name} {k}": v for k, v in view.items()})
            else:
                settings[f"view {name}"] = view
    keys = sorted(
        (k for k in set(stored) | set(asked) if stored.get(k) != asked.get(k)),
        key=lambda k: (k != "model", k.startswith("fingerprint "), k),
    )
    fingerprinted = any(k.startswith("fingerprint ") for k in keys)
    if fingerprinted and "model" not in keys and models[0] != models[1]:
        # compared by fingerprint, the model's name was left out: another model is named first, not
        # only by the hashes of its files ('fingerprint files.config.json: ...')
        stored["model"], asked["model"] = models
        keys.insert(0, "model")
    if stored.get("level") != asked.get("level"):
        # another level owns other options (pooling for sentences, subword for words): name the level,
        # not each option one level has and the other lacks, which nobody asked for
        keys = [k for k in keys if k in stored and k in asked]
    said = [f"{k}: {stored.get(k)!r} then, {asked.get(k)!r} now{_RULES.get(k, '')}" for k in keys[:4]]
    return "; ".join(said + [f"{len(keys) - 4} more"] * (len(keys) > 4))
