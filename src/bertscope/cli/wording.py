"""Library messages in the command line's words: `dtype='bfloat16'` reads `--dtype bfloat16`.

The library speaks to Python callers (`load(dtype='bfloat16')`); a person at the command line typed
flags. `as_flags` rewrites the keyword forms of the options that are also flags, with the same meaning,
into the flag the user would type, and leaves everything else as written: a keyword no flag gives
(`calibration=`), Python advice inside a call (`bertscope.load(..., mode=...)`), a quoted text the user
gave (`view 'layers=-1/mean'`). The flag name takes hyphens (`--fast-min-cosine`), a value keeps its own
spelling (`--quantize int8_fused`, as --quantize takes it).

    dtype='float16' or 'bfloat16'     ->  --dtype float16 or bfloat16
    normalize=True / late=False       ->  --normalize / --naive   (`drop late=False`: `drop --naive`)
    sweep='rank=8', not kind='mlp'    ->  --sweep rank=8, not --kind mlp
    mode='fast'                       ->  --fast
    post= (--post)                    ->  --post             (a message that already names the flag)
    label_field= (--label-field)      ->  --label-field
    (pooling='cls'; --pooling cls)    ->  (--pooling cls)     (and `(format=, --format)`)
    --debiased (debiased=True)        ->  --debiased          (a flag said twice is said once)
    k must be a whole number ...      ->  -k must be a whole number ...
    leave mask_special out            ->  leave --mask-special out   (not where a --view is spelled)
    leave stride out                  ->  leave --stride out
    use static_word('bread')          ->  use --as-words      (a Python call a flag stands for)
    fitted on {'layers': [6]}         ->  fitted on --layers 6   (a settings dict whose keys are flags)

A command whose flag for a keyword is not the usual one says so with `flags_named` around the library
call (`eval pairs` gives fit_post's dim= by --post-dim):

    dim=50 ... (--dim)                ->  --post-dim 50 ... (--post-dim)
"""

from __future__ import annotations

import ast
import importlib
import re
import shlex
import sys
from collections.abc import Iterator, Mapping
from contextlib import contextmanager
from pathlib import Path

import typer

from ..errors import BertscopeError

# keyword -> the flag that gives it on the command line (same meaning); names not listed stay as written
# (rank= and epochs= too: typer checks --rank/--epochs itself, and "rank=8,32" is also a --sweep value).
FLAGS: dict[str, str] = {
    name: "--" + name.replace("_", "-")
    for name in (
        "backend", "baseline_pairs", "batch_size", "chunk_overlap", "chunk_size", "chunks", "collection",
        "column", "combine", "control", "corpus", "device", "dim", "dtype", "engine", "fast_min_cosine",
        "folds", "format", "id_field", "kind", "label_field", "layers", "level", "limit", "long",
        "mask_special", "max_contexts", "punct",
        "min_count", "min_contexts", "n_clusters", "n_jobs", "nprobe", "normalize", "overwrite",
        "per_label_layer", "pooling", "post", "precision", "prompt", "prompt_name", "quantize", "remeasure",
        "resume", "seed", "stride", "subword", "sweep", "test", "text_field", "threads", "view", "workers",
    )
} | {"k": "-k", "top_k": "-k", "late": "--late", "model": "-m", "debiased": "--debiased"}  # fmt: skip
# Booleans: the flag for True and, where one exists, for False (None: no flag turns it off).
SWITCHES: dict[str, tuple[str, str | None]] = {
    "control": ("--control", None),
    "debiased": ("--debiased", None),
    "normalize": ("--normalize", "--no-normalize"),
    "late": ("--late", "--naive"),
    "mask_special": ("--mask-special", None),
    "overwrite": ("--overwrite", None),
    "remeasure": ("--remeasure", None),
    "resume": ("--resume", None),
}
# `mode` is no flag: its one non-default value is --fast.
MODES = {"fast": "--fast"}
# Python calls whose command-line form is a flag of the same command (`static breadmaker --as-words`).
CALLS = {"static_word": "--as-words"}
# The command each call's flag belongs to: on another command (`plot static`, which draws pieces only)
# the advice naming the call is left out, as no flag of that command gives it.
CALL_COMMANDS = {"static_word": "static"}
# The click typer runs: its own copy (typer._click) in recent typer, click itself before (typer_setup
# reads it from here too).
CLICK = typer.Context.__mro__[1].__module__.rpartition(".")[0]
# Names with an underscore are Python names wherever a message has them bare ("fast_min_cosine applies
# to ..."); mask_special is also a --view option's spelling (`--view a=-1/mean/mask_special`), so it stays
# where the message speaks of a view.
BARE = sorted((n for n in FLAGS if "_" in n), key=len, reverse=True)
_VIEW_SPELLING = "mask_special"

