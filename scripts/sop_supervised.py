#!/usr/bin/env python3
"""Issue 25 item 5: is sentence order learnable here at all? Supervised SOP fine-tuning of MiniLM.

``scripts/sop_vs_nsp.py`` continued MiniLM's pretraining with SOP for 15 minutes and the training SOP loss
stayed at 0.693. This script asks the prior question: can this encoder learn sentence order when it is the
*only* objective, as an ordinary sentence-pair classification task?

1. the corpus and document split of ``scripts/sop_vs_nsp.py`` (Wikipedia pages and State of the Union
   speeches; documents whose index is 0 or 1 mod 10 held out) and its ``albert prepare --task sop`` (MiniLM
   WordPiece vocabulary, length 128, dupe factor 1, seed 12345): the SOP pairs are the library's own
   instances (``albert_lm.data.instances``), read back from the shards, not re-implemented;
2. each instance -> one csv row (segment A, segment B, label ``in_order`` / ``swapped``), the token ids
   decoded back to text (uncased WordPiece decodes and re-encodes to the same ids almost always); the few
   instances whose B was drawn from another document (a one-unit chunk: a topic shift, not an order) are left
   out, so the task is order alone. Train: the training documents; dev: the held-out documents;
3. ``albert finetune custom --text-column a --text-pair-column b`` from ``data/minilm`` for a fixed number
   of steps (batch 32 x 128; the step count is fixed so that the result does not depend on how busy the
   shared cores are), per (lr, seed);
4. a table: dev accuracy with two binomial standard errors (on the dev size), mean and two standard errors
   across seeds, the last logged training loss; printed and written to ``--out/summary.json``.

    python scripts/sop_supervised.py --steps 8 --lrs 1e-4 --seeds 1 --train-limit 256 --out runs/sop_sup_smoke
    python scripts/sop_supervised.py --steps 450 --lrs 1e-5 3e-5 1e-4 --seeds 1      # the lr sweep
    python scripts/sop_supervised.py --steps 450 --lrs 3e-5 --seeds 1 2 3            # seeds at the best lr
    python scripts/sop_supervised.py --task pola --steps 150 --lrs 1e-4 --seeds 1    # pair-encoding control

Rerunning skips finished runs.
"""

from __future__ import annotations

import argparse
import csv
import json
import logging
import math
import shlex
import statistics
import sys
import time
from pathlib import Path
from typing import Any

sys.path.insert(0, str(Path(__file__).resolve().parent))
from demo import MINILM, POLARITY, REPO, albert, standard_error  # noqa: E402
from sop_vs_nsp import LR, STUDY_SETTINGS, write_corpus  # noqa: E402

log = logging.getLogger("sop_supervised")
# FLAG_LABEL unset / set (the pretraining head's class ids 0 / 1), per --task; nsp is the positive control:
# the same pipeline on pairs whose label is a topic shift (B from another document half of the time)
TASK_LABELS = {"sop": ("in_order", "swapped"), "nsp": ("next", "random")}
# the pair-encoding control: two polarity sentences, labelled with the polarity of segment A (pola) or of
# segment B (polb); a pair task whose signal sits in one segment, so both must reach the classifier
TASK_LABELS.update({"pola": ("neg", "pos"), "polb": ("neg", "pos")})


def polarity_pairs(work: Path, task: str) -> tuple[dict[str, Path], dict[str, dict[str, int]]]:
    """The 4,000 Pang & Lee sentences shuffled (seed 0) and paired: 1,600 training pairs from the first
    3,200, 400 dev pairs from the rest; label the polarity (file label 1 / -1) of A (``pola``) or B
    (``polb``). Returns the two csv paths and, per split, rows and the count of the second label."""
    import random

    with POLARITY.open(encoding="utf-8-sig", newline="") as f:
        rows = [(int(y), text.strip()) for y, text in csv.reader(f)]
    random.Random(0).shuffle(rows)
    side = 0 if task == "pola" else 1
    csvs, stats = {}, {}
    for split, part in (("train", rows[:3200]), ("dev", rows[3200:])):
        pairs = [(part[i], part[i + 1]) for i in range(0, len(part) - 1, 2)]
        csvs[split] = work / f"{task}_{split}.csv"
        with csvs[split].open("w", encoding="utf-8", newline="") as f:
            w = csv.writer(f)
            w.writerow(["a", "b", "label"])
            w.writerows([a[1], b[1], TASK_LABELS[task][(a, b)[side][0] == 1]] for a, b in pairs)
        stats[split] = {"rows": len(pairs), "swapped": sum((a, b)[side][0] == 1 for a, b in pairs)}
    return csvs, stats


