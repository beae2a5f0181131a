"""A model's fingerprint: the settings that decide its vectors, its files' hashes, and canary vectors.

The canaries are the calibration sentences and one text longer than the model's limit, run through every
layer: per text and layer, the mean of its token vectors projected on `DIRECTIONS` fixed directions
(signs drawn from SHA-256, the same on every machine), kept to 6 significant digits, with each text's
token count and a hash of every id read. Compared within `CANARY_RTOL` (relative, per text and layer),
the same float32 model gives the same fingerprint on any runtime, thread count or machine (their
differences stay below 1e-6), while a weight moved by 1e-4 or stored in float16 moves the canaries by
more than 3e-4. The `id` hashes the settings and files only: equal ids, the same model set up alike.

A static model (a model2vec folder) has one layer, its rows: its canaries are the mean of each text's rows
(its sentence vector before normalize), so a row that moved is caught as a moved weight is. It has no
Hugging Face forward to compare with (`compare_to_reference` refuses it): a fingerprint is its check.
"""

from __future__ import annotations

import hashlib
import json
import math
import os
import warnings
from dataclasses import dataclass, field
from datetime import datetime, timezone
from pathlib import Path
from typing import Any

import numpy as np

from ..core.fingerprint_facts import fingerprint_id, store_fingerprint
from ..core.given import shown_value
from ..errors import InvalidInput, TruncatedTextsWarning
from .settings import environment, file_hashes, flatten, is_lossy, is_static, lossy_floor, vector_settings

__all__ = [
    "CANARY_RTOL", "DIRECTIONS", "FORMAT", "Difference", "FingerprintCheck", "canary_texts",
    "check_fingerprint", "compare_fingerprints", "fingerprint", "fingerprint_given", "fingerprint_id",
    "fingerprint_problem", "light_fingerprint", "model_checked", "read_fingerprint", "save_fingerprint",
    "store_fingerprint",
]  # fmt: skip

FORMAT = 1
DIRECTIONS = 8
# Float32 runtimes move a canary by ~1e-6 of its size; a 1e-4 weight change or float16 weights by >3e-4.
CANARY_RTOL = 5e-5
# How the canaries' directions are drawn, written beside them: a file naming others was not made here.
_DIRECTIONS_NAME = f"sha256-signs/{DIRECTIONS}"
_DIGITS = 6
# What every fingerprint holds, the store's too (`store_fingerprint`): what a check compares.
FINGERPRINT_KEYS = ("settings", "files")


@dataclass
class Difference:
    """One way the model differs from what was expected: what, the expected value, the value found."""

    what: str
    expected: Any
    found: Any

    def to_dict(self) -> dict[str, Any]:
        return {"what": self.what, "expected": self.expected, "found": self.found}


@dataclass
class FingerprintCheck:
    """A model against a saved fingerprint: ok when nothing differs."""

    ok: bool
    differences: list[Difference] = field(default_factory=list)
    expected_id: str | None = None
    found_id: str | None = None

    def to_dict(self) -> dict[str, Any]:
        """JSON-able: ok, differences [{what, expected, found}], expected_id, found_id."""
        return {
            "ok": self.ok,
            "differences": [d.to_dict() for d in self.differences],
            "expected_id": self.expected_id,
            "found_id": self.found_id,
        }


def canary_texts(model: Any) -> list[str]:
    """The calibration sentences and one long text: their join repeated past the model's positions within
    its tokenizer's limit (`_canary_limit`), or a static model's cut; kept as truncated."""
    from ..backends.onnx import calibration_texts

    sentences = calibration_texts()
    joined = " ".join(sentences)
    limit = model.max_tokens if is_static(model) else _canary_limit(model)  # a static model's cut
    repeats = limit // max(1, len(joined.split())) + 1
    return [*sentences, " ".join([joined] * repeats)]


def _canary_limit(model: Any) -> int:
    """The length the long canary is sized by: the positions within the tokenizer's `model_max_length`,
    what `max_positions` was before it left the tokenizer's limit out (fingerprints saved then compare)."""
    from ..core.folder import token_limit

    loaded = model.loaded
    view = getattr(loaded, "view", None)
    if view is not None:
        tokenizer_max = view.tokenizer_max_length
    else:
        tokenizer_max = getattr(loaded.tokenizer, "model_max_length", None)
    return token_limit(model.max_positions, tokenizer_max, None)


