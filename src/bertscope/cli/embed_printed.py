"""What `embed` prints without -o: the texts read and numbered as a corpus job numbers them, sentence, token
or word vectors as a table or JSON, and the settings line (`spec_line`, which other commands print too)."""

from __future__ import annotations

from collections.abc import Callable
from pathlib import Path
from typing import TYPE_CHECKING, Any

from rich.table import Table

from ..errors import InvalidInput
from .app import emit_json, no_text, out, warn
from .typer_setup import missing_argument

if TYPE_CHECKING:
    from ..core.spec import EmbedOptions


def note_own_pooling(m: Any, recipe: EmbedOptions) -> None:
    """Say so when --pooling names the model's own pooling and its Normalize step is left off."""
    from ..core.spec import unnormalized_own_pooling

    note = unnormalized_own_pooling(m, recipe, pooling_name="--pooling", fix="--normalize")
    if note:
        warn(note)


def print_sentences(
    m: Any, items: list[Any], given: list[str], ids: list[str], recipe: EmbedOptions, *,
    input_path: str | None, pair: str | None, as_json: bool,
) -> None:  # fmt: skip
    """Sentence vectors printed: a table (ids where -i gave them) and the settings line, or JSON."""
    from ..core.finite import refuse_non_finite
    from ..core.spec import resolve

    note_own_pooling(m, recipe)
    result = m.embed_with(items, resolve(m, recipe))
    refuse_non_finite(result.vectors)
    if result.n_truncated:
        from ..core.tokens import cut_summary

        dropped = int(result.n_dropped.sum())
        warn(f"{cut_summary(result.n_truncated, len(items), m.max_tokens, dropped)}; {CUT_FIX}")
    if as_json:
        # texts and ids beside the vectors, row for row: ids as a corpus job gives them (line numbers, or
        # the --id-field values), so a row is matched to its line though empty lines were skipped
        emit_json({**result.to_dict(), "texts": given, "ids": ids, **({"pair": pair} if pair else {})})
        return
    import numpy as np

    table = Table(*(["id"] if input_path is not None else []), "text", "tokens", "norm", "vector")
    for i, (text, vec, n) in enumerate(
        zip(map(shown_value, items), result.vectors, result.n_tokens, strict=True)
    ):
        preview = " ".join(f"{v:+.3f}" for v in vec[:5])
        table.add_row(
            *([ids[i]] if input_path is not None else []),
            short_text(text), str(n), f"{np.linalg.norm(vec):.3f}", f"[{preview} ...] ({len(vec)} dims)",
        )  # fmt: skip
    out.print(table)
    out.print(f"spec: {spec_line(result.spec)}", highlight=False)


# what a printed embedding's cut line says to do (embed and similarity take --long)
CUT_FIX = "their ends are not in the vectors; --long window keeps every token"


def say_job_cut(n_truncated: int, embedded: int, max_tokens: int) -> None:
    """The warning line a corpus job (local or on Ray) ends with where it cut texts, before its summary."""
    if n_truncated:
        from ..core.tokens import cut_summary

        warn(f"{cut_summary(n_truncated, embedded, max_tokens)}; {CUT_FIX}")


def check_argument_texts(
    texts: list[str] | None, *, command: str, reads_input: bool, takes: str = "its texts as arguments"
) -> None:
    """Refuse `-` given as a text: it would be embedded (tokenized, taken apart) as the text "-", not
    read from stdin. A command with -i is pointed to `-i -`; one without says it takes its text as an
    argument. A text that names a file is read as the text it is, with a note: `embed notes.txt` embedded
    the word 'notes.txt' in silence."""
    for text in texts or ():
        if text != "-" and not any(c.isspace() for c in text) and Path(text).is_file():
            how = f"give -i {text}" if reads_input else f'pass its text: bertscope {command} "$(cat {text})"'
            warn(f"{text!r} is read as a text, though a file of that name is here; to read the file, {how}")
    if not texts or "-" not in texts:
        return
    if reads_input:
        raise InvalidInput(
            f"`-` would be read as the text '-', not stdin: to read stdin, give -i - "
            f"(cat FILE | bertscope {command} -i -)"
        )
    raise InvalidInput(
        f"`-` would be read as the text '-': {command} takes {takes}, not from stdin; pass the text itself"
    )


def check_text_source(texts: list[str] | None, input_path: str | None) -> None:
    """Refuse texts given both as arguments and with -i, or not at all: the one rule of every command
    reading texts (printed, a corpus job, its check before the model loads)."""
    if texts and input_path:
        raise InvalidInput("give texts as arguments or with -i/--input, not both")
    if not texts and not input_path:
        raise missing_argument(
            "no texts given: pass them as arguments, or -i FILE (one per line, - for stdin)"
        )


