"""`albert finetune` killed with SIGKILL at an arbitrary step and resumed with ``--resume`` logs the same
losses and dev evaluations, bit for bit (CPU, fp32, tiny model with dropout, shuffled length-grouped
batches), as the same run uninterrupted; the best (an early step: the best-so-far must survive the kill)
and final weights, the dev predictions and the report agree too."""

from __future__ import annotations

import json
import os
import random
import subprocess
import sys
from pathlib import Path

import pytest
from kill_support import sigkill_after

TESTS = Path(__file__).resolve().parent.parent
STEPS = 60
TRAIN_COMPARED = ("step", "loss", "lr", "grad_norm", "tokens")


def _env() -> dict[str, str]:
    env = dict(os.environ)
    env["OMP_NUM_THREADS"] = "1"  # same thread count in every run: same float reductions
    return env


@pytest.fixture(scope="module")
def task_dir(tmp_path_factory) -> Path:
    """A CSV with a 0 / 1 target (a positive or negative word hidden among filler words: a regression, so
    the dev score moves at every evaluation) and a random albert-tiny whose vocab.txt holds every word."""
    sys.path.insert(0, str(TESTS / "unit"))
    from standin_tokenizer import make_tiny_model_dir

    root = tmp_path_factory.mktemp("finetune_resume")
    rng = random.Random(0)
    pos, neg = (
        ["good", "great", "fine", "lovely", "nice", "superb"],
        ["bad", "awful", "dull", "poor", "boring", "weak"],
    )
    filler = ["the", "a", "film", "movie", "plot", "was", "is", "very", "quite", "story"]
    rows = []
    for i in range(48):
        words = [rng.choice(filler) for _ in range(rng.randint(2, 8))] + [rng.choice(pos if i % 2 else neg)]
        rng.shuffle(words)
        rows.append((" ".join(words), float(i % 2)))
    (root / "train.csv").write_text("text,label\n" + "".join(f"{t},{y}\n" for t, y in rows[:36]))
    (root / "dev.csv").write_text("text,label\n" + "".join(f"{t},{y}\n" for t, y in rows[36:]))
    make_tiny_model_dir(root / "init", [t for t, _ in rows])
    return root


def finetune_args(data: Path, out: Path) -> list[str]:
    """36 examples in batches of 4: 9 batches an epoch, so the kill lands mid-epoch as often as not."""
    return [
        "finetune", "custom", "--train", str(data / "train.csv"), "--dev", str(data / "dev.csv"),
        "--regression", "--init", str(data / "init"), "--output", str(out), "--train-steps", str(STEPS),
        "--batch-size", "4", "--max-seq-length", "16", "--eval-every", "5", "--save-every", "5",
        "--learning-rate", "1e-3",
        "--encoder-dropout", "0.1", "--precision", "fp32", "--no-progress",
        # fixed: "auto" times MKL against oneDNN at start-up in each process, and the straight and the killed
        # run may pick differently (they differ in the last bits: seen as a grad norm 6e-8 apart at step 4)
        "--fp32-linear", "torch",
    ]  # fmt: skip


def start(*args: str) -> subprocess.Popen:
    return subprocess.Popen(
        [sys.executable, "-m", "albert_lm.cli.main", *args],
        env=_env(),
        stdout=subprocess.DEVNULL,
        stderr=subprocess.PIPE,
        text=True,
    )


def finished(proc: subprocess.Popen) -> None:
    _, err = proc.communicate(timeout=300)
    assert proc.returncode == 0, err[-3000:]


def logged(out: Path) -> tuple[list[tuple], list[dict]]:
    """The training lines (compared fields) and the dev-evaluation lines of metrics.jsonl."""
    recs = [json.loads(line) for line in (out / "metrics.jsonl").read_text().splitlines()]
    train = [tuple(r[k] for k in TRAIN_COMPARED) for r in recs if "loss" in r]
    return train, [r for r in recs if "loss" not in r]


def same_weights(a: Path, b: Path) -> bool:
    from safetensors.torch import load_file

    x, y = load_file(str(a / "model.safetensors")), load_file(str(b / "model.safetensors"))
    return x.keys() == y.keys() and all((x[k] == y[k]).all() for k in x)


def test_sigkill_then_resume_reproduces_the_fine_tune_bit_for_bit(task_dir, tmp_path):
    straight, killed = tmp_path / "straight", tmp_path / "killed"
    whole = start(*finetune_args(task_dir, straight))  # the two runs side by side: half the wall time
    kill_after = random.Random().randint(6, STEPS - 15)  # arbitrary: a different step on every run
    reached = sigkill_after(start(*finetune_args(task_dir, killed)), killed, kill_after)
    assert reached < STEPS, f"the run finished before the kill (reached step {reached})"
    assert not (killed / "report.json").exists()
    finished(whole)

    # the same command again, plus --resume (a non-empty --output needs it)
    finished(start(*finetune_args(task_dir, killed), "--resume"))
    want_train, want_eval = logged(straight)
    got_train, got_eval = logged(killed)
    assert [r[0] for r in want_train] == list(range(1, STEPS + 1))
    assert [r["step"] for r in want_eval] == list(range(5, STEPS + 1, 5))
    where = f"killed after step {reached} (asked {kill_after})"
    assert got_train == want_train, f"{where}: training logs differ"
    assert got_eval == want_eval, f"{where}: dev evaluations differ"

    # best-so-far survived the kill: the same best step, the same best and final weights, the same report
    report_a = json.loads((straight / "report.json").read_text())
    report_b = json.loads((killed / "report.json").read_text())
    # (on this data the dev score peaks early, at step 15 here; a run whose best is the last step would not
    # notice a best-so-far lost on resume)
    assert report_a["checkpoints"]["best"]["step"] < STEPS - 10
    assert report_b["history"] == report_a["history"]
    for which in ("best", "last"):
        a, b = report_a["checkpoints"][which], report_b["checkpoints"][which]
        assert {**a, "dir": None} == {**b, "dir": None}, which
        assert same_weights(straight / a["dir"], killed / b["dir"]), f"{where}: {which} weights differ"
    for name in ("dev_best.jsonl", "dev_last.jsonl"):
        assert (killed / "predictions" / name).read_text() == (straight / "predictions" / name).read_text()
    # one step checkpoint is kept (they are model-sized), the final one
    assert sorted(p.name for p in (killed / "checkpoints").iterdir()) == ["best", f"step-{STEPS:08d}"]
