"""Reading a model card's YAML metadata back (huggingface_hub's parser), bounded in size.

Kept apart from policies/model_card.py, which writes cards: model loading (policies/models.py) reads one
key and must not import the writer, which imports it.
"""
from __future__ import annotations

from pathlib import Path
from typing import Any

CARD_FILE = "README.md"
# An adapter trained over the embedded GGUF model records that model's hub id as its base (so that peft and
# the Hub resolve it); this metadata key says its weights were the embedded copy, which loads offline.
EMBEDDED_BASE_KEY = "rlgym_base_model"
MAX_CARD_BYTES = 1 << 20  # a card read back for its metadata (a larger file is not ours: ignored)


def card_metadata(folder: str | Path) -> dict[str, Any]:
    """The YAML metadata of `folder`'s model card ({} without one, or an unreadable or oversized one)."""
    from huggingface_hub import ModelCard

    path = Path(folder) / CARD_FILE
    try:
        if not path.is_file() or path.stat().st_size > MAX_CARD_BYTES:
            return {}
        return ModelCard.load(path).data.to_dict()
    except (OSError, ValueError):  # a card that does not parse names nothing
        return {}
