"""The command line: `bertscope info | tokens | static | anatomy | embed | similarity | bench | ...`.

Data goes to stdout, progress and warnings to stderr; `--json` for machines, tables for people.
Errors are one line (no traceback unless --debug).
"""

from __future__ import annotations

import importlib
import json
import logging
import math
import os
import sys
import warnings
from collections.abc import Callable, Iterable, Iterator
from contextlib import contextmanager
from itertools import chain
from pathlib import Path
from typing import Annotated, Any

import typer

from ..core._enums import Backend, DType, Engine, Level, Pooling, Quantize, StrEnum, level_named
from ..core.cpu import usable_cpus
from ..errors import InvalidInput, InvalidSpec, TruncatedTextsWarning

# The command modules import these from here, with the shared options below.
from .typer_setup import CLICK, pipe_closed
from .typer_setup import HiddenArgumentsUnsaid as HiddenArgumentsUnsaid
from .typer_setup import err as err
from .typer_setup import out as out
from .typer_setup import warn as warn

app = typer.Typer(
    help="See and use every embedding of a BERT-family model (default: the bundled all-MiniLM-L6-v2).\n\n"
    'Examples: `bertscope tokens "I like eating bread"`, `bertscope embed "a cat" "a dog" --json`, '
    "`bertscope embed -i corpus.txt -o corpus.parquet`, "
    '`bertscope similar "a storm" --store corpus.parquet -k 5`; `bertscope COMMAND --help` shows more.',
    no_args_is_help=True,
    pretty_exceptions_enable=False,
    add_completion=False,
    rich_markup_mode="markdown",
)


_state = {"debug": os.environ.get("BERTSCOPE_DEBUG", "") not in ("", "0")}
# the (model, mode) loads of the running command that measured again (--remeasure): each once a command
_remeasured: set[tuple[str, str]] = set()


class _Notices(logging.Handler):
    """The library's notices (`logging` at INFO under `bertscope.core`: the seconds PyTorch took to load
    for a feature) as `note:` lines on stderr, unless the running command was given -q/--quiet. A Python
    caller sees them only where it turns logging on: a notice is not a warning about what it asked."""

    def emit(self, record: logging.LogRecord) -> None:
        ctx = importlib.import_module(f"{CLICK}.globals").get_current_context(silent=True)
        if ctx is not None and ctx.params.get("quiet"):
            return
        warn(record.getMessage(), label="note:", style="cyan")


_NOTICES = _Notices(logging.INFO)


def _say_notices() -> None:
    """Route the library's notices to stderr for this command (once per process)."""
    logger = logging.getLogger("bertscope.core")
    if _NOTICES not in logger.handlers:
        logger.addHandler(_NOTICES)
        logger.setLevel(logging.INFO)
        logger.propagate = False  # said once, here, whatever handlers the root logger has


def _model_given(ctx: typer.Context, param: typer.CallbackParam, value: str | None) -> str | None:
    """-m as given; a value read from BERTSCOPE_MODEL is checked now, so that an error names the variable
    (the user typed no -m: "leave the model out" would be no fix)."""
    source = ctx.get_parameter_source(param.name or "")
    if value is not None and getattr(source, "name", None) == "ENVIRONMENT":
        from ..core.folder import check_env_model

        check_env_model(value)
    return value


ModelOpt = Annotated[
    str | None,
    typer.Option(
        "--model",
        "-m",
        envvar="BERTSCOPE_MODEL",
        callback=_model_given,
        help="Model folder or hub id (default: the bundled all-MiniLM-L6-v2, also named `bundled`).",
    ),
]
JsonOpt = Annotated[bool, typer.Option("--json", help="Print JSON instead of a table.")]
# The texts a research command reads, as `embed -i` reads them (read_lines).
InputOpt = Annotated[
    str,
    typer.Option(
        "--input",
        "-i",
        help="Texts: one per line, or the text field of .jsonl/.csv/.tsv/.parquet (- for stdin).",
    ),
]


