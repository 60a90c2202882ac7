"""Which precision a run uses: ``auto`` resolves to bf16 where the device runs it natively, else fp32.

One resolver, `resolve_precision`, for pretraining and fine-tuning (the `Trainer` calls it). bf16 autocast
pays off only on hardware with bf16 arithmetic: CUDA GPUs that support it natively (Ampere and later), and
x86 CPUs with AVX-512 BF16 or AMX. Elsewhere PyTorch emulates it, and on a CPU the emulation costs far more
than it saves: one albert-base training step (8 x 128) on an AMD EPYC without AVX-512 BF16 took 12.7 s in
fp32 and 239 s under bf16 autocast (measured with ``benchmarks/bench_model.py``), about
`EMULATED_CPU_BF16_SLOWDOWN` times slower. So ``auto`` picks fp32 there, and an explicit ``bf16`` warns.

The CPU's features come from torch's own CPU probe (``torch.cpu.get_capabilities()`` in recent releases,
``torch.cpu._is_avx512_bf16_supported()`` / ``_is_amx_tile_supported()`` in older ones), else from the
flags of ``/proc/cpuinfo``.
"""

from __future__ import annotations

import functools
import logging
from pathlib import Path

import torch

from albert_lm.runtime.choices import PRECISIONS

logger = logging.getLogger(__name__)

# CPU features that make bf16 matmuls native (x86: AVX-512 BF16 dot products, AMX tiles with bf16).
NATIVE_CPU_BF16 = ("avx512_bf16", "amx_bf16")
# benchmarks/bench_model.py train-*-8x128 on albert-base, AMD EPYC without avx512_bf16:
# fp32 12.7 s per step, bf16 autocast 239 s (transformers: 16.1 s and 228 s) -> ~19x
EMULATED_CPU_BF16_SLOWDOWN = 19
CPUINFO = Path("/proc/cpuinfo")

_logged: set[str] = set()  # messages already logged by this process ("logged once")


def _log_once(level: int, message: str) -> None:
    if message not in _logged:
        _logged.add(message)
        logger.log(level, message)


def _cpuinfo_flags(path: Path = CPUINFO) -> set[str]:
    """The ``flags`` of the first processor in ``/proc/cpuinfo`` (empty where there is no such file)."""
    try:
        text = path.read_text(encoding="ascii", errors="replace")
    except OSError:
        return set()
    for line in text.splitlines():
        key, sep, value = line.partition(":")
        if sep and key.strip() == "flags":
            return set(value.split())
    return set()


def cpu_bf16_features() -> list[str]:
    """The features of this CPU among `NATIVE_CPU_BF16` (empty: bf16 would be emulated)."""
    found: set[str] = set()
    capabilities = getattr(torch.cpu, "get_capabilities", None)
    if capabilities is not None:  # torch >= 2.9
        caps = capabilities()
        found.update(f for f in NATIVE_CPU_BF16 if caps.get(f))
    else:
        if getattr(torch.cpu, "_is_avx512_bf16_supported", lambda: False)():
            found.add("avx512_bf16")
        if getattr(torch.cpu, "_is_amx_tile_supported", lambda: False)():
            found.add("amx_bf16")  # every AMX CPU so far has AMX-BF16 with its tiles
    found.update(f for f in NATIVE_CPU_BF16 if f in _cpuinfo_flags())
    return sorted(found)


@functools.cache
def cpu_attention_by_gemms_pays() -> bool:
    """Whether attention under bf16 autocast on this CPU should run as bf16 GEMMs around an fp32 softmax
    rather than torch's flash kernel: where the CPU has no AMX. torch's CPU flash attention takes its fast
    bf16 path only on AMX tiles (`albert_lm.runtime.attention.cpu_attention`). Decided and logged once
    per process (the trainer asks at every step)."""
    pays = "amx_bf16" not in cpu_bf16_features()
    if pays:
        _log_once(
            logging.INFO,
            "attention as bf16 GEMMs around an fp32 softmax under bf16 autocast: this CPU has no AMX, where "
            "torch's bf16 CPU flash attention is slower than its fp32 kernel and both are slower than the GEMMs",
        )
    return pays


def cpu_capability() -> str:
    """One line about this CPU for logs and benchmarks, e.g. ``AMD EPYC, x86_64, AVX512, native bf16:
    avx512_bf16`` (torch's dispatch level from ``torch.backends.cpu.get_cpu_capability()``)."""
    capabilities = getattr(torch.cpu, "get_capabilities", None)
    caps = capabilities() if capabilities is not None else {}
    parts = [str(caps[k]) for k in ("cpu_name", "architecture") if caps.get(k)]
    parts.append(torch.backends.cpu.get_cpu_capability())
    native = cpu_bf16_features()
    parts.append(f"native bf16: {', '.join(native)}" if native else "no native bf16")
    return ", ".join(parts)


def _cuda_bf16(device: torch.device) -> tuple[bool, str]:
    index = device.index if device.index is not None else torch.cuda.current_device()
    name = torch.cuda.get_device_name(index)
    major, minor = torch.cuda.get_device_capability(index)
    try:
        native = torch.cuda.is_bf16_supported(including_emulation=False)
    except TypeError:  # torch < 2.3 has no including_emulation: bf16 there means native (sm_80+)
        native = torch.cuda.is_bf16_supported()
    what = "supports" if native else "does not support"
    return native, f"{name} (compute capability {major}.{minor}) {what} bf16 natively"


def native_bf16(device: torch.device | str) -> tuple[bool, str]:
    """Whether ``device`` runs bf16 natively, and why (the reason that `resolve_precision` logs)."""
    device = torch.device(device)
    if device.type == "cuda":
        return _cuda_bf16(device)
    if device.type == "cpu":
        features = cpu_bf16_features()
        if features:
            return True, f"the CPU has {' and '.join(features)}"
        return False, (
            f"the CPU ({cpu_capability()}) has neither AVX-512 BF16 nor AMX, so bf16 would be emulated "
            f"(~{EMULATED_CPU_BF16_SLOWDOWN}x slower than fp32, measured)"
        )
    return False, f"no native-bf16 check for {device.type} devices"


def resolve_precision(requested: str, device: torch.device | str) -> str:
    """The precision a run on ``device`` uses: ``requested`` unless it is ``auto``.

    ``auto`` is bf16 where ``device`` runs it natively (see `native_bf16`), else fp32; the choice and its
    reason are logged once. An explicit ``bf16`` on a CPU without native bf16 is kept but warned about.

    Raises:
        ValueError: ``requested`` is none of `albert_lm.runtime.choices.PRECISIONS`.
    """
    if requested not in PRECISIONS:
        raise ValueError(f"precision must be one of {', '.join(PRECISIONS)} (got {requested!r})")
    device = torch.device(device)
    if requested == "auto":
        native, reason = native_bf16(device)
        resolved = "bf16" if native else "fp32"
        _log_once(logging.INFO, f"precision auto -> {resolved} on {device}: {reason}")
        return resolved
    if requested == "bf16" and device.type == "cpu" and not cpu_bf16_features():
        _log_once(
            logging.WARNING,
            f"precision bf16 on a CPU without native bf16 ({cpu_capability()}): autocast emulates it, about "
            f"{EMULATED_CPU_BF16_SLOWDOWN}x slower than fp32 (measured: an albert-base step 239 s vs 12.7 s); "
            "use precision auto or fp32",
        )
    return requested