_KEYWORDS = "|".join(sorted([*FLAGS, "mode"], key=len, reverse=True))
_VALUE = (
    r"'[^']*'|\"[^\"]*\"|\[[^\]]*\]|\.\.\.|True\b|False\b|None\b|-?\d+(?:\.\d+)?(?:e-?\d+)?(?!\w)"
    r"|(?=[\s),;]|$)"  # `post=` alone: the option itself
)
# A keyword form, then what may follow it: the same option in flag form, or more quoted values.
_FORM = re.compile(
    rf"(?<![-\w.'\"])(?P<kw>{_KEYWORDS})=(?P<value>{_VALUE})"
    r"(?P<dual> \((?P<flag1>--?[\w-]+[^()]*)\)|[;,] (?P<flag2>--?[\w-]+[^();]*)(?=\)))?"
    r"(?P<tails>(?:(?:,|,? or|,? not| \(or| and)\s*'[^']*')*)"
)
_BARE = re.compile(rf"(?<![-\w.'\"])(?P<kw>{'|'.join(BARE)})(?![\w=])")
_MUST = re.compile(rf"(?:^|(?<=; ))(?P<kw>{'|'.join(sorted(FLAGS, key=len, reverse=True))}) must be ")
# "leave stride out": a bare option name in the advice to drop it (names with an underscore are _BARE's;
# "leave layers out (--layers)" already names the flag).
_PLAIN = "|".join(sorted((n for n in FLAGS if "_" not in n), key=len, reverse=True))
_LEAVE = re.compile(rf"\bleave (?P<kw>{_PLAIN}) out\b(?! \()")
_CALL = re.compile(rf"(?<![\w.])(?P<call>{'|'.join(CALLS)})\((?:'[^']*'|\"[^\"]*\")\)")
# The advice a call stands in ("; use static_word('x') for the mean of its pieces"), to its clause's end.
_CALL_ADVICE = re.compile(rf"[;,] use (?P<call>{'|'.join(CALLS)})\((?:'[^']*'|\"[^\"]*\")\)[^;()]*?(?=;|$)")
# A flag said twice, as the flag and then in parentheses (`--debiased (debiased=True)` once rewritten).
_TWICE = re.compile(r"(?P<flag>--?[\w-]+(?: [^\s()]+)?) \((?P=flag)\)")
# A settings dict (`{'layers': [6], 'pooling': 'mean'}`): flags where every key is one.
_DICT = re.compile(r"\{'\w+': [^{}]*\}")


@contextmanager
def flags_named(**named: str) -> Iterator[None]:
    """A library error raised inside names the keywords in `named` by this command's flags for them
    (`with flags_named(dim="--post-dim")`: `dim=50 is out of range` -> `--post-dim 50 is out of range`)."""
    try:
        yield
    except BertscopeError as exc:
        exc.args = (as_flags(str(exc), named), *exc.args[1:])
        raise


def as_flags(message: str, named: Mapping[str, str] | None = None) -> str:
    """`message` with every keyword form of a flag written as that flag (see the module's examples); a
    keyword in `named` (keyword -> flag) is written as the flag given there, where a command names it
    otherwise (`{"dim": "--post-dim"}`)."""
    text = _as_usual_flags(message)
    for kw, flag in (named or {}).items():
        text = re.sub(rf"(?<![\w-]){re.escape(FLAGS[kw])}(?![\w-])", flag, text)
    return text