def _enum_option(kind: type[StrEnum], what: str) -> Callable[[str], StrEnum]:
    """A typer callback that turns the option's text into `kind` once, so a bad value fails first."""

    def parse(value: str) -> StrEnum:
        return kind.parse(value, what=what)

    return parse


DeviceOpt = Annotated[str, typer.Option("--device", help="auto, cpu, cuda or cuda:N.")]
DtypeOpt = Annotated[
    str,
    typer.Option(
        "--dtype", callback=_enum_option(DType, "dtype"), help="float32 (exact), bfloat16, float16 (CUDA)."
    ),
]
BackendOpt = Annotated[
    str,
    typer.Option(
        "--backend",
        callback=_enum_option(Backend, "backend"),
        help="auto (the fastest runtime measured exact on this machine: torch, onnxruntime or openvino "
        "float32 within 1e-5 of torch, timed once and cached; onnxruntime for int8; torch on CUDA and for "
        "other dtypes), torch, onnxruntime or openvino (CPU).",
    ),
]
QuantizeOpt = Annotated[
    str,
    typer.Option(
        "--quantize",
        callback=_enum_option(Quantize, "quantize"),
        help="none, int8, int8_fused or int8_static (CPU; ONNX Runtime by default; --backend openvino runs "
        "int8 and int8_static; drift recorded).",
    ),
]
FastOpt = Annotated[
    bool,
    typer.Option(
        "--fast",
        help="Run the fastest mode this machine has within --fast-min-cosine of float32 "
        "(measured once per model and machine, cached, recorded).",
    ),
]


def _remeasure_asked(asked: bool) -> bool:
    # Only noted here: `load_model` asks its load to measure again, once the other options are accepted
    # (a callback runs before the command checks anything, even where it then fails).
    _state["remeasure"] = asked
    return asked


RemeasureOpt = Annotated[
    bool,
    typer.Option(
        "--remeasure",
        callback=_remeasure_asked,
        help="Measure this machine's runtimes again (--fast and the exact default), e.g. after it was "
        "measured under load: `bertscope embed -i corpus.txt -o out.parquet --fast --remeasure`.",
    ),
]
# None when not given: `load` refuses a bound without --fast, and applies its own default (0.999) with it.
FastMinCosineOpt = Annotated[
    float | None,
    typer.Option(
        "--fast-min-cosine", min=0.0, max=1.0, help="--fast's bound: min cosine to float32 [default: 0.999]."
    ),
]
EngineOpt = Annotated[
    str,
    typer.Option(
        "--engine",
        callback=_enum_option(Engine, "engine"),
        is_eager=True,  # read before --threads, which it changes the meaning of
        help="local, or ray (Ray Data; -o names a folder of shards).",
    ),
]


def _threads_here(ctx: typer.Context, value: int | None) -> int | None:
    """--threads no higher than the CPUs here: more cannot run at once, and each new count is a new
    runtime measurement (minutes at a count in the hundreds), so a typo is refused, not timed. With
    --engine ray (an eager option: read by now) it is each actor's CPUs, on machines of their own."""
    engine = ctx.params.get("engine")
    if value is None or getattr(engine, "value", engine) == Engine.RAY.value:
        return value
    return at_most_cpus(value)


def at_most_cpus(value: int | None) -> int | None:
    """A count of CPUs (--threads, probe --n-jobs) no higher than this machine's: refused in one line."""
    if value is not None and value > (cpus := usable_cpus()):
        word = "CPU" if cpus == 1 else "CPUs"
        raise typer.BadParameter(f"{value}: this machine has {cpus} {word}; give at most {cpus}")
    return value


