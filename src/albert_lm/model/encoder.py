"""The transformer encoder with ALBERT's cross-layer parameter sharing (paper Sec. 3.1, Table 4).

Depth L is split into `num_hidden_groups` groups; layer l applies group int(l / L * G) (original
modeling.py `transformer_model`), and each group runs `inner_group_num` post-LN transformer layers in a row.
`sharing` says which sub-layers are shared across the layers of a group:

    all        attention and FFN shared (ALBERT default)     -> G * I attention + G * I FFN blocks
    attention  attention shared, each layer its own FFN      -> G * I attention + L * I FFN blocks
    ffn        FFN shared, each layer its own attention      -> L * I attention + G * I FFN blocks
    none       nothing shared (BERT)                         -> L * I attention + L * I FFN blocks

Attention and feed-forward blocks live in two flat ModuleLists; how many there are and which one a
(layer, inner) position uses are facts of the configuration (`AlbertConfig.num_attention_blocks`,
`AlbertConfig.attention_block`, ...), which the checkpoint converters read too. Attention uses PyTorch
SDPA with a fused QKV projection.

Inside `albert_lm.runtime.attention.skip_padding` a padded batch runs with its padding removed everywhere but inside attention: the
encoder's rows are the batch's N real tokens (N, H), so the projections, the FFN, GELU and LayerNorm cost
what the real tokens cost, and only SDPA sees the (B, T) layout (`SelfAttention.forward` with ``keep``).
The inference entry point (`albert_lm.infer.predict.model_predict_fn`) enters it.
"""

from __future__ import annotations

from collections.abc import Callable

import torch
import torch.nn.functional as F
from torch import nn

from albert_lm.config import AlbertConfig
from albert_lm.runtime.attention import cpu_attention_mode, padding_skipped


def gelu_tanh(x: torch.Tensor) -> torch.Tensor:
    # The original TF code's `gelu` is the tanh approximation (google-research/albert modeling.py).
    return F.gelu(x, approximate="tanh")


ACT_FNS: dict[str, Callable[[torch.Tensor], torch.Tensor]] = {
    "gelu_tanh": gelu_tanh,
    "gelu": F.gelu,
    "relu": F.relu,
    "tanh": torch.tanh,
    "silu": F.silu,
}


def real_tokens(attention_mask: torch.Tensor | None) -> torch.Tensor | None:
    """Flat indices (N,) of the real tokens of a (B, T) attention mask inside
    `albert_lm.runtime.attention.skip_padding`; None where padding is kept (outside it, no mask, or tracing /
    compiling / exporting)."""
    # tracing / compiling first: the graph stays static, and dynamo does not trace a context variable
    if torch.jit.is_tracing() or torch.compiler.is_compiling():
        return None
    if not padding_skipped() or attention_mask is None:
        return None
    return attention_mask.reshape(-1).nonzero().squeeze(1)


def attention(
    q: torch.Tensor, k: torch.Tensor, v: torch.Tensor, mask: torch.Tensor | None, dropout_p: float
) -> torch.Tensor:
    """SDPA of (B, heads, T, head_dim) q, k, v; on bf16 / fp16 CPU tensors as the runtime's CPU attention
    mode says (`albert_lm.runtime.attention.cpu_attention`; by default the best for this CPU)."""
    if q.device.type != "cpu" or q.dtype not in (torch.bfloat16, torch.float16):
        return F.scaled_dot_product_attention(q, k, v, attn_mask=mask, dropout_p=dropout_p)
    mode = cpu_attention_mode(resolve=True)
    if mode is None:
        return F.scaled_dot_product_attention(q, k, v, attn_mask=mask, dropout_p=dropout_p)
    # autocast off: it would cast SDPA's fp32 inputs back down, and store the gemms' softmax in fp32
    with torch.autocast("cpu", enabled=False):
        if mode == "fp32":
            y = F.scaled_dot_product_attention(
                q.float(), k.float(), v.float(), attn_mask=mask, dropout_p=dropout_p
            )
            return y.to(q.dtype)
        return attention_by_gemms(q, k, v, mask, dropout_p)


def attention_by_gemms(
    q: torch.Tensor, k: torch.Tensor, v: torch.Tensor, mask: torch.Tensor | None, dropout_p: float
) -> torch.Tensor:
    """softmax(q k^T / sqrt(head_dim) + mask) v in q's dtype: the two products as batched GEMMs, the softmax
    computed in fp32 (torch's CPU softmax accumulates reduced types in fp32) and stored in q's dtype. ``mask``
    as SDPA's: boolean (True = attend) or additive. The scale goes on q, (B, heads, T, head_dim), not on the
    (B, heads, T, T) scores; it is a power of two, so exact, for head_dim 64 (every ALBERT preset)."""
    scores = torch.matmul(q * q.shape[-1] ** -0.5, k.transpose(-1, -2))  # (B, heads, T, T)
    if mask is not None:
        scores = (
            scores.masked_fill(~mask, float("-inf"))
            if mask.dtype == torch.bool
            else scores + mask.to(scores.dtype)
        )
    probs = torch.softmax(scores, dim=-1)
    if dropout_p > 0.0:
        probs = F.dropout(probs, dropout_p)
    return torch.matmul(probs, v)


