"""Task models: the encoder plus a head. Each returns an `Output` with ``loss`` when labels are given.

* `AlbertForPreTraining`: MLM head tied to the word embeddings (H -> E dense + activation + LayerNorm,
  E x V decoder, own bias) and the sentence-order (ALBERT) / next-sentence (BERT) head.
* `AlbertForMaskedLM`: the MLM head alone.
* `AlbertForSequenceClassification`: pooled -> dropout -> dense; regression (MSE) when num_labels == 1.
* `AlbertForMultipleChoice`: pooled -> dropout -> dense(1), softmax over the choices.
* `AlbertForQuestionAnswering`: the SQuAD 1.1 span head (start / end logits per token).
* `AlbertForTokenClassification`: a tag per token (NER): sequence -> dropout -> dense.

`HEADS` at the bottom names every model class (with `albert_lm.model.squad_head.AlbertForSquadV2`): the one
head-name -> class table that checkpoints, ``config.json`` and the converters' name tables key on.
"""

from __future__ import annotations

from typing import Any

import torch
import torch.nn.functional as F
from torch import nn

from albert_lm._io import IGNORE_INDEX
from albert_lm.config import AlbertConfig
from albert_lm.model.albert import AlbertModel, Output, PreTrainedModule, reject_unknown_inputs
from albert_lm.model.encoder import ACT_FNS
from albert_lm.model.squad_head import AlbertForSquadV2


class MLMHead(nn.Module):
    """H -> E dense + activation + LayerNorm, then the tied E x V decoder plus a bias
    (original run_pretraining.py `get_masked_lm_output`)."""

    def __init__(self, config: AlbertConfig) -> None:
        super().__init__()
        self.dense = nn.Linear(config.hidden_size, config.embedding_size)
        self.act = ACT_FNS[config.hidden_act]
        self.norm = nn.LayerNorm(config.embedding_size, eps=config.layer_norm_eps)
        self.bias = nn.Parameter(torch.zeros(config.vocab_size))

    def forward(self, h: torch.Tensor, word_embeddings: torch.Tensor) -> torch.Tensor:
        """``word_embeddings`` (V, E) is the tied decoder matrix."""
        h = self.norm(self.act(self.dense(h)))  # (..., E)
        return F.linear(h, word_embeddings, self.bias)  # (..., V)


def _masked_lm(
    head: MLMHead, words: torch.Tensor, seq: torch.Tensor, mlm_labels: torch.Tensor | None
) -> tuple[torch.Tensor, torch.Tensor | None, torch.Tensor | None]:
    """Vocabulary logits only at masked positions when labels are given (N, V), else at all (B, T, V).
    Computing the E x V decoder at the ~15% masked positions only is most of the memory saving over
    computing it everywhere."""
    if mlm_labels is None:
        return head(seq, words), None, None
    selected = mlm_labels != IGNORE_INDEX  # (B, T)
    targets = mlm_labels[selected]  # (N,)
    logits = head(seq[selected], words)  # (N, V)
    if targets.numel() == 0:
        return logits, logits.sum() * 0.0, torch.zeros((), device=seq.device)
    return logits, *_cross_entropy(logits, targets)


def _either(ours: Any, our_name: str, theirs: Any, their_name: str) -> Any:
    """The labels given under our name or transformers' (not both: which would win is not obvious)."""
    if ours is not None and theirs is not None:
        raise TypeError(f"give {our_name} or {their_name} (transformers' name for it), not both")
    return ours if theirs is None else theirs


def _cross_entropy(logits: torch.Tensor, labels: torch.Tensor) -> tuple[torch.Tensor, torch.Tensor]:
    """Cross-entropy (in float32) and accuracy of ``logits`` (N, K) against ``labels`` (N,): the loss of
    every head that picks one of K (masked word, sentence order, label, choice)."""
    loss = F.cross_entropy(logits.float(), labels)
    return loss, (logits.detach().argmax(-1) == labels).float().mean()


