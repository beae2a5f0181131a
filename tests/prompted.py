"""A copy of the bundled sentence-transformers folder with prompts written into its config, for tests."""

from __future__ import annotations

import json
import shutil
from pathlib import Path

PROMPTS = {
    "query": "query: ",
    "passage": "passage: ",
    "instruct": "Represent this sentence for searching relevant passages: ",
}


def with_prompts(source: Path, folder: Path, *, include_prompt: bool, default: str | None) -> Path:
    """Copy `source` to `folder` with PROMPTS (default prompt `default`) and the Pooling's include_prompt."""
    shutil.copytree(source, folder)
    config_path = folder / "config_sentence_transformers.json"
    config = json.loads(config_path.read_text())
    config.update(prompts=PROMPTS, default_prompt_name=default)
    config_path.write_text(json.dumps(config))
    pooling_path = folder / "1_Pooling" / "config.json"
    pooling = json.loads(pooling_path.read_text())
    pooling_path.write_text(json.dumps({**pooling, "include_prompt": include_prompt}))
    return folder
