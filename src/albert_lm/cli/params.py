"""`albert params`: parameter counts of the presets next to the paper's Tables 1, 3 and 4."""

from __future__ import annotations

import argparse
import json

HELP = "print parameter counts next to the paper's Tables 1, 3 and 4"
DESCRIPTION = """Print our parameter counts for the paper's configurations next to the paper's figures.

  albert params                      all three tables
  albert params --table 4            one table
  albert params --preset albert-large-v2 --set embedding_size=256 --set sharing=ffn
  albert params --json
"""


def add_arguments(p: argparse.ArgumentParser) -> None:
    from albert_lm.config import PRESETS

    p.add_argument("--table", choices=["1", "3", "4"], action="append", help="only these tables (repeatable)")
    p.add_argument(
        "--preset", choices=list(PRESETS), metavar="PRESET", help=f"count one preset: {', '.join(PRESETS)}"
    )
    # "extend": every --set adds to the list (with nargs alone, a second --set replaced the first)
    p.add_argument(
        "--set",
        action="extend",
        nargs="+",
        default=[],
        metavar="FIELD=VALUE",
        help="override a field of --preset (repeatable)",
    )
    p.add_argument("--json", action="store_true", help="machine-readable output")


def run(args: argparse.Namespace) -> int:
    from albert_lm._fields import parse_value
    from albert_lm.config import AlbertConfig, ConfigError
    from albert_lm.params import PAPER_ROWS, agrees, count_parameters

    if args.set and not args.preset:
        raise ConfigError("--set: needs --preset (the paper's tables fix their own configurations)")
    if args.preset:
        overrides = {}
        for item in args.set:
            field, eq, value = item.partition("=")
            if not eq or not field.strip():
                raise ConfigError(f"--set: expected FIELD=VALUE, got {item!r}")
            overrides[field.strip()] = parse_value(value)
        config = AlbertConfig.from_preset(args.preset, **overrides)
        n = count_parameters(config)
        print(
            json.dumps({"preset": args.preset, "parameters": n})
            if args.json
            else f"{args.preset}: {n / 1e6:.2f}M"
        )
        return 0

    tables = args.table or ["1", "3", "4"]
    rows = []
    for row in PAPER_ROWS:
        if row.table not in tables:
            continue
        n = count_parameters(row.config())
        rows.append((row, n))
    if args.json:
        print(
            json.dumps(
                [
                    {
                        "table": r.table,
                        "model": r.label,
                        "preset": r.preset,
                        "overrides": dict(r.overrides),
                        "paper_m": r.paper_m,
                        "ours": n,
                        "agrees": agrees(n, r.paper_m),
                    }
                    for r, n in rows
                ],
                indent=2,
            )
        )
        return 0
    titles = {
        "1": "Table 1: BERT and ALBERT configurations",
        "3": "Table 3: embedding size E (ALBERT-base)",
        "4": "Table 4: cross-layer parameter sharing (ALBERT-base)",
    }
    current = None
    for row, n in rows:
        if row.table != current:
            current = row.table
            print(f"\n{titles[current]}\n{'model':<38s} {'paper':>9s} {'ours':>10s}  ")
        mark = "ok" if agrees(n, row.paper_m) else "differs"
        print(f"{row.label:<38s} {row.paper_m:>8g}M {n / 1e6:>9.2f}M  {mark}")
        if row.note and not agrees(n, row.paper_m):
            print(f"    note: {row.note.format(ours=f'{n / 1e6:.1f}M', paper=row.paper_m)}")
    if "1" in tables:
        large = {
            r.preset: n for r, n in rows if r.preset in ("albert-large-v2", "bert-large") and not r.overrides
        }
        print(
            f"\nALBERT-large has {large['bert-large'] / large['albert-large-v2']:.1f}x fewer parameters than "
            "BERT-large (paper: 18x, 18M vs 334M)"
        )
    print(
        "\nCounts: embeddings (incl. the E->H projection) + encoder + pooler, as `AlbertModel`; the paper"
        "\nrounds to whole millions inconsistently, so 'ok' means within 1.1M (0.5% above 200M)."
        "\nALBERT xlarge and xxlarge: the paper's Table 1 figures (60M, 235M) do not follow from the released"
        "\nconfigs (24x2048 and 12x4096 with E=128 give 58.7M and 222.6M); both are printed."
    )
    return 0
