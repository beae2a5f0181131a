"""Commands that look at the model itself: info, tokens, static, anatomy."""

from __future__ import annotations

import warnings
from collections.abc import Iterator
from pathlib import Path
from typing import Annotated, Any

import typer
from rich.table import Table
from rich.text import Text

from ..core.exports import formats_help
from ..core.folder import FolderView
from ..core.given import past_segments
from ..core.writable import refuse_unwritable
from ..errors import InvalidInput
from .app import (
    BackendOpt,
    DeviceOpt,
    DtypeOpt,
    EngineOpt,
    IdFieldOpt,
    JsonOpt,
    ModelOpt,
    PairOpt,
    QuantizeOpt,
    TextFieldOpt,
    ThreadsOpt,
    app,
    cuts_said_here,
    emit_json,
    err,
    load_model,
    old_spelling,
    out,
    pair_note,
    say_cut,
    top_k_option,
    with_pair,
)
from .typer_setup import missing_argument

TOKENS_FIX = "embed and similarity cut them there too; --long window shows (and embeds) every token"
ANATOMY_FIX = "the anatomy stops there; split the text to see its end"


@app.command()
def info(model: ModelOpt = None, as_json: JsonOpt = False) -> None:
    """Show the model: family, layers, sizes, vocabulary, limits, special tokens, pooling.

    Example: `bertscope info --model ./my-bert`
    """
    from ..backends.recorded import folder_info, unchosen_info
    from ..core.model_info import resolved
    from ..core.prompts import read_prompts
    from ..core.st_settings import (
        auto_refused,
        folder_similarity_fn_name,
        folder_truncate_dim,
        sentence_transformers_settings,
    )
    from ..verify.fingerprint import light_fingerprint, store_fingerprint

    view = FolderView.open(model)
    # a runtime no load has chosen here yet is said so: timing it would make the first `info` a full load
    light = (folder_info(view) or unchosen_info(view)) if view is not None else None
    if light is not None:  # absolute, as the loaded model's info() says it
        light = {**light, "path": resolved(light.get("path"))}
    fingerprint = light_fingerprint(model) if light is not None else None
    if view is not None and light is not None and fingerprint is not None:
        prompts = read_prompts(view.path)
        refused = sentence_transformers_settings(view.path).unsupported
        # sentence-transformers' attributes as a load sets them from the folder (a name it cannot
        # compute is the load's one-line refusal)
        attributes = {
            "truncate_dim": folder_truncate_dim(view.path),
            "similarity_fn_name": folder_similarity_fn_name(view.path),
        }
    else:
        loaded = load_model(model)
        light, fingerprint, prompts = loaded.info().to_dict(), store_fingerprint(loaded), loaded.prompts
        refused = loaded.loaded.st_unsupported
        attributes = {"truncate_dim": loaded.truncate_dim, "similarity_fn_name": loaded.similarity_fn_name}
    # beside pooling and normalize, which are the Pooling and Normalize modules' own: whether --pooling auto
    # (the default) and encode do the folder's whole sentence pipeline, or refuse it and why
    light = _beside(light, "normalize", auto_refused=auto_refused(refused, option="--pooling auto"))
    # The prompts prompt_name takes, as /v2/info lists them; what `bertscope verify --store` and /v2/info
    # compare: the fingerprint's id, settings and file hashes.
    details = {**light, "prompts": dict(prompts.prompts), **attributes, "fingerprint": fingerprint}
    if as_json:
        emit_json({**details, "default_prompt_name": prompts.default_name})
        return
    details["fingerprint"] = fingerprint["id"]
    # quoted: a prompt's closing space is part of it
    shown = [
        f"{name}={text!r}" + (" (default)" if name == prompts.default_name else "")
        for name, text in details["prompts"].items()
    ]
    details["prompts"] = shown
    details = _beside(details, "prompts", default_prompt_name=prompts.default_name)  # as --json has it
    for way in ("exact", "fast"):  # the ratio said as what it is, as `fast mode: ... 2.10x torch float32`
        if isinstance(chosen := details.get(way), dict) and isinstance(chosen.get("vs_float32"), float):
            details[way] = {**chosen, "vs_float32": f"{chosen['vs_float32']:.2f}x torch float32"}
    from .embed_printed import plain_value

    table = Table(show_header=False, box=None)
    for key, value in details.items():
        # `-` for none, lists without brackets; booleans as the model card says them
        table.add_row(key, str(value) if isinstance(value, bool) else plain_value(value))
    out.print(table)