class SelfAttention(nn.Module):
    """Multi-head self-attention, output projection, dropout, residual and post-LayerNorm."""

    def __init__(self, config: AlbertConfig) -> None:
        super().__init__()
        h = config.hidden_size
        self.num_heads = config.num_attention_heads
        self.head_dim = config.head_dim
        self.qkv = nn.Linear(h, 3 * h)  # rows [q; k; v]
        self.out = nn.Linear(h, h)
        self.norm = nn.LayerNorm(h, eps=config.layer_norm_eps)
        self.attn_dropout = config.attention_probs_dropout_prob
        self.dropout = nn.Dropout(config.hidden_dropout_prob)

    def forward(
        self, x: torch.Tensor, mask: torch.Tensor | None, keep: torch.Tensor | None = None
    ) -> torch.Tensor:
        """x (B, T, H); or, with ``keep`` (`skip_padding`), (N, H): the real tokens at flat positions
        ``keep`` of the (B, T) batch that ``mask`` (B, 1, 1, T) describes. Returns x's shape."""
        qkv = self.qkv(x)  # (B, T, 3H) or (N, 3H)
        if keep is not None:  # scatter the real tokens' q, k, v into the padded layout SDPA needs
            if mask is None:
                raise ValueError("SelfAttention: keep (the real tokens) needs the mask of their (B, T) batch")
            b, t = mask.shape[0], mask.shape[-1]
            qkv = qkv.new_zeros(b * t, qkv.shape[-1]).index_copy_(0, keep, qkv).view(b, t, -1)
        b, t, h3 = qkv.shape
        h = h3 // 3
        qkv = qkv.view(b, t, 3, self.num_heads, self.head_dim)  # (B, T, 3, heads, head_dim)
        # Split before moving the heads forward: the backward of unbind(2) then stacks the three gradients
        # straight into the (B, T, 3H) layout of the projection's output. Permuting first made that stack
        # land in (3, B, heads, T, head_dim) order, which the projection's backward copied once more
        # (benchmarks/profile_step.py: one (B*T, 3H) copy per layer; ~5-10% of the attention block).
        q, k, v = (z.transpose(1, 2) for z in qkv.unbind(2))  # each (B, heads, T, head_dim)
        y = attention(q, k, v, mask, self.attn_dropout if self.training else 0.0)  # (B, heads, T, head_dim)
        y = y.transpose(1, 2).reshape(b, t, h)  # (B, T, H)
        if keep is not None:
            y = y.view(b * t, h).index_select(0, keep)  # (N, H)
        return self.norm(x + self.dropout(self.out(y)))


class FeedForward(nn.Module):
    """H -> intermediate -> H with the configured activation, dropout, residual and post-LayerNorm."""

    def __init__(self, config: AlbertConfig) -> None:
        super().__init__()
        self.up = nn.Linear(config.hidden_size, config.intermediate_size)
        self.down = nn.Linear(config.intermediate_size, config.hidden_size)
        self.norm = nn.LayerNorm(config.hidden_size, eps=config.layer_norm_eps)
        self.act = ACT_FNS[config.hidden_act]
        self.dropout = nn.Dropout(config.hidden_dropout_prob)

    def forward(self, x: torch.Tensor) -> torch.Tensor:
        return self.norm(x + self.dropout(self.down(self.act(self.up(x)))))


class Encoder(nn.Module):
    def __init__(self, config: AlbertConfig) -> None:
        super().__init__()
        self.config = config
        self.attention = nn.ModuleList(SelfAttention(config) for _ in range(config.num_attention_blocks))
        self.ffn = nn.ModuleList(FeedForward(config) for _ in range(config.num_ffn_blocks))
        # (attention block, FFN block) of each (layer, inner) position in order, precomputed once
        self._schedule = [
            (config.attention_block(layer, i), config.ffn_block(layer, i))
            for layer in range(config.num_hidden_layers)
            for i in range(config.inner_group_num)
        ]
        self.gradient_checkpointing = False

    def _block(
        self, x: torch.Tensor, mask: torch.Tensor | None, a: int, f: int, keep: torch.Tensor | None
    ) -> torch.Tensor:
        return self.ffn[f](self.attention[a](x, mask, keep))

    def forward(
        self, x: torch.Tensor, mask: torch.Tensor | None, keep: torch.Tensor | None = None
    ) -> torch.Tensor:
        """x (B, T, H), or its real tokens (N, H) at flat positions ``keep`` (`skip_padding`)."""
        for a, f in self._schedule:
            if self.gradient_checkpointing and self.training:
                x = torch.utils.checkpoint.checkpoint(self._block, x, mask, a, f, keep, use_reentrant=False)
            else:
                x = self._block(x, mask, a, f, keep)
        return x


def attention_mask_for_sdpa(attention_mask: torch.Tensor | None) -> torch.Tensor | None:
    """(B, T) with 1 = token, 0 = padding -> boolean SDPA mask (B, 1, 1, T) (True = attend); None only
    when no mask is given.

    A given mask is always used, even when nothing is padded: testing ``attention_mask.all()`` here was a
    host sync on every forward, a graph break under torch.compile, and a data-dependent branch that
    torch.export cannot trace (the tracing ONNX exporter, given an unpadded example, dropped the mask
    input and ran padded batches unmasked). The branch-free mask is a static graph for all of them.
    """
    if attention_mask is None:  # a Python-level argument, not data: fixed when tracing
        return None
    return attention_mask[:, None, None, :].to(torch.bool)  # (B, 1, 1, T)


def init_weights(module: nn.Module, std: float) -> None:
    """Original initialization: truncated normal (±2σ, TF `truncated_normal_initializer`) for weights
    and embeddings, zero biases, LayerNorm at (1, 0)."""
    if isinstance(module, (nn.Linear, nn.Embedding)):
        nn.init.trunc_normal_(module.weight, mean=0.0, std=std, a=-2 * std, b=2 * std)
        if isinstance(module, nn.Linear) and module.bias is not None:
            nn.init.zeros_(module.bias)
    elif isinstance(module, nn.LayerNorm):
        nn.init.ones_(module.weight)
        nn.init.zeros_(module.bias)
