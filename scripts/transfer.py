#!/usr/bin/env python3
"""What pretraining gave, checkpoint by checkpoint: the transfer curve and the recipe study of issue 25.

For each pretraining run directory given, every checkpoint (``checkpoints/step-*``) and the final
``model/`` are scored by

* the held-out masked-LM loss and accuracy the run logged at that step (``metrics.jsonl``);
* the representation spread (albert_lm.pretrain.health: the std across held-out sequences of the mean-pooled
  last layer, median over features; ~0 when the encoder ignores its input), on the first batch of
  ``--heldout``;
* the linear probe on the sentence-polarity set (``albert probe``: frozen mean-pooled features, logistic
  regression with C by 5-fold CV; length 64), by default cross-fitted (``--outer-folds 5``: every one of the
  4,000 sentences scored by a probe fitted without it), else on the fixed 80/20 split (seed 0, 800 dev
  sentences; ``--outer-folds 0``), compared, paired over the scored sentences, with ``--random-seeds``
  random initializations of the same architecture.

    python scripts/transfer.py runs/study/base runs/study/ubias --heldout runs/demo/data/heldout \\
        --report docs/transfer-study.json

Writes the JSON report (one row per checkpoint) and prints a table; ``--plot PNG`` draws probe accuracy
against pretraining tokens with the random-initialization band. Figures are counts of tokens and steps,
not minutes: the runs of the study were made on shared cores, so only a quiet machine's tokens/s turns
them into minutes (``--tokens-per-s``).
"""

from __future__ import annotations

import argparse
import json
import math
import os
import sys
from pathlib import Path
from typing import Any

REPO = Path(__file__).resolve().parent.parent
DATA = Path(os.environ.get("ALBERT_DATA_DIR", REPO / "data"))
POLARITY = DATA / "polarity" / "polarity-en-pang-lee.csv"


def polarity_split(outer_folds: int) -> tuple[list[Any], list[Any]]:
    """All 4,000 sentences and no dev part (cross-fitted with ``outer_folds``), or the demo's fine-tuning
    split: 3200 train / 800 dev, seed 0 (as `albert finetune custom --dev-fraction 0.2 --split-seed 0`)."""
    from albert_lm.tasks.custom import CustomData, holdout_split, read_file

    rows = read_file(CustomData(columns=("label", "text")), POLARITY, labelled=True, split="train")
    if outer_folds:
        return rows, []
    tr, dv = holdout_split(len(rows), 0.2, 0)
    return [rows[i] for i in tr], [rows[i] for i in dv]


def checkpoints(run: Path) -> list[tuple[int, Path]]:
    out = []
    for d in sorted((run / "checkpoints").glob("step-*")):
        if (d / "model.safetensors").is_file():
            out.append((int(d.name.split("-")[1]), d))
    return out


def evals(run: Path) -> dict[int, dict[str, float]]:
    out: dict[int, dict[str, float]] = {}
    path = run / "metrics.jsonl"
    if path.is_file():
        for line in path.read_text().splitlines():
            r = json.loads(line)
            if "eval_mlm_loss" in r:
                out[int(r["step"])] = r
    return out


def architecture_key(model_dir: Path) -> str:
    """A digest of what a random initialization depends on: the architecture (the model config as read)
    and the vocabulary (the tokenizer files)."""
    import hashlib

    from albert_lm.tasks.inputs import read_model_config

    h = hashlib.sha256(repr(read_model_config(model_dir)).encode())
    for name in ("spiece.model", "vocab.txt", "tokenizer.json"):
        if (model_dir / name).is_file():
            h.update(name.encode() + (model_dir / name).read_bytes())
    return h.hexdigest()[:16]


def tokens_at(ckpt: Path) -> int | None:
    for name in ("trainer_state.json",):
        p = ckpt / name
        if p.is_file():
            state = json.loads(p.read_text())
            for key in ("tokens",):
                if key in state:
                    return int(state[key])
            loop = state.get("loop") or {}
            if "tokens" in loop:
                return int(loop["tokens"])
    return None