ThreadsOpt = Annotated[
    int | None,
    typer.Option(
        "--threads",
        min=1,
        callback=_threads_here,
        help="CPU threads of every runtime (default: the physical cores); 512 tokens a forward each.",
    ),
]
LayersOpt = Annotated[
    str | None, typer.Option("--layers", "-l", help="Layer spec: -1, -2, 0, 6, -4:, 1:4, 0,6, all.")
]
CombineOpt = Annotated[
    str,
    typer.Option(
        "--combine",
        help="How several layers combine: mean, sum, concat, stack (tokens/words: one per layer).",
    ),
]
LongOpt = Annotated[
    str, typer.Option("--long", help="Texts over the model's limit: truncate, window, error.")
]
# The commands that read one window (anatomy, attention): /anatomy's and /attention's `long`.
CutOpt = Annotated[
    str, typer.Option("--long", help="A text over the model's limit: truncate (the cut is said) or error.")
]
PromptNameOpt = Annotated[
    str | None,
    typer.Option("--prompt-name", help="One of the model's own prompts (default: its default prompt)."),
]
PromptOpt = Annotated[
    str | None, typer.Option("--prompt", help='A prompt text put before every text ("" for none).')
]
PoolingOpt = Annotated[str, typer.Option("--pooling", "-p", help=", ".join(p.value for p in Pooling) + ".")]
# Help text is markdown: code spans keep `<s>` from being read as an HTML tag and dropped.
MaskSpecialOpt = Annotated[
    bool, typer.Option("--mask-special", help="Leave `[CLS]`/`[SEP]` (`<s>`, `</s>`) out of pooling.")
]
StrideOpt = Annotated[
    int | None,
    typer.Option("--stride", min=1, help="Window step in tokens (--long window; default: half a window)."),
]


def top_k_option(help: str, *, least: int | None = None) -> Any:
    """The nearest-neighbour count, under one name in every command that asks it: `--top-k`/`-k`
    (sentence-transformers' `top_k`)."""
    return typer.Option("--top-k", "-k", min=least, help=help)


def old_spelling(value: Any, old_value: Any, *, name: str, old: str, default: Any = None) -> Any:
    """An option's value given under its name or its old, hidden spelling (`--export` for `--output`);
    both at once is refused, naming the one to keep, even where the value typed under `name` is its
    default (`-k 10 --top 2` would otherwise drop the 10 typed)."""
    if old_value is None:
        return value
    if value != default or _typed(name):
        raise InvalidInput(f"{old} is the old spelling of {name}; give {name} only")
    return old_value


def _typed(option: str) -> bool:
    """Whether the running command's `option` (`--top-k`) was typed on its command line."""
    ctx = importlib.import_module(f"{CLICK}.globals").get_current_context(silent=True)
    found = [p for p in (ctx.command.params if ctx is not None else []) if option in getattr(p, "opts", ())]
    return bool(found) and getattr(ctx.get_parameter_source(found[0].name), "name", None) == "COMMANDLINE"


def level_option(value: str, names: list[str]) -> str:
    """A --level value in the spelling of the command's own level names: a level's singular and plural
    are one name (`embed --level word`, `probe --level word`, `cka --level token`), read as the library
    reads them (`core._enums.level_named`). Anything else is refused, listing the names as embed and the
    corpus jobs spell them (tokens, words, sentence)."""
    found = level_named(value, names)
    if found is None:
        raise InvalidSpec(f"unknown level {value!r}; choose one of: {level_help(names)}")
    return found


def level_help(names: list[str]) -> str:
    """The levels `names` as embed and the corpus jobs spell them: the plural where it is theirs."""
    corpus = [level.value for level in Level]
    return ", ".join(level_named(name, corpus) or name for name in names)


# How a JSONL, CSV or Parquet corpus is read: embed and verify (which reads the corpus a store was made from)
TextFieldOpt = Annotated[str, typer.Option("--text-field", help="Text field (jsonl/csv/parquet).")]
IdFieldOpt = Annotated[
    str | None,
    typer.Option(
        "--id-field",
        help="Id field (default: 1-based: line number in .txt/.jsonl, data row in .csv/.tsv/.parquet).",
    ),
]
# --text-column/--id-column: the old spellings of --text-field/--id-field, still read, not shown
# (a record's field, as the library's text_field=/id_field= and probe's --label-field)
TextColumnOpt = Annotated[str | None, typer.Option("--text-column", hidden=True)]
IdColumnOpt = Annotated[str | None, typer.Option("--id-column", hidden=True)]


