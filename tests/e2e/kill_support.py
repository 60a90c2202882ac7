"""The SIGKILL half of the exact-resume tests: watch a run's metrics.jsonl, kill it after a logged step."""

from __future__ import annotations

import json
import signal
import subprocess
import time
from pathlib import Path


def last_step(run_dir: Path) -> int:
    """The step of the last record of ``run_dir/metrics.jsonl`` (0 before the first, or mid-write)."""
    try:
        lines = (run_dir / "metrics.jsonl").read_text().splitlines()
        return json.loads(lines[-1])["step"] if lines else 0
    except (FileNotFoundError, json.JSONDecodeError):
        return 0


def sigkill_after(proc: subprocess.Popen, run_dir: Path, step: int, timeout_s: float = 300.0) -> int:
    """SIGKILL ``proc`` once ``run_dir`` has logged ``step`` (or it ended, or ``timeout_s`` passed); returns
    the last logged step."""
    deadline = time.time() + timeout_s
    while last_step(run_dir) < step and proc.poll() is None and time.time() < deadline:
        time.sleep(0.002)
    proc.send_signal(signal.SIGKILL)
    proc.wait()
    return last_step(run_dir)
