"""ALBERT's own SQuAD 2.0 head: start, end conditioned on the start, and an answer verifier.

Exactly google-research/albert ``squad_utils.py`` ``create_v2_model`` / ``v2_model_fn_builder`` (the head
behind the paper's SQuAD 2.0 results; Hugging Face's ``AlbertForQuestionAnswering`` is a BERT span head):

* start logits: dense(H -> 1) per position, masked with ``p_mask`` (1 = the answer cannot be there:
  question, ``[SEP]``, padding; ``[CLS]`` stays open as the no-answer position), log-softmax over positions;
* end logits, conditioned on a start: ``[h_t ; h_start]`` -> dense(2H -> H) + tanh -> LayerNorm ->
  dense(H -> 1), masked the same way. In training ``h_start`` is the gold start's representation; at
  inference the ``start_n_top`` best starts are each expanded and the ``end_n_top`` best ends of each
  kept (a beam of start_n_top x end_n_top spans);
* answerability: ``[sum_t softmax(start)_t h_t ; h_CLS]`` -> dense(2H -> H) + tanh -> dropout ->
  dense(H -> 1, no bias) = ``cls_logits`` (a logit of "unanswerable"); no dependence on the end, so one
  score per window;
* loss: ``(CE_start + CE_end) / 2 + 0.5 * BCE(cls_logits, is_impossible)`` ("multiply the loss by 0.5 so
  that the scale is comparable to start_loss and end_loss", original note).

Masking is ``logits * (1 - p_mask) - 1e30 * p_mask`` in the original; ``masked_fill(p_mask, -1e30)`` is the
same for a 0/1 mask and is done in float32 so that it holds under fp16 / bf16 autocast.
The LayerNorm is ``tf.contrib.layers.layer_norm`` in the original, whose epsilon is 1e-12.
"""

from __future__ import annotations

from typing import Any

import torch
import torch.nn.functional as F
from torch import nn

from albert_lm.config import AlbertConfig
from albert_lm.model.albert import AlbertModel, Output, PreTrainedModule, reject_unknown_inputs

NEG_INF = -1e30  # original: - 1e30 * p_mask
START_N_TOP = 5  # original run_squad_v2.py flag start_n_top
END_N_TOP = 5  # original run_squad_v2.py flag end_n_top
CLS_LOSS_WEIGHT = 0.5  # original v2_model_fn_builder: total_loss += regression_loss * 0.5