def _beside(facts: dict[str, Any], after: str, **added: Any) -> dict[str, Any]:
    """`facts` with `added` put right after its key `after` (at the end where there is none)."""
    keys = list(facts)
    at = keys.index(after) + 1 if after in facts else len(keys)
    return {**{k: facts[k] for k in keys[:at]}, **added, **{k: facts[k] for k in keys[at:]}}


# -i as embed reads it (read_corpus: a text a line, or records' text field)
InputPathOpt = Annotated[
    str | None,
    typer.Option(
        "--input",
        "-i",
        help="Texts: one per line, or the text field of .jsonl/.csv/.tsv/.parquet (- for stdin).",
    ),
]
# said where the long-text choices are: a pair is never cut (core/tokens.py), so no --long reaches it
PAIR_LONG = "a --pair over the limit is refused whatever --long says: either part could be cut"
TokensLongOpt = Annotated[
    str, typer.Option("--long", help=f"Texts over the model's limit: truncate, window, error ({PAIR_LONG}).")
]
AnatomyLongOpt = Annotated[
    str,
    typer.Option(
        "--long", help=f"A text over the model's limit: truncate (the cut is said) or error ({PAIR_LONG})."
    ),
]
BATCH = 256  # texts tokenized at once: the tokenizer's batch, and all a run holds of a long -i file


@app.command()
def tokens(
    texts: Annotated[list[str] | None, typer.Argument(help="Texts to tokenize.")] = None,
    input_path: InputPathOpt = None,
    pad: Annotated[
        bool, typer.Option("--pad", help="Show the padded batch with its attention mask.")
    ] = False,
    pair: PairOpt = None,
    long: TokensLongOpt = "truncate",
    text_field: TextFieldOpt = "text",
    id_field: IdFieldOpt = None,
    model: ModelOpt = None,
    as_json: JsonOpt = False,
) -> None:
    """Show how texts become word pieces: token, id, word, character span, special (and segment, --pair).

    Examples: `bertscope tokens "I like eating bread"`, `bertscope tokens "a" "b c" --pad`,
    `bertscope tokens -i texts.txt --json` (a text a line, each with its line number as `id`; `-i -` reads
    stdin), `bertscope tokens -i t.jsonl --text-field sentence --id-field key`,
    `bertscope tokens "How are you?" --pair "Fine."`,
    `bertscope tokens "$(cat long.txt)" --long window` (every token, as embed's --long window reads them)
    """
    from .embed_printed import check_argument_texts

    check_argument_texts(texts, command="tokens", reads_input=True)
    # a file checked now (its fields too), read as its texts are printed
    batches = _given_batches(texts, input_path, text_field=text_field, id_field=id_field)
    # the tokenizer alone answers, without torch, where the folder has a tokenizer.json
    m: Any = FolderView.open(model) or load_model(model)
    cut: list[int] = []  # tokens dropped: the cut texts as they come, then a 0 for each kept whole
    shown = _tokenized(m, batches, pair, long, from_file=input_path is not None, cut=cut)
    if pad:
        _print_padded(m, list(shown), as_json=as_json, from_file=input_path is not None)
    elif as_json:  # one document, written text by text: a long file is never held whole
        _write_json_items({**tok.to_dict(), "id": id_} for tok, id_ in shown)
    else:
        for tok, id_ in shown:
            _print_tokens(m, tok, id_ if input_path is not None else None)
    say_cut(cut, m.max_tokens, TOKENS_FIX)


