"""`albert probe`: a linear probe of a frozen encoder on a labelled file, optionally against random init."""

from __future__ import annotations

import argparse
import json
import sys
from pathlib import Path
from typing import Any

from albert_lm.probe.verdict import compare, format_report

HELP = "linear probe: logistic regression on a frozen model's features, optionally vs random init"
DESCRIPTION = """Score what a model's frozen features are worth on a labelled text set: the encoder of MODEL
is not trained; each text becomes one vector (--pooling), and a logistic regression, its L2 strength
chosen by cross-validation on the training rows, is fitted to them. One answer per model and data, so it
separates a small gain from pretraining from noise where fine-tuning one seed cannot.

  albert probe --model runs/demo/pretrain/model --train polarity.csv --columns label,text \\
      --dev-fraction 0.2 --compare-random-init 3        # + 3 random initializations and the verdict
  albert probe --model models/albert-base-v2 --train train.csv --dev dev.csv --json

Files are read as by `albert finetune custom` (CSV, TSV or JSONL with named columns; --columns for files
without a header). The verdict: ABOVE / BELOW the random initializations' mean when the difference exceeds
two standard errors, else AT. The comparison is paired (the same dev rows on both sides: the standard
error of the per-row difference) plus the spread of the random seeds."""


def add_arguments(p: argparse.ArgumentParser) -> None:
    p.add_argument("--model", required=True, type=Path, help="model directory (a pretraining run's model/, "
                   "a fine-tuned run's checkpoint, an HF ALBERT or BERT directory): its encoder is probed")  # fmt: skip
    g = p.add_argument_group("data (CSV, TSV or JSONL with named columns)")
    g.add_argument("--train", required=True, type=Path, help="labelled training file")
    g.add_argument("--dev", type=Path, help="labelled dev file (default: hold out --dev-fraction of --train)")
    g.add_argument("--dev-fraction", type=float, default=0.2, help="held out of --train without --dev")
    g.add_argument("--split-seed", type=int, default=0, help="seed of that held-out split")
    g.add_argument("--format", choices=("csv", "tsv", "jsonl"), help="file format (default: by extension)")
    g.add_argument("--columns", help="comma-separated column names of files WITHOUT a header row")
    g.add_argument("--text-column", default="text", help="column with the text (default: text)")
    g.add_argument("--text-pair-column", help="column with the second text of sentence-pair sets")
    g.add_argument("--label-column", default="label", help="column with the label (default: label)")
    g.add_argument("--train-limit", type=int, help="use only the first N training rows (after the split)")
    g.add_argument("--outer-folds", type=int, default=0, metavar="K",
                   help="score EVERY row of --train instead of a held-out part: K outer folds, each predicted "
                   "by a probe fitted (C by inner cross-validation) on the others -- nested cross-validation; "
                   "a comparison then pairs all rows, not a fifth of them (no --dev with it)")  # fmt: skip
    g = p.add_argument_group("probe")
    g.add_argument("--pooling", choices=("mean", "cls", "pooled"), default="mean",
                   help="text vector: mean of the last layer over real tokens (default), its [CLS], or the pooler")  # fmt: skip
    g.add_argument("--max-seq-length", type=int, default=128, help="tokens per text (default: 128)")
    g.add_argument("--batch-size", type=int, default=64, help="texts per forward pass (default: 64)")
    g.add_argument("--folds", type=int, default=5, help="cross-validation folds choosing C (default: 5)")
    g.add_argument("--random-init", action="store_true", help="probe MODEL's architecture with fresh weights")
    g.add_argument("--seed", type=int, default=0, help="seed of the cross-validation folds")
    g.add_argument("--init-seed", type=int, default=0, help="seed of --random-init's weights")
    g.add_argument("--compare-random-init", type=int, default=0, metavar="N",
                   help="also probe N random initializations (seeds 1..N) and print the verdict")  # fmt: skip
    g = p.add_argument_group("run")
    g.add_argument("--threads", type=int, help="torch threads (default: torch's own)")
    g.add_argument("--output", type=Path, help="also write the report as JSON to this file")
    g.add_argument("--json", action="store_true", help="print the report as JSON instead of text")


