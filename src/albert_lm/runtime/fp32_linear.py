"""Which library runs the fp32 linear layers on a CPU: torch's default GEMM (MKL) or oneDNN, picked by measuring.

torch's fp32 ``F.linear`` on x86 goes to MKL's sgemm. On Intel CPUs that is as fast as any GEMM the
machine has; on AMD CPUs MKL picks a slower code path (MKL 195 vs OpenBLAS 430 GFLOP/s on a 2-core
AMD EPYC). torch also ships oneDNN, whose fp32 matmul does not key on the vendor, reachable for linear
layers as ``torch.ops.mkldnn._linear_pointwise``. Neither is always the faster, so `choose_fp32_linear`
times both on the layer shapes of ALBERT once per process (a fraction of a second), keeps torch unless
oneDNN is clearly faster (`ONEDNN_MARGIN`, paired trials, so a noisy machine does not flip the choice), and
logs the figures once. `fp32_linear(backend)` then applies the choice to every ``F.linear`` of fp32 CPU
tensors run inside it (``nn.Linear`` calls it), outside autocast; bf16 / fp16 autocast and CUDA are left
alone, and so is anything compiled or exported (the caller does not enter it there).

The oneDNN path is the forward GEMM only: the backward's two GEMMs are torch's ``mm`` (oneDNN's fp32
linear has no autograd formula in torch), so training gains at most a third of the GEMM time.
"""

from __future__ import annotations

import contextlib
import logging
import statistics
import time
from collections.abc import Callable, Iterator, Sequence
from typing import Any

import torch
import torch.nn.functional as F
from torch.overrides import TorchFunctionMode

from albert_lm.runtime.choices import FP32_LINEAR_BACKENDS

logger = logging.getLogger(__name__)

# oneDNN is chosen only when its median paired time is at most 1 / ONEDNN_MARGIN of torch's: a small or
# noisy difference keeps the default (the one every other code path and test runs on).
ONEDNN_MARGIN = 1.10
# (rows, in, out) of albert-base's projections at 4 sequences of 128 tokens: qkv, FFN up, FFN down. Small
# enough that measuring both backends costs ~0.2 s on 2 cores; large enough to be GEMM-bound.
SHAPES: tuple[tuple[int, int, int], ...] = ((512, 768, 2304), (512, 768, 3072), (512, 3072, 768))

_chosen: dict[str, str] = {}  # requested -> backend, measured once per process


def onednn_available() -> bool:
    """Whether this torch build can run a oneDNN linear layer on the CPU."""
    return torch.backends.mkldnn.is_available() and hasattr(torch.ops.mkldnn, "_linear_pointwise")


def _onednn_linear(x: torch.Tensor, weight: torch.Tensor, bias: torch.Tensor | None) -> torch.Tensor:
    return torch.ops.mkldnn._linear_pointwise(x, weight, bias, "none", [], "")


class _OneDNNLinear(torch.autograd.Function):
    """y = x W^T + b: the forward by oneDNN, the backward by torch's mm (the same gradients as F.linear's)."""

    @staticmethod
    def forward(ctx: Any, x: torch.Tensor, weight: torch.Tensor, bias: torch.Tensor | None) -> torch.Tensor:
        ctx.save_for_backward(x, weight)
        ctx.has_bias = bias is not None
        return _onednn_linear(x, weight, bias)

    @staticmethod
    def backward(ctx: Any, grad: torch.Tensor) -> tuple[torch.Tensor | None, ...]:
        x, weight = ctx.saved_tensors
        g = grad.reshape(-1, grad.shape[-1])  # (rows, out)
        gx = (g @ weight).view(x.shape) if ctx.needs_input_grad[0] else None  # (..., in)
        gw = g.t() @ x.reshape(-1, x.shape[-1]) if ctx.needs_input_grad[1] else None  # (out, in)
        gb = g.sum(0) if ctx.has_bias and ctx.needs_input_grad[2] else None  # (out,)
        return gx, gw, gb


def _linear_args(input: Any, weight: Any, bias: Any = None) -> tuple[Any, Any, Any]:  # noqa: A002
    return input, weight, bias  # F.linear's signature, to read its arguments however they were passed


def _applies(x: Any, weight: Any, bias: Any) -> bool:
    tensors = [t for t in (x, weight, bias) if t is not None]
    return (
        all(
            isinstance(t, torch.Tensor) and t.dtype == torch.float32 and t.device.type == "cpu"
            for t in tensors
        )
        and x.dim() >= 2
        and not torch.is_autocast_enabled("cpu")
    )