def fingerprint(model: Any, *, with_canaries: bool = True) -> dict[str, Any]:
    """`model`'s fingerprint as a JSON-able dict (see the module docstring); `with_canaries=False` leaves
    the forward out (settings, files and id; a store's metadata carries those three: `store_fingerprint`)."""
    settings = vector_settings(model)
    files = file_hashes(model.loaded.path)
    made: dict[str, Any] = {
        "bertscope_fingerprint": FORMAT,
        "id": fingerprint_id(settings, files),
        "model": model.info().source,
        "settings": settings,
        "files": files,
    }
    if with_canaries:
        made["canaries"] = _canaries(model)
    made["environment"] = environment(model)
    made["made"] = datetime.now(timezone.utc).isoformat(timespec="seconds")
    return made


def light_fingerprint(name: str | os.PathLike[str] | None) -> dict[str, Any] | None:
    """`store_fingerprint` of `name`'s folder opened without torch (as `load(name)` opens it: float32 on
    the CPU), or None where only a full load can open it (`bertscope info` then loads the model)."""
    from ..core.encoder import Encoder
    from ..core.loading import open_light

    loaded = open_light(name)
    if loaded is None:
        return None
    return store_fingerprint(Encoder(loaded, device="cpu", max_tokens=None, token_budget=None))


def model_checked(model: Any) -> None:
    """Refuse a `model` that is not a loaded one (a name, None) in one line naming `bertscope.load`: the
    checks here read its files and run its forward. A static model (model2vec) is loaded too."""
    from ..research.states import model_given

    if not is_static(model):
        model_given(model, "model")


def fingerprint_given(value: Any, name: str) -> None:
    """Refuse a `value` given as the argument `name` that is neither a fingerprint dict nor a path, in one
    line (a list, a number: pathlib's TypeError named neither the argument nor what it takes), and a dict
    without the `settings` and `files` every fingerprint holds (`fingerprint`, `store_fingerprint`): {}
    was compared as a fingerprint of nothing, every setting listed as a difference."""
    shown = shown_value(value)
    taken = (
        "give a fingerprint, a dict from fingerprint() or the path of a file written by save_fingerprint "
        "(`bertscope verify --save`)"
    )
    if not isinstance(value, (dict, str, os.PathLike)):
        raise InvalidInput(f"{name}={shown}: {taken}")
    lacks = [key for key in FINGERPRINT_KEYS if isinstance(value, dict) and key not in value]
    if lacks:
        raise InvalidInput(
            f"{name}={shown}: a dict with no {' or '.join(f'`{k}`' for k in lacks)} is not a fingerprint; "
            f"{taken}"
        )


def save_fingerprint(model: Any, path: str | Path, *, overwrite: bool = False) -> dict[str, Any]:
    """Write `model`'s fingerprint to `path` as JSON; returns it. A path that is no file name, a folder, in
    no folder, or a file already there without overwrite=True (it is the reference every later check
    reads: replaced unasked, a check against it would pass) is refused before the forward runs."""
    model_checked(model)
    if not isinstance(path, (str, os.PathLike)):
        raise InvalidInput(f"path={shown_value(path)}: give the path of a JSON file to write (a str or Path)")
    path = Path(path)
    if path.is_dir():  # as --save says it
        raise InvalidInput(
            f"path={str(path)!r} is a folder; name a JSON file, e.g. {path / 'fingerprint.json'}"
        )
    if not path.parent.is_dir():
        raise InvalidInput(
            f"path={str(path)!r}: the folder {path.parent} does not exist; create it or save elsewhere"
        )
    if path.exists() and not overwrite:  # as --save says it
        raise InvalidInput(f"{path} exists; pass overwrite=True to replace it, or choose another name")
    made = fingerprint(model)
    path.write_text(json.dumps(made, indent=1) + "\n", encoding="utf-8")
    return made