def _as_usual_flags(message: str) -> str:
    """`message` with every keyword form of a flag written as the flag FLAGS gives it."""
    command = _running_command()
    if command is not None:  # on another command than the flag's, there is no such fix to name
        message = _CALL_ADVICE.sub(lambda m: "" if CALL_COMMANDS[m["call"]] != command else m[0], message)
    message = _CALL.sub(lambda m: CALLS[m["call"]], message)
    message = _DICT.sub(_dict_flags, message)
    calls = _call_spans(message)

    def form(match: re.Match[str]) -> str:
        if any(start < match.start() < end for start, end in calls):
            return match.group(0)
        kw, value = match["kw"], match["value"]
        named = match["flag1"] or match["flag2"]
        if named and named.split()[0] in _flags_of(kw):
            return named
        flag = _flag(kw, value)
        if flag is None:
            return match.group(0)
        tails = match["tails"]
        if value[:1] in "'\"":
            tails = re.sub(r"'([^']*)'", r"\1", tails)
        return flag + (match["dual"] or "") + tails

    text = _TWICE.sub(r"\g<flag>", _FORM.sub(form, message))
    text = _MUST.sub(lambda m: f"{FLAGS[m['kw']]} must be ", text)
    text = _LEAVE.sub(lambda m: f"leave {FLAGS[m['kw']]} out", text)
    calls = _call_spans(text)
    view = "view" in text

    def bare(match: re.Match[str]) -> str:
        if any(s < match.start() < e for s, e in calls) or view and match["kw"] == _VIEW_SPELLING:
            return match.group(0)
        return FLAGS[match["kw"]]

    return _BARE.sub(bare, text)


def _dict_flags(match: re.Match[str]) -> str:
    """A settings dict in flag form (`{'layers': [6], 'normalize': False}` -> `--layers 6 --no-normalize`),
    or as written where a key is no flag or a value has no flag form."""
    try:
        settings = ast.literal_eval(match.group(0))
    except (ValueError, SyntaxError):
        return match.group(0)
    said = []
    for key, value in settings.items():
        if key not in FLAGS or value is None:
            return match.group(0)
        if isinstance(value, bool):
            on, off = SWITCHES.get(key, (FLAGS[key], None))
            said.append(on if value else off or f"no {on}")
        elif isinstance(value, (list, tuple)):
            said.append(f"{FLAGS[key]} {','.join(map(str, value))}")
        else:
            said.append(f"{FLAGS[key]} {_shell_word(str(value))}")
    return " ".join(said)


def _shell_word(value: str) -> str:
    """`value` as a shell takes it as one word: bare where it can be (mean), else quoted, so a space
    ('query: ') is not lost; in double quotes where it holds a single one (the user's query: ) and
    nothing a shell reads inside double quotes."""
    quoted = shlex.quote(value)
    if quoted != value and "'" in value and not set('"$`\\!') & set(value):
        return f'"{value}"'
    return quoted


def _flag(kw: str, value: str) -> str | None:
    """The flag form of `kw=value`, or None where no flag says it (mode='exact', normalize=None)."""
    if value in ("True", "False"):
        on, off = SWITCHES.get(kw, (None, None))
        return on if value == "True" else off
    if value == "None" or kw in SWITCHES and value not in ("", "..."):
        return None
    if kw == "mode":
        return MODES.get(value.strip("'\""))
    if value in ("", "..."):
        return FLAGS[kw]
    if value[:1] in "'\"":
        inner = value[1:-1]
        return f"{FLAGS[kw]} {_shell_word(inner)}" if inner else f'{FLAGS[kw]} ""'
    if value.startswith("["):
        return f"{FLAGS[kw]} " + ",".join(part.strip(" '\"") for part in value[1:-1].split(","))
    return f"{FLAGS[kw]} {value}"


def _flags_of(kw: str) -> set[str]:
    """Every flag that gives `kw`: a message that already names one needs no second spelling."""
    if kw == "mode":
        return set(MODES.values())
    return {FLAGS[kw], *(flag for flag in SWITCHES.get(kw, ()) if flag)}


def _call_spans(text: str) -> list[tuple[int, int]]:
    """The spans inside Python calls (`load(..., mode=...)`): advice to a Python caller stays as written."""
    spans, opened = [], []
    for at, char in enumerate(text):
        if char == "(":
            opened.append((at, at > 0 and (text[at - 1].isalnum() or text[at - 1] in "_.")))
        elif char == ")" and opened:
            start, is_call = opened.pop()
            if is_call:
                spans.append((start, at))
    return spans


def _running_command() -> str | None:
    """The first word of the bertscope command running (`plot` for `plot static`), or None outside one."""
    ctx = importlib.import_module(f"{CLICK}.globals").get_current_context(silent=True)
    if ctx is not None:
        words = ctx.command_path.split()[1:]
    else:  # the command's context is closed by the time `main` prints its error: the command line read
        program = Path(sys.argv[0]) if sys.argv else Path()
        if "bertscope" not in (program.name, program.parent.name):
            return None
        words = [arg for arg in sys.argv[1:] if not arg.startswith("-")]
    return words[0] if words else None
