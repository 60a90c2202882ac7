"""torchrun with 2 gloo processes on CPU logs the same losses as one process at the same global batch, and
every rank ends without the interpreter's finalization (issue 22 item 2)."""

from __future__ import annotations

import json
import os
import subprocess
import sys
from pathlib import Path

import pytest
import torch

from albert_lm.train import checkpoint as ckpt_io

TESTS = Path(__file__).resolve().parent.parent
SCRIPT = TESTS / "toy_training.py"


def _env(*paths: Path) -> dict[str, str]:
    env = dict(os.environ)
    env["OMP_NUM_THREADS"] = "1"
    env["PYTHONPATH"] = os.pathsep.join([*map(str, paths), str(TESTS), env.get("PYTHONPATH", "")])
    return env


# Imported by every Python process started with this folder on its path: a rank (RANK set; not torchrun's
# launcher) that reaches the interpreter's finalization leaves a file. Gloo's threads outlive the process
# group once a DDP was built, and one of them may free a collective's Python-owned tensors while the
# interpreter finalizes: "terminate called without an active exception", exit 1 after a finished run (4 in
# 51 runs of this script). That race needs the finalization, so a rank must end without one
# (`albert_lm.train.distributed.exit_process`); the file shows whether it did, every run, not 1 in 13.
FINALIZATION_PROBE = """
import atexit, os
if "RANK" in os.environ:
    atexit.register(lambda: open(os.path.join({out!r}, "finalized-rank-" + os.environ["RANK"]), "w").close())
"""


def _losses(run_dir: Path) -> list[tuple[int, float]]:
    lines = (run_dir / "metrics.jsonl").read_text().splitlines()
    return [(r["step"], r["loss"]) for r in map(json.loads, lines) if "loss" in r]


def test_torchrun_two_gloo_ranks_match_one_process(tmp_path):
    common = ["--steps", "12", "--micro-batch", "8", "--dropout", "0.0"]
    # one process: 2 micro-batches per step (global batch 16); stream indices 0,1 | 2,3 | ...
    single = tmp_path / "single"
    subprocess.run(
        [sys.executable, str(SCRIPT), "--run-dir", str(single), "--accum", "2", *common],
        check=True,
        env=_env(),
        timeout=300,
    )
    # two ranks, 1 micro-batch each (global batch 16); rank r reads indices r, r+2, ...
    ddp = tmp_path / "ddp"
    probe = tmp_path / "probe"
    probe.mkdir()
    (probe / "sitecustomize.py").write_text(FINALIZATION_PROBE.format(out=str(probe)))
    done = subprocess.run(
        [
            sys.executable,
            "-m",
            "torch.distributed.run",
            "--standalone",
            "--nproc_per_node",
            "2",
            str(SCRIPT),
            "--run-dir",
            str(ddp),
            "--accum",
            "1",
            *common,
        ],
        check=True,
        env=_env(probe),
        timeout=300,
        stdout=subprocess.PIPE,
    )
    assert sorted(p.name for p in probe.iterdir()) == ["sitecustomize.py"], "a rank ran finalization"
    summary = json.loads(done.stdout.decode().strip().splitlines()[-1])  # flushed before os._exit
    assert summary["steps"] == 12
    a, b = _losses(single), _losses(ddp)
    assert [s for s, _ in a] == [s for s, _ in b] == list(range(1, 13))
    for (_, la), (_, lb) in zip(a, b):
        assert la == pytest.approx(lb, rel=1e-5, abs=1e-7)
    # the final weights agree too, and only rank 0 wrote the checkpoint
    from safetensors.torch import load_file

    wa = load_file(str(single / "checkpoints" / "step-00000012" / "model.safetensors"))
    wb = load_file(str(ddp / "checkpoints" / "step-00000012" / "model.safetensors"))
    for k in wa:
        torch.testing.assert_close(wa[k], wb[k], rtol=1e-5, atol=1e-6)
    state = json.loads((ddp / "checkpoints" / "step-00000012" / "trainer_state.json").read_text())
    assert state["world_size"] == 2
    ranks = ckpt_io.read_training_state(ddp / "checkpoints" / "step-00000012")["ranks"]
    assert [r["data"]["pos"] for r in ranks] == [12, 12]  # each rank's own data position


@pytest.mark.slow  # two training processes and a torchrun launch
def test_torchrun_ranks_roll_back_together(tmp_path):
    """A NaN loss on one rank only (albert_lm.train.rollback): every rank goes back to the same checkpoint and
    skips the same global batches, as one process at the same global batch does."""
    common = ["--steps", "8", "--micro-batch", "8", "--dropout", "0.0", "--save-every", "2", "--spike-rollback",
              "--poison-at", "5"]  # fmt: skip
    # one process: step 3 reads batches 4, 5; two ranks: step 3 is batch 4 on rank 0, batch 5 on rank 1
    single, ddp = tmp_path / "single", tmp_path / "ddp"
    run = [sys.executable, str(SCRIPT), "--run-dir", str(single), "--accum", "2", *common]
    subprocess.run(run, check=True, env=_env(), timeout=300)
    launch = [sys.executable, "-m", "torch.distributed.run", "--standalone", "--nproc_per_node", "2"]
    subprocess.run([*launch, str(SCRIPT), "--run-dir", str(ddp), "--accum", "1", *common], check=True,
                   env=_env(), timeout=300)  # fmt: skip
    for run_dir in (single, ddp):
        records = [json.loads(line) for line in (run_dir / "metrics.jsonl").read_text().splitlines()]
        rollbacks = [r for r in records if "rollback_from_step" in r]
        assert rollbacks == [{"step": 2, "rollback_from_step": 3, "rollback_skipped_batches": 1,
                              "rollback_reason": "non-finite loss"}]  # fmt: skip
    a, b = _losses(single), _losses(ddp)
    assert [s for s, _ in a] == [s for s, _ in b] == list(range(1, 9))
    for (_, la), (_, lb) in zip(a, b):
        assert la == pytest.approx(lb, rel=1e-5, abs=1e-7)