def prepare_task(work: Path, task: str = "sop") -> dict[str, Path]:
    """``albert prepare --task TASK`` over sop_vs_nsp.py's corpus: the same arguments, the same seed."""
    corpus = write_corpus(work / "corpus")
    dirs = {}
    for split in ("train", "heldout"):
        d = dirs[split] = work / "data" / task / split
        if not (d / "manifest.json").exists():
            albert("prepare", "--input", str(corpus[split]), "--tokenizer", str(MINILM), "--output", str(d),
                   "--max-seq-length", "128", "--task", task, "--dupe-factor", "1", "--seed", "12345",
                   "--workers", "2")  # fmt: skip
    return dirs


def shards_to_csv(data_dir: Path, out: Path, tok: Any, task: str = "sop") -> dict[str, int]:
    """The SOP instances of ``data_dir`` as csv rows (a, b, label), ``tok`` (DATA_DIR's tokenizer) decoding
    the ids; B-from-another-document ones left out. Counts in ``out`` with suffix .json; cached."""
    from albert_lm.data import ShardReader, load_manifest
    from albert_lm.data.instances import FLAG_LABEL, FLAG_RANDOM_B
    from albert_lm.data.shards import iter_shard_paths

    stats = {"rows": 0, "swapped": 0, "random_b_left_out": 0}
    if out.exists():
        return json.loads(out.with_suffix(".json").read_text())
    tmp = out.with_suffix(".part")
    with tmp.open("w", encoding="utf-8", newline="") as f:
        w = csv.writer(f)
        w.writerow(["a", "b", "label"])
        for path in iter_shard_paths(data_dir, load_manifest(data_dir)):
            r = ShardReader(path)
            tokens = r["tokens"]
            for inst in r["instances"]:
                a_start, b_start, a_len, b_len, flags = (int(inst[i]) for i in (0, 1, 2, 3, 5))
                if flags & FLAG_RANDOM_B and task == "sop":
                    stats["random_b_left_out"] += 1
                    continue
                a = tok.decode(tokens[a_start : a_start + a_len].tolist())
                b = tok.decode(tokens[b_start : b_start + b_len].tolist())
                swapped = bool(flags & FLAG_LABEL)
                w.writerow([a, b, TASK_LABELS[task][swapped]])
                stats["rows"] += 1
                stats["swapped"] += swapped
            r.close()
    tmp.rename(out)
    out.with_suffix(".json").write_text(json.dumps(stats))
    return stats


