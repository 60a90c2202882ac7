"""Golden losses (torchtitan's ``tests/assets/losses``): the smoke recipe's first 20 per-step losses on the
fixture corpus, seeded, against a committed file.

The resume tests compare a run with itself, so a change that alters what the loop computes (masking, loss
reduction, accumulation, the schedule, initialization) passes them; this test does not. Losses are compared
with a small tolerance, not bit for bit, because these machines differ in CPU (AVX-512 or not) and float
reductions differ with the kernels.

A deliberate change of the numbers regenerates the file: ``ALBERT_UPDATE_GOLDEN=1 pytest tests/e2e/test_golden_loss.py``
(then say why in the commit).
"""

from __future__ import annotations

import json
import math
import os
import subprocess
import sys
from pathlib import Path

TESTS = Path(__file__).resolve().parent.parent
WIKI = TESTS / "fixtures" / "data_wiki_sample.txt"
GOLDEN = TESTS / "assets" / "losses" / "smoke_20_steps.json"
KEYS = ("loss", "mlm_loss", "sop_loss", "lr")
RTOL = 1e-3  # observed cross-CPU drift over 20 steps is far below this; a real change moves step 2 already


def _albert(*args: str) -> None:
    env = dict(os.environ, OMP_NUM_THREADS="1")  # same thread count: same float reductions
    subprocess.run(
        [sys.executable, "-m", "albert_lm.cli.main", *args], check=True, env=env, stdout=subprocess.DEVNULL
    )


def _run_smoke(root: Path) -> list[dict[str, float]]:
    _albert(
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
    _albert(
        "prepare", "--input", str(WIKI), "--tokenizer", str(root / "tok"), "--output", str(root / "data"),
        "--max-seq-length", "48", "--format", "lines", "--masking", "dynamic", "--seed", "7",
    )  # fmt: skip
    # fp32_linear fixed to torch's GEMM: auto measures at start-up and could pick oneDNN on a loaded machine
    _albert(
        "pretrain", "--recipe", "smoke", "--data-dir", str(root / "data"), "--tokenizer", str(root / "tok"),
        "--run-dir", str(root / "run"), "--set", "schedule.train_steps=20", "--set", "run.eval_every=null",
        "--set", "run.save_every=null", "--set", "run.precision=fp32", "--set", "run.fp32_linear=torch",
        "--set", "run.seed=12345",
        "--set", "run.log_every=1",
    )  # fmt: skip
    rows = [json.loads(line) for line in (root / "run" / "metrics.jsonl").read_text().splitlines()]
    return [{k: r[k] for k in ("step", *KEYS)} for r in rows if "loss" in r]


def test_smoke_recipe_losses_match_the_golden_file(tmp_path: Path) -> None:
    got = _run_smoke(tmp_path)
    if os.environ.get("ALBERT_UPDATE_GOLDEN"):
        GOLDEN.parent.mkdir(parents=True, exist_ok=True)
        GOLDEN.write_text(json.dumps(got, indent=1) + "\n", encoding="utf-8")
    want = json.loads(GOLDEN.read_text(encoding="utf-8"))
    assert [r["step"] for r in got] == [r["step"] for r in want] == list(range(1, 21))
    bad = [
        f"step {w['step']} {k}: got {g[k]!r}, golden {w[k]!r}"
        for g, w in zip(got, want)
        for k in KEYS
        if not math.isclose(g[k], w[k], rel_tol=RTOL, abs_tol=1e-7)
    ]
    assert not bad, (
        "losses moved away from tests/assets/losses (a silent change of the training loop?):\n"
        + "\n".join(bad)
    )
    # the file is not trivially flat: the model learns something in 20 steps
    assert want[-1]["mlm_loss"] < want[0]["mlm_loss"] - 0.1
