"""benchmarks/gpu_check.py: the CUDA check refuses a machine without CUDA with exit 2 and a message, and its
--smoke mode runs every part of the check on the CPU and prints each figure."""

from __future__ import annotations

import os
import subprocess
import sys
from pathlib import Path

import pytest
import torch

SCRIPT = Path(__file__).resolve().parents[3] / "benchmarks" / "gpu_check.py"


def _run(*args: str) -> subprocess.CompletedProcess[str]:
    env = dict(os.environ, PYTHONPATH=str(SCRIPT.parents[1] / "src"), OMP_NUM_THREADS="1")
    return subprocess.run(
        [sys.executable, str(SCRIPT), *args], capture_output=True, text=True, env=env, timeout=600
    )


@pytest.mark.skipif(torch.cuda.is_available(), reason="this machine has CUDA")
def test_without_cuda_exits_2_with_a_message() -> None:
    proc = _run()
    assert proc.returncode == 2
    assert "gpu_check: no CUDA device" in proc.stderr and "--smoke" in proc.stderr
    assert "Traceback" not in proc.stderr


def _smoke_lines(*args: str) -> list[str]:
    proc = _run("--smoke", *args)
    assert proc.returncode == 0, proc.stderr[-2000:]
    return proc.stdout.splitlines()


def test_smoke_prints_tokens_mfu_kernels_and_the_pair() -> None:
    lines = _smoke_lines("--no-compile")
    step = next(line for line in lines if line.startswith("pretraining step:"))
    assert "tokens/s" in step and "MFU" in step
    kernels = [line for line in lines if line.startswith("SDPA kernel")]
    assert [k.split(":")[0] for k in kernels] == [
        "SDPA kernel, no mask",
        "SDPA kernel, all-ones mask",
        "SDPA kernel, padded",
    ]
    assert all("flash (cpu)" in k for k in kernels)  # torch's CPU SDPA kernel, found by the profiler
    pair = next(line for line in lines if line.startswith("step albert-tiny "))
    assert "albert-tiny unshared" in pair and "paper Table 2" in pair
    assert not any("torch.compile" in line for line in lines)


@pytest.mark.slow
def test_smoke_compiles_the_step() -> None:
    lines = _smoke_lines()
    assert any(line.startswith("torch.compile (eager):") for line in lines)
