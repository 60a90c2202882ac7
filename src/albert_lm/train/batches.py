"""The trainer's view of the data: an iterable of batches re-iterated as epochs, with a resumable position."""

from __future__ import annotations

import logging
from collections.abc import Iterable, Iterator, Mapping
from typing import Any

import torch
from torch import Tensor

logger = logging.getLogger(__name__)

Batch = Mapping[str, Any]


def batch_tokens(batch: Batch) -> int:
    """Tokens in a batch: numel of input_ids (padding included, as the reference counts), else of the first
    tensor."""
    t = batch.get("input_ids")
    if isinstance(t, Tensor):
        return t.numel()
    for v in batch.values():
        if isinstance(v, Tensor):
            return v.numel()
    return 0


def to_device(batch: Batch, device: torch.device) -> dict[str, Any]:
    """The tensors of ``batch`` on ``device`` (asynchronous copies to a GPU); other values as they are."""
    nb = device.type == "cuda"
    return {k: (v.to(device, non_blocking=nb) if isinstance(v, Tensor) else v) for k, v in batch.items()}


class Epochs:
    """Batches of an iterable, started again at each epoch, and where the reading stands.

    The position a checkpoint saves is ``epoch`` and ``batch_in_epoch``, plus the state of the data-state
    object when there is one: ``data_state`` (anything with ``state_dict()`` / ``load_state_dict()``, e.g.
    the pretraining dataset), by default the iterable itself when it has them. Such an object keeps its own
    epoch and position. A plain iterable instead gets ``set_epoch(epoch)`` (on itself, its ``sampler`` or
    its ``batch_sampler``) for its shuffle, and a resumed run skips the batches the epoch already gave
    (exact when the order per epoch is deterministic).
    """

    def __init__(self, data_state: Any = None) -> None:
        self.data_state = data_state
        self.batches: Iterable[Batch] = ()
        self.epoch = 0
        self.batch_in_epoch = 0
        self.consumed = 0  # batches read in the whole run (saved as the trainer state's batches_read)
        self._iter: Iterator[Batch] | None = None
        self._skip = 0

    def read(self, batches: Iterable[Batch]) -> None:
        """Read from ``batches`` from now on."""
        self.batches = batches

    def stateful(self) -> Any:
        """The object whose state_dict() is the data position, or None."""
        if self.data_state is not None:
            return self.data_state
        if hasattr(self.batches, "state_dict") and hasattr(self.batches, "load_state_dict"):
            return self.batches
        return None

    def state_dict(self) -> Any:
        data = self.stateful()
        return data.state_dict() if data is not None else None

    def restore(self, epoch: int, batch_in_epoch: int, data: Any) -> None:
        """Continue at a checkpoint's position (``data``: its data state, or None)."""
        self.epoch, self.batch_in_epoch = epoch, batch_in_epoch
        obj = self.stateful()
        if obj is not None and data is not None:
            obj.load_state_dict(data)
            return
        self._skip = batch_in_epoch
        if self._skip:
            logger.info("resume: no data state; skipping %d batches of epoch %d", self._skip, epoch)

    def _start_epoch(self) -> Iterator[Batch]:
        # A stateful iterable keeps its own epoch and position (set_epoch would rewind a restored
        # position); a plain one gets the epoch for its shuffle.
        if self.stateful() is None:
            for obj in (
                self.batches,
                *(getattr(self.batches, a, None) for a in ("sampler", "batch_sampler")),
            ):
                if obj is not None and hasattr(obj, "set_epoch"):
                    obj.set_epoch(self.epoch)
                    break
        it = iter(self.batches)
        while self._skip > 0:  # resume without a data state: skip what the epoch already gave
            next(it)
            self._skip -= 1
        return it

    def next(self) -> Batch:
        """The next batch; at the end of the iterable the next epoch starts."""
        fresh_epoch = False
        while True:
            if self._iter is None:
                self._iter = self._start_epoch()
                fresh_epoch = True
            try:
                batch = next(self._iter)
            except StopIteration:
                if fresh_epoch and self.batch_in_epoch == 0:
                    raise ValueError("the batch iterable yielded no batch") from None
                self.epoch += 1
                self.batch_in_epoch = 0
                self._iter = None
                continue
            self.batch_in_epoch += 1
            self.consumed += 1
            return batch
