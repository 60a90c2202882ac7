"""`MicroBatcher` behind a slow fake model: concurrent requests share model calls and each gets its own
answers."""

from __future__ import annotations

import asyncio
import time

from albert.serve.batcher import MicroBatcher


class SlowModel:
    """A batch function that takes ``seconds`` per call, answers ``x -> f"label of {x}"`` and records the
    inputs of each call."""

    def __init__(self, seconds: float) -> None:
        self.seconds = seconds
        self.calls: list[list[int]] = []

    def __call__(self, batch: list[int]) -> list[str]:
        self.calls.append(list(batch))
        time.sleep(self.seconds)
        return [f"label of {x}" for x in batch]


def test_concurrent_requests_behind_a_slow_model_share_calls_and_keep_their_answers() -> None:
    n = 48
    model = SlowModel(seconds=0.1)

    async def scenario() -> list[list[str]]:
        batcher: MicroBatcher[int, str] = MicroBatcher(model, max_batch=32, max_wait_s=0.0)

        async def client(i: int) -> list[str]:
            await asyncio.sleep(0.001 * i)  # arriving one after another, while the model is busy
            return await batcher.submit([2 * i, 2 * i + 1])

        answers = await asyncio.gather(*(client(i) for i in range(n)))
        await batcher.close()
        assert (batcher.batches, batcher.inputs) == (len(model.calls), 2 * n)
        return answers

    answers = asyncio.run(scenario())
    assert answers == [[f"label of {2 * i}", f"label of {2 * i + 1}"] for i in range(n)]
    assert len(model.calls) <= n / 4, [len(c) for c in model.calls]
    assert max(len(c) for c in model.calls) <= 32
    assert sorted(x for c in model.calls for x in c) == list(range(2 * n))  # each input computed once