def _given_batches(
    texts: list[str] | None, input_path: str | None, *, text_field: str = "text", id_field: str | None = None
) -> Iterator[tuple[list[str], list[str]]]:
    """The texts and their ids, `BATCH` at a time, read and numbered as embed prints them (`read_inputs`):
    arguments 1, 2, ...; -i FILE's records by line (or data row), or their `id_field`, the text read from
    their `text_field`; empty lines skipped and said on stderr. The file is checked here and read lazily,
    so a run holds a batch of it, never the whole."""
    from ..io.readers import Rejects, read_corpus, refuse_fields_without_records
    from .embed_printed import read_inputs

    # a field named for texts with none (arguments, stdin, a .txt) would be ignored in silence
    refuse_fields_without_records(
        texts if input_path is None else input_path, text_field=text_field, id_field=id_field
    )
    if input_path is None or texts:
        given, ids = read_inputs(texts, input_path)  # the arguments; texts and -i both: refused there
        return ((given[at : at + BATCH], ids[at : at + BATCH]) for at in range(0, len(given), BATCH))
    rejects = Rejects()
    # a missing or unreadable file: refused now
    records = read_corpus(input_path, text_field=text_field, id_field=id_field, rejects=rejects)
    return _records_batched(records, input_path, text_field, rejects)


def _records_batched(
    records: Iterator[Any], input_path: str, text_field: str, rejects: Any
) -> Iterator[tuple[list[str], list[str]]]:
    """-i FILE's texts and ids, `BATCH` at a time; a file with no text is refused, and the empty lines
    skipped are said at its end, in `read_inputs`' words."""
    from .embed_printed import inputs_read

    texts: list[str] = []
    ids: list[str] = []
    read = 0
    for record in records:
        texts.append(record.text)
        ids.append(record.id)
        read += 1
        if len(texts) == BATCH:
            yield texts, ids
            texts, ids = [], []
    if texts:
        yield texts, ids
    inputs_read(input_path, text_field, rejects, read)


def _tokenized(
    m: Any, batches: Iterator[tuple[list[str], list[str]]], pair: str | None, long: str, *,
    from_file: bool, cut: list[int],
) -> Iterator[tuple[Any, str]]:  # fmt: skip
    """Each text's `Tokens` and id, a batch tokenized at a time; a refusal names the text as embed names
    it ("text 2", "the text of id '7'"). `cut` gets the tokens dropped of each text cut at the limit."""
    from ..core.tokens import named_as
    from .embed_printed import printed_names

    texts = 0
    for given, ids in batches:
        with named_as(printed_names(ids, from_file=from_file)):
            toks = m.tokenize(with_pair(given, pair), long=long)
        if pair is not None:
            _refuse_second_segment(m, toks)
        texts += len(toks)
        cut.extend(n for tok in toks if (n := tok.n_dropped))
        yield from zip(toks, ids, strict=True)
    cut.extend([0] * (texts - len(cut)))  # the texts kept whole, for the cut line's count of texts


def _refuse_second_segment(m: Any, toks: list[Any]) -> None:
    """Refuse a pair whose B reads segment 1 where the model has one segment row (type_vocab_size=1), in
    the words embed and anatomy refuse it (`Engine.check_ids`): the model would index past its table."""
    engine = getattr(m, "engine", None)  # a loaded model; a folder view reads its config
    if engine is not None:
        rows = engine.type_rows
    else:
        size = m.config.get("type_vocab_size")
        rows = size if isinstance(size, int) and size > 0 else None  # none or 0: no segment read
    highest = max((max(tok.token_type_ids, default=0) for tok in toks), default=0)
    if rows is not None and m.family.uses_token_types and highest >= rows:
        raise InvalidInput(past_segments(highest, rows, "tokenize the texts apart (drop --pair)"))


