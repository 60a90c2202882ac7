"""ALBERT in PyTorch (Lan et al., ICLR 2020).

    from albert_lm import AlbertConfig, AlbertForPreTraining, load_model, load_tokenizer

    config = AlbertConfig.from_preset("albert-base-v2")
    model = load_model("my-model-dir")          # the class its config.json names
    tokenizer = load_tokenizer("my-model-dir")

Names are imported on first use (PEP 562), so ``import albert_lm`` and ``albert --help`` stay fast.
"""

from __future__ import annotations

import importlib
from importlib import metadata
from typing import TYPE_CHECKING, Any

try:
    __version__ = metadata.version("albert-lm")
except metadata.PackageNotFoundError:  # running from a source tree that was not installed
    __version__ = "0.0.0+unknown"

# public name -> the module that defines it
_EXPORTS: dict[str, str] = {
    "AlbertConfig": "albert_lm.config",
    "PRESETS": "albert_lm.config",
    "AlbertModel": "albert_lm.model",
    "AlbertForPreTraining": "albert_lm.model",
    "AlbertForMaskedLM": "albert_lm.model",
    "AlbertForSequenceClassification": "albert_lm.model",
    "AlbertForMultipleChoice": "albert_lm.model",
    "AlbertForQuestionAnswering": "albert_lm.model",
    "AlbertForSquadV2": "albert_lm.model",
    "load_tokenizer": "albert_lm.tokenizer",
    "Tokenizer": "albert_lm.tokenizer",
    "load_model": "albert_lm.convert.hf",
}

__all__ = ["__version__", *_EXPORTS]  # noqa: PLE0604

if TYPE_CHECKING:  # noqa: SIM102 - names for type checkers and IDEs
    from albert_lm.config import PRESETS, AlbertConfig
    from albert_lm.convert.hf import load_model
    from albert_lm.model import (
        AlbertForMaskedLM,
        AlbertForMultipleChoice,
        AlbertForPreTraining,
        AlbertForQuestionAnswering,
        AlbertForSequenceClassification,
        AlbertForSquadV2,
        AlbertModel,
    )
    from albert_lm.tokenizer import Tokenizer, load_tokenizer


def __getattr__(name: str) -> Any:
    module = _EXPORTS.get(name)
    if module is None:
        raise AttributeError(f"module 'albert_lm' has no attribute {name!r}")
    value = getattr(importlib.import_module(module), name)
    globals()[name] = value
    return value


def __dir__() -> list[str]:
    return sorted(__all__)