def record_fields(
    text_field: str, id_field: str | None, text_column: str | None, id_column: str | None
) -> tuple[str, str | None]:
    """--text-field and --id-field, each given under its name or its old spelling (both refused)."""
    text = old_spelling(text_field, text_column, name="--text-field", old="--text-column", default="text")
    return text, old_spelling(id_field, id_column, name="--id-field", old="--id-column")


PairOpt = Annotated[
    str | None,
    typer.Option("--pair", help="A second text B: each text is read as the pair [CLS] A [SEP] B [SEP]."),
]


def with_pair(texts: list[str], pair: str | None) -> list[Any]:
    """The texts, each joined with `pair` as an (A, B) sentence pair when one is given."""
    return list(texts) if pair is None else [(text, pair) for text in texts]


def pair_note(model: Any) -> str:
    """The note for a pair whose token type ids are all 0: the family has no segment rows, or its tokenizer
    gives no token_type_ids (model_input_names without them: every token, B's included, reads segment 0,
    as transformers does), or gives B segment 0 as A."""
    # A Model names its source on `loaded`; a tokenizer-only folder view on itself.
    source = getattr(getattr(model, "loaded", None), "source", None) or getattr(model, "source", "this model")
    family = getattr(model, "family", None)
    if family is not None and not family.uses_token_types:
        return f"note: {source} has no token types (segment rows): B is marked by the separators only"
    # the tokenizer Model runs (a folder view's is text_tokenizer; its `tokenizer` is the Rust one)
    tokenizer = getattr(model, "text_tokenizer", None) or getattr(model, "tokenizer", None)
    if getattr(tokenizer, "token_types", True):
        given = "gives B token type 0, as A"
    else:
        given = "gives no token_type_ids"
    return (
        f"note: {source}'s tokenizer {given}: every token, B's included, reads segment 0, as transformers "
        "does; B is marked by the separators only"
    )


@app.callback()
def _root(
    debug: Annotated[bool, typer.Option("--debug", help="Show full tracebacks on errors.")] = False,
    trust_remote_code: Annotated[
        bool,
        typer.Option(
            "--trust-remote-code",
            help="Run the model code a folder ships (config.json auto_map); only for sources you trust.",
        ),
    ] = False,
) -> None:
    """See and use every embedding of a BERT-family model."""
    if debug:
        _state["debug"] = True
    _state["trust_remote_code"] = trust_remote_code  # per invocation: one test's flag must not leak
    _state["remeasure"] = False  # a command's --remeasure: read by load_model
    _remeasured.clear()
    _say_notices()


def say_cut(n_dropped: Iterable[int], max_tokens: int, fix: str) -> None:
    """The one line on stderr for texts a command cut at the model's limit and reports itself (it has no
    --long to hand the library, or says the fix its own way), if any was cut: never in silence."""
    from ..core.tokens import cut_summary

    dropped = list(n_dropped)
    if cut := sum(1 for n in dropped if n > 0):
        warn(f"{cut_summary(cut, len(dropped), max_tokens, sum(dropped))}; {fix}")


@contextmanager
def interrupted_said() -> Iterator[None]:
    """A Ctrl-C inside (serve's and explore's model loading, before uvicorn has its own shutdown lines to
    say) ends in `interrupted`, as every other command's does (`main` says it for those)."""
    try:
        yield
    except KeyboardInterrupt:
        err.print("interrupted")
        raise typer.Exit(130) from None


@contextmanager
def cuts_said_here() -> Iterator[None]:
    """The library's `TruncatedTextsWarning` kept quiet inside: the command says the cut itself, once."""
    with warnings.catch_warnings():
        warnings.simplefilter("ignore", TruncatedTextsWarning)
        yield


