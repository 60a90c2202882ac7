"""`albert pretrain` killed with SIGKILL at an arbitrary step and resumed logs the same losses, bit for bit
(CPU, tiny model with dropout, dynamic masking), as the same run uninterrupted: with the step schedule, and
with the schedule laid over training time (schedule.by=time) under a fake clock (`fake_clock_cli.py`: 1 s
of training per batch, a different wall clock in the resumed process), where the lr too must continue
exactly from the training time saved in the checkpoint and the run must end on its budget at lr 0."""

from __future__ import annotations

import json
import os
import random
import subprocess
import sys
from pathlib import Path

import pytest
from kill_support import sigkill_after

from albert_lm.optim.schedules import TimeWarmupPolyDecay

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


CLI = [sys.executable, "-m", "albert_lm.cli.main"]
FAKE_CLOCK_CLI = [sys.executable, str(Path(__file__).resolve().parent / "fake_clock_cli.py")]


def albert(*args: str, cli: list[str] = CLI, clock_start: float = 0.0, **kw) -> subprocess.CompletedProcess:
    return subprocess.run([*cli, *args], check=True, env=_env(clock_start), **kw)


def _env(clock_start: float = 0.0) -> dict[str, str]:
    env = dict(os.environ)
    env["OMP_NUM_THREADS"] = "1"  # same thread count in every run: same float reductions
    env["ALBERT_FAKE_CLOCK_START"] = str(clock_start)  # read by fake_clock_cli.py only
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
        "--run-dir", str(run_dir), "--set", f"schedule.train_steps={STEPS}", "--set", "run.save_every=5",
        "--set", "run.eval_every=null", "--set", "run.keep_last=2", "--set", "run.precision=fp32",
        # the straight and the killed run are two processes: auto would measure the fp32 linear library in
        # each and could pick two (bit-different) ones on a loaded machine; a resume keeps its checkpoint's
        "--set", "run.fp32_linear=torch",
        "--overrides", '{"hidden_dropout_prob": 0.1, "attention_probs_dropout_prob": 0.1}',
    ]  # fmt: skip


def logged(run_dir: Path) -> list[tuple]:
    lines = (run_dir / "metrics.jsonl").read_text().splitlines()
    return [tuple(r[k] for k in COMPARED) for r in map(json.loads, lines)]


def test_sigkill_then_resume_reproduces_the_losses_bit_for_bit(data_dir, tmp_path):
    straight, killed = tmp_path / "straight", tmp_path / "killed"
    albert(*pretrain_args(data_dir, straight), stdout=subprocess.DEVNULL)
    want = logged(straight)
    assert [r[0] for r in want] == list(range(1, STEPS + 1))
    kill_then_resume(pretrain_args(data_dir, killed), killed, CLI)
    assert_same_run(straight, killed, want)


# the time schedule's run: a budget of STEPS seconds of training, 1 s per batch (fake clock), a step cap
# far beyond it, warmup 10% of the budget
TIME_BUDGET = ["--set", f"run.max_time_minutes={STEPS / 60}", "--set", "schedule.by=time",
               "--set", "schedule.train_steps=100000", "--set", "schedule.warmup_fraction=0.1"]  # fmt: skip


def test_sigkill_then_resume_with_the_time_schedule_is_exact(data_dir, tmp_path):
    straight, killed = tmp_path / "straight", tmp_path / "killed"
    albert(*pretrain_args(data_dir, straight), *TIME_BUDGET, cli=FAKE_CLOCK_CLI, stdout=subprocess.DEVNULL)
    want = logged(straight)
    recs = [json.loads(line) for line in (straight / "metrics.jsonl").read_text().splitlines()]
    # stopped by the budget, after STEPS one-second batches; update k used the schedule at k - 1 seconds
    # (warmup over 6 s, then the linear decay to 0 at the budget): the last one lr/STEPS, then 0
    assert [r["step"] for r in recs] == list(range(1, STEPS + 1))
    assert [r["elapsed_s"] for r in recs] == [float(s) for s in range(1, STEPS + 1)]
    factor = TimeWarmupPolyDecay(budget_s=float(STEPS), warmup_s=0.1 * STEPS)
    lr = recs[1]["lr"] / factor(1.0)
    assert [r["lr"] for r in recs] == pytest.approx([lr * factor(s - 1.0) for s in range(1, STEPS + 1)])
    assert recs[0]["lr"] == 0.0 and recs[-1]["lr"] == pytest.approx(lr / STEPS) and factor(STEPS) == 0.0
    # a different wall clock in the killed and the resumed process: only the saved training time counts
    kill_then_resume(pretrain_args(data_dir, killed) + TIME_BUDGET, killed, FAKE_CLOCK_CLI, clock_start=5e4)
    assert_same_run(straight, killed, want)
    assert [
        json.loads(line)["elapsed_s"] for line in (killed / "metrics.jsonl").read_text().splitlines()
    ] == [r["elapsed_s"] for r in recs]


def kill_then_resume(args: list[str], killed: Path, cli: list[str], clock_start: float = 0.0) -> None:
    """Start ``args``, SIGKILL it after an arbitrary logged step, then ``albert pretrain --resume``."""
    kill_after = random.Random().randint(7, STEPS - 15)  # arbitrary: a different step on every run
    proc = subprocess.Popen(
        [*cli, *args], env=_env(clock_start), stdout=subprocess.DEVNULL, stderr=subprocess.DEVNULL
    )
    reached = sigkill_after(proc, killed, kill_after)
    assert reached < STEPS, f"the run finished before the kill (reached step {reached})"
    albert(
        "pretrain", "--resume", str(killed), cli=cli, clock_start=2 * clock_start, stdout=subprocess.DEVNULL
    )


def assert_same_run(straight: Path, killed: Path, want: list[tuple]) -> None:
    got = logged(killed)
    assert got == want, "logs differ"
    # the final model equals the uninterrupted one's, tensor for tensor
    from safetensors.torch import load_file

    a = load_file(str(straight / "model" / "model.safetensors"))
    b = load_file(str(killed / "model" / "model.safetensors"))
    assert a.keys() == b.keys()
    assert all((a[k] == b[k]).all() for k in a)