def finetune(work: Path, csvs: dict[str, Path], lr: str, seed: int, args: argparse.Namespace) -> dict:
    """One ``albert finetune custom`` run (skipped when finished): its final dev accuracy and last loss."""
    hls = f"-hls{args.head_lr_scale:g}" if args.head_lr_scale != 1 else ""
    run = (
        work
        / "finetune"
        / f"{'' if args.task == 'sop' else args.task + '-'}lr{lr}-seed{seed}-steps{args.steps}{hls}"
    )
    cmd = ["finetune", "custom", "--model", str(MINILM), "--train", str(csvs["train"]), "--dev", str(csvs["dev"]),
           "--text-column", "a", "--text-pair-column", "b", "--labels", ",".join(TASK_LABELS[args.task]), "--name", args.task,
           "--max-seq-length", "128", "--batch-size", "32", "--train-steps", str(args.steps),
           "--learning-rate", lr, "--warmup-fraction", "0.1", "--eval-every", str(args.steps), "--seed", str(seed),
           "--save-every-minutes", "0", "--no-test", "--no-progress", "--output", str(run)]  # fmt: skip
    if args.train_limit:
        cmd += ["--train-limit", str(args.train_limit)]
    if args.threads:
        cmd += ["--threads", str(args.threads)]
    if args.head_lr_scale != 1:
        cmd += ["--head-lr-scale", f"{args.head_lr_scale:g}"]
    COMMANDS.append(shlex.join(("albert", *cmd)))
    if not finished(run):
        t0 = time.time()
        albert(*cmd, *(["--overwrite"] if run.exists() else []))
        log.info("lr %s seed %d: %.0f s", lr, seed, time.time() - t0)
    return read_run(run)


def read_run(run: Path) -> dict:
    """Final dev accuracy, dev size, last training loss and steps/s of a finished fine-tuning run."""
    res = json.loads((run / "result.json").read_text())
    rows = [json.loads(line) for line in (run / "metrics.jsonl").read_text().splitlines() if line.strip()]
    losses = [r["loss"] for r in rows if "loss" in r and "eval_accuracy" not in r]
    dev = [r for r in rows if "eval_accuracy" in r]
    return {"result": res, "last_loss": losses[-1] if losses else math.nan,
            "losses": losses, "dev": dev[-1] if dev else {}}  # fmt: skip


COMMANDS: list[str] = []


def finished(run: Path) -> bool:
    """A run that reached its steps (a run stopped by a signal also writes result.json: not finished)."""
    res = run / "result.json"
    return res.exists() and json.loads(res.read_text()).get("stop_reason") == "max_steps"


def pretrain_variant(work: Path, data_dir: Path, variant: str, args: argparse.Namespace) -> dict:
    """A short ``albert pretrain`` from MiniLM on the SOP training set: the continued pretraining of
    ``scripts/sop_vs_nsp.py`` (lr 1e-4, heads and pooler x10, its STUDY_SETTINGS) but laid over
    ``--pretrain-steps`` optimizer steps (warmup 10%, as the fine-tuning runs), with the ``key=value``
    settings of ``variant`` (``name:key=value,key=value``; plain ``name``: none) changed."""
    name, _, changes = variant.partition(":")
    run = work / "pretrain" / name
    sets = [f"optim.learning_rate={LR}", "optim.head_lr_scale=10", *STUDY_SETTINGS, "schedule.by=steps",
            f"schedule.train_steps={args.pretrain_steps}", f"schedule.warmup_steps={max(1, args.pretrain_steps // 10)}",
            "run.max_time_minutes=null", "run.threads=1", "run.log_every=10", "run.save_every=null",
            "run.progress=false", "run.seed=1", *(c for c in changes.split(",") if c)]  # fmt: skip
    cmd = ["pretrain", "--recipe", "demo", "--model", str(MINILM), "--data-dir", str(data_dir),
           "--tokenizer", str(MINILM), "--output", str(run), *(a for kv in sets for a in ("--set", kv))]  # fmt: skip
    COMMANDS.append(shlex.join(("albert", *cmd)))
    if not finished(run):
        albert(*cmd, *(["--overwrite"] if run.exists() else []))
    rows = [json.loads(line) for line in (run / "metrics.jsonl").read_text().splitlines() if line.strip()]
    rows = [r for r in rows if "sop_loss" in r]
    last = rows[-3:]  # the last 30 steps (960 pairs)
    return {
        "steps": rows[-1]["step"] if rows else 0,
        "sop_loss_end": statistics.fmean(r["sop_loss"] for r in last) if last else math.nan,
        "sop_accuracy_end": statistics.fmean(r["sop_accuracy"] for r in last) if last else math.nan,
        "mlm_loss_end": statistics.fmean(r["mlm_loss"] for r in last) if last else math.nan,
        "sop_loss_min": min((r["sop_loss"] for r in rows), default=math.nan),
        "curve": [(r["step"], r["sop_loss"]) for r in rows],
        "changes": changes,
    }


