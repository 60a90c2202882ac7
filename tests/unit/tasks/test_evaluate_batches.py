"""`albert_lm.tasks.evaluate.predict`'s batches: length-sorted, at most ``batch_size``, answers in input order; with
``call_cost_tokens`` cut where padded tokens plus a cost per call are least (`cheapest_batches`)."""

from __future__ import annotations

import itertools
import random
from typing import Any

import numpy as np
import pytest

from albert_lm.tasks.collate import Batch, cheapest_batches
from albert_lm.tasks.evaluate import predict


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


def _cost(lengths: list[int], ends: list[int], call_cost: float) -> float:
    starts = [0, *ends[:-1]]
    return sum(call_cost + (e - s) * lengths[e - 1] for s, e in zip(starts, ends))


def test_without_a_call_cost_batches_are_cut_by_count_only() -> None:
    lengths = [5, 60, 12, 33, 8, 41]
    shapes, firsts = _run(lengths, batch_size=4)
    assert shapes == [(4, 33), (2, 60)] and firsts == [1, 2, 3, 4, 5, 6]  # answers in input order


@pytest.mark.parametrize("seed", range(6))
@pytest.mark.parametrize("call_cost", [0, 8, 40])
def test_cheapest_batches_is_the_least_cost_of_every_partition(seed: int, call_cost: int) -> None:
    rng = random.Random(seed)
    lengths = sorted(rng.randint(3, 60) for _ in range(10))
    batch_size = 4
    ends = cheapest_batches(lengths, batch_size, call_cost)
    assert ends[-1] == len(lengths) and all(0 < e - s <= batch_size for s, e in zip([0, *ends], ends))
    every = []  # all 2^9 ways to cut 10 sorted lengths, those with no batch over batch_size
    for cuts in itertools.product([False, True], repeat=len(lengths) - 1):
        candidate = [i + 1 for i, cut in enumerate(cuts) if cut] + [len(lengths)]
        if all(e - s <= batch_size for s, e in zip([0, *candidate], candidate)):
            every.append(_cost(lengths, candidate, call_cost))
    assert _cost(lengths, ends, call_cost) == min(every)


def test_a_servers_random_batch_costs_little_more_than_its_real_tokens() -> None:
    rng = random.Random(0)
    lengths = [rng.randint(6, 60) for _ in range(32)]  # a server's batch of random sentences
    loose, _ = _run(lengths, batch_size=32)
    shapes, firsts = _run(lengths, batch_size=32, call_cost_tokens=32)
    assert firsts == list(range(1, 33)) and sum(n for n, _ in shapes) == 32
    real = sum(lengths)
    assert sum(n * t for n, t in loose) > 1.5 * real  # one batch: padded to the longest
    assert sum(n * t for n, t in shapes) <= 1.15 * real
    assert 1 < len(shapes) < 32


def test_a_high_call_cost_keeps_small_batches_whole_and_zero_leaves_no_padding() -> None:
    shapes, _ = _run([4, 8, 16, 30], batch_size=32, call_cost_tokens=256)
    assert shapes == [(4, 30)]  # another call would cost more than the 62 padded tokens it saves
    shapes, _ = _run([4, 8, 8, 30, 30], batch_size=32, call_cost_tokens=0)
    assert sorted(shapes) == [(1, 4), (2, 8), (2, 30)]


def test_batches_never_mix_group_keys(monkeypatch: pytest.MonkeyPatch) -> None:
    import albert_lm.tasks.evaluate as base

    monkeypatch.setattr(base, "group_key", lambda f: f["input_ids"][0] % 2)  # odd / even features apart
    shapes, firsts = _run([10, 11, 12, 13, 14, 15], batch_size=32, call_cost_tokens=1000)
    assert sorted(shapes) == [(3, 14), (3, 15)] and firsts == [1, 2, 3, 4, 5, 6]
