"""Make the small UD English EWT slice shipped here from a checkout of the treebank.

    git clone https://github.com/UniversalDependencies/UD_English-EWT
    python examples/ewt/make_slice.py UD_English-EWT

Writes train.conllu (150 sentences of en_ewt-ud-train.conllu), dev.conllu (60 of en_ewt-ud-dev.conllu)
and dev.txt (the dev slice's texts, one a line, for `bertscope geometry`): sentences of 5 to 40 words,
spread evenly over each file (every k-th such sentence, so every genre of the treebank is in), each
sentence unchanged with its comments. A header comment at the top of each .conllu names the source.
"""

from __future__ import annotations

import sys
from pathlib import Path

HERE = Path(__file__).resolve().parent
WORDS = (5, 40)
HEADER = (
    "# UD English EWT slice, CC BY-SA 4.0 (https://creativecommons.org/licenses/by-sa/4.0/):\n"
    "# {count} sentences of {name} from https://github.com/UniversalDependencies/UD_English-EWT\n"
    "# (commit {commit}), unchanged; see examples/ewt/README.md\n"
)


def sentences(path: Path) -> list[str]:
    """The file's sentence blocks (comments and word lines), blank-line separated."""
    return [
        block.strip("\n") + "\n" for block in path.read_text(encoding="utf-8").split("\n\n") if block.strip()
    ]


def n_words(block: str) -> int:
    """Syntactic words: word lines whose ID is a whole number (no ranges, no empty nodes)."""
    return sum(1 for line in block.splitlines() if line.split("\t")[0].isdigit())


def spread(blocks: list[str], count: int) -> list[str]:
    """`count` blocks of WORDS words, evenly spaced over the file."""
    fitting = [b for b in blocks if WORDS[0] <= n_words(b) <= WORDS[1]]
    step = len(fitting) / count
    return [fitting[int(i * step)] for i in range(count)]


def main(source: Path, commit: str) -> None:
    """Write the slices from `source` (a UD_English-EWT checkout at `commit`)."""
    for name, out, count in (("en_ewt-ud-train.conllu", "train", 150), ("en_ewt-ud-dev.conllu", "dev", 60)):
        chosen = spread(sentences(source / name), count)
        head = HEADER.format(count=count, name=name, commit=commit)
        (HERE / f"{out}.conllu").write_text(head + "\n".join(chosen) + "\n", encoding="utf-8")
        if out == "dev":
            texts = [
                line[len("# text = ") :]
                for b in chosen
                for line in b.splitlines()
                if line.startswith("# text = ")
            ]
            (HERE / "dev.txt").write_text("\n".join(texts) + "\n", encoding="utf-8")


if __name__ == "__main__":
    main(Path(sys.argv[1]), sys.argv[2] if len(sys.argv) > 2 else "15d613d8447b3478787d4c278730a1e48a945efb")