def plot(work: Path, png: Path) -> None:
    """SOP training loss over steps: every finished fine-tuning run (solid) and --pretrain run (dashed)."""
    import matplotlib

    matplotlib.use("Agg")
    import matplotlib.pyplot as plt

    fig, ax = plt.subplots(figsize=(8, 4.5))
    for kind, key, style in (("finetune", "loss", "-o"), ("pretrain", "sop_loss", "--")):
        for run in sorted((work / kind).glob("*")):
            if not finished(run):
                continue
            rows = [json.loads(x) for x in (run / "metrics.jsonl").read_text().splitlines() if x.strip()]
            rows = [r for r in rows if key in r and "eval_accuracy" not in r]
            label = (
                f"pretraining {run.name} (its SOP loss)" if kind == "pretrain" else f"supervised {run.name}"
            )
            label += " (NSP: the positive control)" if run.name.startswith("nsp-") else ""
            label += " (SOP)" if kind == "finetune" and run.name.startswith("lr") else ""
            ax.plot([r["step"] for r in rows], [r[key] for r in rows], style, lw=1, ms=3, label=label)
    ax.axhline(math.log(2), color="grey", lw=1, alpha=0.6, label="ln 2 = 0.693 (chance)")
    ax.set(xlabel="optimizer step (batch 32 pairs)", ylabel="training pair loss (mean since the last log)",
           title="MiniLM on sentence pairs: the training loss of each run")  # fmt: skip
    ax.legend(fontsize=7)
    fig.tight_layout()
    fig.savefig(png, dpi=110)
    log.info("wrote %s", png)


def summarize(results: dict[tuple[str, int], dict], n_dev: int) -> list[str]:
    lines = ["| lr | seeds | steps | dev accuracy per seed (± 2 s.e. binomial) | mean ± 2 s.e. across seeds | last train loss |",
             "|---|---|---|---|---|---|"]  # fmt: skip
    for lr in dict.fromkeys(k[0] for k in results):
        runs = [(s, r) for (lr2, s), r in results.items() if lr2 == lr]
        accs = [r["dev"]["eval_accuracy"] for _, r in runs]
        per = ", ".join(f"{a:.1%} ± {200 * standard_error(a, n_dev):.1f}" for a in accs)
        mean = statistics.fmean(accs)
        spread = (f"{mean:.1%} ± {200 * statistics.stdev(accs) / math.sqrt(len(accs)):.1f}"
                  if len(accs) > 1 else "(one seed)")  # fmt: skip
        loss = ", ".join(f"{r['last_loss']:.3f}" for _, r in runs)
        steps = runs[0][1]["result"].get("steps", "?")
        lines.append(f"| {lr} | {', '.join(str(s) for s, _ in runs)} | {steps} | {per} | {spread} | {loss} |")
    return lines