def read_inputs(
    texts: list[str] | None, input_path: str | None, *, text_field: str = "text", id_field: str | None = None
) -> tuple[list[str], list[str]]:
    """The texts to print vectors of and their ids, as a corpus job reads and numbers them: arguments
    1, 2, ...; -i FILE's records by 1-based line (or data row) number, or their `id_field`. Empty lines
    (records) are skipped, and said on stderr; a file with no text at all is named."""
    check_text_source(texts, input_path)
    if input_path is None:
        given = list(texts or [])
        return given, [str(number) for number in range(1, len(given) + 1)]
    from ..io.readers import Rejects, read_corpus

    rejects = Rejects()
    records = list(read_corpus(input_path, text_field=text_field, id_field=id_field, rejects=rejects))
    inputs_read(input_path, text_field, rejects, len(records))
    return [r.text for r in records], [r.id for r in records]


def inputs_read(input_path: str, text_field: str, rejects: Any, count: int) -> None:
    """The end of reading -i FILE's `count` texts: a file with no text refused, the empty lines (records)
    skipped said on stderr; `tokens -i` says it after streaming, as `read_inputs` after reading whole."""
    if not count:
        raise no_text(input_path, text_field, rejects)
    if rejects.empty:
        lines = input_path == "-" or input_path.lower().endswith(".txt")
        unit = ("line" if lines else "record") + ("s" if rejects.empty != 1 else "")
        warn(f"{rejects.empty} empty {unit} skipped (ids name each text's own line)", label="note:")


def argument_named(kind: str, index: int) -> str:
    """A text given as an argument, named by its number from 1 ("text 2"), as `embed` names it."""
    return f"{kind} {index + 1}"


def only_text_named(kind: str, index: int) -> str:
    """The one text a command takes ("the text", "the pair")."""
    return f"the {kind}"


def printed_names(ids: list[str], *, from_file: bool) -> Callable[[str, int], str]:
    """How a refusal names a printed text (`core.tokens.named_as`): an argument by its number from 1
    ("text 2"), a record of -i by its id as a corpus job names it ("the text of id '7'")."""
    if from_file:
        return lambda kind, index: f"the {kind} of id {ids[index]!r}"
    return lambda kind, index: f"{kind} {ids[index]}"


def spec_line(spec: Any) -> str:
    """Settings as a human reads them: `layers 6, pooling mean, normalize on, long truncate` (combine
    only where several layers combine, mask-special and stride only where set), no Python reprs."""
    shown = dict(spec)
    layers = list(shown.pop("layers", ()) or ())
    parts = [f"layers {','.join(map(str, layers))}"] if layers else []
    combine = shown.pop("combine", None)
    if len(layers) > 1 and combine is not None:
        parts.append(f"combine {combine}")
    if not shown.get("mask_special"):
        shown.pop("mask_special", None)
    for key in ("stride", "prompt_name", "prompt", "prompt_length", "post"):
        if shown.get(key) in (None, "", 0):
            shown.pop(key, None)
    order = ["pooling", "mask_special", "normalize", "long", "stride"]
    keys = [k for k in order if k in shown] + [k for k in shown if k not in order]
    parts += [f"{key.replace('_', '-')} {plain_value(shown[key])}" for key in keys]
    return ", ".join(parts)


def plain_value(value: Any) -> str:
    """One setting's value as a human reads it: on/off, `-` for none, a list without brackets."""
    if value is None:
        return "-"
    if isinstance(value, bool):
        return "on" if value else "off"
    if isinstance(value, (list, tuple)):
        return ", ".join(plain_value(v) for v in value) if value else "-"
    if isinstance(value, dict):
        return ", ".join(f"{k}={plain_value(v)}" for k, v in value.items())
    return str(getattr(value, "value", value))


def shown_value(item: Any) -> str:
    """A text, or an (A, B) pair as `A + B`."""
    return item if isinstance(item, str) else " + ".join(item)


def per_piece(
    m: Any, items: list[Any], ids: list[str], recipe: EmbedOptions, *, words: bool, subword: str,
    as_json: bool,
) -> None:  # fmt: skip
    """Token or word vectors printed: the recipe's layers, combine and long-text policy (not pooled)."""
    options = {
        "layers": recipe.layers,
        "combine": recipe.combine,
        "long": recipe.long,
        "stride": recipe.stride,
    }
    # The text as given, as the token and word stores keep it (`unpooled_spec`): a model's default prompt
    # is its sentence vectors' (printed rows took it and stored ones did not: other vectors).
    options["prompt"] = ""
    results = m.embed_words(items, subword=subword, **options) if words else m.embed_tokens(items, **options)
    labels = [(r.words if words else r.tokens) for r in results]
    if as_json:
        from ..core.results import per_text

        found = per_text(results)
        for item, id_ in zip(found["items"], ids, strict=True):
            item["id"] = id_  # as the sentence rows' ids: a line number, or the --id-field value
        emit_json(found)
        return
    import numpy as np

    for r, lab in zip(results, labels, strict=True):
        title = short_text(r.text if getattr(r, "pair", None) is None else f"{r.text} + {r.pair}")
        table = Table("word" if words else "token", "norm", "vector", title=title)
        for label, vec in zip(lab, r.vectors, strict=True):
            table.add_row(
                label, f"{np.linalg.norm(vec):.3f}", " ".join(f"{v:+.3f}" for v in vec[:5]) + " ..."
            )
        out.print(table)


def short_text(text: str, width: int = 50) -> str:
    return text if len(text) <= width else text[: width - 1] + "…"