class SquadV2Head(nn.Module):
    """The head on top of the encoder's sequence output; see the module docstring."""

    def __init__(
        self,
        hidden_size: int,
        *,
        start_n_top: int = START_N_TOP,
        end_n_top: int = END_N_TOP,
        dropout_prob: float = 0.1,
        layer_norm_eps: float = 1e-12,
    ) -> None:
        super().__init__()
        if start_n_top < 1 or end_n_top < 1:
            raise ValueError(f"start_n_top and end_n_top must be >= 1, got {start_n_top}, {end_n_top}")
        self.start_n_top = start_n_top
        self.end_n_top = end_n_top
        # original variable scopes: start_logits/dense, end_logits/{dense_0, LayerNorm, dense_1},
        # answer_class/{dense_0, dense_1}
        self.start = nn.Linear(hidden_size, 1)
        self.end_dense = nn.Linear(2 * hidden_size, hidden_size)
        self.end_norm = nn.LayerNorm(hidden_size, eps=layer_norm_eps)
        self.end_out = nn.Linear(hidden_size, 1)
        self.answer_dense = nn.Linear(2 * hidden_size, hidden_size)
        self.answer_out = nn.Linear(hidden_size, 1, bias=False)
        self.dropout = nn.Dropout(dropout_prob)

    def _end_logits(self, seq: torch.Tensor, start_features: torch.Tensor) -> torch.Tensor:
        """``seq`` (..., T, H) and ``start_features`` broadcastable to it -> end logits (..., T)."""
        start_features = start_features.expand_as(seq)
        h = torch.tanh(self.end_dense(torch.cat([seq, start_features], dim=-1)))  # (..., T, H)
        return self.end_out(self.end_norm(h)).squeeze(-1).float()  # (..., T)

    def forward(
        self,
        sequence_output: torch.Tensor,
        p_mask: torch.Tensor,
        start_positions: torch.Tensor | None = None,
        end_positions: torch.Tensor | None = None,
        is_impossible: torch.Tensor | None = None,
    ) -> Output:
        """Training outputs (and the loss) when ``start_positions`` is given; beam outputs when it is not,
        or in eval mode (so that an evaluation batch with labels gives both the loss and predictions).

        Args:
            sequence_output: (B, T, H) encoder output.
            p_mask: (B, T), 1 where no answer can start or end.
            start_positions, end_positions: (B,) gold positions (0 = ``[CLS]`` = no answer).
            is_impossible: (B,) 0/1; when absent, taken as ``start_positions == 0``.

        Returns:
            With labels: ``start_log_probs``, ``end_log_probs`` (B, T), ``cls_logits`` (B,), and ``loss``,
            ``start_loss``, ``end_loss``, ``cls_loss`` when ``end_positions`` is given.
            Without labels (or in eval mode): ``start_log_probs`` (B, T), ``start_top_log_probs`` / ``start_top_index``
            (B, start_n_top), ``end_top_log_probs`` / ``end_top_index`` (B, start_n_top * end_n_top, row
            ``i * end_n_top + j`` = j-th end of the i-th start), ``cls_logits`` (B,).
        """
        if p_mask is None:
            raise ValueError("SquadV2Head needs p_mask (B, T): 1 at question, [SEP] and padding positions")
        b, t, _ = sequence_output.shape  # (B, T, H)
        if p_mask.shape != (b, t):
            raise ValueError(f"p_mask has shape {tuple(p_mask.shape)}, expected {(b, t)}")
        masked = p_mask.to(torch.bool)  # (B, T)

        start_logits = self.start(sequence_output).squeeze(-1).float()  # (B, T)
        start_logits = start_logits.masked_fill(masked, NEG_INF)
        out = Output(start_log_probs=F.log_softmax(start_logits, dim=-1))  # (B, T)
        if start_positions is not None:
            out["end_log_probs"] = self._gold_start_end(sequence_output, masked, start_positions)
        if start_positions is None or not self.training:
            out.update(self._beam(sequence_output, masked, out["start_log_probs"]))
        out["cls_logits"] = self._answer_logits(sequence_output, start_logits)
        if start_positions is not None and end_positions is not None:
            out.update(self._losses(out, start_positions, end_positions, is_impossible))
        return out

    def _gold_start_end(
        self, seq: torch.Tensor, masked: torch.Tensor, start_positions: torch.Tensor
    ) -> torch.Tensor:
        """End log-probabilities (B, T) conditioned on the gold start (training)."""
        rows = torch.arange(seq.size(0), device=seq.device)
        start_feat = seq[rows, start_positions][:, None, :]  # (B, 1, H)
        end_logits = self._end_logits(seq, start_feat).masked_fill(masked, NEG_INF)  # (B, T)
        return F.log_softmax(end_logits, dim=-1)

    def _beam(
        self, seq: torch.Tensor, masked: torch.Tensor, start_log_probs: torch.Tensor
    ) -> dict[str, torch.Tensor]:
        """The ``start_n_top`` best starts, each expanded to its ``end_n_top`` best ends (inference)."""
        b, t, h = seq.shape  # (B, T, H)
        k_start = min(self.start_n_top, t)
        k_end = min(self.end_n_top, t)
        top_lp, top_idx = start_log_probs.topk(k_start, dim=-1)  # (B, k)
        gather = top_idx[:, :, None].expand(b, k_start, h)  # (B, k, H)
        start_feat = seq.gather(1, gather)[:, :, None, :]  # (B, k, 1, H)
        seq_k = seq[:, None, :, :].expand(b, k_start, t, h)  # (B, k, T, H)
        end_logits = self._end_logits(seq_k, start_feat)  # (B, k, T)
        end_logits = end_logits.masked_fill(masked[:, None, :], NEG_INF)
        end_log_probs = F.log_softmax(end_logits, dim=-1)  # (B, k, T)
        end_lp, end_idx = end_log_probs.topk(k_end, dim=-1)  # (B, k, k_end)
        return {
            "start_top_log_probs": top_lp,
            "start_top_index": top_idx,
            "end_top_log_probs": end_lp.reshape(b, k_start * k_end),
            "end_top_index": end_idx.reshape(b, k_start * k_end),
        }

    def _answer_logits(self, seq: torch.Tensor, start_logits: torch.Tensor) -> torch.Tensor:
        """Answerability ``cls_logits`` (B,) from the start-probability-weighted representation and [CLS]."""
        start_p = start_logits.softmax(dim=-1).to(seq.dtype)  # (B, T)
        start_summary = torch.einsum("bt,bth->bh", start_p, seq)  # (B, H)
        cls_feat = seq[:, 0]  # (B, H)
        h = torch.tanh(self.answer_dense(torch.cat([start_summary, cls_feat], dim=-1)))  # (B, H)
        return self.answer_out(self.dropout(h)).squeeze(-1).float()  # (B,)

    @staticmethod
    def _losses(
        out: Output,
        start_positions: torch.Tensor,
        end_positions: torch.Tensor,
        is_impossible: torch.Tensor | None,
    ) -> dict[str, torch.Tensor]:
        start_loss = F.nll_loss(out["start_log_probs"], start_positions)
        end_loss = F.nll_loss(out["end_log_probs"], end_positions)
        if is_impossible is None:
            is_impossible = start_positions == 0
        cls_loss = F.binary_cross_entropy_with_logits(out["cls_logits"], is_impossible.float())
        return {
            "loss": (start_loss + end_loss) / 2 + CLS_LOSS_WEIGHT * cls_loss,
            "start_loss": start_loss,
            "end_loss": end_loss,
            "cls_loss": cls_loss,
        }


