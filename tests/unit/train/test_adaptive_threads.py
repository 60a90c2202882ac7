"""The thread count of a long run is re-decided while it runs (`albert_lm.train.threads.ThreadTuner`):
every N minutes each candidate count is timed on a few of the run's own steps and the fastest kept, with a
log line when the count changes. A fake clock and a fake machine whose speed per thread count changes."""

from __future__ import annotations

import logging

import pytest
import torch

from albert_lm.train.threads import FixedThreads, ThreadTuner, candidate_counts, thread_tuner


class Machine:
    """Step seconds by thread count (changed by the test), a clock advanced by each step."""

    def __init__(self, seconds: dict[int, float], threads: int) -> None:
        self.seconds, self.threads, self.now = seconds, threads, 0.0

    def clock(self) -> float:
        return self.now

    def set_threads(self, n: int) -> None:
        self.threads = n

    def run(self, tuner: ThreadTuner, steps: int) -> None:
        for _ in range(steps):
            self.now += self.seconds[self.threads]
            tuner.after_step()


def _tuner(m: Machine, every_s: float = 60.0) -> ThreadTuner:
    return ThreadTuner(every_s, [1, 2], probe_steps=3, clock=m.clock, get_threads=lambda: m.threads,
                       set_threads=m.set_threads)  # fmt: skip


def test_a_busy_core_at_the_start_does_not_keep_one_thread_for_the_run(caplog):
    m = Machine({1: 1.0, 2: 1.5}, threads=1)  # the other core busy: one thread is faster
    tuner = _tuner(m)
    m.run(tuner, 70)  # past the first decision
    assert m.threads == 1 and tuner.decisions[0][0] == 1
    m.seconds = {1: 1.0, 2: 0.6}  # the other core is free now
    with caplog.at_level(logging.INFO, logger="albert_lm.train.threads"):
        m.run(tuner, 100)
    assert m.threads == 2 and tuner.decisions[-1][0] == 2
    assert tuner.decisions[-1][1] == pytest.approx({1: 1.0, 2: 0.6})
    assert "threads 1 -> 2" in caplog.text
    m.seconds = {1: 1.0, 2: 3.0}  # busy again: back to one
    m.run(tuner, 200)
    assert m.threads == 1


def test_decisions_come_every_period_and_a_step_that_saved_does_not_decide():
    m = Machine({1: 2.0, 2: 1.0}, threads=2)
    tuner = _tuner(m, every_s=100.0)
    m.run(tuner, 49)  # 49 s: no decision yet
    assert tuner.decisions == []
    m.run(tuner, 60)
    assert len(tuner.decisions) == 1 and m.threads == 2
    # one probe step at 2 threads also wrote a checkpoint (30 s): the median keeps it from deciding
    slow = iter([30.0])
    start = len(tuner.decisions)
    while len(tuner.decisions) == start:
        m.now += next(slow, m.seconds[m.threads]) if m.threads == 2 and tuner._probe else m.seconds[m.threads]
        tuner.after_step()
    assert tuner.decisions[-1][0] == 2


def test_off_by_default_and_on_one_core():
    assert isinstance(thread_tuner(None, torch.device("cpu")), FixedThreads)
    assert isinstance(thread_tuner(5.0, torch.device("meta")), FixedThreads)
    assert candidate_counts(1) == [1] and candidate_counts(2) == [1, 2] and candidate_counts(16) == [1, 8, 16]
    with pytest.raises(ValueError):
        ThreadTuner(0, [1, 2])


def test_the_setting_reaches_the_trainer_and_is_checked():
    from albert_lm.config import ConfigError
    from albert_lm.train import TrainerConfig
    from albert_lm.train.settings import OptimSettings, RunSettings

    cfg = TrainerConfig.from_settings(
        RunSettings(adaptive_threads_minutes=5.0), OptimSettings(), max_steps=10
    )
    assert cfg.adaptive_threads_minutes == 5.0
    with pytest.raises(ConfigError, match="adaptive_threads_minutes"):
        TrainerConfig(max_steps=10, adaptive_threads_minutes=-1.0)
