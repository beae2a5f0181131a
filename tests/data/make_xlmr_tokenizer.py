"""Writes xlmr_unigram.tokenizer.json.xz: an XLM-R tokenizer.json made as the real ones were made.

A 300-piece SentencePiece unigram model trained on the multilingual lines below with nmt_nfkc
normalization (XLM-R's), converted the way transformers 4's XLMRobertaConverter wrote
xlm-roberta-base's and multilingual-e5's tokenizer.json: the fairseq ids (<s> <pad> </s> <unk>, the
pieces, <mask> last), Unigram with unk_id 3, normalizer Sequence[Precompiled(charsmap), Replace(" {2,}",
" ")], pre-tokenizer Metaspace, <s> $A </s> templates, <mask> with lstrip. xz keeps the 240 KB charsmap
small. sentencepiece is not a bertscope dependency; run once with it on the path:

    pip install --target /tmp/spm sentencepiece
    PYTHONPATH=/tmp/spm .venv/bin/python tests/data/make_xlmr_tokenizer.py
"""

from __future__ import annotations

import lzma
import tempfile
from pathlib import Path

from sentencepiece import SentencePieceTrainer, sentencepiece_model_pb2
from tokenizers import AddedToken, Regex, Tokenizer, decoders, models, normalizers, pre_tokenizers, processors

OUT = Path(__file__).with_name("xlmr_unigram.tokenizer.json.xz")
LINES = """\
The quick brown fox jumps over the lazy dog near the river bank.
A multilingual model reads many languages and writes one vector per sentence.
Le renard brun rapide saute par-dessus le chien paresseux près de la rivière.
Où est la bibliothèque ? Elle est à côté du café, naïve et élégante.
Der schnelle braune Fuchs springt über den faulen Hund. Grüße aus München!
Straße, Mädchen, schön, größer, Übung, Äpfel und Öl.
El rápido zorro marrón salta sobre el perro perezoso. ¿Dónde está la estación?
Mañana comeremos paella con limón y pimientos en la playa.
O rápido raposo castanho salta sobre o cão preguiçoso. Não sei, coração.
Il veloce volpe marrone salta sopra il cane pigro. Perché così?
Быстрая коричневая лиса прыгает через ленивую собаку. Привет, мир!
Москва, книга, слово, язык, человек, время, жизнь, работа.
Η γρήγορη καφέ αλεπού πηδά πάνω από τον τεμπέλη σκύλο. Καλημέρα κόσμε.
敏捷的棕色狐狸跳过了懒狗。我喜欢吃面包和苹果。你好，世界！
東京は日本の首都です。私は本を読みます。こんにちは。
빠른 갈색 여우가 게으른 개를 뛰어넘습니다. 안녕하세요.
الثعلب البني السريع يقفز فوق الكلب الكسول. مرحبا بالعالم.
Tokenization splits words into pieces; embeddings turn pieces into vectors.
Search finds the nearest sentences by cosine similarity, fast and exact.
Numbers like 1, 2, 3, 10, 100, 2024 and 3.14 appear in text too.
I like eating bread, bananas and apples with my friends every day.
Hello world, hello model, hello tokenizer: the cat sat on the mat.
Ελληνικά, Русский, 中文, 日本語, 한국어, العربية, Français, Deutsch, Español.
"""


def main() -> None:
    with tempfile.TemporaryDirectory() as tmp:
        corpus = Path(tmp) / "corpus.txt"
        corpus.write_text(LINES, encoding="utf-8")
        SentencePieceTrainer.train(
            input=str(corpus), model_prefix=f"{tmp}/spm", vocab_size=300, model_type="unigram",
            normalization_rule_name="nmt_nfkc", character_coverage=1.0, hard_vocab_limit=False,
            minloglevel=2,
        )  # fmt: skip
        proto = sentencepiece_model_pb2.ModelProto()
        proto.ParseFromString(Path(f"{tmp}/spm.model").read_bytes())
    specials = ["<s>", "<pad>", "</s>", "<unk>"]
    vocab = [(t, 0.0) for t in specials] + [(p.piece, p.score) for p in proto.pieces[3:]] + [("<mask>", 0.0)]
    tokenizer = Tokenizer(models.Unigram(vocab, 3, False))
    tokenizer.normalizer = normalizers.Sequence(
        [
            normalizers.Precompiled(proto.normalizer_spec.precompiled_charsmap),
            normalizers.Replace(Regex(" {2,}"), " "),
        ]
    )
    tokenizer.pre_tokenizer = pre_tokenizers.Metaspace(replacement="▁", prepend_scheme="always")
    tokenizer.decoder = decoders.Metaspace(replacement="▁", prepend_scheme="always")
    tokenizer.post_processor = processors.TemplateProcessing(
        single="<s> $A </s>", pair="<s> $A </s> </s> $B </s>", special_tokens=[("<s>", 0), ("</s>", 2)]
    )
    tokenizer.add_special_tokens([AddedToken(t, special=True, normalized=False) for t in specials])
    tokenizer.add_special_tokens([AddedToken("<mask>", lstrip=True, special=True, normalized=False)])
    OUT.write_bytes(lzma.compress(tokenizer.to_str().encode("utf-8")))
    print(f"{OUT}: {OUT.stat().st_size} bytes, {tokenizer.get_vocab_size()} tokens")


if __name__ == "__main__":
    main()
