#!/usr/bin/env python3
"""Do two revisions of the library write the same bytes? The chain a user runs -- a vocabulary, prepared
shards, a short pretraining run, a short fine-tuning run -- on the same inputs, once with each revision, and
the sha256 of every file both wrote.

Each revision runs from its own `git worktree` (``PYTHONPATH=<worktree>/src``), through its own command line
(``python -m albert`` or ``python -m albert_lm``, whichever package the revision has), with flags both
revisions read. The runs are deterministic by construction (fixed seeds, one thread, fp32 on torch's linear
library); a file that only one revision writes (a model card, say) is listed, not compared.

    python scripts/same_outputs.py --base ad4c24e            # base vs the working tree's HEAD
    python scripts/same_outputs.py --base ad4c24e --other HEAD --keep /tmp/same

Exit 0 when every common file is byte-identical, 1 otherwise.
"""

from __future__ import annotations

import argparse
import csv
import hashlib
import os
import subprocess
import sys
import tempfile
from pathlib import Path

REPO = Path(__file__).resolve().parents[1]
CORPUS = REPO / "tests" / "fixtures" / "data_wiki_sample.txt"
POLARITY = REPO / "data" / "polarity" / "polarity-en-pang-lee.csv"


def worktree(rev: str, where: Path) -> Path:
    subprocess.run(["git", "worktree", "add", "--detach", "-q", str(where), rev], cwd=REPO, check=True)
    return where


def package(src: Path) -> str:
    return "albert_lm" if (src / "albert_lm").is_dir() else "albert"


def run_chain(tree: Path, out: Path, labelled: Path) -> None:
    """tokenizer train -> prepare -> pretrain (smoke, 6 steps) -> finetune custom (4 steps) into ``out``."""
    src = tree / "src"
    env = {**os.environ, "PYTHONPATH": str(src), "OMP_NUM_THREADS": "1", "ALBERT_MALLOC": "system"}
    cli = [sys.executable, "-m", package(src)]

    def albert(*args: str) -> None:
        print("  $ albert", " ".join(args), flush=True)
        subprocess.run([*cli, *args], env=env, check=True, stdout=subprocess.DEVNULL)

    albert("tokenizer", "train", "--input", str(CORPUS), "--output", str(out / "vocab"), "--vocab-size", "800",
           "--seed", "1", "--threads", "1", "--no-progress")  # fmt: skip
    albert("prepare", "--input", str(CORPUS), "--tokenizer", str(out / "vocab"), "--output", str(out / "shards"),
           "--max-seq-length", "64", "--seed", "1", "--workers", "1")  # fmt: skip
    albert("pretrain", "--recipe", "smoke", "--data-dir", str(out / "shards"), "--output", str(out / "pretrain"),
           "--tokenizer", str(out / "vocab"),
           "--set", "run.max_steps=6", "run.fp32_linear=torch", "run.threads=1", "run.precision=fp32",
           "run.save_every=6", "run.eval_every=null", "run.seed=1")  # fmt: skip
    albert("finetune", "custom", "--train", str(labelled), "--model", str(out / "pretrain" / "model"),
           "--output", str(out / "finetune"), "--train-steps", "4", "--batch-size", "8", "--max-seq-length", "48",
           "--seed", "1", "--precision", "fp32", "--fp32-linear", "torch", "--threads", "1", "--no-progress",
           "--no-test", "--text-column", "text", "--label-column", "label")  # fmt: skip


# files whose content records where or when a run happened (paths, timings, versions), not what it computed
VARYING = ("metrics.jsonl", "run_config.json", "report.json", "task.json", "manifest.json", "health.json",
           "training_state.json", "stats.json", "export_report.json", "tokenizer_train_report.json")  # fmt: skip


def digests(root: Path) -> dict[str, str]:
    out = {}
    for p in sorted(root.rglob("*")):
        if p.is_file() and p.name not in VARYING and ".lock" not in p.name:
            out[str(p.relative_to(root))] = hashlib.sha256(p.read_bytes()).hexdigest()
    return out


def main() -> int:
    ap = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    ap.add_argument("--base", required=True, help="the revision to compare against (e.g. ad4c24e)")
    ap.add_argument("--other", default="HEAD", help="the revision compared (default HEAD)")
    ap.add_argument("--keep", type=Path, help="keep the outputs here (default: a temporary directory)")
    args = ap.parse_args()
    if not POLARITY.is_file():
        print(f"same_outputs: {POLARITY} missing: run `make data`", file=sys.stderr)
        return 2
    tmp = Path(args.keep or tempfile.mkdtemp(prefix="same-outputs-"))
    tmp.mkdir(parents=True, exist_ok=True)
    labelled = tmp / "polarity-200.csv"  # 100 rows of each class, under a header label,text
    with POLARITY.open(encoding="utf-8-sig", newline="") as f:
        rows = [r for r in csv.reader(f) if len(r) == 2]
    pick = [r for r in rows if r[0] == "1"][:100] + [r for r in rows if r[0] != "1"][:100]
    with labelled.open("w", encoding="utf-8", newline="") as f:
        csv.writer(f).writerows([["label", "text"], *([label, text.strip()] for label, text in pick)])
    results = {}
    trees = []
    try:
        for name, rev in (("base", args.base), ("other", args.other)):
            tree = worktree(rev, tmp / f"tree-{name}")
            trees.append(tree)
            print(f"{name}: {rev} ({package(tree / 'src')})", flush=True)
            run_chain(tree, tmp / name, labelled)
            results[name] = digests(tmp / name)
    finally:
        for tree in trees:
            subprocess.run(["git", "worktree", "remove", "--force", str(tree)], cwd=REPO, check=False)
    base, other = results["base"], results["other"]
    common = sorted(set(base) & set(other))
    differ = [f for f in common if base[f] != other[f]]
    for f in common:
        print(f"{'same' if base[f] == other[f] else 'DIFFERENT':>9}  {f}  {other[f][:16]}")
    for f in sorted(set(base) ^ set(other)):
        print(f"{'only ' + ('base' if f in base else 'other'):>9}  {f}")
    print(f"{len(common) - len(differ)} of {len(common)} files byte-identical ({tmp})")
    return 1 if differ else 0


if __name__ == "__main__":
    sys.exit(main())
