"""`albert` with a fake training clock, for exact-resume tests of the time-based schedule (schedule.by=time).

The trainer's ``time.perf_counter`` is replaced by a clock that stands still except when a training batch
is accumulated, which advances it by 1 s. The clock starts at
``ALBERT_FAKE_CLOCK_START`` (default 0): a resumed process is given another start, so only the training
time saved in the checkpoint can carry the schedule over. Everything else is the real CLI.

    python tests/e2e/fake_clock_cli.py pretrain ...
"""

from __future__ import annotations

import os
import sys
import time as real_time
from typing import Any


class FakeClock:
    """Stands in for the ``time`` module inside `albert_lm.train.trainer`."""

    def __init__(self, start: float) -> None:
        self.now = start

    def perf_counter(self) -> float:
        return self.now

    def __getattr__(self, name: str) -> Any:
        return getattr(real_time, name)


def main() -> int:
    from albert_lm.cli.main import main as albert_main
    from albert_lm.train import trainer

    clock = FakeClock(float(os.environ.get("ALBERT_FAKE_CLOCK_START", "0")))
    trainer.time = clock  # type: ignore[assignment]
    accumulate = trainer.Trainer._accumulate

    def timed_accumulate(self: Any, model: Any) -> Any:
        clock.now += 1.0
        return accumulate(self, model)

    trainer.Trainer._accumulate = timed_accumulate  # type: ignore[method-assign]
    return albert_main(sys.argv[1:])


if __name__ == "__main__":
    sys.exit(main())
