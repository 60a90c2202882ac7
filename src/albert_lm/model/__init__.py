"""Single-device PyTorch modules: no IO, no training code."""

from albert_lm.model.albert import AlbertModel, Output, PreTrainedModule
from albert_lm.model.heads import (
    HEADS,
    AlbertForMaskedLM,
    AlbertForMultipleChoice,
    AlbertForPreTraining,
    AlbertForQuestionAnswering,
    AlbertForSequenceClassification,
    head_of,
)
from albert_lm.model.squad_head import AlbertForSquadV2, SquadV2Head

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
