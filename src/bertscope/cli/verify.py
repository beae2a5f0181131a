"""The verify command: the model against the plain Hugging Face forward, a fingerprint, or a store.

Exit status: 0 within tolerance (or the same fingerprint), 1 on drift (or any difference), 2 on bad input.
"""

from __future__ import annotations

import importlib
import os
from pathlib import Path
from typing import Annotated, Any, NoReturn

import typer
from rich.table import Table
from typer.core import TyperCommand

from ..core._enums import Backend, DType, Quantize
from ..core.spec import reloadable
from ..core.text_files import not_a_file
from ..core.writable import cannot_create
from ..errors import BertscopeError, InvalidInput
from .app import (
    FastMinCosineOpt,
    FastOpt,
    IdColumnOpt,
    IdFieldOpt,
    JsonOpt,
    ModelOpt,
    TextColumnOpt,
    TextFieldOpt,
    ThreadsOpt,
    app,
    cuts_said_here,
    emit_json,
    err,
    load_model,
    old_spelling,
    out,
    read_lines,
    record_fields,
    warn,
)
from .typer_setup import CLICK, JSON_ON_USAGE_ERROR
from .wording import as_flags

JSON_ON_USAGE_ERROR.add("verify")  # docs/verify.md: with --json, one JSON object on every exit

_Device = Annotated[str | None, typer.Option("--device", help="auto, cpu, cuda or cuda:N.")]
_Dtype = Annotated[str | None, typer.Option("--dtype", help="float32 (exact), bfloat16, float16 (CUDA).")]
_Backend = Annotated[
    str | None, typer.Option("--backend", help="auto, torch, onnxruntime or openvino (--store: the store's).")
]
_Quantize = Annotated[
    str | None,
    typer.Option("--quantize", help="none, int8, int8_fused or int8_static (--store: the store's)."),
]


class _WordsKept(TyperCommand):
    """verify's command, keeping the words it was given, so that a refusal names -i or --input as typed
    (click records the option, not the spelling)."""

    def parse_args(self, ctx: Any, args: list[str]) -> list[str]:  # ctx: the Context of typer's own click
        ctx.meta["bertscope.verify.words"] = list(args)
        return super().parse_args(ctx, args)


def _input_as_typed() -> str:
    """-i where the command line gave --input's short spelling (`-i X`, `-iX`), else --input."""
    ctx = importlib.import_module(f"{CLICK}.globals").get_current_context(silent=True)
    words = ctx.meta.get("bertscope.verify.words", []) if ctx is not None else []
    for word in words[: words.index("--")] if "--" in words else words:
        if word == "--input" or word.startswith("--input="):
            return "--input"
        if word.startswith("-i"):
            return "-i"
    return "--input"