@contextmanager
def cuts_said_once(fix: str) -> Iterator[None]:
    """The library's cut warnings inside (a command without --long, calling it several times) as one line
    on stderr at the end: the one over the most texts, with `fix` for the library's `long='window'`
    advice, which the command does not take. Other warnings pass on, one line each."""
    with warnings.catch_warnings(record=True) as caught:
        warnings.simplefilter("always", TruncatedTextsWarning)
        yield
    cuts = [w.message for w in caught if isinstance(w.message, TruncatedTextsWarning)]
    for other in (w for w in caught if not isinstance(w.message, TruncatedTextsWarning)):
        warn(other.message)
    if cuts:
        from ..core.tokens import cut_summary

        widest = max(cuts, key=lambda said: said.texts)
        warn(f"{cut_summary(widest.cut, widest.texts, widest.max_tokens, widest.tokens)}; {fix}")


def is_debug() -> bool:
    """Whether --debug (or BERTSCOPE_DEBUG) asked for full tracebacks."""
    return _state["debug"]


def check_layers_unloaded(model: str | None, layers: Any) -> None:
    """Refuse a layer spec the model's folder has not (its layer count read torch-free) before anything
    else: a load (and a --remeasure's timing), or an output check the user would fix first in vain."""
    from ..core.folder import FolderView
    from ..core.layers import parse_layers

    view = FolderView.open(model) if layers is not None else None
    facts = view.info() if view is not None else None
    if facts is not None:
        parse_layers(layers, int(facts["n_layers"]))


def load_model(
    model: str | None,
    *,
    device: str = "auto",
    dtype: DType | str = DType.FLOAT32,
    backend: Backend | str = Backend.AUTO,
    quantize: Quantize | str = Quantize.NONE,
    threads: int | None = None,
    fast: bool = False,
    fast_min_cosine: float | None = None,
    max_tokens: int | None = None,
    facts_only: bool = False,
) -> Any:
    """Load the model a command asked for with the shared load options (--fast: the fastest mode in bound;
    `max_tokens`: a store's recorded limit, where it differs from the model's).

    With --remeasure, the options are checked as `load(remeasure=True)` checks them (`remeasure_if_asked`);
    the load then measures this model's figures again, once its own options are accepted. `facts_only`: a
    load only to read the model's facts (its token limit, before a job), which never measures: the
    command's own load does, once per model and mode."""
    from ..model import load

    mode = "fast" if fast else "exact"
    remeasure = not facts_only and remeasure_if_asked(
        backend=backend, quantize=quantize, fast=fast, fast_min_cosine=fast_min_cosine, key=(str(model), mode)
    )
    return load(
        model, device=device, dtype=dtype, threads=threads, backend=backend, quantize=quantize,
        mode=mode, fast_min_cosine=fast_min_cosine, remeasure=remeasure, max_tokens=max_tokens,
        trust_remote_code=bool(_state.get("trust_remote_code")),
    )  # fmt: skip


def remeasure_if_asked(
    *,
    backend: Backend | str,
    quantize: Quantize | str | None,
    fast: bool,
    fast_min_cosine: float | None = None,
    key: tuple[str, str] = ("", ""),
) -> bool:
    """Whether this load should measure again (`load(remeasure=True)`, once per command): where the command
    was given --remeasure, the options are checked first (InvalidSpec where they name the runtime
    themselves, as `load(remeasure=True)` refuses). Nothing is forgotten here: the load measures the
    model's figures of the runtime choice it reads again once its own options are accepted, so a command
    refused (a folder that is not there, --fast with --dtype, another dtype: nothing to measure) keeps
    every measurement. `key` (model, mode) measures each once per command. A Ray job, whose driver loads
    without `remeasure`, forgets this machine's figures instead, once the options are checked."""
    if not _state.get("remeasure"):
        return False
    from ..model import refuse_unread_options

    mode = "fast" if fast else "exact"
    refuse_unread_options(
        backend=backend, quantize=quantize, mode=mode, fast_min_cosine=fast_min_cosine, remeasure=True
    )
    if key in _remeasured:  # a second load of the same model and mode in one command: the figures are fresh
        return False
    _remeasured.add(key)
    if _ray_job():
        from ..backends.fast import forget_measurements

        forget_measurements()
    return True


