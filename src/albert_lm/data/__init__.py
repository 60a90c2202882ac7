"""Pretraining data: documents -> streaming shards -> SOP/NSP instances -> n-gram masking.

    albert prepare --input corpus.txt --tokenizer vocab_dir --output DATA_DIR
    ds = albert_lm.data.PretrainingDataset(DATA_DIR)       # an IterableDataset of dicts of tensors
    albert data stats DATA_DIR

Faithful to google-research/albert ``create_pretraining_data.py`` (see :mod:`albert_lm.data.instances` and
:mod:`albert_lm.data.masking` for the rules and the deliberate fixes), but streaming, parallel and
reproducible to the bit.

The torch-dependent names (``PretrainingDataset``, ``PretrainingLoader``, ``collate``, ``IGNORE_INDEX``) load
lazily, so ``albert prepare`` and its worker processes never import torch.
"""

from typing import Any

from albert_lm.data.documents import DataError, Document, ReadReport, SentenceSplitter, read_documents
from albert_lm.data.instances import InstanceConfig, create_instances_from_document, truncate_pair_randomly
from albert_lm.data.masking import (
    MaskingConfig,
    create_masked_lm_predictions,
    is_start_piece_sp,
    is_start_piece_wordpiece,
)
from albert_lm.data.pipeline import PrepareConfig, merge_parts, prepare
from albert_lm.data.shards import ShardReader, load_manifest, verify_shards
from albert_lm.data.stats import compute_stats, format_stats
from albert_lm.data.wiki_markup import strip_wiki_markup

__all__ = [
    "IGNORE_INDEX",
    "DataError",
    "Document",
    "InstanceConfig",
    "MaskingConfig",
    "PrepareConfig",
    "PretrainingDataset",
    "PretrainingLoader",
    "ReadReport",
    "SentenceSplitter",
    "ShardReader",
    "collate",
    "compute_stats",
    "create_instances_from_document",
    "create_masked_lm_predictions",
    "format_stats",
    "is_start_piece_sp",
    "is_start_piece_wordpiece",
    "load_manifest",
    "merge_parts",
    "prepare",
    "read_documents",
    "strip_wiki_markup",
    "truncate_pair_randomly",
    "verify_shards",
]

_LAZY = {"IGNORE_INDEX", "PretrainingDataset", "PretrainingLoader", "collate"}


def __getattr__(name: str) -> Any:
    if name in _LAZY:
        from albert_lm.data import dataset

        return getattr(dataset, name)
    raise AttributeError(f"module 'albert_lm.data' has no attribute {name!r}")
