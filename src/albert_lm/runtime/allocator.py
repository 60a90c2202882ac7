"""The process's memory allocator: glibc malloc keeps freed blocks for reuse.

A training step allocates and frees the same large tensors every step: the masked-LM logits and their
gradients (N x V), the FFN activations (B*T x I). glibc's malloc serves a block over its mmap threshold
(dynamic, never above 32 MiB on 64-bit) with a fresh ``mmap`` and unmaps it on ``free``, and it trims the
heap's top beyond the trim threshold. The next step's block is then new memory, and the kernel page-faults
on every 4 KiB page of it the first time it is touched. On the demo's step (albert-small 16x128, 38 masked
per sequence, vocabulary 16000, fp32, 2 cores) that was ~50,000 page faults per step: the fill of the
masked-LM loss's gradient and the copy of the decoder's bias, each 39 MB, ran at ~3.5 GB/s, and the step took
~12% longer than with freed memory reused (``benchmarks/bench_allocator.py`` measures both, taking turns).

`keep_freed_memory` raises both thresholds (``mallopt``; the limits are glibc's, malloc.h): blocks up to
1 GiB come from the heap, and a freed block stays there for the next step. This is what PyTorch's
performance tuning guide gets by preloading jemalloc or TCMalloc ("reusing memory as much as possible"),
without a preload. The cost: the process's resident memory stays at its peak instead of shrinking between
steps. ``ALBERT_MALLOC=system`` leaves glibc's defaults; a process whose allocator the user already chose
(``LD_PRELOAD`` of jemalloc / TCMalloc / mimalloc, or glibc's own ``MALLOC_*_`` / ``GLIBC_TUNABLES``
settings) is left as it is.
"""

from __future__ import annotations

import ctypes
import ctypes.util
import logging
import os
import platform

from albert_lm.config import ConfigError

logger = logging.getLogger(__name__)

ENV = "ALBERT_MALLOC"  # "keep" (the default) or "system"
MMAP_THRESHOLD = 1 << 30  # bytes: blocks up to 1 GiB come from the heap
TRIM_THRESHOLD = (1 << 31) - 1  # bytes: mallopt takes a C int; 2 GiB - 1 of free heap top kept
_M_TRIM_THRESHOLD, _M_MMAP_THRESHOLD = -1, -3  # glibc malloc.h
_GLIBC_ENV = ("MALLOC_MMAP_THRESHOLD_", "MALLOC_TRIM_THRESHOLD_", "MALLOC_TOP_PAD_", "MALLOC_MMAP_MAX_")
_OTHER_ALLOCATORS = ("jemalloc", "tcmalloc", "mimalloc")

_outcome: str | None = None  # what the first call did; later calls return it


def _left_as_is() -> str | None:
    """Why the allocator is left as it is, or None to tune it."""
    choice = os.environ.get(ENV, "keep").strip().lower()
    if choice not in ("keep", "system"):
        raise ConfigError(f"environment variable {ENV}={os.environ[ENV]!r}: must be 'keep' or 'system'")
    if choice == "system":
        return f"{ENV}=system"
    preload = os.environ.get("LD_PRELOAD", "")
    other = next((name for name in _OTHER_ALLOCATORS if name in preload), None)
    if other:
        return f"{other} is preloaded (LD_PRELOAD)"
    user_set = [name for name in _GLIBC_ENV if name in os.environ]
    if "glibc.malloc." in os.environ.get("GLIBC_TUNABLES", ""):
        user_set.append("GLIBC_TUNABLES")
    if user_set:
        return f"glibc malloc settings from the environment ({', '.join(user_set)})"
    if platform.system() != "Linux" or platform.libc_ver()[0] != "glibc":
        return f"not glibc ({platform.system()} {platform.libc_ver()[0] or 'libc'})"
    return None


def keep_freed_memory() -> str:
    """Make glibc malloc keep freed blocks (up to 1 GiB) for reuse instead of returning them to the kernel;
    returns what was done, in one line (logged once). Idempotent; a no-op that says why where the user chose
    the allocator or the C library is not glibc.

    Raises:
        ConfigError: ``ALBERT_MALLOC`` is neither ``keep`` nor ``system``.
    """
    global _outcome
    if _outcome is not None:
        return _outcome
    why = _left_as_is()
    if why is None:
        libc = ctypes.CDLL(ctypes.util.find_library("c") or "libc.so.6", use_errno=True)
        ok = libc.mallopt(_M_MMAP_THRESHOLD, MMAP_THRESHOLD) and libc.mallopt(
            _M_TRIM_THRESHOLD, TRIM_THRESHOLD
        )
        why = None if ok else "mallopt refused the thresholds"
    if why is None:
        _outcome = (
            "allocator: glibc malloc keeps freed blocks up to 1 GiB for reuse (each step's large tensors "
            f"no longer page-fault; resident memory stays at its peak; {ENV}=system turns this off)"
        )
        logger.info(_outcome)
    else:
        _outcome = f"allocator: left as it is ({why})"
        logger.debug(_outcome)
    return _outcome
