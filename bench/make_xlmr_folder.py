"""A MiniLM-sized XLM-RoBERTa folder with random weights, for timing the light engine on XLM-R models.

    .venv/bin/python bench/make_xlmr_folder.py bench/out/xlmr-minilm-size

No multilingual model can be downloaded here, so this builds one of multilingual-e5-small's shape class
(6 layers, 384 wide, 12 heads; 10.7M weights, over the exact default's export threshold) with
tests/data's real SentencePiece tokenizer (300 pieces, XLM-R's nmt_nfkc charsmap, xlm-roberta-base's
tokenizer.json shape) and e5's tokenizer_config.json and sentence-transformers files (mean pooling,
normalized). Random weights: for start time and memory only, never for quality.
"""

from __future__ import annotations

import json
import lzma
import sys
from pathlib import Path

_ROOT = Path(__file__).resolve().parent.parent
_FIXTURE = _ROOT / "tests" / "data" / "xlmr_unigram.tokenizer.json.xz"
_SPECIAL = [(0, "<s>"), (1, "<pad>"), (2, "</s>"), (3, "<unk>")]


def main() -> None:
    """Write the folder named on the command line."""
    import torch
    from transformers import XLMRobertaConfig, XLMRobertaModel

    folder = Path(sys.argv[1])
    folder.mkdir(parents=True, exist_ok=True)
    tokenizer_json = json.loads(lzma.decompress(_FIXTURE.read_bytes()))
    mask_id = next(t["id"] for t in tokenizer_json["added_tokens"] if t["content"] == "<mask>")
    (folder / "tokenizer.json").write_text(json.dumps(tokenizer_json, ensure_ascii=False))
    decoder = {
        str(i): {"content": token, "lstrip": token == "<mask>", "normalized": False, "rstrip": False,
                 "single_word": False, "special": True}
        for i, token in [*_SPECIAL, (mask_id, "<mask>")]
    }  # fmt: skip
    tokenizer_config = {
        "added_tokens_decoder": decoder, "bos_token": "<s>", "cls_token": "<s>", "eos_token": "</s>",
        "mask_token": "<mask>", "model_max_length": 512, "pad_token": "<pad>", "sep_token": "</s>",
        "unk_token": "<unk>", "tokenizer_class": "XLMRobertaTokenizer",
    }  # fmt: skip
    (folder / "tokenizer_config.json").write_text(json.dumps(tokenizer_config, indent=1))
    config = XLMRobertaConfig(
        vocab_size=mask_id + 1, hidden_size=384, num_hidden_layers=6, num_attention_heads=12,
        intermediate_size=1536, max_position_embeddings=514, pad_token_id=1, bos_token_id=0, eos_token_id=2,
    )  # fmt: skip
    torch.manual_seed(0)
    XLMRobertaModel(config, add_pooling_layer=False).save_pretrained(folder)
    modules = [
        {"idx": 0, "name": "0", "path": "", "type": "sentence_transformers.models.Transformer"},
        {"idx": 1, "name": "1", "path": "1_Pooling", "type": "sentence_transformers.models.Pooling"},
        {"idx": 2, "name": "2", "path": "2_Normalize", "type": "sentence_transformers.models.Normalize"},
    ]
    (folder / "modules.json").write_text(json.dumps(modules, indent=1))
    (folder / "sentence_bert_config.json").write_text(
        json.dumps({"max_seq_length": 512, "do_lower_case": False})
    )
    (folder / "1_Pooling").mkdir(exist_ok=True)
    pooling = {"word_embedding_dimension": 384, "pooling_mode_mean_tokens": True}
    (folder / "1_Pooling" / "config.json").write_text(json.dumps(pooling))
    (folder / "2_Normalize").mkdir(exist_ok=True)
    print(folder)


if __name__ == "__main__":
    main()
