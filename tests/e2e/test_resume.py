"""`albert pretrain` killed with SIGKILL at an arbitrary step and resumed logs the same losses, bit for bit
(CPU, tiny model with dropout, dynamic masking), as the same run uninterrupted."""

from __future__ import annotations

import json
import os
import random
import signal
import subprocess
import sys
import time
from pathlib import Path

import pytest

TESTS = Path(__file__).resolve().parent.parent
WIKI = TESTS / "fixtures" / "data_wiki_sample.txt"
STEPS = 60
COMPARED = (
    "step",
    "loss",
    "mlm_loss",
    "sop_loss",
    "mlm_accuracy",
    "sop_accuracy",
    "lr",
    "grad_norm",
    "tokens",
)


def albert(*args: str, **kw) -> subprocess.CompletedProcess:
    return subprocess.run([sys.executable, "-m", "albert.cli.main", *args], check=True, env=_env(), **kw)


def _env() -> dict[str, str]:
    env = dict(os.environ)
    env["OMP_NUM_THREADS"] = "1"  # same thread count in every run: same float reductions
    return env


@pytest.fixture(scope="module")
def data_dir(tmp_path_factory) -> Path:
    root = tmp_path_factory.mktemp("pretrain_data")
    albert(
        "tokenizer",
        "train",
        "--input",
        str(WIKI),
        "--vocab-size",
        "600",
        "--output",
        str(root / "tok"),
        "--quiet",
    )
    albert(
        "prepare", "--input", str(WIKI), "--tokenizer", str(root / "tok"), "--output", str(root / "data"),
        "--max-seq-length", "48", "--format", "lines", "--masking", "dynamic",
    )  # fmt: skip
    return root


def pretrain_args(data: Path, run_dir: Path) -> list[str]:
    return [
        "pretrain", "--recipe", "smoke", "--data-dir", str(data / "data"), "--tokenizer", str(data / "tok"),
        "--run-dir", str(run_dir), "--set", f"schedule.total_steps={STEPS}", "--set", "run.save_every=5",
        "--set", "run.eval_every=null", "--set", "run.keep_last=2", "--set", "run.precision=fp32",
        "--model.overrides", '{"hidden_dropout_prob": 0.1, "attention_probs_dropout_prob": 0.1}',
    ]  # fmt: skip


def logged(run_dir: Path) -> list[tuple]:
    lines = (run_dir / "metrics.jsonl").read_text().splitlines()
    return [tuple(r[k] for k in COMPARED) for r in map(json.loads, lines)]


def last_step(run_dir: Path) -> int:
    try:
        lines = (run_dir / "metrics.jsonl").read_text().splitlines()
        return json.loads(lines[-1])["step"] if lines else 0
    except (FileNotFoundError, json.JSONDecodeError):
        return 0


def test_sigkill_then_resume_reproduces_the_losses_bit_for_bit(data_dir, tmp_path):
    straight = tmp_path / "straight"
    albert(*pretrain_args(data_dir, straight), stdout=subprocess.DEVNULL)
    want = logged(straight)
    assert [r[0] for r in want] == list(range(1, STEPS + 1))

    kill_after = random.Random().randint(7, STEPS - 15)  # arbitrary: a different step on every run
    killed = tmp_path / "killed"
    proc = subprocess.Popen(
        [sys.executable, "-m", "albert.cli.main", *pretrain_args(data_dir, killed)],
        env=_env(),
        stdout=subprocess.DEVNULL,
        stderr=subprocess.DEVNULL,
    )
    deadline = time.time() + 300
    while last_step(killed) < kill_after and proc.poll() is None and time.time() < deadline:
        time.sleep(0.005)
    proc.send_signal(signal.SIGKILL)
    proc.wait()
    reached = last_step(killed)
    assert reached < STEPS, f"the run finished before the kill (reached step {reached})"

    albert("pretrain", "--resume", str(killed), stdout=subprocess.DEVNULL)
    got = logged(killed)
    assert got == want, f"killed after step {reached} (asked {kill_after}); logs differ"
    # the final model equals the uninterrupted one's, tensor for tensor
    from safetensors.torch import load_file

    a = load_file(str(straight / "model" / "model.safetensors"))
    b = load_file(str(killed / "model" / "model.safetensors"))
    assert a.keys() == b.keys()
    assert all((a[k] == b[k]).all() for k in a)
