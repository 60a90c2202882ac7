"""How attention and padding run on this machine: two switches the model reads at call time, held in context
variables (each thread and each asyncio task sees its own value; a ``with`` restores the previous one).

**CPU attention under bf16 / fp16 autocast.** torch's CPU flash-attention kernel is fast in bf16 only with AMX
tiles; with AVX-512 BF16 alone its bf16 path is slower than its own fp32 path in training (2-core AMD EPYC,
albert-base heads 12 x 64, forward + backward, one thread: 8x128 66 ms bf16 vs 37 fp32). ``"gemms"`` runs
attention as the two batched GEMMs it is, in bf16 (oneDNN), with the softmax between them computed in fp32 and
stored in bf16 -- the eager attention of transformers under autocast, one bf16 rounding of the scores and of
the probabilities more than a fused kernel (figures: ``benchmarks/bench_attention.py --part kernels``).
``"fp32"`` runs the flash kernel on fp32 copies; ``None`` is torch's SDPA as it is. The default, ``"auto"``,
is the runtime's choice wherever the model runs (the trainer, `albert_lm.infer`, a user's own loop under
``torch.autocast``): ``"gemms"`` on a CPU without AMX (`albert_lm.runtime.precision.cpu_attention_by_gemms_pays`),
else SDPA. CUDA tensors and fp32 activations always take SDPA.

**Padding removal.** A server's batch is whatever requests arrived, in any order of length: 32 random polarity
sentences padded to their longest are 1.87x their real tokens. Inside `skip_padding` the encoder runs on a
padded batch's real tokens only; only SDPA sees the (B, T) layout, and the output is 0 at padded positions (the
idea of FasterTransformer's "remove padding" and of torch's nn.TransformerEncoder fast path). Off by default:
training, tracing and export run the padded graph; `albert_lm.infer` enters it (``benchmarks/bench_padding.py``
measures it).
"""

from __future__ import annotations

import contextlib
from collections.abc import Iterator
from contextvars import ContextVar

from albert_lm.runtime.choices import CPU_ATTENTION_MODES
from albert_lm.runtime.precision import cpu_attention_by_gemms_pays

_CPU_ATTENTION: ContextVar[str | None] = ContextVar("albert_lm_cpu_attention", default="auto")
_SKIP_PADDING: ContextVar[bool] = ContextVar("albert_lm_skip_padding", default=False)


@contextlib.contextmanager
def cpu_attention(mode: str | None = "gemms") -> Iterator[None]:
    """Inside, attention of bf16 / fp16 CPU tensors runs as bf16 GEMMs around an fp32 softmax (``"gemms"``),
    as SDPA on fp32 copies (``"fp32"``), as torch's SDPA (None), or as this CPU is best served (``"auto"``)."""
    if mode is not None and mode != "auto" and mode not in CPU_ATTENTION_MODES:
        raise ValueError(
            f"cpu_attention: mode {mode!r} is not one of {('auto', *CPU_ATTENTION_MODES)} or None"
        )
    token = _CPU_ATTENTION.set(mode)
    try:
        yield
    finally:
        _CPU_ATTENTION.reset(token)


def cpu_attention_mode(resolve: bool = False) -> str | None:
    """The mode set by the innermost `cpu_attention` (``"auto"`` outside any); ``resolve``: ``"auto"`` turned
    into what it means on this CPU (``"gemms"`` without AMX, else None)."""
    mode = _CPU_ATTENTION.get()
    if resolve and mode == "auto":
        return "gemms" if cpu_attention_by_gemms_pays() else None
    return mode


@contextlib.contextmanager
def skip_padding(enabled: bool = True) -> Iterator[None]:
    """Inside, `AlbertModel` runs its encoder on the real tokens of a masked batch only; its
    ``sequence_output`` is 0 at padded positions (their values were never read: every head masks them or
    reads the first token). Not applied while tracing or compiling (the graph stays static)."""
    token = _SKIP_PADDING.set(enabled)
    try:
        yield
    finally:
        _SKIP_PADDING.reset(token)


def padding_skipped() -> bool:
    """Whether the innermost `skip_padding` is on."""
    return _SKIP_PADDING.get()
