"""`albert data`: inspect a prepared DATA_DIR (`albert data stats`, `albert data verify`)."""

from __future__ import annotations

import argparse
import json
from pathlib import Path

HELP = "inspect a prepared pretraining DATA_DIR (stats, cues, verify)"
DESCRIPTION = """Inspect a DATA_DIR made by `albert prepare`.

  albert data stats DATA_DIR            counts, length histogram, masked fraction, 80/10/10, spans, labels
  albert data stats DATA_DIR --json
  albert data cues TRAIN_DIR HELDOUT_DIR  held-out SOP accuracy from shallow features alone (the floors
                                        a pretraining run's SOP accuracy must beat to mean anything)
  albert data verify DATA_DIR           recompute every shard's sha256 against the manifest
"""


def add_arguments(p: argparse.ArgumentParser) -> None:
    from albert_lm.cli.options import add_subcommands, runs

    sub = add_subcommands(p, "SUBCOMMAND")
    s = runs(sub.add_parser("stats", help="measure what the DATA_DIR contains, next to the targets"), _stats)
    s.add_argument("data_dir", type=Path)
    s.add_argument("--json", action="store_true", help="machine-readable output")
    s.add_argument(
        "--sample", type=int, default=20000, help="dynamic masking: instances to mask for the stats"
    )
    s.add_argument("--epoch", type=int, default=0, help="dynamic masking: the epoch whose masks to measure")
    s.add_argument("--check", action="store_true", help="exit 1 unless every check is within 1 point")
    c = sub.add_parser(
        "cues", help="held-out SOP accuracy of shallow features (majority, boundary tokens, overlap)"
    )
    runs(c, _cues)
    c.add_argument("data_dir", type=Path, metavar="TRAIN_DIR", help="fit the logistic regressions here")
    c.add_argument("eval_dir", type=Path, metavar="HELDOUT_DIR", help="measure their accuracy here")
    c.add_argument("--sample", type=int, default=50000, help="instances drawn from each DATA_DIR")
    c.add_argument("--seed", type=int, default=0, help="seeds the instance draws and the regression")
    c.add_argument("--json", action="store_true", help="machine-readable output")
    v = runs(sub.add_parser("verify", help="check every shard's sha256 against the manifest"), _verify)
    v.add_argument("data_dir", type=Path)


# a bad DATA_DIR raises DataError: `albert_lm.cli.main` prints it as one line and exits 1


def _verify(args: argparse.Namespace) -> int:
    from albert_lm.data.shards import load_manifest, verify_shards

    manifest = load_manifest(args.data_dir)
    verify_shards(args.data_dir, manifest)
    print(f"{args.data_dir}: {len(manifest['shards'])} shards ok")
    return 0


def _cues(args: argparse.Namespace) -> int:
    from albert_lm.data.cues import format_cues, sop_cues

    cues = sop_cues(args.data_dir, args.eval_dir, sample=args.sample, seed=args.seed)
    print(json.dumps(cues, indent=1) if args.json else format_cues(cues))
    return 0


def _stats(args: argparse.Namespace) -> int:
    from albert_lm.data.stats import compute_stats, format_stats

    stats = compute_stats(args.data_dir, sample=args.sample, epoch=args.epoch)
    print(json.dumps(stats, indent=1) if args.json else format_stats(stats))
    if args.check and not all(c["within_1_point"] for c in stats["checks"]):
        return 1  # the stats above show which check is off; not an error of the data
    return 0