@app.command(cls=_WordsKept)
def verify(
    model: ModelOpt = None,
    input_path: Annotated[
        Path | None,
        typer.Option(
            "--input",
            "-i",
            help="Your own texts: also compare the first --limit (a line each, or a .jsonl/.csv/.tsv text "
            "field).",
        ),
    ] = None,
    # --sample: --input's old name (bench reads your own texts with -i/--input too); still read, not shown
    old_sample: Annotated[Path | None, typer.Option("--sample", hidden=True)] = None,
    limit: Annotated[
        int, typer.Option("--limit", min=1, help="How many lines of --input to compare (the first N).")
    ] = 100,
    # --lines was --limit's name before --limit everywhere (bench, eval words, senses); still read, not shown
    old_lines: Annotated[int | None, typer.Option("--lines", min=1, hidden=True)] = None,
    save: Annotated[
        Path | None, typer.Option("--save", help="Write the model's fingerprint to this JSON file.")
    ] = None,
    overwrite: Annotated[
        bool, typer.Option("--overwrite", help="With --save: replace an existing fingerprint file.")
    ] = False,
    against: Annotated[
        Path | None, typer.Option("--against", help="Compare with a fingerprint written by --save.")
    ] = None,
    store: Annotated[
        Path | None, typer.Option("--store", help="Re-embed a sample of this store and compare its vectors.")
    ] = None,
    rows: Annotated[int, typer.Option("--rows", min=1, help="With --store: how many rows to check.")] = 200,
    seed: Annotated[
        int | None,
        typer.Option(
            "--seed", min=0, help="With --store: the sample's seed, to repeat a check (default: fresh)."
        ),
    ] = None,
    collection: Annotated[
        str | None, typer.Option("--collection", "-c", help="With --store: the collection in a .db file.")
    ] = None,
    corpus: Annotated[
        Path | None,
        typer.Option(
            "--corpus",
            help="With --store: the corpus it was made from; needed where it keeps no texts (.npy), and "
            "where it keeps them, the sampled rows' ids are checked against it too.",
        ),
    ] = None,
    text_field: TextFieldOpt = "text",
    id_field: IdFieldOpt = None,
    text_column: TextColumnOpt = None,
    id_column: IdColumnOpt = None,
    post: Annotated[
        Path | None, typer.Option("--post", help="With --store: its post-processing file.")
    ] = None,
    device: _Device = None,
    dtype: _Dtype = None,
    backend: _Backend = None,
    quantize: _Quantize = None,
    threads: ThreadsOpt = None,
    fast: FastOpt = False,
    fast_min_cosine: FastMinCosineOpt = None,
    min_cosine: Annotated[
        float | None,
        typer.Option(
            "--min-cosine",
            min=0.0,
            max=1.0,
            help="A lossy mode's floor (default: --fast's bound, else 0.98 for int8, 0.999 for bfloat16 and "
            "float16).",
        ),
    ] = None,
    as_json: JsonOpt = False,
) -> None:
    """Prove the vectors are still the vectors: the model as set up against the plain Hugging Face float32
    forward (every layer of the calibration sentences, a text over the limit, --input lines), against a
    saved fingerprint, or a store's vectors against this deployment.

    Exit 0 within tolerance (1e-5 for exact modes; for lossy ones the fast mode's cosine bound with --fast,
    else the precision's floor: 0.98 for --quantize int8, 0.999 for bfloat16/float16), 1 on
    drift or any difference, 2 on bad input.

    Examples: `bertscope verify`, `bertscope verify --backend onnxruntime -i corpus.txt --json`,
    at build time `bertscope verify -m ./my-model --save my-model.fingerprint.json`, in CI after every
    upgrade `bertscope verify -m ./my-model --against my-model.fingerprint.json`, before querying a
    store `bertscope verify --store corpus.parquet --rows 1000`, a .npy store made from JSONL
    `bertscope verify --store docs.npy --corpus examples/docs.jsonl --id-field id`
    """
    run: dict[str, Any] = {"device": device, "dtype": dtype, "backend": backend, "quantize": quantize}
    # None where not given: --store keeps the store's own runtime unless a load option is given.
    run.update(threads=threads, fast=fast or None, fast_min_cosine=fast_min_cosine)
    try:
        lines = old_spelling(limit, old_lines, name="--limit", old="--lines", default=100)
        sample = old_spelling(input_path, old_sample, name=_input_as_typed(), old="--sample")
        flag = "--input" if old_sample is None else "--sample"  # named as typed
        text_field, id_field = record_fields(text_field, id_field, text_column, id_column)
        if sum(x is not None for x in (save, against, store)) > 1:
            raise InvalidInput("give one of --save, --against and --store")
        store_only: dict[str, Any] = {
            "--rows": rows != 200,
            "--collection": collection is not None,
            "--corpus": corpus,
            "--seed": seed is not None,
        }
        # named in the spelling typed (--text-column/--id-column: the old ones)
        text_flag = "--text-field" if text_column is None else "--text-column"
        id_flag = "--id-field" if id_column is None else "--id-column"
        # -i reads a .jsonl/.csv/.tsv text field too (as bench -i does): --text-field is its, there
        store_only.update(
            {text_flag: text_field != "text" and sample is None, id_flag: id_field, "--post": post}
        )
        _refuse_unused(
            store, against, sample, lines=lines, min_cosine=min_cosine, store_only=store_only, flag=flag
        )
        if store is not None and not corpus and (named := [n for n in (text_flag, id_flag) if store_only[n]]):
            them = "them" if len(named) > 1 else "it"  # they name the fields of the corpus, read nowhere else
            raise InvalidInput(
                f"{', '.join(named)}: the fields of --corpus FILE; add --corpus or leave {them} out"
            )
        if overwrite and save is None:
            raise InvalidInput("--overwrite replaces an existing --save file; add --save FILE or drop it")
        if save is not None:
            _check_writable(save, overwrite=overwrite)  # before the work, not after it
        # A text cut here is compared cut, as the reference (or the store) cut it: no vector is handed on,
        # and the canary texts hold one over the limit on purpose, so the cut is not a warning here.
        with cuts_said_here():
            if store is not None:
                fields = {"text_field": text_field, "id_field": id_field}
                code = _verify_store(
                    store, model, run, rows=rows, collection=collection, corpus=corpus, fields=fields,
                    post=post, seed=seed, as_json=as_json,
                )  # fmt: skip
            else:
                code = _verify_model(
                    model, run, sample, lines, save=save, against=against, min_cosine=min_cosine,
                    as_json=as_json, flag=flag, text_field=text_field,
                )  # fmt: skip
    except BertscopeError as exc:
        _refused(as_flags(str(exc)), as_json=as_json)
    except OSError as exc:  # a file it could not read or write: bad input (2), never drift (1)
        _refused(f"{exc.filename or 'a file'}: {exc.strerror or exc}", as_json=as_json)
    raise typer.Exit(code)