def read_fingerprint(path: str | Path) -> dict[str, Any]:
    """A fingerprint file written by `save_fingerprint`, or InvalidInput saying what is wrong with it."""
    try:
        made = json.loads(Path(path).read_text(encoding="utf-8"))
    except OSError as exc:
        raise InvalidInput(f"cannot read the fingerprint {path}: {exc.strerror or exc}") from None
    except ValueError:
        raise InvalidInput(f"{path} is not JSON; give a file written by `bertscope verify --save`") from None
    if not isinstance(made, dict) or "bertscope_fingerprint" not in made:
        raise InvalidInput(f"{path} is not a bertscope fingerprint; write one with `bertscope verify --save`")
    if made["bertscope_fingerprint"] != FORMAT:
        raise InvalidInput(
            f"{path} is fingerprint format {made['bertscope_fingerprint']}; this bertscope reads format "
            f"{FORMAT}: save it again with this version"
        )
    problem = fingerprint_problem(made) or _saved_problem(made)
    if problem:
        raise InvalidInput(
            f"{path} is a damaged fingerprint ({problem}); write it again with `bertscope verify --save`"
        )
    return made


def fingerprint_problem(made: Any, *, canaries: bool = True) -> str | None:
    """What makes `made` unreadable as a fingerprint (its settings, files and, with `canaries`, canary
    vectors), or None when each part has the shape `fingerprint` writes."""
    if not isinstance(made, dict):
        return f"a JSON {type(made).__name__}, not an object"
    if not isinstance(made.get("settings", {}), dict):
        return "settings is not an object"
    files = made.get("files", {})
    if not isinstance(files, dict) or not all(isinstance(v, str) for v in files.values()):
        return "files is not an object of file name to hash"
    if canaries and "canaries" in made:
        return _canaries_problem(made["canaries"], made.get("settings", {}))
    return None


def _saved_problem(made: dict[str, Any]) -> str | None:
    """What makes a saved file contradict what `save_fingerprint` writes: no canaries or no id (every
    format-1 file has both), or an id that is not the hash of its own settings and files (edited). Not
    asked of a dict handed to `check_fingerprint`: the caller's own, it may leave canaries out (settings
    and files alone, as `store_fingerprint`) or carry files of its choosing."""
    if "canaries" not in made:
        return "no canaries: its canary vectors were removed, so the model's forward cannot be compared"
    if "id" not in made:
        return "no id: it was removed after it was saved"
    own = fingerprint_id(made.get("settings", {}), made.get("files", {}))
    if made["id"] != own:
        return (
            f"its id {made['id']!r} is not the hash of its own settings and files, {own}: the file was "
            "edited after it was saved"
        )
    return None


def _canaries_problem(found: Any, settings: dict[str, Any]) -> str | None:
    """What makes canaries contradict what `_canaries` writes: their shape (a row per text, `DIRECTIONS`
    columns, a layer per hidden state of `settings`' layers, the directions this bertscope draws), or a
    checksum (written since the canaries carry one; older files have none) that is not their own."""
    if not isinstance(found, dict):
        return "canaries is not an object"
    tokens = found.get("tokens", [])
    if not isinstance(tokens, list) or not all(
        isinstance(t, int) and not isinstance(t, bool) for t in tokens
    ):
        return "canaries.tokens is not a list of token counts"
    if found.get("directions", _DIRECTIONS_NAME) != _DIRECTIONS_NAME:
        return f"canaries.directions is {shown_value(found['directions'])}, not {_DIRECTIONS_NAME!r}"
    layers = found.get("layers", [])
    if not isinstance(layers, list):
        return "canaries.layers is not a list"
    for number, layer in enumerate(layers):
        if not isinstance(layer, dict) or not isinstance(layer.get("layer"), int) or "mean" not in layer:
            return f"canaries.layers[{number}] has no layer number and mean"
        if layer["layer"] != number:
            return f"canaries.layers[{number}] is layer {layer['layer']}: layers are kept in order from 0"
        try:
            mean = np.asarray(layer["mean"], dtype=np.float64)
        except (TypeError, ValueError):
            mean = np.empty(0)
        if mean.ndim != 2 or not np.isfinite(mean).all():
            return f"canaries.layers[{number}].mean is not a table of finite numbers (texts x directions)"
        if "tokens" in found and mean.shape != (len(tokens), DIRECTIONS):
            return (
                f"canaries.layers[{number}].mean is {mean.shape[0]} texts x {mean.shape[1]} directions, "
                f"not {len(tokens)} x {DIRECTIONS} (a row per text of canaries.tokens)"
            )
    n_layers = settings.get("layers") if isinstance(settings, dict) else None
    if "layers" in found and isinstance(n_layers, int) and len(layers) != n_layers + 1:
        return f"canaries hold {len(layers)} layers where its settings' {n_layers} layers make {n_layers + 1}"
    if "checksum" in found and found["checksum"] != _checksum(found):
        return "its canaries are not those it was saved with (their checksum differs): they were edited"
    return None