def main() -> int:
    ap = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    ap.add_argument("--out", type=Path, default=REPO / "runs" / "sop_supervised")
    ap.add_argument("--steps", type=int, default=450, help="optimizer steps of batch 32 per run")
    ap.add_argument("--lrs", nargs="+", default=["1e-5", "3e-5", "1e-4"])
    ap.add_argument("--seeds", type=int, nargs="+", default=[1])
    ap.add_argument(
        "--task",
        choices=tuple(TASK_LABELS),
        default="sop",
        help="nsp: the positive control; pola / polb: the pair-encoding control (polarity of A / of B)",
    )
    ap.add_argument("--train-limit", type=int, default=None, help="first N training pairs (smoke)")
    ap.add_argument(
        "--head-lr-scale", type=float, default=1.0,
        help="the classifier and the pooler at this multiple of the lr (--head-lr-scale of albert finetune)",
    )  # fmt: skip
    ap.add_argument("--threads", type=int, default=None, help="torch threads per fine-tuning run")
    ap.add_argument(
        "--pretrain", nargs="*", default=[], metavar="NAME[:KEY=VALUE,...]",
        help="short continued-pretraining runs (sop_vs_nsp.py's settings, one thing changed) instead of fine-tuning",
    )  # fmt: skip
    ap.add_argument(
        "--pretrain-steps", type=int, default=150, help="optimizer steps of batch 32 per --pretrain run"
    )
    ap.add_argument(
        "--plot", type=Path, help="only draw the SOP loss curves of the finished runs to this png"
    )
    args = ap.parse_args()
    for lr in args.lrs:
        try:
            ok = math.isfinite(float(lr)) and float(lr) > 0
        except ValueError:
            ok = False
        if not ok:
            ap.error(f"--lrs: {lr!r} is not a learning rate > 0")
    if args.steps < 1:
        ap.error(f"--steps must be >= 1 (got {args.steps})")
    if not (math.isfinite(args.head_lr_scale) and args.head_lr_scale > 0):
        ap.error(f"--head-lr-scale must be a finite number > 0 (got {args.head_lr_scale})")
    logging.basicConfig(level=logging.INFO, format="%(asctime)s %(name)s: %(message)s")
    work: Path = args.out.resolve()
    if args.plot:
        plot(work, args.plot)
        return 0
    if args.task in ("pola", "polb"):
        if args.pretrain:
            ap.error(f"--pretrain takes --task sop or nsp, not {args.task}")
        work.mkdir(parents=True, exist_ok=True)
        csvs, stats = polarity_pairs(work, args.task)
    else:
        dirs = prepare_task(work, args.task)
        csvs = {"train": work / f"{args.task}_train.csv", "dev": work / f"{args.task}_dev.csv"}
        from albert_lm.tokenizer import load_tokenizer

        tok = load_tokenizer(MINILM)
        stats = {
            name: shards_to_csv(dirs[split], csvs[name], tok, args.task)
            for name, split in (("train", "train"), ("dev", "heldout"))
        }
    log.info("pairs: %s", stats)
    if args.pretrain:
        pre = {v.partition(":")[0]: pretrain_variant(work, dirs["train"], v, args) for v in args.pretrain}
        print(
            "| run | changed | steps | SOP loss, last 30 steps | SOP accuracy, last 30 steps | lowest SOP loss logged | MLM loss, last 30 steps |"
        )
        print("|---|---|---|---|---|---|---|")
        for name, r in pre.items():
            print(f"| {name} | {r['changes'] or '-'} | {r['steps']} | {r['sop_loss_end']:.3f} | {r['sop_accuracy_end']:.1%} | "
                  f"{r['sop_loss_min']:.3f} | {r['mlm_loss_end']:.3f} |")  # fmt: skip
        print("\n".join(c.replace(f"{REPO}/", "") for c in COMMANDS))
        old = json.loads((work / "pretrain.json").read_text()) if (work / "pretrain.json").exists() else {}
        (work / "pretrain.json").write_text(json.dumps({**old, **pre}, indent=1))
        return 0
    results = {(lr, seed): finetune(work, csvs, lr, seed, args) for lr in args.lrs for seed in args.seeds}
    n_dev = stats["dev"]["rows"]
    table = summarize(results, n_dev)
    print("\n".join(table))
    print(
        f"dev: {n_dev} pairs ({stats['dev']['swapped'] / n_dev:.1%} {TASK_LABELS[args.task][1]}); "
        f"train: {stats['train']['rows']} pairs"
    )
    print("\n".join(c.replace(f"{REPO}/", "") for c in COMMANDS))
    summary = {f"lr{lr}-seed{s}": {"dev": r["dev"], "last_loss": r["last_loss"], "result": r["result"]}
               for (lr, s), r in results.items()}  # fmt: skip
    (work / "summary.json").write_text(json.dumps({"pairs": stats, "runs": summary}, indent=1))
    return 0


if __name__ == "__main__":
    sys.exit(main())
