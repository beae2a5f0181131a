"""Write examples/pos.conllu: short hand-tagged sentences (UPOS) with words that change part of speech
with context (book, watch, play, run, light, park, ...), for `bertscope probe --column upos --control`.

Run from the repository root: python bench/make_pos_example.py
"""

from __future__ import annotations

from pathlib import Path

SENTENCES = """
I/PRON will/AUX book/VERB a/DET table/NOUN for/ADP two/NUM ./PUNCT
The/DET book/NOUN on/ADP the/DET shelf/NOUN is/AUX old/ADJ ./PUNCT
We/PRON watch/VERB the/DET birds/NOUN every/DET morning/NOUN ./PUNCT
Her/PRON watch/NOUN stopped/VERB at/ADP noon/NOUN ./PUNCT
The/DET children/NOUN play/VERB in/ADP the/DET park/NOUN ./PUNCT
They/PRON saw/VERB a/DET play/NOUN at/ADP the/DET theatre/NOUN ./PUNCT
You/PRON can/AUX park/VERB the/DET car/NOUN here/ADV ./PUNCT
She/PRON went/VERB for/ADP a/DET run/NOUN before/ADP work/NOUN ./PUNCT
Dogs/NOUN run/VERB fast/ADV on/ADP the/DET beach/NOUN ./PUNCT
Please/INTJ light/VERB the/DET candles/NOUN ./PUNCT
The/DET light/NOUN in/ADP the/DET kitchen/NOUN is/AUX broken/ADJ ./PUNCT
This/DET bag/NOUN is/AUX very/ADV light/ADJ ./PUNCT
He/PRON will/AUX cook/VERB dinner/NOUN tonight/ADV ./PUNCT
The/DET cook/NOUN made/VERB a/DET great/ADJ soup/NOUN ./PUNCT
Birds/NOUN fly/VERB south/ADV in/ADP winter/NOUN ./PUNCT
A/DET fly/NOUN landed/VERB on/ADP my/PRON plate/NOUN ./PUNCT
They/PRON train/VERB hard/ADV every/DET day/NOUN ./PUNCT
The/DET train/NOUN left/VERB the/DET station/NOUN late/ADV ./PUNCT
We/PRON need/VERB fresh/ADJ water/NOUN ./PUNCT
Please/INTJ water/VERB the/DET plants/NOUN today/NOUN ./PUNCT
The/DET plant/NOUN grew/VERB tall/ADJ and/CCONJ green/ADJ ./PUNCT
Farmers/NOUN plant/VERB corn/NOUN in/ADP spring/NOUN ./PUNCT
I/PRON like/VERB this/DET song/NOUN ./PUNCT
She/PRON sings/VERB like/ADP a/DET bird/NOUN ./PUNCT
The/DET old/ADJ man/NOUN walked/VERB slowly/ADV home/ADV ./PUNCT
Sailors/NOUN man/VERB the/DET boats/NOUN at/ADP dawn/NOUN ./PUNCT
My/PRON sister/NOUN and/CCONJ I/PRON visited/VERB Paris/PROPN ./PUNCT
John/PROPN gave/VERB Mary/PROPN a/DET red/ADJ apple/NOUN ./PUNCT
The/DET cat/NOUN sleeps/VERB on/ADP the/DET warm/ADJ mat/NOUN ./PUNCT
It/PRON was/AUX a/DET cold/ADJ and/CCONJ dark/ADJ night/NOUN ./PUNCT
He/PRON caught/VERB a/DET cold/NOUN last/ADJ week/NOUN ./PUNCT
We/PRON can/AUX open/VERB the/DET window/NOUN now/ADV ./PUNCT
The/DET shop/NOUN is/AUX open/ADJ until/ADP six/NUM ./PUNCT
They/PRON shop/VERB at/ADP the/DET market/NOUN on/ADP Sundays/PROPN ./PUNCT
Three/NUM students/NOUN passed/VERB the/DET hard/ADJ exam/NOUN ./PUNCT
She/PRON quickly/ADV answered/VERB the/DET last/ADJ question/NOUN ./PUNCT
The/DET results/NOUN were/AUX better/ADJ than/ADP expected/VERB ./PUNCT
Our/PRON team/NOUN will/AUX face/VERB a/DET strong/ADJ rival/NOUN ./PUNCT
Her/PRON face/NOUN turned/VERB red/ADJ ./PUNCT
I/PRON saw/VERB him/PRON near/ADP the/DET bridge/NOUN ./PUNCT
The/DET boy/NOUN kicked/VERB the/DET ball/NOUN over/ADP the/DET fence/NOUN ./PUNCT
Mark/PROPN will/AUX mark/VERB the/DET papers/NOUN tomorrow/NOUN ./PUNCT
There/PRON is/VERB a/DET mark/NOUN on/ADP the/DET wall/NOUN ./PUNCT
We/PRON talked/VERB about/ADP the/DET long/ADJ trip/NOUN ./PUNCT
Do/AUX not/PART trip/VERB on/ADP the/DET stairs/NOUN !/PUNCT
The/DET dog/NOUN and/CCONJ the/DET cat/NOUN are/AUX friends/NOUN ./PUNCT
""".strip().splitlines()


def main() -> None:
    """Write the CoNLL-U file (FORM and UPOS filled, the other columns _)."""
    blocks = []
    for number, line in enumerate(SENTENCES, 1):
        pairs = [item.rsplit("/", 1) for item in line.split()]
        text = " ".join(word for word, _ in pairs)
        rows = [f"# sent_id = {number}", f"# text = {text}"]
        rows += [f"{i}\t{word}\t_\t{tag}\t_\t_\t_\t_\t_\t_" for i, (word, tag) in enumerate(pairs, 1)]
        blocks.append("\n".join(rows))
    Path("examples/pos.conllu").write_text("\n\n".join(blocks) + "\n", encoding="utf-8")


if __name__ == "__main__":
    main()
