"""`albert plot RUN_DIR`: the training curves of a run (metrics.jsonl) as a PNG."""

from __future__ import annotations

import argparse
from pathlib import Path

HELP = "plot a run's curves (loss, accuracies, learning rate, throughput) to a PNG"
DESCRIPTION = """Read RUN_DIR/metrics.jsonl (written by `albert pretrain` and `albert finetune`) and draw loss,
accuracies (training and held-out), learning rate and tokens/s against the step.

  albert plot runs/demo                    # writes runs/demo/curves.png
  albert plot runs/a runs/b -o compare.png # several runs on the same axes
"""


def add_arguments(p: argparse.ArgumentParser) -> None:
    p.add_argument("run_dirs", nargs="+", type=Path, metavar="RUN_DIR")
    p.add_argument(
        "-o", "--output", type=Path, help="PNG path (default: RUN_DIR/curves.png of the first run)"
    )
    p.add_argument(
        "--smooth", type=int, default=1, help="moving average over N logged points (training curves)"
    )


def run(args: argparse.Namespace) -> int:
    from albert_lm.cli.options import MissingExtra
    from albert_lm.train.plot import plot_runs

    try:
        import matplotlib  # noqa: F401 - an optional dependency (the plot extra)
    except ImportError as e:
        raise MissingExtra(f"{e.name or 'matplotlib'} is missing; pip install 'albert-lm[plot]'") from None

    # a missing run or a bad metrics.jsonl raises: `albert_lm.cli.main` prints it as one line and exits 1
    print(plot_runs(args.run_dirs, args.output, smooth=args.smooth))
    return 0