def _ray_job() -> bool:
    """Whether the running command is a Ray job (`embed --engine ray`), which loads on Ray's own loader."""
    ctx = importlib.import_module(f"{CLICK}.globals").get_current_context(silent=True)
    engine = ctx.params.get("engine") if ctx is not None else None
    return getattr(engine, "value", engine) == Engine.RAY.value


def emit_json(data: Any) -> None:
    """Write one JSON document on stdout (NumPy arrays and paths included; NaN and infinity as null)."""
    try:
        text = json.dumps(data, ensure_ascii=False, default=_jsonable, allow_nan=False)
    except ValueError:
        # Bare NaN is not JSON; only a document that holds one pays for the second walk.
        text = json.dumps(_finite(data), ensure_ascii=False, default=_jsonable, allow_nan=False)
    try:
        sys.stdout.write(text + "\n")
        sys.stdout.flush()
    except BrokenPipeError:  # `| head -c1`: click would end it in exit 1, as a failure
        pipe_closed()


def _finite(value: Any) -> Any:
    """`value` with every non-finite float (NaN, inf) as None, through dicts, lists and arrays."""
    if isinstance(value, dict):
        return {k: _finite(v) for k, v in value.items()}
    if isinstance(value, (list, tuple)):
        return [_finite(v) for v in value]
    if hasattr(value, "tolist") and not isinstance(value, (str, bytes)):
        return _finite(value.tolist())
    if isinstance(value, float) and not math.isfinite(value):
        return None
    return value


def _jsonable(value: Any) -> Any:
    import numpy as np  # already loaded wherever a NumPy value reaches here

    if isinstance(value, np.ndarray):
        return value.tolist()
    if isinstance(value, (np.floating, np.integer)):
        return value.item()
    if isinstance(value, Path):
        return str(value)
    raise TypeError(f"cannot write {type(value).__name__} as JSON")


def check_stride(model: Any, stride: int | None, long: str | None = None) -> None:
    """Refuse a --stride outside the model's window now, before any work (a corpus job would otherwise
    meet it only at its first long text). The bounds are the windows' own check (`Tokens.windows`),
    run on a one-word text. With a `long` other than window the recipe refuses the stride itself, for
    that reason (a stride steps windows), not for its size."""
    if long is not None and str(long).strip().lower() != "window":
        return
    if stride is not None:
        model.tokenize(["a"])[0].windows(model.max_tokens, stride)


def read_lines(input_path: str, *, text_field: str = "text") -> Iterator[str]:
    """The texts of -i FILE (or stdin for -), streamed, read exactly as `embed -i` and corpus jobs read
    it: a line each of a .txt, the `text_field` of each .jsonl/.csv/.tsv/.parquet record. A file that
    holds no text is refused here, naming it (`no_text`), as `embed -i` refuses it."""
    from ..io.readers import Rejects, read_corpus, refuse_fields_without_records

    refuse_fields_without_records(input_path, text_field=text_field)  # a .txt: no field to read it from
    rejects = Rejects()
    texts = (record.text for record in read_corpus(input_path, text_field=text_field, rejects=rejects))
    first = next(texts, None)
    if first is None:
        raise no_text(input_path, text_field, rejects)
    return chain([first], texts)


def no_text(input_path: str, text_field: str, rejects: Any) -> InvalidInput:
    """The one-line refusal of an -i FILE that holds no text (empty, or every line or record empty), in
    the words a corpus job says it in (`io.readers.empty_corpus`)."""
    from ..io.readers import empty_corpus, source_name

    return InvalidInput(
        f"{source_name(input_path)}: {empty_corpus(input_path, rejects, text_field=text_field)}"
    )