def _write_json_items(items: Iterator[dict[str, Any]]) -> None:
    """`{"items": [...]}` on stdout as emit_json writes it, an item at a time, so memory stays flat: nothing
    is written before the first item is made, and a refusal part-way (exit 1, said on stderr) leaves the
    document unclosed, never a whole-looking one short of its texts."""
    import json
    import sys

    from .typer_setup import pipe_closed

    opening = '{"items": ['
    try:
        for item in items:
            sys.stdout.write(opening + json.dumps(item, ensure_ascii=False))
            opening = ", "
        sys.stdout.write(("" if opening == ", " else opening) + "]}\n")
        sys.stdout.flush()
    except BrokenPipeError:  # `| head`: ended as emit_json ends it, not as a failure
        pipe_closed()


def _print_padded(m: Any, shown: list[tuple[Any, str]], *, as_json: bool, from_file: bool) -> None:
    """The padded batch with its attention mask and token type ids: a table per text, or JSON with each
    text's id in `ids` (as the unpadded --json's `id`); an -i record's table is titled with its id."""
    from ..core.tokens import pad_batch

    toks = [tok for tok, _ in shown]
    ids, mask = pad_batch([t.ids for t in toks], m.pad_id)
    types, _ = pad_batch([t.token_type_ids for t in toks], 0)
    batch = {"input_ids": ids, "attention_mask": mask, "token_type_ids": types}
    if as_json:
        emit_json({**batch, "pad_id": m.pad_id, "ids": [id_ for _, id_ in shown]})
        return
    for row, (tok, id_) in enumerate(shown):
        # a file's record by its own id (its line), as the unpadded tables name it
        table = Table(title=f"{id_ if from_file else f'text {row}'}: {_titled(tok.text, tok.pair)}")
        table.add_column("")
        for col in range(ids.shape[1]):
            table.add_column(str(col), justify="right")
        names = tok.tokens + [m.id_to_token.get(m.pad_id, "[PAD]")] * (ids.shape[1] - len(tok))
        table.add_row("token", *names)
        for key, matrix in batch.items():
            table.add_row(key, *(str(v) for v in matrix[row]))
        out.print(table)


def _print_tokens(m: Any, tok: Any, id_: str | None) -> None:
    """One text's table: token, id, word, character span, text, special (and segment for a pair); an -i
    record's title starts with its id."""
    title = _titled(tok.text, tok.pair)
    table = Table(title=title if id_ is None else f"{id_}: {title}")
    pair = tok.pair is not None
    for heading in ("token", "id", "word", "chars", "text", "special", *(["segment"] if pair else [])):
        table.add_column(heading)
    for index, rec in enumerate(tok.as_records()):
        table.add_row(
            str(rec["token"]),
            str(rec["id"]),
            "" if rec["word"] is None else str(rec["word"]),
            f"{rec['start']}-{rec['end']}",
            tok.span_text(index),
            "yes" if rec["special"] else "",
            *([str(rec.get("token_type_id", 0))] if pair else []),
        )
    out.print(table)
    if pair and not any(tok.token_type_ids):
        err.print(pair_note(m))