class AlbertForPreTraining(PreTrainedModule):
    """Encoder + MLM head + sentence-order (SOP) or next-sentence (NSP, BERT) head.

    ``sop_labels``: 0 = segments in the original order, 1 = swapped (original create_pretraining_data.py).
    ``loss = mlm_loss + sop_loss`` (original run_pretraining.py).
    """

    # The sentence loss's weight in ``loss``: 1 as the original; the pretraining orchestration sets it from
    # model.sop_loss_weight (0: masked-LM-only pretraining). Not part of the saved config: a training choice.
    sop_loss_weight: float = 1.0

    def __init__(self, config: AlbertConfig) -> None:
        super().__init__(config)
        self.albert = AlbertModel(config)
        self.mlm = MLMHead(config)
        # The original SOP head has no dropout (run_pretraining.py get_sentence_order_output).
        self.sop = nn.Linear(config.hidden_size, 2)
        self.init_weights()

    def forward(
        self,
        input_ids: torch.Tensor,
        token_type_ids: torch.Tensor | None = None,
        attention_mask: torch.Tensor | None = None,
        mlm_labels: torch.Tensor | None = None,
        sop_labels: torch.Tensor | None = None,
        labels: torch.Tensor | None = None,
        sentence_order_label: torch.Tensor | None = None,
        **unknown: Any,
    ) -> Output:
        """``labels`` / ``sentence_order_label`` are transformers' names of ``mlm_labels`` / ``sop_labels``."""
        reject_unknown_inputs(self, unknown)
        mlm_labels = _either(mlm_labels, "mlm_labels", labels, "labels")
        sop_labels = _either(sop_labels, "sop_labels", sentence_order_label, "sentence_order_label")
        out = self.albert(input_ids, token_type_ids, attention_mask)
        mlm_logits, mlm_loss, mlm_acc = _masked_lm(
            self.mlm, self.albert.embeddings.word.weight, out.sequence_output, mlm_labels
        )
        sop_logits = self.sop(out.pooled_output)  # (B, 2)
        out.update(mlm_logits=mlm_logits, sop_logits=sop_logits)
        losses = []
        if mlm_loss is not None:
            out.update(mlm_loss=mlm_loss, mlm_accuracy=mlm_acc)
            losses.append(mlm_loss)
        if sop_labels is not None:
            sop_loss, sop_acc = _cross_entropy(sop_logits, sop_labels)
            out.update(sop_loss=sop_loss, sop_accuracy=sop_acc)
            losses.append(sop_loss if self.sop_loss_weight == 1.0 else self.sop_loss_weight * sop_loss)
        if losses:
            out["loss"] = sum(losses[1:], losses[0])
        return out.ordered("mlm_logits", "sop_logits")


class AlbertForMaskedLM(PreTrainedModule):
    """Encoder + the MLM head alone (no pooler)."""

    def __init__(self, config: AlbertConfig) -> None:
        super().__init__(config)
        self.albert = AlbertModel(config, add_pooler=False)
        self.mlm = MLMHead(config)
        self.init_weights()

    def forward(
        self,
        input_ids: torch.Tensor,
        token_type_ids: torch.Tensor | None = None,
        attention_mask: torch.Tensor | None = None,
        mlm_labels: torch.Tensor | None = None,
        labels: torch.Tensor | None = None,
        **unknown: Any,
    ) -> Output:
        """``labels`` is transformers' name of ``mlm_labels``. With labels, the logits are those of the
        labelled positions only, (N, V) (the decoder runs there alone), not transformers' (B, T, V)."""
        reject_unknown_inputs(self, unknown)
        mlm_labels = _either(mlm_labels, "mlm_labels", labels, "labels")
        out = self.albert(input_ids, token_type_ids, attention_mask)
        logits, loss, acc = _masked_lm(
            self.mlm, self.albert.embeddings.word.weight, out.sequence_output, mlm_labels
        )
        out["mlm_logits"] = logits
        if loss is not None:
            out.update(loss=loss, mlm_loss=loss, mlm_accuracy=acc)
        return out.ordered("mlm_logits")