def _refused(message: str, *, as_json: bool) -> NoReturn:
    """Exit 2 (bad input) with `message` on stderr, and with --json a JSON object on stdout too, so that
    `--json > verify.json || exit 1` in CI leaves a file that says why (an empty one said nothing)."""
    warn(message, label="error:", style="red")
    if as_json:
        emit_json({"ok": False, "error": message})
    raise typer.Exit(2)


def _refuse_unused(
    store: Path | None, against: Path | None, sample: Path | None, *, lines: int, min_cosine: float | None,
    store_only: dict[str, Any], flag: str = "--input",
) -> None:  # fmt: skip
    """Refuse an option the chosen check would leave unused (exit 2), naming what to do instead (`flag`:
    -i/--input as typed, --sample where its old name was)."""
    if store is not None:
        model_only = {flag: sample, "--limit": lines != 100, "--min-cosine": min_cosine is not None}
        if given := [name for name, on in model_only.items() if on]:
            raise InvalidInput(
                f"{', '.join(given)}: for the check against the reference forward; --store re-embeds the "
                f"store's own rows (--rows N): leave {'them' if len(given) > 1 else 'it'} out"
            )
    elif given := [name for name, on in store_only.items() if on]:
        them = "them" if len(given) > 1 else "it"
        raise InvalidInput(f"{', '.join(given)}: with --store FILE only; add --store or leave {them} out")
    if sample is None and lines != 100:
        raise InvalidInput("--limit counts the lines of --input; add -i FILE or leave --limit out")
    if against is not None and min_cosine is not None:
        raise InvalidInput(
            "--min-cosine bounds the check against the reference forward; --against compares fingerprints: "
            "leave it out"
        )


def _check_writable(path: Path, *, overwrite: bool) -> None:
    """Refuse a --save path the fingerprint could not be written to, or one it would replace unasked."""
    folder = path.parent
    if path.is_dir():
        raise InvalidInput(f"--save {path} is a folder; name a JSON file, e.g. {path / 'fingerprint.json'}")
    if path.exists() and not overwrite:
        # the reference a deployment is checked --against: replaced in silence, every check would pass
        raise InvalidInput(f"--save {path} exists; pass --overwrite to replace it, or choose another name")
    if not folder.is_dir():
        raise InvalidInput(f"--save {path}: the folder {folder} does not exist; create it or save elsewhere")
    why = cannot_create(folder)  # os.access says yes to root in a folder that takes no file (/proc)
    if why or (path.exists() and not os.access(path, os.W_OK)):
        raise InvalidInput(
            f"--save {path}: not writable here ({why or 'read-only'}); choose a path you can write to"
        )


