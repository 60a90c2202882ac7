"""`MicroBatcher` behind a slow fake model: concurrent requests share model calls and each gets its own
answers."""

from __future__ import annotations

import asyncio
import threading
import time

import pytest

from albert_lm.serve.app import model_thread
from albert_lm.serve.batcher import MicroBatcher


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


def test_the_batch_function_runs_in_the_thread_that_loaded_the_model() -> None:
    # libgomp gives each thread that runs a parallel op its own team: the model must run where it was loaded
    executor = model_thread()
    loaded_in = executor.submit(threading.get_ident).result()
    ran_in: list[int] = []

    def fn(batch: list[int]) -> list[int]:
        ran_in.append(threading.get_ident())
        return [x + 1 for x in batch]

    async def scenario() -> list[list[int]]:
        batcher: MicroBatcher[int, int] = MicroBatcher(fn, max_batch=4, max_wait_s=0.0, executor=executor)
        answers = await asyncio.gather(*(batcher.submit([i, i + 10]) for i in range(6)))
        await batcher.close()
        return answers

    assert asyncio.run(scenario()) == [[i + 1, i + 11] for i in range(6)]
    assert ran_in and set(ran_in) == {loaded_in} and loaded_in != threading.get_ident()
    with pytest.raises(RuntimeError):  # `close` shut the executor down with the batcher
        executor.submit(threading.get_ident)


def test_albert_serve_loads_and_runs_the_model_in_one_thread(monkeypatch, tmp_path) -> None:
    import albert_lm.serve.app as app
    from albert_lm.cli.main import main
    from albert_lm.infer.predictor import Predictor

    seen: dict[str, int] = {}

    def load(*args: object, **kwargs: object) -> str:
        seen["load"] = threading.get_ident()
        return "predictor"

    def run_server(predictor: str, config: object, executor: object) -> None:
        assert predictor == "predictor"
        seen["run"] = executor.submit(threading.get_ident).result()  # type: ignore[attr-defined]

    monkeypatch.setattr(Predictor, "load", staticmethod(load))
    monkeypatch.setattr(app, "run_server", run_server)
    assert main(["serve", "--model", str(tmp_path)]) == 0
    assert seen["load"] == seen["run"] != threading.get_ident()