def _checksum(canaries: dict[str, Any]) -> str:
    """The SHA-256 of canaries as JSON (keys sorted), their own `checksum` left out: an edit changes it."""
    kept = {key: value for key, value in canaries.items() if key != "checksum"}
    return hashlib.sha256(json.dumps(kept, sort_keys=True).encode("utf-8")).hexdigest()[:16]


def check_fingerprint(model: Any, expected: dict[str, Any] | str | Path) -> FingerprintCheck:
    """`model` (as set up) against a saved fingerprint: every difference named. A file is refused as
    damaged without canaries or with an id not its own settings' and files' (`read_fingerprint`); a dict
    is compared on what it holds (no canaries: settings and files alone)."""
    model_checked(model)
    fingerprint_given(expected, "expected")
    if not isinstance(expected, dict):
        expected = read_fingerprint(expected)
    problem = fingerprint_problem(expected)
    if problem:
        raise InvalidInput(
            f"the fingerprint given is damaged ({problem}); write it with `bertscope verify --save`"
        )
    found = fingerprint(model, with_canaries="canaries" in expected)
    floor = lossy_floor(model)
    differences = compare_fingerprints(expected, found, lossy_floor=floor)
    return FingerprintCheck(not differences, differences, expected.get("id"), found["id"])


def compare_fingerprints(
    expected: dict[str, Any], found: dict[str, Any], *, lossy_floor: float = 0.999
) -> list[Difference]:
    """Each difference between two fingerprints: settings, files, then canaries (skipped where either
    has none). Canaries of a lossy mode are held to the cosine floor's distance, not `CANARY_RTOL`."""
    differences = _dict_differences("settings", expected.get("settings", {}), found["settings"])
    differences += _dict_differences("files", expected.get("files", {}), found["files"], flat=False)
    if "canaries" in expected and "canaries" in found:
        lossy = is_lossy(expected.get("settings", {})) or is_lossy(found["settings"])
        rtol = math.sqrt(2 * (1 - lossy_floor)) if lossy else CANARY_RTOL
        differences += _canary_differences(expected["canaries"], found["canaries"], rtol)
    return differences


def _canaries(model: Any) -> dict[str, Any]:
    texts = canary_texts(model)
    tokens = model.tokenize(texts)
    # one canary runs past the model's limit on purpose: not the user's cut; a canary that is not finite is
    # refused in one line (NonFiniteVectors), never saved nor read as a drift of 0
    with warnings.catch_warnings():
        warnings.simplefilter("ignore", TruncatedTextsWarning)
        if is_static(model):  # one layer, the rows: the mean of each text's rows is its sentence vector
            means = model.embed(texts, normalize=False).vectors[:, None, :]  # (texts, 1, d)
        else:
            found = model.embed_tokens(texts, layers="all", combine="concat")
            n_layers = model.n_layers + 1
            means = np.stack([e.vectors.reshape(len(e.tokens), n_layers, -1).mean(axis=0) for e in found])
    n_layers = means.shape[1]
    projected = means.astype(np.float64) @ _directions(means.shape[-1])  # (texts, layers, DIRECTIONS)
    ids = json.dumps([list(t.ids) for t in tokens])
    canaries = {
        "texts": hashlib.sha256("\n".join(texts).encode("utf-8")).hexdigest()[:16],
        "tokens": [len(t.ids) for t in tokens],
        "ids": hashlib.sha256(ids.encode("utf-8")).hexdigest()[:16],
        "directions": _DIRECTIONS_NAME,
        "layers": [
            {"layer": layer, "mean": [[_rounded(v) for v in row] for row in projected[:, layer]]}
            for layer in range(n_layers)
        ],
    }
    return {**canaries, "checksum": _checksum(canaries)}