class _OneDNNLinearMode(TorchFunctionMode):
    """Routes ``F.linear`` on fp32 CPU tensors outside autocast to oneDNN; every other call unchanged."""

    def __torch_function__(self, func: Any, types: Any, args: Sequence[Any] = (), kwargs: Any = None) -> Any:
        kwargs = kwargs or {}
        if func is F.linear:
            x, weight, bias = _linear_args(*args, **kwargs)
            if _applies(x, weight, bias):
                return _OneDNNLinear.apply(x, weight, bias)
        return func(*args, **kwargs)


@contextlib.contextmanager
def fp32_linear(backend: str) -> Iterator[None]:
    """Run the fp32 CPU linear layers inside on ``backend`` (``torch``: no change).

    Raises:
        ValueError: an unknown backend, or ``onednn`` where this torch has none.
    """
    if backend not in FP32_LINEAR_BACKENDS:
        raise ValueError(
            f"fp32 linear backend must be one of {', '.join(FP32_LINEAR_BACKENDS)} (got {backend!r})"
        )
    if backend == "torch":
        yield
        return
    if not onednn_available():
        raise ValueError("fp32 linear backend onednn: this torch build has no oneDNN (torch.backends.mkldnn)")
    with _OneDNNLinearMode():
        yield


def measure_fp32_linear(
    shapes: Sequence[tuple[int, int, int]] = SHAPES, trials: int = 5
) -> dict[str, list[float]]:
    """Seconds of one pass over ``shapes`` (rows, in, out) with each backend, ``trials`` times, the
    backends alternating within each trial (so a load change on the machine hits both alike)."""
    gen = torch.Generator().manual_seed(0)
    cases = [
        (torch.randn(r, i, generator=gen), torch.randn(o, i, generator=gen), torch.randn(o, generator=gen))
        for r, i, o in shapes
    ]
    runs: dict[str, Callable[[torch.Tensor, torch.Tensor, torch.Tensor | None], torch.Tensor]] = {
        "torch": F.linear,
        "onednn": _onednn_linear,
    }
    times: dict[str, list[float]] = {name: [] for name in runs}
    with torch.inference_mode():
        for fn in runs.values():  # warm-up: first-call allocations and oneDNN's primitive creation
            for x, w, b in cases:
                fn(x, w, b)
        for _ in range(trials):
            for name, fn in runs.items():
                t0 = time.perf_counter()
                for x, w, b in cases:
                    fn(x, w, b)
                times[name].append(time.perf_counter() - t0)
    return times


def pick_backend(times: dict[str, list[float]]) -> str:
    """``onednn`` when its paired trials beat torch's in the majority and its median is at least
    `ONEDNN_MARGIN` times faster; else ``torch``."""
    t, o = times["torch"], times["onednn"]
    wins = sum(b < a for a, b in zip(t, o))
    if wins * 2 > len(t) and statistics.median(o) * ONEDNN_MARGIN <= statistics.median(t):
        return "onednn"
    return "torch"


def choose_fp32_linear(requested: str = "auto") -> str:
    """The fp32 linear backend of this process: ``requested`` unless ``auto``, which measures both
    (`measure_fp32_linear`) once and logs the figures and the choice once.

    Raises:
        ValueError: ``requested`` is neither ``auto`` nor one of `FP32_LINEAR_BACKENDS`.
    """
    if requested != "auto":
        if requested not in FP32_LINEAR_BACKENDS:
            raise ValueError(
                f"fp32 linear backend must be auto or one of {', '.join(FP32_LINEAR_BACKENDS)} (got {requested!r})"
            )
        return requested
    if "auto" not in _chosen:
        if not onednn_available():
            _chosen["auto"] = "torch"
            logger.info("fp32 linear backend auto -> torch (this torch has no oneDNN)")
        else:
            times = measure_fp32_linear()
            flops = sum(2 * r * i * o for r, i, o in SHAPES)
            rate = {k: flops / statistics.median(v) / 1e9 for k, v in times.items()}
            _chosen["auto"] = pick_backend(times)
            logger.info(
                "fp32 linear backend auto -> %s (measured on ALBERT-base layer shapes: torch %.0f GFLOP/s, "
                "oneDNN %.0f GFLOP/s; oneDNN needs %.2fx to be chosen)",
                _chosen["auto"],
                rate["torch"],
                rate["onednn"],
                ONEDNN_MARGIN,
            )
    return _chosen["auto"]