def _load(model: str | None, run: dict[str, Any], stored: dict[str, Any] | None = None) -> Any:
    """The model with the load options given and a store's token limit; its runtime (backend, dtype,
    quantize) too unless the options choose one: a store's runtime is a whole, and one part of it beside
    a choice typed (--fast, --dtype bfloat16 on its onnxruntime) would be refused as if typed."""
    from ..io.query import at_recorded_limit

    stored = stored or {}
    if model is None:
        reloadable(stored)
    chosen = any(run[name] for name in ("dtype", "backend", "quantize", "fast"))
    runtime = {} if chosen else stored
    options: dict[str, Any] = dict(
        device=run["device"] or "auto",
        dtype=DType.parse(run["dtype"] or runtime.get("dtype") or "float32", what="dtype"),
        backend=Backend.parse(run["backend"] or runtime.get("backend") or "auto", what="backend"),
        quantize=Quantize.parse(run["quantize"] or runtime.get("quantize") or "none", what="quantize"),
        threads=run["threads"],
        fast=bool(run["fast"]),
        fast_min_cosine=run["fast_min_cosine"],
    )
    # The store's rows were cut at its recorded limit (load(max_tokens=12)): re-embedded at it, as a
    # verify without load options does (io.query.model_for)
    return at_recorded_limit(load_model, stored, model, **options)


def _verify_model(
    model: str | None,
    run: dict[str, Any],
    sample: Path | None,
    lines: int,
    *,
    save: Path | None,
    against: Path | None,
    min_cosine: float | None,
    as_json: bool,
    flag: str = "--input",
    text_field: str = "text",
) -> int:
    from ..backends.exact import EXACT_ATOL
    from ..verify import check_fingerprint, compare_to_reference, read_fingerprint, save_fingerprint
    from ..verify.reference import reference_texts
    from ..verify.settings import is_lossy, is_static, vector_settings

    if against is not None:
        if sample is not None:
            raise InvalidInput(f"{flag} is compared with the reference forward; leave it out with --against")
        expected = read_fingerprint(against)  # a bad file is bad input, found before the model loads
        check = check_fingerprint(_load(model, run), expected)
        same = f"same fingerprint as {against} (id {check.found_id})"
        _show_differences(check.to_dict(), as_json, same=same)
        return 0 if check.ok else 1
    texts = _sample(sample, lines, flag, text_field) if sample is not None else []
    loaded = _load(model, run)
    if save is not None and not texts and min_cosine is None and is_static(loaded):
        # no forward to compare with (compare_to_reference refuses one, naming --save): its fingerprint alone
        made = save_fingerprint(loaded, save, overwrite=True)  # --overwrite checked before the work
        warn(f"fingerprint {made['id']} of a static model written to {save}", label="saved:", style="green")
        if as_json:
            emit_json(made)
        return 0
    if min_cosine is not None and not is_lossy(vector_settings(loaded)):  # the library's refusal, in flags
        raise InvalidInput(
            "--min-cosine bounds a lossy mode's drift (--dtype bfloat16/float16, --quantize, --fast); this "
            f"model runs exact (float32: every token vector held to max abs {EXACT_ATOL:g}): leave it out"
        )
    reference = reference_texts(loaded)  # problems name the -i texts from their first, text 0
    result = compare_to_reference(
        loaded, [*reference, *texts], min_cosine=min_cosine, reference=len(reference)
    )
    if save is not None:
        made = save_fingerprint(loaded, save, overwrite=True)  # --overwrite checked before the work
        warn(f"fingerprint {made['id']} written to {save}", label="saved:", style="green")
    if as_json:
        emit_json(result.to_dict())
    else:
        _show_verification(result)
    err.print(f"verified in {result.seconds:.1f} s", highlight=False)
    return 0 if result.ok else 1


def _sample(path: Path, lines: int, flag: str, text_field: str = "text") -> list[str]:
    """The first `lines` texts of `path` (given as `flag`; a record file's `text_field`)."""
    if not path.is_file():
        fix = "" if path.is_dir() else "; give a text file, one text a line"
        raise InvalidInput(f"{flag} {path}: {not_a_file(path)}{fix}")
    texts = []
    for line in read_lines(str(path), text_field=text_field):
        texts.append(line)
        if len(texts) >= lines:
            break
    if not texts:
        raise InvalidInput(f"{flag} {path} holds no text")
    return texts


