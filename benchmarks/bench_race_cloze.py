#!/usr/bin/env python3
"""Multiple choice on real text: a RACE-layout cloze set from the Wikipedia dump, `albert finetune race`
from the all-MiniLM-L6-v2 weights, accuracy against the 25% of chance.

1. ``scripts/make_cloze_race.py`` writes the set (skipped when it exists): articles of 5 consecutive
   sentences of a page; questions: the next sentences with one content word blanked; options: that word
   and 3 other content words of the same page. Pages are split train / dev / test (no page in two).
2. ``albert finetune race --data-dir data/cloze_race --init data/minilm ...`` (the RACE task: per option
   ``[CLS] article [SEP] question-with-the-option [SEP]``, pooled -> dense(1), softmax over the options).
3. ``albert evaluate race --split test`` on the best-on-dev checkpoint.

Prints dev and test accuracy (overall, middle, high) next to chance.

    python benchmarks/bench_race_cloze.py
    python benchmarks/bench_race_cloze.py --train-questions 3000 --epochs 2 --max-seq-length 128
"""

from __future__ import annotations

import argparse
import json
import shutil
import subprocess
import sys
import time
from pathlib import Path

REPO = Path(__file__).resolve().parent.parent
MINILM = REPO / "data" / "minilm"


def albert(*argv: str) -> subprocess.CompletedProcess:
    cmd = [sys.executable, "-m", "albert_lm.cli.main", *argv]
    print("$ albert", " ".join(argv), flush=True)
    return subprocess.run(cmd, check=True, cwd=REPO, stdout=subprocess.PIPE, text=True)


def main() -> int:
    ap = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    ap.add_argument("--data", type=Path, default=REPO / "data" / "cloze_race")
    ap.add_argument("--out", type=Path, default=REPO / "runs" / "bench_race_cloze")
    ap.add_argument("--train-questions", type=int, default=1200)
    ap.add_argument("--max-seq-length", type=int, default=96)
    ap.add_argument("--batch-size", type=int, default=8)
    ap.add_argument("--learning-rate", type=float, default=5e-5)
    ap.add_argument("--epochs", type=float, default=1.0)
    ap.add_argument("--seed", type=int, default=42)
    ap.add_argument("--remake", action="store_true", help="rebuild the cloze set")
    args = ap.parse_args()
    if not MINILM.exists():
        print(f"{MINILM} missing: run `python scripts/fetch_data.py`", file=sys.stderr)
        return 2
    if args.remake or not (args.data / "RACE").is_dir():
        cmd = [sys.executable, str(REPO / "scripts" / "make_cloze_race.py"), "--out", str(args.data)]
        cmd += ["--max-train-questions", str(args.train_questions)]
        print("$", " ".join(cmd[1:]), flush=True)
        subprocess.run(cmd, check=True, cwd=REPO)
    if args.out.exists():
        shutil.rmtree(args.out)

    t0 = time.perf_counter()
    albert(
        "finetune", "race", "--data-dir", str(args.data), "--init", str(MINILM), "--output", str(args.out),
        "--max-seq-length", str(args.max_seq_length), "--batch-size", str(args.batch_size),
        "--learning-rate", str(args.learning_rate), "--epochs", str(args.epochs), "--warmup-fraction", "0.1",
        "--eval-batch-size", "32", "--seed", str(args.seed), "--no-test", "--no-progress",
    )  # fmt: skip
    wall = time.perf_counter() - t0
    report = json.loads((args.out / "report.json").read_text())
    test = json.loads(
        albert(
            "evaluate", "race", "--data-dir", str(args.data), "--model", str(args.out), "--split", "test"
        ).stdout
    )

    best, last = report["checkpoints"]["best"], report["checkpoints"]["last"]
    print()
    print(
        f"cloze RACE from Wikipedia: {report['num_train_examples']} train / {report['num_dev_examples']['dev']} dev / "
        f"{test['num_examples']} test questions, 4 options; all-MiniLM-L6-v2, max len {args.max_seq_length}, "
        f"batch {args.batch_size}, lr {args.learning_rate}, {report['total_steps']} steps"
    )
    print(f"{'':22s} {'accuracy':>9s} {'middle':>8s} {'high':>8s}")
    print(f"{'chance':22s} {0.25:9.4f} {0.25:8.4f} {0.25:8.4f}")
    for name, m in (
        (f"dev, best (step {best['step']})", best),
        (f"dev, last (step {last['step']})", last),
        ("test, best checkpoint", test),
    ):
        print(
            f"{name:22s} {m['accuracy']:9.4f} {m.get('accuracy_middle', float('nan')):8.4f} {m.get('accuracy_high', float('nan')):8.4f}"
        )
    print(f"fine-tuning wall time {wall:.0f} s (training {report['train_seconds']:.0f} s)")
    return 0


if __name__ == "__main__":
    sys.exit(main())
