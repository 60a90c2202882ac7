"""How the trainer runs a single-device model: activation checkpointing, DDP, torch.compile and autocast,
applied from outside (as torchtitan's parallelize step), so the model code stays plain PyTorch."""

from __future__ import annotations

import contextlib
import logging
from collections.abc import Iterator
from typing import Any

import torch
from torch import nn

from albert_lm.runtime.attention import cpu_attention
from albert_lm.runtime.fp32_linear import (
    FP32_LINEAR_BACKENDS,
    choose_fp32_linear,
    fp32_linear,
    onednn_available,
)
from albert_lm.runtime.precision import cpu_attention_by_gemms_pays
from albert_lm.train.config import TrainerConfig
from albert_lm.train.distributed import DistInfo

logger = logging.getLogger(__name__)

# A resolved precision (albert_lm.runtime.precision: "auto" is never a key) -> the autocast dtype (None: plain
# fp32). Parameters stay fp32 in every case.
PRECISION_DTYPES: dict[str, torch.dtype | None] = {
    "fp32": None,
    "bf16": torch.bfloat16,
    "fp16": torch.float16,
}


def enable_activation_checkpointing(model: nn.Module) -> int:
    """Turn on per-layer recomputation: sets ``gradient_checkpointing = True`` on every submodule that has the
    attribute (our Encoder; Hugging Face encoders), or calls ``gradient_checkpointing_enable()``. Returns the
    number of modules switched; raises if the model has no such hook."""
    n = 0
    for m in model.modules():
        if hasattr(m, "gradient_checkpointing") and isinstance(m.gradient_checkpointing, bool):
            m.gradient_checkpointing = True
            n += 1
    if n == 0 and hasattr(model, "gradient_checkpointing_enable"):
        model.gradient_checkpointing_enable()  # type: ignore[operator]
        n = 1
    if n == 0:
        raise ValueError(
            f"{type(model).__name__} has no activation checkpointing hook (no submodule with a "
            "`gradient_checkpointing` flag and no gradient_checkpointing_enable())"
        )
    return n


def wrap_model(
    model: nn.Module,
    device: torch.device,
    dist: DistInfo,
    *,
    compile: bool = False,  # noqa: A002 - TrainerConfig's name
    activation_checkpointing: bool = False,
    find_unused_parameters: bool = False,
) -> nn.Module:
    """``model`` moved to ``device``, with activation checkpointing turned on, in DDP when the job has
    several ranks, then compiled. Returns the module to call; ``model`` itself stays the one to save."""
    if activation_checkpointing:
        n = enable_activation_checkpointing(model)
        logger.info("activation checkpointing on (%d module(s))", n)
    model.to(device)
    wrapped: nn.Module = model
    if dist.enabled:
        from torch.nn.parallel import DistributedDataParallel

        wrapped = DistributedDataParallel(
            model,
            device_ids=[device] if device.type == "cuda" else None,
            find_unused_parameters=find_unused_parameters,
        )
    if compile:
        wrapped = torch.compile(wrapped)  # type: ignore[assignment]
    return wrapped


def autocast(
    device: torch.device,
    dtype: torch.dtype | None,
    linear: str = "torch",
    cpu_attention_mode: str | None = "auto",
) -> contextlib.AbstractContextManager[Any]:
    """Autocast to ``dtype`` on ``device``; None: fp32, its linear layers on the ``linear`` library
    (`linear_backend`: torch's own is a no-op context). ``cpu_attention_mode``: how attention runs under
    autocast on the CPU (`albert_lm.runtime.attention.cpu_attention`: "gemms", "fp32" or None for torch's SDPA);
    "auto": where `cpu_attention_rule` says."""
    if dtype is None:
        return fp32_linear(linear) if linear != "torch" else contextlib.nullcontext()
    if cpu_attention_mode == "auto":
        cpu_attention_mode = cpu_attention_rule(device, dtype)
    if device.type == "cpu" and cpu_attention_mode is not None:
        return _cpu_autocast(dtype, cpu_attention_mode)
    return torch.autocast(device_type=device.type, dtype=dtype)


@contextlib.contextmanager
def _cpu_autocast(dtype: torch.dtype, attention_mode: str) -> Iterator[None]:
    with torch.autocast(device_type="cpu", dtype=dtype), cpu_attention(attention_mode):
        yield


def cpu_attention_rule(device: torch.device, dtype: torch.dtype | None, setting: str = "auto") -> str | None:
    """How attention under ``dtype`` autocast on ``device`` runs (`albert_lm.runtime.attention.cpu_attention`'s
    mode, None: torch's SDPA as it is), from the ``run.cpu_attention`` setting: "gemms" / "fp32" on a CPU
    under autocast as set, "sdpa" None; "auto": "gemms" on a CPU without AMX, where torch's bf16 CPU flash
    attention is slow (`cpu_attention_by_gemms_pays`), None elsewhere. fp32 runs and CUDA: None."""
    if device.type != "cpu" or dtype is None or setting == "sdpa":
        return None
    if setting != "auto":
        return setting
    return "gemms" if cpu_attention_by_gemms_pays() else None


def linear_backend(device: torch.device, dtype: torch.dtype | None, config: TrainerConfig) -> str:
    """The library of the fp32 linear layers (`albert_lm.runtime.fp32_linear`): for fp32 on a CPU
    ``config.fp32_linear`` (auto: measured once per process; torch's MKL GEMM is slow on AMD CPUs),
    else torch's. Not under torch.compile, which traces F.linear itself."""
    if dtype is None and device.type == "cpu" and not config.compile:
        return choose_fp32_linear(config.fp32_linear)
    return "torch"


def step_backends(
    device: torch.device, dtype: torch.dtype | None, config: TrainerConfig
) -> tuple[str, str | None]:
    """What a run's steps run on: the fp32 linear library (`linear_backend`) and the CPU attention mode
    (`cpu_attention_rule` of ``config.cpu_attention``), decided once when the trainer is built."""
    return linear_backend(device, dtype, config), cpu_attention_rule(device, dtype, config.cpu_attention)


def resumed_run(
    state: dict[str, Any], path: Any, config: TrainerConfig, linear: str, device: torch.device, dtype: Any
) -> str:
    """What a resumed run keeps of the checkpoint ``path`` (its trainer state ``state``): warns where the
    data order will differ (another ``grad_accum_steps``); returns the fp32 linear library to run on --
    where ``auto`` measured one at start-up (``linear``), the one the checkpoint ran on: the measurement can
    pick the other library on a loaded machine, the two differ in the last bits, and a resume must reproduce
    the uninterrupted run bit for bit."""
    if state.get("grad_accum_steps", 1) != config.grad_accum_steps:
        logger.warning(
            "%s was written with grad_accum_steps=%s, now %d: the data order will differ",
            path,
            state.get("grad_accum_steps"),
            config.grad_accum_steps,
        )
    saved = state.get("fp32_linear")
    measured = config.fp32_linear == "auto" and dtype is None and device.type == "cpu" and not config.compile
    if not measured or saved == linear or saved not in FP32_LINEAR_BACKENDS:
        return linear
    if saved == "onednn" and not onednn_available():
        return linear
    logger.info("fp32 linear backend %s, as the checkpoint %s ran on (auto measured %s)", saved, path, linear)
    return str(saved)