def _check(args: argparse.Namespace) -> None:
    """Argument errors before any file is read or model loaded."""
    for name in ("max_seq_length", "batch_size", "folds", "threads", "train_limit"):
        value = getattr(args, name)
        if value is not None and value < 1:
            raise ValueError(f"--{name.replace('_', '-')}: must be at least 1, got {value}")
    if not 0 < args.dev_fraction < 1:
        raise ValueError(f"--dev-fraction: must be in (0, 1), got {args.dev_fraction}")
    if args.compare_random_init < 0:
        raise ValueError(f"--compare-random-init: must be >= 0, got {args.compare_random_init}")
    if args.outer_folds and (args.outer_folds < 2 or args.dev is not None):
        raise ValueError(
            f"--outer-folds: must be >= 2 and scores every row of --train, so no --dev (got {args.outer_folds}"
            + (f", --dev {args.dev})" if args.dev is not None else ")")
        )
    if args.random_init and args.compare_random_init:
        raise ValueError("--random-init and --compare-random-init: choose one")
    if args.output is not None:  # its folder made (or refused) now, not after minutes of encoding
        out = Path(args.output)
        if out.is_dir():
            raise ValueError(f"--output {out}: is a directory; give a file name for the JSON report")
        try:
            out.parent.mkdir(parents=True, exist_ok=True)
        except OSError as e:
            raise ValueError(f"--output {out}: cannot create its folder ({e.strerror or e})") from None


def _read(args: argparse.Namespace) -> tuple[list[Any], list[Any]]:
    from albert_lm.tasks.custom import CustomData, holdout_split, read_file

    data = CustomData(
        text_column=args.text_column,
        text_pair_column=args.text_pair_column,
        label_column=args.label_column,
        columns=tuple(c.strip() for c in args.columns.split(",")) if args.columns else None,
        format=args.format,
    )
    train = read_file(data, args.train, labelled=True, split="train")
    if args.dev is not None:
        dev = read_file(data, args.dev, labelled=True, split="dev")
    elif args.outer_folds:  # every row is scored by the cross-fitted probe: no held-out part
        dev = []
    else:
        tr, dv = holdout_split(len(train), args.dev_fraction, args.split_seed)
        train, dev = [train[i] for i in tr], [train[i] for i in dv]
    if args.train_limit:
        train = train[: args.train_limit]
    for rows, source in ((train, args.train), (dev, args.dev or f"{args.train} (held-out part)")):
        if not rows and not (args.outer_folds and rows is dev):
            raise ValueError(f"{source}: no labelled rows")
    return train, dev


def run(args: argparse.Namespace) -> int:
    import torch

    from albert_lm.probe.run import ProbeConfig, run_probe
    from albert_lm.runtime.allocator import keep_freed_memory

    _check(args)
    if args.threads:
        torch.set_num_threads(args.threads)
    keep_freed_memory()
    config = ProbeConfig(
        pooling=args.pooling,
        max_seq_length=args.max_seq_length,
        batch_size=args.batch_size,
        folds=args.folds,
        seed=args.seed,
    )
    train, dev = _read(args)
    probed = run_probe(
        args.model, train, dev, config, random_init=args.random_init, init_seed=args.init_seed,
        outer_folds=args.outer_folds,
    )  # fmt: skip
    main = probed.to_dict()
    report: dict[str, Any] = {"probe": main}
    randoms = []
    for seed in range(1, args.compare_random_init + 1):  # the same folds, other weights
        randoms.append(
            run_probe(
                args.model, train, dev, config, random_init=True, init_seed=seed, outer_folds=args.outer_folds
            ).to_dict()
        )
    if randoms:
        report["random_init"] = randoms
        report["comparison"] = compare(main, randoms)
    if args.output:
        from albert_lm._io import atomic_write_json

        atomic_write_json(args.output, report, indent=2)
    if args.json:
        print(json.dumps(report, indent=2))
    else:
        print(format_report(report), file=sys.stdout)
    return 0