class AlbertForSquadV2(PreTrainedModule):
    """The encoder plus `SquadV2Head` (google-research/albert's SQuAD 2.0 model).

    ``forward(**batch)`` takes what `albert_lm.tasks.squad_data.collate` makes: ``input_ids``, ``token_type_ids``,
    ``attention_mask``, ``p_mask`` and, for training, ``start_positions``, ``end_positions``,
    ``is_impossible``.
    """

    extra_config_keys = ("start_n_top", "end_n_top")

    def __init__(
        self, config: AlbertConfig, start_n_top: int = START_N_TOP, end_n_top: int = END_N_TOP
    ) -> None:
        super().__init__(config)
        self.start_n_top = start_n_top
        self.end_n_top = end_n_top
        self.albert = AlbertModel(config, add_pooler=False)
        # original run_squad_v2.py flag dropout_prob (0.1) = our classifier dropout
        self.squad = SquadV2Head(
            config.hidden_size,
            start_n_top=start_n_top,
            end_n_top=end_n_top,
            dropout_prob=config.classifier_dropout_prob,
            layer_norm_eps=1e-12,  # tf.contrib.layers.layer_norm
        )
        self.init_weights()

    def forward(
        self,
        input_ids: torch.Tensor,
        token_type_ids: torch.Tensor | None = None,
        attention_mask: torch.Tensor | None = None,
        p_mask: torch.Tensor | None = None,
        start_positions: torch.Tensor | None = None,
        end_positions: torch.Tensor | None = None,
        is_impossible: torch.Tensor | None = None,
        **unknown: Any,
    ) -> Output:
        reject_unknown_inputs(self, unknown)
        if p_mask is None:
            raise ValueError("AlbertForSquadV2 needs p_mask (see albert_lm.tasks.squad_data.collate)")
        seq = self.albert(input_ids, token_type_ids, attention_mask).sequence_output  # (B, T, H)
        return self.squad(seq, p_mask, start_positions, end_positions, is_impossible)
