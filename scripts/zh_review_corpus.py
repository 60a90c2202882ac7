#!/usr/bin/env python3
"""The text of the Chinese review *training* rows as a pretraining corpus (labels dropped), for ``albert prepare``.

Task-adaptive pretraining (Gururangan et al. 2020, "Don't Stop Pretraining"): the unlabelled text of the
downstream task's training split is added to the pretraining corpus. Here: ``data/zh_sentiment/train.csv``
(15,606 reviews, 1.15M characters) beside People's Daily (1.86M characters), see docs/chinese.md.

A review is short (median 46 characters, one or two 。！？ sentences), and a one-sentence document makes
the original's instance builder take segment B from a random other document; so ``--group`` consecutive
rows (default 8) form one document. The rows of train.csv are ordered by a hash of their text
(scripts/fetch_data.py), not by label: neighbours agree in label as often as chance (50.9% vs 50.1%), so a
document carries no label information. Rows whose text is also in an ``--exclude`` file (the dev split)
are dropped and counted: dev text never enters pretraining.

    python scripts/zh_review_corpus.py --output runs/zh/reviews.jsonl
    albert prepare --language chinese --input data/zh_news/people_daily.jsonl runs/zh/reviews.jsonl ...
"""

from __future__ import annotations

import argparse
import csv
import json
import sys
from pathlib import Path

REPO = Path(__file__).resolve().parents[1]
SENTIMENT = REPO / "data" / "zh_sentiment"


def texts(path: Path, column: str) -> list[str]:
    with path.open(encoding="utf-8-sig", newline="") as f:
        reader = csv.DictReader(f)
        if reader.fieldnames is None or column not in reader.fieldnames:
            raise SystemExit(f"error: {path}: no column {column!r} (header: {reader.fieldnames})")
        return [row[column].strip() for row in reader]


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(
        description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter
    )
    parser.add_argument(
        "--train", type=Path, default=SENTIMENT / "train.csv", help="labelled CSV (text column)"
    )
    parser.add_argument(
        "--exclude",
        type=Path,
        nargs="*",
        default=[SENTIMENT / "dev.csv"],
        help="CSV files whose texts must not enter the corpus (default: the dev split)",
    )
    parser.add_argument("--column", default="text")
    parser.add_argument("--group", type=int, default=8, help="rows per document (default 8)")
    parser.add_argument("--output", type=Path, required=True, help="JSONL to write ({'text': ...} per line)")
    args = parser.parse_args(argv)
    if args.group < 1:
        parser.error(f"--group must be >= 1, got {args.group}")
    held_out = {t for path in args.exclude for t in texts(path, args.column)}
    rows = [t for t in texts(args.train, args.column) if t]
    kept = [t for t in rows if t not in held_out]
    docs = ["\n".join(kept[i : i + args.group]) for i in range(0, len(kept), args.group)]
    args.output.parent.mkdir(parents=True, exist_ok=True)
    tmp = args.output.with_name(args.output.name + ".tmp")
    with tmp.open("w", encoding="utf-8") as f:
        for doc in docs:
            f.write(json.dumps({"text": doc}, ensure_ascii=False) + "\n")
    tmp.replace(args.output)
    print(
        f"{args.output}: {len(docs):,} documents of <= {args.group} reviews, {len(kept):,} reviews, "
        f"{sum(map(len, kept)):,} characters; {len(rows) - len(kept)} rows dropped as also in "
        f"{', '.join(map(str, args.exclude)) or 'no exclude file'}",
        file=sys.stderr,
    )
    return 0


if __name__ == "__main__":
    sys.exit(main())