@app.command()
def static(
    items: Annotated[
        list[str] | None, typer.Argument(help="Word pieces (or ids with --ids, words with --as-words).")
    ] = None,
    top_k: Annotated[int, top_k_option("Show this many nearest pieces.", least=0)] = 0,
    neighbors: Annotated[int | None, typer.Option("--neighbors", min=0, hidden=True)] = None,
    ids: Annotated[bool, typer.Option("--ids", help="Read the items as token ids.")] = False,
    word: Annotated[
        bool,
        typer.Option(
            "--as-words",
            help="Read the items as words: each the mean of its pieces' rows (refused with -o, which writes "
            "word-piece rows: a file of word vectors is static --corpus FILE -o w.vec).",
        ),
    ] = False,
    # --word: --as-words' old name, still read, not shown (`similar --word bank` takes the word itself)
    old_word: Annotated[bool, typer.Option("--word", hidden=True)] = False,
    output: Annotated[
        Path | None,
        typer.Option("--output", "-o", help="Write the rows named (every row if none) to this file."),
    ] = None,
    export: Annotated[Path | None, typer.Option("--export", hidden=True)] = None,
    fmt: Annotated[
        str | None,
        typer.Option(
            "--format",
            help=f"Export format: {formats_help()}.",
        ),
    ] = None,
    include_special: Annotated[
        bool, typer.Option("--include-special", help="Let neighbours be special and [unusedN] pieces.")
    ] = False,
    corpus: Annotated[
        str | None,
        typer.Option("--corpus", help="Aggregate each word's vectors over this corpus (- for stdin)."),
    ] = None,
    # --from-corpus: --corpus's old name (eval words --corpus and the library's `corpus` name this file)
    from_corpus: Annotated[str | None, typer.Option("--from-corpus", hidden=True)] = None,
    layers: Annotated[
        str | None, typer.Option("--layers", "-l", help="With --corpus: layer(s) to aggregate (1).")
    ] = None,
    min_count: Annotated[
        int, typer.Option("--min-count", min=1, help="With --corpus: leave out rarer words.")
    ] = 1,
    subword: Annotated[
        str,
        typer.Option(
            "--subword",
            help="With --corpus: pieces -> word: mean, first, last, first_last (both, concatenated).",
        ),
    ] = "mean",
    long: Annotated[
        str,
        typer.Option(
            "--long",
            help="With --corpus, texts over the model's limit: window (every word), truncate, error.",
        ),
    ] = "window",
    text_field: Annotated[
        str,
        typer.Option("--text-field", help="With --corpus: its records' text field."),
    ] = "text",
    resume: Annotated[bool, typer.Option("--resume", help="Continue an interrupted aggregation.")] = False,
    overwrite: Annotated[
        bool, typer.Option("--overwrite", help="Replace an existing --output file.")
    ] = False,
    batch_size: Annotated[
        int,
        typer.Option(
            "--batch-size",
            min=1,
            help="With --corpus: texts per saved batch (with --engine ray, per actor call).",
        ),
    ] = 64,
    engine: EngineOpt = "local",
    workers: Annotated[int, typer.Option("--workers", min=1, help="With --engine ray: Ray actors.")] = 2,
    quiet: Annotated[bool, typer.Option("--quiet", "-q", help="No progress and no summary.")] = False,
    model: ModelOpt = None,
    device: DeviceOpt = "auto",
    dtype: DtypeOpt = "float32",
    backend: BackendOpt = "auto",
    quantize: QuantizeOpt = "none",
    threads: ThreadsOpt = None,
    as_json: JsonOpt = False,
) -> None:
    """Static word-piece vectors: rows of the input embedding matrix (no position, no segment).

    Examples: `bertscope static bread cake -k 10`,
    `bertscope static --ids 7852`, `bertscope static breadmaker --as-words -k 5` (a word: the mean of its
    pieces' rows), `bertscope static -o vocab.vec --format word2vec`,
    `bertscope static king queen bread -o three.vec` (only those rows),
    `bertscope static bread cake -o sub.npy` (NumPy: the suffix chooses the format),
    `bertscope static --corpus corpus.txt --layers 1 --min-count 5 -o agg.vec` (each word's
    mean layer-1 vector over the corpus, counts in agg.counts.tsv; resumable with --resume;
    `--engine ray --workers 4` runs the forwards on Ray actors)
    """

    from ..static import export as export_static
    from ..static import lookup

    # --neighbors, --export and --from-corpus: the old spellings of --top-k, --output and --corpus
    top_k = old_spelling(top_k, neighbors, name="--top-k", old="--neighbors", default=0)
    output = old_spelling(output, export, name="--output", old="--export")
    corpus = old_spelling(corpus, from_corpus, name="--corpus", old="--from-corpus")
    words_flag = "--word" if old_word else "--as-words"  # refusals name the spelling typed
    if word and old_word:
        raise InvalidInput("--word is the old spelling of --as-words; give --as-words only")
    word = word or old_word
    if ids and word:
        raise InvalidInput(f"--ids reads token ids and {words_flag} reads words; give one of them")
    for item in (items or []) if ids else []:
        _token_id(item)  # before any load: a value that is no whole number is a usage error
    if corpus is None:
        aggregation = {
            "--layers": layers is not None,
            "--min-count": min_count != 1,
            "--subword": subword != "mean",
            "--long": long != "window",
            "--text-field": text_field != "text",
            "--resume": resume,
            "--batch-size": batch_size != 64,
            "--engine": engine != "local",
            "--workers": workers != 2,
            # the rows are the input matrix as stored: no forward, so no runtime to choose or thread
            "--backend": backend != "auto",
            "--quantize": quantize != "none",
            "--threads": threads is not None,
        }
        if given := [name for name, on in aggregation.items() if on]:
            them = "them" if len(given) > 1 else "it"
            raise InvalidInput(f"{', '.join(given)}: for --corpus only; leave {them} out here")
        if include_special and not top_k:
            raise InvalidInput("--include-special lets neighbours be special pieces; add -k N or drop it")
        if overwrite and output is None:
            raise InvalidInput("--overwrite replaces an existing --output file; add -o FILE or drop it")
        if fmt is not None and output is None:  # unread without a file to write: said, not ignored
            raise InvalidInput("--format names the format of -o FILE (or --corpus's); add -o FILE or drop it")
        if output is None and not items:  # a missing argument (exit 2), before the rows are read
            raise missing_argument("name at least one word piece (e.g. `bertscope static bread`), or -o FILE")
    if output is not None and corpus is None and output.parent.is_dir():  # --corpus's job lock checks it
        refuse_unwritable(output, "-o")  # before the rows are read, not after
    # Rows of the matrix need no forward: with the default load options they are read from the folder's
    # safetensors without torch (about 1 s where a load takes 6-9 s), the same float32 values a load gives.
    defaults = (device, dtype, backend, quantize, threads) == ("auto", "float32", "auto", "none", None)
    from ..core._enums import Engine

    on_ray = corpus is not None and Engine.parse(engine, what="engine") is Engine.RAY
    if corpus is not None and corpus != "-" and not on_ray:  # Ray reads patterns and URIs itself
        from ..io.readers import read_corpus

        read_corpus(corpus, text_field=text_field)  # checks the file at once (reads lazily): before the load
    view = FolderView.open(model) if corpus is None and defaults else None
    m: Any = view
    if view is None or view.static_rows is None:
        # On Ray the driver only checks the options and reads the vocabulary, on the CPU as `embed --engine
        # ray`'s does: --device is the actors' (a head node without a GPU drives GPU actors).
        where = "cpu" if on_ray else device
        # --threads on Ray is each actor's CPUs (on machines of their own), not the driver's
        here = None if on_ray else threads
        m = load_model(model, device=where, dtype=dtype, backend=backend, quantize=quantize, threads=here)
    if corpus is not None:
        if items:
            raise InvalidInput("--corpus aggregates every corpus word; name no pieces with it")
        from ..errors import TruncatedTextsWarning
        from .static_kinds import aggregate_to_file

        with warnings.catch_warnings():
            # aggregate_to_file says how many texts were truncated itself, in the command line's words
            warnings.simplefilter("ignore", TruncatedTextsWarning)
            aggregate_to_file(
                m, corpus, output, layers=layers, fmt=fmt, min_count=min_count, subword=subword,
                long=long, resume=resume, overwrite=overwrite, batch_size=batch_size, quiet=quiet,
                as_json=as_json, engine=engine, workers=workers, device=device, threads=threads,
                text_field=text_field,
            )  # fmt: skip
        return
    if output is not None:
        if word:  # with no words named too: every row written would be a piece's, --as-words unread
            raise InvalidInput(
                f"--output writes word-piece rows; name pieces (or --ids), not {words_flag} words"
            )
        named: list[Any] | None = ([_token_id(i) for i in items] if ids else list(items)) if items else None
        written = export_static(m, output, fmt, items=named, overwrite=overwrite)
        rows = (f"{len(named)} row" + ("s" if len(named) > 1 else "")) if named else "every row"
        if as_json:  # one object, as `static --corpus` and `distill` print
            emit_json({"output": str(output), "files": [str(p) for p in written]})
        elif not quiet:
            err.print(f"wrote {', '.join(map(str, written))} ({rows})", highlight=False)
        return
    pieces = items or []  # never empty here: refused before the load
    keys: list[Any] = [_token_id(i) if ids else i for i in pieces] if not word else list(pieces)
    records = [lookup(m, key, as_words=word, top_k=top_k, include_special=include_special) for key in keys]
    if as_json:
        emit_json({"items": records})
        return
    for rec in records:
        label = f"{rec['item']} {rec['token']!r}" if ids else repr(rec["item"])
        head = f"{label}: " + (f"pieces {rec['pieces']}" if word else f"id {rec['id']}")
        preview = " ".join(f"{v:+.3f}" for v in rec["vector"][:6])
        line = f"  norm {rec['norm']:.4f}  [{preview} ...] ({len(rec['vector'])} dims)"
        out.print(Text.assemble((head, "bold"), line))
        if top_k:
            table = Table("rank", "token", "id", "score")  # as JSON, the service and `Neighbor` name it
            for rank, n in enumerate(rec["neighbors"], 1):
                table.add_row(str(rank), n["token"], str(n["id"]), f"{n['score']:.4f}")
            out.print(table)