def main() -> int:
    ap = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    ap.add_argument("runs", nargs="+", type=Path, help="pretraining run directories")
    ap.add_argument("--heldout", type=Path, required=True, help="held-out DATA_DIR (the spread's batch)")
    ap.add_argument("--random-seeds", type=int, default=5)
    ap.add_argument(
        "--outer-folds", type=int, default=5, help="cross-fitted probe over all rows (0: 80/20 split)"
    )
    ap.add_argument("--report", type=Path, required=True, help="JSON report (rows are appended/kept by key)")
    ap.add_argument("--plot", type=Path, help="PNG: probe accuracy against pretraining tokens")
    ap.add_argument("--threads", type=int, default=None)
    ap.add_argument("--tokens-per-s", type=float, help="plot against minutes at this training speed")
    ap.add_argument(
        "--names", nargs="+", help="legend names of the runs, in their order (default: folder names)"
    )
    ap.add_argument("--only-final", action="store_true", help="probe only each run's model/ directory")
    ap.add_argument("--max-step", type=int, help="probe only checkpoints up to this step")
    args = ap.parse_args()

    import torch

    from albert_lm.data import PretrainingDataset
    from albert_lm.pretrain.health import representation_spread
    from albert_lm.probe.run import ProbeConfig, load_encoder, run_probe
    from albert_lm.probe.verdict import compare

    if args.threads:
        torch.set_num_threads(args.threads)
    train, dev = polarity_split(args.outer_folds)
    folds = {"outer_folds": args.outer_folds}
    config = ProbeConfig(max_seq_length=64)
    report: dict[str, Any] = json.loads(args.report.read_text()) if args.report.is_file() else {}
    rows: dict[str, Any] = report.setdefault("rows", {})
    batch = next(iter(PretrainingDataset(args.heldout, shuffle=False, batch_size=64)))

    def save() -> None:
        args.report.parent.mkdir(parents=True, exist_ok=True)
        tmp = args.report.with_suffix(".tmp")
        tmp.write_text(json.dumps(report, indent=1))
        tmp.replace(args.report)

    for run in args.runs:
        ev = evals(run)
        targets = [] if args.only_final else checkpoints(run)
        if args.max_step is not None:
            targets = [(step, path) for step, path in targets if step <= args.max_step]
        result = json.loads((run / "result.json").read_text()) if (run / "result.json").is_file() else {}
        if (run / "model" / "model.safetensors").is_file() and args.max_step is None:
            targets.append((int(result.get("steps", -1)), run / "model"))
        if not targets:
            continue
        # the random initializations of this architecture and vocabulary, probed once for all runs sharing them
        key0 = f"random/{architecture_key(targets[0][1])}/outer-folds-{args.outer_folds}"
        if key0 not in rows:
            randoms = []
            for seed in range(1, args.random_seeds + 1):
                r = run_probe(
                    targets[0][1], train, dev, config, random_init=True, init_seed=seed, **folds
                ).to_dict()
                enc, _ = load_encoder(targets[0][1], random_init=True, seed=seed)
                r["spread"] = representation_spread(enc, batch)
                randoms.append(r)
            rows[key0] = {"run": "random initialization", "step": 0, "tokens": 0, "randoms": randoms}
            save()
        for step, path in targets:
            key = f"{run}/{path.name}"
            if key in rows:
                continue
            probe = run_probe(path, train, dev, config, **folds).to_dict()
            enc, _ = load_encoder(path)
            row = {
                "run": str(run),
                "checkpoint": str(path),
                "step": step,
                "tokens": tokens_at(path) if path.name != "model" else result.get("tokens"),
                "eval_mlm_loss": ev.get(step, {}).get("eval_mlm_loss"),
                "eval_mlm_accuracy": ev.get(step, {}).get("eval_mlm_accuracy"),
                "spread": representation_spread(enc, batch),
                "probe": probe,
                "comparison": compare(probe, rows[key0]["randoms"]),
                "random_key": key0,
            }
            rows[key] = row
            save()
            c = row["comparison"]
            print(
                f"{key}: step {step}, held-out MLM loss {row['eval_mlm_loss'] or math.nan:.3f}, spread "
                f"{row['spread']:.3g}, probe {probe['dev_accuracy']:.1%} vs random {c['random_init_mean']:.1%} "
                f"({c['difference'] * 100:+.1f}, 2se {c['two_standard_errors'] * 100:.1f}): {c['verdict']}",
                flush=True,
            )
    if args.plot:
        if args.names and len(args.names) != len(args.runs):
            ap.error(f"--names: {len(args.names)} names for {len(args.runs)} runs")
        names = {str(run): name for run, name in zip(args.runs, args.names or [])}
        plot(rows, args.plot, args.tokens_per_s, names)
    return 0


def plot(rows: dict[str, Any], out: Path, tokens_per_s: float | None, names: dict[str, str]) -> None:
    per = tokens_per_s * 60 / 1e6 if tokens_per_s else 1.0
    import matplotlib

    matplotlib.use("Agg")
    import matplotlib.pyplot as plt

    fig, ax = plt.subplots(figsize=(7, 4.5))
    for r in rows.values():  # the random initializations: their mean and the seeds' range
        if "randoms" in r:
            accs = [100 * x["dev_accuracy"] for x in r["randoms"]]
            ax.axhspan(min(accs), max(accs), color="gray", alpha=0.2)
            ax.axhline(
                sum(accs) / len(accs), ls="--", lw=0.8, color="gray", label="random init (mean, range)"
            )
    for run in sorted({r["run"] for r in rows.values() if "probe" in r}):
        pts = sorted(
            (
                r["tokens"] / 1e6 / per,
                100 * r["probe"]["dev_accuracy"],
                100 * r["comparison"]["two_standard_errors"],
            )
            for r in rows.values()
            if r["run"] == run and "probe" in r and r.get("tokens") and r["checkpoint"].find("/model") < 0
        )
        if pts:
            x, y, e = zip(*pts)
            ax.errorbar(x, y, yerr=e, marker="o", capsize=3, label=names.get(run, Path(run).name))
    ax.set_xlabel(
        f"pretraining minutes at {tokens_per_s:g} tokens/s" if tokens_per_s else "pretraining tokens (M)"
    )
    ax.set_ylabel("polarity accuracy, linear probe (%)")
    ax.set_title(
        "cross-fitted polarity probe vs pretraining (4,000 sentences; bars: 2 s.e. of the difference to random init)",
        fontsize=9,
    )
    ax.set_xlim(left=0)
    ax.legend()
    fig.tight_layout()
    fig.savefig(out, dpi=120)


if __name__ == "__main__":
    sys.exit(main())
