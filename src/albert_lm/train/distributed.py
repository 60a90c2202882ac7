"""torch.distributed set-up for `torchrun` launches (DDP): NCCL on GPUs, gloo on CPU.

``torchrun --nproc_per_node=N`` (one node) or ``torchrun --nnodes=M --node_rank=R --master_addr=HOST
--master_port=PORT --nproc_per_node=N`` (several) set ``RANK``, ``LOCAL_RANK``, ``WORLD_SIZE``,
``MASTER_ADDR`` and ``MASTER_PORT``; `init_distributed` reads them. Without them it returns a
single-process `DistInfo` and touches nothing, so the same code runs with and without torchrun.

Only rank 0 writes files and logs at INFO (`rank_zero_logging` lowers the others to WARNING). SIGINT and
SIGTERM (Ctrl-C, a scheduler or torchrun stopping the job) become stop requests (`stop_on_signals`).

A process that joined a process group ends through `exit_process` (the CLI and the test scripts call it):
logs and stdio flushed, then ``os._exit``, skipping the interpreter's finalization (see there why).
"""

from __future__ import annotations

import contextlib
import datetime
import logging
import os
import signal
import sys
import threading
from collections.abc import Callable, Iterator
from dataclasses import dataclass
from typing import Any

import torch
import torch.distributed as dist

from albert_lm.runtime.device import pick_device

logger = logging.getLogger(__name__)

_joined = False
"""Whether this process joined a process group (then it must end through `exit_process`)."""


@dataclass(frozen=True)
class DistInfo:
    """Where this process sits in the job."""

    rank: int = 0
    world_size: int = 1
    local_rank: int = 0
    device: torch.device = torch.device("cpu")
    backend: str | None = None

    @property
    def is_main(self) -> bool:
        return self.rank == 0

    @property
    def enabled(self) -> bool:
        return self.world_size > 1


def init_distributed(device: str | torch.device | None = None, timeout_s: float = 1800.0) -> DistInfo:
    """Join the process group when launched by torchrun (idempotent); else a single-process `DistInfo`.

    Args:
        device: ``"cpu"``, ``"cuda"``, ``"auto"``/None (GPU if available). The backend follows: NCCL for
            CUDA, gloo for CPU.
        timeout_s: collective timeout.
    """
    world_size = int(os.environ.get("WORLD_SIZE", "1"))
    rank = int(os.environ.get("RANK", "0"))
    local_rank = int(os.environ.get("LOCAL_RANK", "0"))
    dev = pick_device(device, local_rank)
    if dev.type == "cuda":
        torch.cuda.set_device(dev)
    if world_size <= 1:
        return DistInfo(device=dev)
    backend = "nccl" if dev.type == "cuda" else "gloo"
    if not dist.is_initialized():
        kwargs: dict[str, Any] = {}
        if dev.type == "cuda":
            kwargs["device_id"] = dev
        dist.init_process_group(backend=backend, timeout=datetime.timedelta(seconds=timeout_s), **kwargs)
    global _joined
    _joined = True
    info = DistInfo(rank=rank, world_size=world_size, local_rank=local_rank, device=dev, backend=backend)
    logger.info("rank %d/%d on %s (%s)", rank, world_size, dev, backend)
    return info


def destroy_distributed() -> None:
    """Leave the process group if one was joined."""
    if dist.is_available() and dist.is_initialized():
        dist.destroy_process_group()


def exit_process(rc: int) -> int:
    """End a process that joined a process group with exit status ``rc``, without the interpreter's
    finalization; in any other process return ``rc`` (the caller exits as usual).

    Why: gloo's worker threads outlive `destroy_process_group` once a DDP was built, and one of them may
    drop the last reference to a finished collective (the final checkpoint's ``gather_object`` /
    ``barrier``, whose tensors Python owns) while the interpreter finalizes; taking the GIL then ends the
    thread inside a C++ destructor: "terminate called without an active exception", SIGABRT, exit 1
    after a finished run, and torchrun SIGTERMs the other ranks (4 of 66 two-rank smoke pretraining runs).
    With ``os._exit`` after the group is left there is no finalization to race with, so the work that
    needs it is done here: the group left, every logging handler flushed and closed, stdout and
    stderr flushed. Nothing else in this package relies on atexit.
    """
    if not _joined:
        return rc
    try:
        destroy_distributed()
    finally:
        logging.shutdown()
        for stream in (sys.stdout, sys.stderr):
            with contextlib.suppress(Exception):  # a closed or broken pipe: nothing more to flush
                stream.flush()
        os._exit(rc)


def barrier(info: DistInfo) -> None:
    if info.enabled:
        dist.barrier()


def all_reduce_sum(t: torch.Tensor, info: DistInfo) -> torch.Tensor:
    """Sum over ranks (in place; returns ``t``); a no-op for a single process."""
    if info.enabled:
        dist.all_reduce(t, op=dist.ReduceOp.SUM)
    return t


def gather_objects(obj: Any, info: DistInfo) -> list[Any] | None:
    """Every rank's ``obj`` on rank 0 (a list indexed by rank); None on the other ranks."""
    if not info.enabled:
        return [obj]
    out: list[Any] | None = [None] * info.world_size if info.is_main else None
    dist.gather_object(obj, out, dst=0)
    return out


@contextlib.contextmanager
def stop_on_signals(request: Callable[[int], None]) -> Iterator[None]:
    """While inside, SIGINT / SIGTERM call ``request(signum)`` instead of ending the process; a second one
    acts at once. The previous handlers come back on exit. Outside the main thread (where Python cannot
    install handlers) nothing changes."""
    if threading.current_thread() is not threading.main_thread():
        yield
        return

    def handler(signum: int, frame: Any) -> None:
        request(signum)
        logger.warning("%s received: stopping after this step", signal.Signals(signum).name)
        signal.signal(signum, signal.default_int_handler if signum == signal.SIGINT else signal.SIG_DFL)

    old = {sig: signal.signal(sig, handler) for sig in (signal.SIGINT, signal.SIGTERM)}
    try:
        yield
    finally:
        for sig, h in old.items():
            signal.signal(sig, h)


class _RankFilter(logging.Filter):
    def __init__(self, rank: int) -> None:
        super().__init__()
        self.rank = rank

    def filter(self, record: logging.LogRecord) -> bool:
        prefix = f"[rank {self.rank}] "
        if not str(record.msg).startswith(prefix):
            record.msg = prefix + str(record.msg)
        return record.levelno >= logging.WARNING


def rank_zero_logging(info: DistInfo) -> None:
    """On ranks other than 0, let only warnings and errors through (prefixed with the rank)."""
    if info.rank == 0:
        return
    root = logging.getLogger()
    for handler in root.handlers:
        if not any(isinstance(f, _RankFilter) for f in handler.filters):
            handler.addFilter(_RankFilter(info.rank))