class _Classifier(PreTrainedModule):
    """The encoder, dropout(classifier_dropout_prob) and a dense layer to ``num_labels`` (``classifier``):
    the layers of the sequence classifier (on the pooled output) and of the token classifier (on every
    position, no pooler)."""

    extra_config_keys = ("num_labels",)

    def __init__(self, config: AlbertConfig, num_labels: int, *, add_pooler: bool) -> None:
        super().__init__(config)
        if num_labels < 1:
            raise ValueError(f"num_labels must be >= 1, got {num_labels}")
        self.num_labels = num_labels
        self.albert = AlbertModel(config, add_pooler=add_pooler)
        self.dropout = nn.Dropout(config.classifier_dropout_prob)
        self.classifier = nn.Linear(config.hidden_size, num_labels)
        self.init_weights()


class AlbertForSequenceClassification(_Classifier):
    """pooled -> dropout(classifier_dropout_prob) -> dense (original classifier_utils.py create_model:
    dropout keep_prob 0.9). ``num_labels == 1`` is regression with a mean squared error (STS-B)."""

    def __init__(self, config: AlbertConfig, num_labels: int = 2) -> None:
        super().__init__(config, num_labels, add_pooler=True)

    def forward(
        self,
        input_ids: torch.Tensor,
        token_type_ids: torch.Tensor | None = None,
        attention_mask: torch.Tensor | None = None,
        labels: torch.Tensor | None = None,
        **unknown: Any,
    ) -> Output:
        reject_unknown_inputs(self, unknown)
        out = self.albert(input_ids, token_type_ids, attention_mask)
        logits = self.classifier(self.dropout(out.pooled_output))  # (B, num_labels)
        out["logits"] = logits
        if labels is not None:
            if self.num_labels == 1:
                out["loss"] = F.mse_loss(logits.squeeze(-1).float(), labels.float())
            else:
                out["loss"], out["accuracy"] = _cross_entropy(logits, labels)
        return out.ordered("logits")


class AlbertForMultipleChoice(PreTrainedModule):
    """Each (example, choice) pair is encoded separately; pooled -> dropout -> dense(1); softmax over the
    choices and cross-entropy (original run_race.py). Inputs are (B, C, T)."""

    def __init__(self, config: AlbertConfig) -> None:
        super().__init__(config)
        self.albert = AlbertModel(config)
        self.dropout = nn.Dropout(config.classifier_dropout_prob)
        self.classifier = nn.Linear(config.hidden_size, 1)
        self.init_weights()

    def forward(
        self,
        input_ids: torch.Tensor,
        token_type_ids: torch.Tensor | None = None,
        attention_mask: torch.Tensor | None = None,
        labels: torch.Tensor | None = None,
        **unknown: Any,
    ) -> Output:
        reject_unknown_inputs(self, unknown)
        b, c, t = input_ids.shape  # (B, C, T)
        flat = lambda x: None if x is None else x.reshape(b * c, t)  # noqa: E731
        out = self.albert(flat(input_ids), flat(token_type_ids), flat(attention_mask))
        logits = self.classifier(self.dropout(out.pooled_output)).view(b, c)  # (B, C)
        result = Output(logits=logits)
        if labels is not None:
            result["loss"], result["accuracy"] = _cross_entropy(logits, labels)
        return result.ordered("logits")


