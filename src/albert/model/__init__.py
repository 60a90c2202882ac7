"""Single-device PyTorch modules: no IO, no training code."""

from albert.model.albert import AlbertModel, Output, PreTrainedModule
from albert.model.heads import (
    AlbertForMaskedLM,
    AlbertForMultipleChoice,
    AlbertForPreTraining,
    AlbertForQuestionAnswering,
    AlbertForSequenceClassification,
)

__all__ = [
    "AlbertModel",
    "AlbertForPreTraining",
    "AlbertForMaskedLM",
    "AlbertForSequenceClassification",
    "AlbertForMultipleChoice",
    "AlbertForQuestionAnswering",
    "Output",
    "PreTrainedModule",
]
