"""The vocabulary a recipe's run builds, where it is not the model's.

Megatron Bridge 0.6.2 sizes the embedding and output layer from the tokenizer when the tokenizer
config sets `use_tokenizer_vocab_size` (training/setup.py `_validate_and_set_vocab_size`; padded
to make_vocab_size_divisible_by x TP as any vocabulary). Its pretraining recipes set it
(recipes/common.py `_pretrain_common`) and then a NullTokenizer of DEFAULT_NULL_TOKENIZER_VOCAB_SIZE
= 32000 for mock data: llama3_8b's pretraining run has a 32000-entry vocabulary, not Llama 3's
128256 (0.79B fewer parameters; gemma3_1b's 32768-token logits shrink from 262144 entries to
32000). The catalog records the three tokenizer fields (catalog_sync/extract.py FEATURE_FIELDS).
"""

from __future__ import annotations

from dataclasses import replace
from typing import Any


def run_vocab_size(recipe: Any) -> int | None:
    """The tokenizer's vocabulary when the recipe's run takes it instead of the model's, else None."""
    features = getattr(recipe, "features", None) or {}
    size = features.get("tokenizer_vocab_size")
    if features.get("use_tokenizer_vocab_size") is True and isinstance(size, int) and size > 0:
        return size
    return None


def with_run_vocab(arch: Any, recipe: Any) -> Any:
    """The architecture with the vocabulary the recipe's run builds (unchanged where it is the model's)."""
    size = run_vocab_size(recipe)
    if arch is None or size is None or getattr(arch, "vocab_size", None) == size:
        return arch
    return replace(arch, vocab_size=size)
