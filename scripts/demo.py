#!/usr/bin/env python3
"""The pretraining demo: real Wikipedia -> SentencePiece vocabulary -> shards -> ALBERT, in about 10 minutes.

Every step is an `albert` command, printed before it runs:

1. fetch the real Wikipedia dump (``scripts/fetch_data.py``, skipped when present) and hold out every 7th
   article (``WORKDIR/corpus``);
2. ``albert tokenizer train``: a SentencePiece unigram vocabulary on the training articles;
3. ``albert prepare``: SOP instances with n-gram masks (the original's settings), sequence length 128; the
   held-out articles once (dupe factor 1), so each held-out sequence is evaluated once;
4. ``albert pretrain --recipe demo``: the small ALBERT of the pretraining issue's reference run (E 128,
   H 256, 4 shared layers, 4 heads, FFN 1024) on the CPU for ``--minutes`` of training time, evaluating on
   the held-out articles as it goes;
5. ``albert plot``: the curves as a PNG;
6. the held-out masked-LM and sentence-order accuracies next to the trivial baselines (the most frequent
   masked token; the majority SOP class, and 50%) and the reference run (transformers'
   AlbertForPreTraining, same size, AdamW 5e-4, 10 minutes on these 2 cores: MLM 9.1%, SOP 64%).

    python scripts/demo.py                       # WORKDIR = runs/demo
    python scripts/demo.py --minutes 3 --workdir runs/demo3

Rerunning skips finished steps (and resumes an interrupted pretraining run); ``--fresh`` starts over.
"""

from __future__ import annotations

import argparse
import json
import math
import os
import shlex
import shutil
import subprocess
import sys
import time
from pathlib import Path

REPO = Path(__file__).resolve().parent.parent
WIKI = Path(os.environ.get("ALBERT_DATA_DIR", REPO / "data")) / "wiki" / "enwiki-shortened.xml.bz2"
REFERENCE = {"mlm": 0.091, "sop": 0.64, "mlm_baseline": 0.062, "tokens": 2.3e6, "tokens_per_s": 3800}
HOLDOUT_EVERY = 7


def sh(*cmd: str) -> None:
    print(f"\n$ {shlex.join(cmd)}", flush=True)
    subprocess.run(cmd, check=True)


def albert(*args: str) -> None:
    exe = Path(sys.executable).with_name("albert")
    sh(*((str(exe),) if exe.exists() else (sys.executable, "-m", "albert.cli.main")), *args)