def _verify_store(
    path: Path, model: str | None, run: dict[str, Any], *, rows: int, collection: str | None,
    corpus: Path | None, fields: dict[str, Any], post: Path | None, seed: int | None, as_json: bool,
) -> int:  # fmt: skip
    from ..io.query import moved_away
    from ..verify.store import open_checked, refuse_edited_settings, verify_store
    from .corpus import ray_shards

    ray_shards(path, option="--store", command="verify")  # a shard of an unfinished job holds some rows
    opened = open_checked(path, collection=collection)
    refuse_edited_settings(opened)  # before a load by the model and options they name
    chosen: Any = model
    if model is None:
        moved_away(opened.settings)  # before a load by its name offers another model
    if any(value is not None for value in run.values()):
        chosen = _load(model or opened.settings.get("model_arg"), run, opened.settings)
    check = verify_store(opened, model=chosen, rows=rows, corpus=corpus, post=post, seed=seed, **fields)
    sample = f"; sample seed {check.seed} (--seed repeats it)" if check.rows_checked < check.rows else ""
    err.print(f"verified in {check.seconds:.1f} s{sample}", highlight=False)
    for note in check.notes:  # what could not be proven: on stderr, in --json too
        warn(note, label="note:")
    if as_json:
        emit_json(check.to_dict())
        return 0 if check.ok else 1
    out.print(check.headline(), highlight=False, soft_wrap=True)  # what differs: the model, rows or both
    if check.differences:
        _show_differences(check.to_dict(), False, same="")
    return 0 if check.ok else 1


def _show_verification(result: Any) -> None:
    table = Table("layer", "max abs", "min cosine")
    for drift in result.layers:
        # one width for every non-zero figure (2.98e-08, not 3e-08 beside it): the column reads alike
        # wherever float32 noise lands, as the docs' pages need
        shown = f"{drift.max_abs:.2e}" if drift.max_abs else "0"
        table.add_row(str(drift.layer), shown, f"{drift.min_cosine:.8f}")
    out.print(table)
    s = result.settings
    facts = [
        f"{result.environment['backend']} {s['precision']['dtype']}"
        + (f" {s['precision']['quantize']}" if s["precision"]["quantize"] else ""),
        f"weights {s['weights_dtype']}",
        f"{s['attention']['mask']} mask",
        f"truncation at {s['truncation']['max_tokens']} tokens ({s['truncation']['side']})",
        f"{s['pooling']['pooling']} pooling of layers {s['pooling']['layers']}"
        + (", normalized" if s["pooling"]["normalize"] else ""),
        "lowercasing tokenizer" if s["tokenizer"]["lowercase"] else "cased tokenizer",
    ]
    out.print("settings: " + "; ".join(facts), highlight=False)
    bound = result.tolerance
    limit = (
        f"max abs <= {bound['max_abs']:g}" if "max_abs" in bound else f"min cosine >= {bound['min_cosine']}"
    )
    # vectors within the bound but a setting the model was not trained with: a problem, not a drift
    verdict = "ok" if result.ok else ("PROBLEM" if result.problems and _within(result) else "DRIFT")
    out.print(
        f"{verdict}: {result.n_texts} texts, {result.n_tokens} tokens against the plain Hugging Face float32 "
        f"forward; tolerance {limit} ({bound['of']}); sentence min cosine {result.sentence_min_cosine:.8f}",
        highlight=False,
    )
    for problem in result.problems:
        warn(problem, label="problem:", style="red")
    for note in result.warnings:
        warn(note)


def _within(result: Any) -> bool:
    """Whether the vectors are within the verification's bound (`Verification.tolerance`), as
    verify/reference.py reads it: every layer's max abs, or the sentence vectors' min cosine."""
    bound = result.tolerance
    if "max_abs" in bound:
        return all(layer.max_abs <= bound["max_abs"] for layer in result.layers)
    return bool(result.sentence_min_cosine >= bound["min_cosine"])


def _show_differences(found: dict[str, Any], as_json: bool, *, same: str) -> None:
    if as_json:
        emit_json(found)
        return
    if not found["differences"]:
        out.print(f"ok: {same}", highlight=False)
        return
    table = Table("what", "expected", "found")
    for difference in found["differences"]:
        table.add_row(*(str(difference[key]) for key in ("what", "expected", "found")))
    out.print(table)
    if "rows_checked" not in found:
        count = len(found["differences"])
        noun = "difference" if count == 1 else "differences"
        out.print(f"DIFFERENT: {count} {noun} from the fingerprint", highlight=False)