class AlbertForQuestionAnswering(PreTrainedModule):
    """SQuAD 1.1 span head: a dense layer to (start, end) logits per token; loss (CE_start + CE_end) / 2
    (original squad_utils.py v1 model)."""

    def __init__(self, config: AlbertConfig) -> None:
        super().__init__(config)
        self.albert = AlbertModel(config, add_pooler=False)
        self.qa = nn.Linear(config.hidden_size, 2)
        self.init_weights()

    def forward(
        self,
        input_ids: torch.Tensor,
        token_type_ids: torch.Tensor | None = None,
        attention_mask: torch.Tensor | None = None,
        start_positions: torch.Tensor | None = None,
        end_positions: torch.Tensor | None = None,
        **unknown: Any,
    ) -> Output:
        reject_unknown_inputs(self, unknown)
        out = self.albert(input_ids, token_type_ids, attention_mask)
        start, end = self.qa(out.sequence_output).float().unbind(-1)  # each (B, T)
        result = Output(start_logits=start, end_logits=end)
        if start_positions is not None and end_positions is not None:
            result["loss"] = (
                F.cross_entropy(start, start_positions) + F.cross_entropy(end, end_positions)
            ) / 2
        return result.ordered("start_logits", "end_logits")


class AlbertForTokenClassification(_Classifier):
    """A tag per token (named entities, BIO): sequence output -> dropout(classifier_dropout_prob) -> dense
    (num_labels), cross-entropy over the positions whose label is not ``IGNORE_INDEX`` (padding, special
    tokens, and the pieces of a word after its first). transformers' AlbertForTokenClassification has the
    same layers and names (``classifier``), and no pooler."""

    def __init__(self, config: AlbertConfig, num_labels: int = 2) -> None:
        super().__init__(config, num_labels, add_pooler=False)

    def forward(
        self,
        input_ids: torch.Tensor,
        token_type_ids: torch.Tensor | None = None,
        attention_mask: torch.Tensor | None = None,
        labels: torch.Tensor | None = None,
        **unknown: Any,
    ) -> Output:
        reject_unknown_inputs(self, unknown)
        out = self.albert(input_ids, token_type_ids, attention_mask)
        logits = self.classifier(self.dropout(out.sequence_output))  # (B, T, num_labels)
        result = Output(logits=logits)
        if labels is not None:  # (B, T), IGNORE_INDEX where no tag is learned
            flat = logits.float().view(-1, self.num_labels)  # (B*T, num_labels)
            scored = labels != IGNORE_INDEX
            if scored.any():
                result["loss"] = F.cross_entropy(flat, labels.view(-1), ignore_index=IGNORE_INDEX)
            else:  # nothing to learn in this batch: a zero loss, not the NaN of an empty mean
                result["loss"] = flat.sum() * 0.0
            hits = (logits.detach().argmax(-1) == labels) & scored
            result["accuracy"] = hits.sum().float() / scored.sum().clamp(min=1)
        return result.ordered("logits")


#: Head name -> model class, the package's one table of them. The name is what ``config.json`` records
#: (``albert_head``) and what the converters' name tables (albert_lm.convert.keymap, Hugging Face and TF) are
#: keyed by; ``None`` is the bare encoder.
HEADS: dict[str | None, type[PreTrainedModule]] = {
    None: AlbertModel,
    "pretraining": AlbertForPreTraining,
    "mlm": AlbertForMaskedLM,
    "classification": AlbertForSequenceClassification,
    "multiple_choice": AlbertForMultipleChoice,
    "question_answering": AlbertForQuestionAnswering,
    "squad_v2": AlbertForSquadV2,
    "token_classification": AlbertForTokenClassification,
}
_NAME_OF = {cls: name for name, cls in HEADS.items()}


def head_of(model: PreTrainedModule | type[PreTrainedModule]) -> str | None:
    """The `HEADS` name of a model or model class (of a subclass: its nearest base in the table).

    Raises:
        ValueError: the class derives from none of the classes in `HEADS`.
    """
    cls = model if isinstance(model, type) else type(model)
    for base in cls.__mro__:
        if base in _NAME_OF:
            return _NAME_OF[base]
    raise ValueError(f"{cls.__name__} is none of the model classes of albert_lm.model.HEADS")