def split_corpus(out: Path) -> tuple[Path, Path, Path]:
    """Articles of the dump -> train / held-out (every 7th article) as JSONL (for prepare) and text (for
    the tokenizer)."""
    from albert.data import ReadReport, read_documents

    out.mkdir(parents=True, exist_ok=True)
    train_jsonl, held_jsonl, train_txt = out / "train.jsonl", out / "heldout.jsonl", out / "train.txt"
    if train_jsonl.exists() and held_jsonl.exists() and train_txt.exists():
        return train_jsonl, held_jsonl, train_txt
    docs = list(read_documents([WIKI], ReadReport(), "wiki"))
    parts: dict[str, list] = {"train": [], "heldout": []}
    for i, doc in enumerate(docs):
        parts["heldout" if i % HOLDOUT_EVERY == HOLDOUT_EVERY // 2 else "train"].append(doc)
    for name, group in parts.items():
        tmp = out / f".{name}.jsonl"
        with open(tmp, "w", encoding="utf-8") as f:
            for doc in group:
                f.write(json.dumps({"text": "\n".join(doc.units)}) + "\n")
        tmp.rename(out / f"{name}.jsonl")
        print(f"{name}: {len(group)} articles, {sum(d.num_chars for d in group):,} characters")
    tmp = out / ".train.txt"
    with open(tmp, "w", encoding="utf-8") as f:
        for doc in parts["train"]:
            f.writelines(u + "\n" for u in doc.units)
    tmp.rename(train_txt)
    return train_jsonl, held_jsonl, train_txt


def calibrate_steps(data: Path, work: Path, minutes: float, threads: int | None) -> int:
    """Schedule length that fits the time budget: time a few steps of the demo recipe, so the learning rate
    decays to zero at the end of the budget (the budget itself stops the run in any case)."""
    cal = work / "calibrate"
    shutil.rmtree(cal, ignore_errors=True)
    args = [
        "pretrain", "--recipe", "demo", "--data-dir", str(data), "--run-dir", str(cal),
        "--set", "schedule.total_steps=12", "--set", "schedule.warmup_steps=1", "--set", "run.log_every=4",
        "--set", "run.eval_every=null", "--set", "run.save_every=null", "--set", "run.progress_bar=false",
    ]  # fmt: skip
    if threads:
        args += ["--set", f"run.threads={threads}"]
    albert(*args)
    recs = [json.loads(line) for line in (cal / "metrics.jsonl").read_text().splitlines()]
    tps = sorted(r["tokens_per_s"] for r in recs[1:])[len(recs[1:]) // 2]  # median after the first window
    shutil.rmtree(cal, ignore_errors=True)
    cfg = json.loads(json.dumps(_demo_recipe()))
    tokens_per_step = cfg["run"]["global_batch_size"] * 128
    steps = int(tps * minutes * 60 / tokens_per_step)
    print(f"calibration: {tps:,.0f} tokens/s -> {steps} steps of {tokens_per_step} tokens in {minutes:g} min")
    return max(steps, 20)


def auto_threads() -> int:
    """Torch threads for this machine now: the cores not busy with other work. OpenMP threads that share a
    core with another process stall each other at every barrier (measured here with one core busy: 1 thread
    3,800 tokens/s, 2 threads 1,400)."""
    cores = os.cpu_count() or 1
    try:
        busy = int(os.getloadavg()[0] + 0.5)
    except OSError:
        busy = 0
    return max(1, min(cores, cores - busy))


def _demo_recipe() -> dict:
    from albert.train.config import RECIPES

    return RECIPES["demo"]


def main() -> int:
    ap = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    ap.add_argument("--workdir", type=Path, default=REPO / "runs" / "demo")
    ap.add_argument("--minutes", type=float, default=10.0, help="training time budget of the pretraining")
    ap.add_argument(
        "--vocab-size", type=int, default=16000, help="SentencePiece pieces (this corpus allows ~20k)"
    )
    ap.add_argument("--threads", type=int, default=None, help="torch threads (default: the idle cores)")
    ap.add_argument(
        "--steps", type=int, default=None, help="schedule length (default: calibrated to --minutes)"
    )
    ap.add_argument("--fresh", action="store_true", help="delete WORKDIR first")
    args = ap.parse_args()
    work: Path = args.workdir
    if args.fresh:
        shutil.rmtree(work, ignore_errors=True)
    t0 = time.time()
    if args.threads is None:
        args.threads = auto_threads()
        print(f"torch threads: {args.threads} (idle cores now; --threads to choose)")

    if not WIKI.exists():
        sh(sys.executable, str(REPO / "scripts" / "fetch_data.py"))
    print(f"\n== 1. corpus: {WIKI}")
    train_jsonl, held_jsonl, train_txt = split_corpus(work / "corpus")

    tok = work / "tokenizer"
    print("\n== 2. SentencePiece vocabulary")
    if not (tok / "spiece.model").exists():
        albert("tokenizer", "train", "--input", str(train_txt), "--vocab-size", str(args.vocab_size),
               "--output", str(tok), "--quiet")  # fmt: skip
    else:
        print(f"(exists: {tok})")

    print("\n== 3. pretraining data")
    train_data, held_data = work / "data" / "train", work / "data" / "heldout"
    workers = str(min(os.cpu_count() or 1, 4))
    if not (train_data / "manifest.json").exists():
        albert("prepare", "--input", str(train_jsonl), "--tokenizer", str(tok), "--output", str(train_data),
               "--max-seq-length", "128", "--workers", workers)  # fmt: skip
    if not (held_data / "manifest.json").exists():
        albert("prepare", "--input", str(held_jsonl), "--tokenizer", str(tok), "--output", str(held_data),
               "--max-seq-length", "128", "--dupe-factor", "1")  # fmt: skip

    print(f"\n== 4. pretraining ({args.minutes:g} minutes of training)")
    run_dir = work / "pretrain"
    if not (run_dir / "result.json").exists():
        common = ["--set", f"run.max_time_minutes={args.minutes}", "--set", "run.eval_batches=1000"]
        if args.threads:
            common += ["--set", f"run.threads={args.threads}"]
        if (run_dir / "checkpoints").exists():
            albert("pretrain", "--resume", str(run_dir), *common)
        else:
            steps = args.steps or calibrate_steps(train_data, work, args.minutes, args.threads)
            warmup = max(1, min(_demo_recipe()["schedule"]["warmup_steps"], steps // 10))
            albert(
                "pretrain", "--recipe", "demo", "--data-dir", str(train_data), "--eval-data-dir", str(held_data),
                "--tokenizer", str(tok), "--run-dir", str(run_dir), "--set", f"schedule.total_steps={steps}",
                "--set", f"schedule.warmup_steps={warmup}", *common,
            )  # fmt: skip
    else:
        print(f"(done: {run_dir}; --fresh to redo)")

    print("\n== 5. curves")
    albert("plot", str(run_dir))

    print("\n== 6. held-out accuracy")
    from albert.train.pretraining import baselines

    base = baselines(train_data, held_data, max_batches=1000)
    result = json.loads((run_dir / "result.json").read_text())
    ev = result["eval_metrics"]
    mlm, sop = ev.get("eval_mlm_accuracy", math.nan), ev.get("eval_sop_accuracy", math.nan)
    rows = [
        ("", "MLM accuracy", "SOP accuracy"),
        ("this run (albert pretrain)", f"{mlm:.1%}", f"{sop:.1%}"),
        ("reference (transformers, 10 min)", f"{REFERENCE['mlm']:.1%}", f"{REFERENCE['sop']:.0%}"),
        ("baseline: most frequent token / majority", f"{base['mlm_most_frequent_accuracy']:.1%}",
         f"{base['sop_majority_accuracy']:.1%}"),
        ("baseline: chance", "", "50.0%"),
    ]  # fmt: skip
    for a, b, c in rows:
        print(f"{a:<42}{b:>14}{c:>14}")
    print(
        f"\n{result['steps']} steps, {result['tokens']:,} tokens in {result['elapsed_s'] / 60:.1f} min of training "
        f"({result['tokens'] / max(result['elapsed_s'], 1e-9):,.0f} tokens/s; reference: "
        f"{REFERENCE['tokens']:,.0f} tokens at {REFERENCE['tokens_per_s']:,} tokens/s); "
        f"held-out: {ev.get('eval_masked_tokens', 0):,.0f} masked tokens, {ev.get('eval_sequences', 0):,.0f} sequences"
    )
    for name, got, want in (("MLM", mlm, REFERENCE["mlm"]), ("SOP", sop, REFERENCE["sop"])):
        verdict = "reached" if got >= want else "BELOW"
        print(f"{name}: {verdict} the reference ({got:.1%} vs {want:.1%})")
    print(
        f"curves: {run_dir / 'curves.png'}; model directory: {run_dir / 'model'}; total {time.time() - t0:.0f}s"
    )
    return 0


if __name__ == "__main__":
    sys.exit(main())