@app.command()
def anatomy(
    text: Annotated[str, typer.Argument(help="One text to take apart.")],
    pair: PairOpt = None,
    model: ModelOpt = None,
    device: DeviceOpt = "auto",
    dtype: DtypeOpt = "float32",
    backend: BackendOpt = "auto",
    quantize: QuantizeOpt = "none",
    threads: ThreadsOpt = None,
    long: AnatomyLongOpt = "truncate",
    as_json: JsonOpt = False,
) -> None:
    """The embedding layer taken apart: word + segment + position rows, LayerNorm, and the proof.

    Examples: `bertscope anatomy "I am Sinan"`, `bertscope anatomy "How are you?" --pair "Fine."`,
    `bertscope anatomy "a long text ..." --long error` (refused if it is over the model's limit)
    """
    import numpy as np

    from ..core.tokens import named_as
    from .embed_printed import check_argument_texts, only_text_named

    check_argument_texts([text], command="anatomy", reads_input=False, takes="its text as an argument")
    m = load_model(model, device=device, dtype=dtype, backend=backend, quantize=quantize, threads=threads)
    with cuts_said_here(), named_as(only_text_named):  # said below in the command line's words
        a = m.anatomy(text, long=long) if pair is None else m.anatomy([(text, pair)], long=long)[0]
    say_cut([a.n_dropped], m.max_tokens, ANATOMY_FIX)
    from ..anatomy import STEPS

    steps = [s for s in STEPS if s != "model_output" and getattr(a, s) is not None]
    error = a.max_abs_error
    if as_json:
        emit_json(a.to_dict())
        _exit_if_proof_fails(a, m)
        return
    table = Table(title=f"embedding layer of {_titled(text, pair)}: the norm of each step's vector")
    shown = [s for s in steps if not (s == "encoder_input" and "projection" in a.lacks)]
    labels = {"token_type": "segment", "normalized": "LayerNorm", "encoder_input": "enc. input"}
    for col in ("token", "id", "pos", "seg", *(labels.get(s, s) for s in shown), "rebuild err"):
        table.add_column(col, justify="right")
    per_token = np.abs(a.encoder_input - a.model_output).max(axis=1)
    for i, tok in enumerate(a.tokens.tokens):
        pos = str(a.position_ids[i]) if a.position_ids else "-"
        norms = [f"{np.linalg.norm(getattr(a, s)[i]):.2f}" for s in shown]
        segment = str(a.tokens.token_type_ids[i])
        table.add_row(tok, str(a.tokens.ids[i]), pos, segment, *norms, f"{per_token[i]:.1e}")
    out.print(table)
    parts = " + ".join(a.sum_order)  # in the order the model adds them, as the rebuild does
    if "layernorm" in a.lacks:
        recipe = parts
    elif a.projected is not None:
        recipe = f"LayerNorm(projection({parts}))"
    elif "projection" not in a.lacks:
        recipe = f"projection(LayerNorm({parts}))"
    else:
        recipe = f"LayerNorm({parts})"
    # the comparison the proof makes (`proof_holds`: at most the bound), said as it came out; a NaN
    # error is not within it
    verdict = ("holds", "green") if a.proof_holds else ("FAILS", "red")
    out.print(
        Text.assemble(
            f"proof: {recipe} rebuilds the model's own layer 0: max |error| = {error:.2e} "
            f"({'' if a.proof_holds else 'not '}<= {_bound_said(a)}) ",
            verdict,
        )
    )
    if a.lacks:
        out.print(f"this family has no: {', '.join(a.lacks)}")
    for note in a.notes:
        out.print(note)
    if pair is not None and not any(a.tokens.token_type_ids):
        err.print(pair_note(m))
    _exit_if_proof_fails(a, m)


