"""Factorized embeddings (paper Sec. 3.1): word, position and token-type tables of size E, summed,
LayerNorm'd and dropped out at size E, then projected to the hidden size H (V×E + E×H parameters instead
of V×H). BERT is the case E = H with no projection."""

from __future__ import annotations

import torch
from torch import nn

from albert_lm.config import AlbertConfig


class Embeddings(nn.Module):
    def __init__(self, config: AlbertConfig) -> None:
        super().__init__()
        e = config.embedding_size
        self.word = nn.Embedding(config.vocab_size, e, padding_idx=None)
        self.position = nn.Embedding(config.max_position_embeddings, e)
        self.token_type = nn.Embedding(config.type_vocab_size, e)
        self.norm = nn.LayerNorm(e, eps=config.layer_norm_eps)
        self.dropout = nn.Dropout(config.hidden_dropout_prob)
        # original modeling.py: "embedding_hidden_mapping_in" exists only when E != H
        self.project = nn.Linear(e, config.hidden_size) if config.has_projection else None
        self.max_positions = config.max_position_embeddings

    def forward(self, input_ids: torch.Tensor, token_type_ids: torch.Tensor | None = None) -> torch.Tensor:
        _, t = input_ids.shape  # (B, T)
        if t > self.max_positions:
            raise ValueError(f"sequence length {t} exceeds max_position_embeddings={self.max_positions}")
        x = self.word(input_ids) + self.position.weight[:t].unsqueeze(0)  # (B, T, E)
        if token_type_ids is None:
            x = x + self.token_type.weight[0]
        else:
            x = x + self.token_type(token_type_ids)
        x = self.dropout(self.norm(x))
        if self.project is not None:
            x = self.project(x)  # (B, T, H)
        return x
