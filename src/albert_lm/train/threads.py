"""The CPU thread count of a long run, re-decided while it runs (``run.adaptive_threads_minutes``).

A thread count chosen once at the start (torch's default, or a guess from a moment's CPU load) stays
wrong for the whole run when the machine's load changes: on a 2-core machine where the other core was busy
at the start, a run kept one thread for ten minutes at two thirds of the speed two threads gave once the
core was free. `ThreadTuner` instead times the run's own steps: every ``every_s`` seconds it runs
``probe_steps`` steps at each candidate count (1, half the cores, all of them), keeps the count whose
median step was fastest, and logs when that changes the count. The probes are training steps like the
others (nothing is computed twice); the median keeps a step that also evaluated or saved from deciding.
"""

from __future__ import annotations

import logging
import os
import statistics
import time
from collections.abc import Callable, Sequence

import torch

logger = logging.getLogger(__name__)


def candidate_counts(cores: int | None = None) -> list[int]:
    """1, half the cores and all of them (distinct, ascending): the counts worth timing."""
    n = max(1, cores if cores is not None else len(os.sched_getaffinity(0)))
    return sorted({1, max(1, n // 2), n})


class ThreadTuner:
    """Re-decides the intra-op thread count every ``every_s`` seconds of a run (see the module docstring).

    Args:
        every_s: seconds between decisions (the first comes this long after the start).
        candidates: the thread counts to time.
        probe_steps: steps timed at each candidate.
        clock: seconds, monotonic (a fake one in tests).
        get_threads / set_threads: read / set the count (`torch.get_num_threads` / `torch.set_num_threads`).
    """

    def __init__(
        self,
        every_s: float,
        candidates: Sequence[int],
        probe_steps: int = 3,
        clock: Callable[[], float] = time.monotonic,
        get_threads: Callable[[], int] = torch.get_num_threads,
        set_threads: Callable[[int], None] = torch.set_num_threads,
    ) -> None:
        if not every_s > 0 or probe_steps < 1 or not candidates:
            raise ValueError("ThreadTuner: every_s > 0, probe_steps >= 1 and some candidates are required")
        self.every_s, self.candidates, self.probe_steps = every_s, list(candidates), probe_steps
        self.clock, self.get_threads, self.set_threads = clock, get_threads, set_threads
        self._next_decision = clock() + every_s
        self._probe: list[int] = []  # counts still to time in the running decision
        self._times: dict[int, list[float]] = {}
        self._before = get_threads()
        self._last = clock()
        self.decisions: list[tuple[int, dict[int, float]]] = []
        """Each decision: the count kept, and the median step seconds of each candidate."""

    def after_step(self) -> None:
        """Call once per optimizer step, after it."""
        now = self.clock()
        took, self._last = now - self._last, now
        if self._probe:
            count = self.get_threads()
            self._times.setdefault(count, []).append(took)
            if len(self._times[count]) >= self.probe_steps:
                self._probe.pop(0)
                if self._probe:
                    self.set_threads(self._probe[0])
                else:
                    self._decide()
            self._last = self.clock()
        elif now >= self._next_decision:
            self._before = self.get_threads()
            self._probe, self._times = list(self.candidates), {}
            self.set_threads(self._probe[0])
            self._last = self.clock()

    def _decide(self) -> None:
        medians = {c: statistics.median(t) for c, t in self._times.items()}
        best = min(medians, key=lambda c: (medians[c], c))  # a tie: fewer threads
        self.set_threads(best)
        self.decisions.append((best, medians))
        if best != self._before:
            shown = ", ".join(f"{c}: {1000 * s:.0f} ms" for c, s in sorted(medians.items()))
            logger.info("threads %d -> %d (median step at %s)", self._before, best, shown)
        self._next_decision = self.clock() + self.every_s


class FixedThreads:
    """The thread count of the start, kept (``run.adaptive_threads_minutes`` null, or not on a CPU)."""

    def after_step(self) -> None:
        """Nothing to re-decide."""


def thread_tuner(minutes: float | None, device: torch.device) -> ThreadTuner | FixedThreads:
    """The run's `ThreadTuner` for ``run.adaptive_threads_minutes``; `FixedThreads` when off, not on a CPU,
    or with one core."""
    if not minutes or device.type != "cpu" or len(candidate_counts()) < 2:
        return FixedThreads()
    return ThreadTuner(minutes * 60, candidate_counts())