def _directions(width: int) -> np.ndarray:
    """(width, DIRECTIONS) unit columns of ±1/sqrt(width), the signs from SHA-256 (no RNG to change)."""
    need = width * DIRECTIONS
    stream = b"".join(
        hashlib.sha256(f"bertscope canary {block}".encode()).digest() for block in range(need // 256 + 1)
    )
    bits = np.unpackbits(np.frombuffer(stream, dtype=np.uint8))[:need]
    return (bits.astype(np.float64) * 2 - 1).reshape(width, DIRECTIONS) / math.sqrt(width)


def _rounded(value: float) -> float:
    return float(f"{value:.{_DIGITS}g}")


def _dict_differences(
    name: str, expected: dict[str, Any], found: dict[str, Any], *, flat: bool = True
) -> list[Difference]:
    want, got = (flatten(expected), flatten(found)) if flat else (expected, found)
    missing = object()
    return [
        Difference(f"{name}.{key}" if key else name, want.get(key), got.get(key))  # "": the whole dict
        for key in sorted(set(want) | set(got))
        if want.get(key, missing) != got.get(key, missing)
    ]


def _canary_differences(expected: dict[str, Any], found: dict[str, Any], rtol: float) -> list[Difference]:
    differences = []
    if expected.get("texts") != found["texts"]:
        differences.append(Difference("canaries.texts", expected.get("texts"), found["texts"]))
    want_tokens, got_tokens = expected.get("tokens", []), found["tokens"]
    changed = [i for i, (a, b) in enumerate(zip(want_tokens, got_tokens, strict=False)) if a != b]
    if changed or len(want_tokens) != len(got_tokens):
        first = changed[0] if changed else min(len(want_tokens), len(got_tokens))
        want = f"{want_tokens[first]} tokens" if first < len(want_tokens) else "no text"
        got = f"{got_tokens[first]} tokens" if first < len(got_tokens) else "no text"
        count = f"{len(changed)} of {len(want_tokens)} texts differ"
        differences.append(Difference("canaries.tokens", f"text {first}: {want}", f"{got} ({count})"))
    if expected.get("ids") != found["ids"]:
        differences.append(Difference("canaries.ids", expected.get("ids"), found["ids"]))
    for want, got in zip(expected.get("layers", []), found["layers"], strict=False):
        want_mean, got_mean = np.asarray(want["mean"], dtype=np.float64), np.asarray(got["mean"])
        if want_mean.shape != got_mean.shape:  # a text or direction missing is a difference, not a pass
            shapes = [f"{m.shape[0]} texts x {m.shape[1]} directions" for m in (want_mean, got_mean)]
            differences.append(Difference(f"canaries.layer {got['layer']}", *shapes))
            continue
        drift = _relative_drift(want_mean, got_mean)
        if drift is not None and drift[0] > rtol:
            differences.append(
                Difference(
                    f"canaries.layer {got['layer']}",
                    f"relative drift <= {rtol:.3g}",
                    f"{drift[0]:.3g} (text {drift[1]})",
                )
            )
    if len(expected.get("layers", [])) != len(found["layers"]):
        differences.append(
            Difference("canaries.layers", len(expected.get("layers", [])), len(found["layers"]))
        )
    return differences


def _relative_drift(want: np.ndarray, got: np.ndarray) -> tuple[float, int] | None:
    """(largest ‖got - want‖ / ‖want‖ over the texts, and which text) of two (texts, DIRECTIONS) tables of
    one shape, or None where there are no texts."""
    if len(want) == 0:
        return None
    drift = np.linalg.norm(got - want, axis=1) / np.maximum(np.linalg.norm(want, axis=1), 1e-12)
    worst = int(np.argmax(drift))
    return float(drift[worst]), worst
