"""Single-device PyTorch modules: no IO, no training code."""

from albert.model.albert import AlbertModel, Output, PreTrainedModule
from albert.model.heads import (
    HEADS,
    AlbertForMaskedLM,
    AlbertForMultipleChoice,
    AlbertForPreTraining,
    AlbertForQuestionAnswering,
    AlbertForSequenceClassification,
    head_of,
)
from albert.model.squad_head import AlbertForSquadV2, SquadV2Head

__all__ = [
    "AlbertModel",
    "AlbertForPreTraining",
    "AlbertForMaskedLM",
    "AlbertForSequenceClassification",
    "AlbertForMultipleChoice",
    "AlbertForQuestionAnswering",
    "AlbertForSquadV2",
    "SquadV2Head",
    "Output",
    "PreTrainedModule",
    "HEADS",
    "head_of",
]