def _titled(text: str, pair: str | None) -> str:
    """A table's name for a text or an (A, B) pair: 'A' or 'A' + 'B', as tokens, anatomy and similarity
    title them."""
    return repr(text) if pair is None else f"{text!r} + {pair!r}"


def _bound_said(anatomy: Any) -> str:
    """The proof's bound as the proof line says it: 1e-5, or the float32 steps of layer 0's largest value."""
    from ..anatomy import PROOF_TOLERANCE, ROUNDING_STEPS

    bound = anatomy.proof_bound
    if bound <= PROOF_TOLERANCE:
        return "1e-5"
    return f"{bound:.1e}: {ROUNDING_STEPS} float32 steps of layer 0's largest |value|"


def _exit_if_proof_fails(anatomy: Any, model: Any) -> None:
    """Exit 1 where the rebuild misses the model's own layer 0: the anatomy shown is not the model's, or
    the model runs a lossy graph whose layer 0 is not its float32 parts'."""
    from ..anatomy import lossy_runtime

    if anatomy.proof_holds:
        return
    error, bound = anatomy.max_abs_error, _bound_said(anatomy)
    if lossy := lossy_runtime(model):
        said = (
            f"the parts (the float32 weights) rebuild this model's layer 0 only to {error:.2e} (not "
            f"<= {bound}): its {lossy} runtime rounds layer 0; drop --quantize/--dtype to take the float32 "
            "model apart, where the proof holds"
        )
    else:
        said = (
            f"the parts rebuild the model's layer 0 only to {error:.2e} (not <= {bound}), so this anatomy is "
            "not the model's own; please report it with the model's config.json"
        )
    err.print(f"error: {said}")
    raise typer.Exit(1)


def _token_id(item: str) -> int:
    """A token id given on the command line; an item that is no whole number is a usage error (exit 2),
    as a value not of an option's type is (docs/errors.md)."""
    try:
        return int(item)
    except ValueError:
        raise missing_argument(f"--ids takes token ids (whole numbers), not {item!r}") from None
