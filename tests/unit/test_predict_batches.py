"""`albert.tasks.base.predict`'s batches: length-sorted, at most ``batch_size``, and with ``max_padding``
cut where padding would exceed that fraction of the real tokens (once ``min_batch_tokens`` are in)."""

from __future__ import annotations

import random
from typing import Any

import numpy as np
import pytest

from albert.tasks.base import predict
from albert.tasks.collate import Batch


class PadTask:
    """The least of a task `predict` needs: ``collate`` pads ``input_ids`` to the longest."""

    def collate(self, features: list[dict[str, Any]], pad_id: int = 0) -> Batch:
        longest = max(len(f["input_ids"]) for f in features)
        ids = [f["input_ids"] + [pad_id] * (longest - len(f["input_ids"])) for f in features]
        return {"input_ids": np.array(ids)}  # type: ignore[dict-item]


def _run(lengths: list[int], **kwargs: Any) -> tuple[list[tuple[int, int]], list[int]]:
    features = [{"input_ids": [i + 1] * n} for i, n in enumerate(lengths)]
    shapes: list[tuple[int, int]] = []

    def fn(batch: Batch) -> dict[str, np.ndarray]:
        ids = np.asarray(batch["input_ids"])
        shapes.append(ids.shape)
        return {"first": ids[:, 0]}

    out = predict(PadTask(), features, fn, **kwargs)  # type: ignore[arg-type]
    return shapes, [int(o["first"]) for o in out]


def test_without_max_padding_batches_are_cut_by_count_only() -> None:
    lengths = [5, 60, 12, 33, 8, 41]
    shapes, firsts = _run(lengths, batch_size=4)
    assert shapes == [(4, 33), (2, 60)] and firsts == [1, 2, 3, 4, 5, 6]  # answers in input order


@pytest.mark.parametrize("max_padding", [0.1, 0.25])
def test_max_padding_bounds_each_batchs_padding_and_keeps_the_order(max_padding: float) -> None:
    rng = random.Random(0)
    lengths = [rng.randint(6, 60) for _ in range(32)]  # a server's batch of random sentences
    loose, _ = _run(lengths, batch_size=32)
    shapes, firsts = _run(lengths, batch_size=32, max_padding=max_padding, min_batch_tokens=64)
    assert firsts == list(range(1, 33)) and sum(n for n, _ in shapes) == 32
    real = sum(lengths)
    assert sum(n * t for n, t in loose) > 1.5 * real  # one batch: padded to the longest
    assert sum(n * t for n, t in shapes) <= (1 + max_padding) * real
    assert 1 < len(shapes) < 32


def test_min_batch_tokens_keeps_small_batches_whole() -> None:
    shapes, _ = _run([4, 8, 16, 30], batch_size=32, max_padding=0.1, min_batch_tokens=256)
    assert shapes == [(4, 30)]  # 58 real tokens: too few to be worth another model call
