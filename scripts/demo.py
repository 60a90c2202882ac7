#!/usr/bin/env python3
"""The pretraining demo: real Wikipedia -> SentencePiece vocabulary -> shards -> ALBERT, in about 10 minutes.

Every step is an `albert` command, printed before it runs:

1. fetch the real Wikipedia dump (``scripts/fetch_data.py``, skipped when present) and hold out every 7th
   article (``WORKDIR/corpus``);
2. ``albert tokenizer train``: a SentencePiece unigram vocabulary on the training articles;
3. ``albert prepare``: SOP instances with n-gram masks (the original's settings), sequence length 128; the
   held-out articles with dupe factor 3 (three different pairings and maskings of the same text);
4. ``albert pretrain --recipe demo``: the small ALBERT of the pretraining issue's reference run (E 128,
   H 256, 4 shared layers, 4 heads, FFN 1024) on the CPU for ``--minutes`` of training time, evaluating on
   the held-out articles as it goes; with the budget knobs of docs/transfer.md: batch 16, 30% of the
   tokens masked and redrawn each epoch (dynamic masking), the masked-LM output bias started at the
   label frequencies (``model.mlm_bias_init: unigram``). The learning rate is laid over that time (``schedule.by: time``:
   warmup 6%, linear decay to 0 at the end of the budget), so the run ends at lr 0 whatever the machine's
   speed; the precision is ``auto``: bf16 on a CPU with native bf16 (AVX-512 BF16 / AMX), fp32 elsewhere
   (emulated bf16 is ~19x slower);
5. ``albert plot``: the curves as a PNG;
6. the held-out masked-LM and sentence-order accuracies next to the trivial baselines (the most frequent
   masked token; the majority SOP class, and 50%) and the SOP floors of shallow features (``albert data
   cues``: logistic regressions on each segment's boundary tokens, and on the A/B token overlap), with a
   verdict for each relative to its floor -- never against a figure measured on another machine, whose
   speed sets how far 10 minutes get. A difference counts when it exceeds two standard errors of the
   held-out accuracy;
7. ``albert probe``: the low-noise measure of what pretraining gave. The pretrained encoder is frozen, its
   mean-pooled last layer fed to an L2 logistic regression (C by 5-fold cross-validation) on the Pang &
   Lee sentence-polarity set (max length 64), cross-fitted (``--outer-folds 5``: each of the 4,000
   sentences scored by a probe fitted, and its C chosen, without it); the same for ``PROBE_RANDOM_SEEDS``
   random initializations of the architecture; the verdict, ABOVE / AT / BELOW random initialization,
   paired over the 4,000 sentences (the per-sentence difference's standard error plus the random seeds'
   spread: two standard errors ~1.6 points, where the 800-sentence dev split gave ~4);
8. ``albert finetune custom`` on the same split (2 epochs, batch 32, warmup 10%) from the small ALBERT
   just pretrained and from the same architecture randomly initialized (``--random-init``), ``--seeds``
   seeds each, both at lr 1e-4 (``SMALL_LR``; the presets' optimizer is the original's
   ``adamw_original``, whose missing bias correction makes its first hundreds of steps several times
   larger than torch AdamW's: at 3e-4 the random initialization collapsed to the majority class); the
   mean dev accuracy of each side with two standard errors over the seeds, and the verdict on their
   difference. ``--minilm`` adds the real all-MiniLM-L6-v2 BERT weights (lr 5e-5, one seed) for context
   (``--no-finetune`` skips steps 7 and 8).

    python scripts/demo.py                       # WORKDIR = runs/demo
    python scripts/demo.py --minutes 3 --workdir runs/demo3 --no-finetune
    python scripts/demo.py --units paragraphs --no-finetune

The SOP figure depends on what a *unit* (a line of the original's input) is. The original documents one
sentence per line, and so does this demo: chunks of 128 tokens then hold several units, almost every
label-1 instance is a swap (labels 51/49 on this corpus; 3% of the pairs take B from another document),
and sentence order is what the head must learn -- which a model this small does not yet do in 10 minutes
(it stays near the majority class). With ``--units paragraphs`` (a paragraph per line, as many Wikipedia
pipelines feed the original tool) a long paragraph fills a chunk alone, and the original's rule then takes
B from another document with label 1: 44% of the pairs are off-topic and the labels are 72/28, so "SOP
accuracy" is mostly topic-shift detection and its floor (the majority class) is already ~70%. The
reference's 64% sits between the two; ``benchmarks/bench_pretrain_reference.py`` runs transformers'
reference loop and ours on the same prepared data for the same time, to compare like with like.
``albert data cues`` (printed in step 6) measures what shallow features alone score on the held-out
pairs: on sentence units about 53% (the majority is 51.7%: there is no shortcut to sentence order), on
paragraph units about 73% (the majority is 69.5%, and the A/B token overlap spots the off-topic pairs).
An SOP accuracy means sentence-order learning only above these floors.

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
HOLDOUT_EVERY = 7
POLARITY = Path(os.environ.get("ALBERT_DATA_DIR", REPO / "data")) / "polarity" / "polarity-en-pang-lee.csv"
MINILM = Path(os.environ.get("ALBERT_DATA_DIR", REPO / "data")) / "minilm"
# For context, not a verdict: the GLUE issue's transformers BertForSequenceClassification run on MiniLM,
# 2 epochs, lr 5e-5, batch 32, max length 64 (benchmarks/bench_finetune_polarity.py runs it side by side);
# a count of epochs, so not a matter of the machine's speed.
FINETUNE_REFERENCE = 0.831
# the fine-tuning lr of the small ALBERT, pretrained and randomly initialized (see step 8 above)
SMALL_LR = "1e-4"
# random initializations the probe compares with: a probe of the small model is seconds, and five seeds
# pin the random side's mean to ~0.2 points (their sd is ~0.4 points cross-fitted)
PROBE_RANDOM_SEEDS = 5
FINETUNE_ARGS = ("--batch-size", "32", "--max-seq-length", "64", "--epochs", "2", "--warmup-fraction", "0.1")


def sh(*cmd: str) -> None:
    print(f"\n$ {shlex.join(cmd)}", flush=True)
    subprocess.run(cmd, check=True)


def albert(*args: str) -> None:
    exe = Path(sys.executable).with_name("albert")
    sh(*((str(exe),) if exe.exists() else (sys.executable, "-m", "albert_lm.cli.main")), *args)


def split_corpus(out: Path, corpus: str = "wiki") -> tuple[Path, Path, Path]:
    """Articles of the dump -> train / held-out (every 7th article): ``{train,heldout}.jsonl`` (documents,
    paragraphs split into sentences by ``albert prepare``), ``{train,heldout}.paragraphs.txt`` (the
    original's ``lines`` format with a paragraph per line, for ``--units paragraphs``) and ``train.txt``
    (for the tokenizer). ``corpus="all"``: the training side also gets the rest of the English text of
    ../shared/DATA.md (``extra_documents``); the held-out articles stay Wikipedia."""
    from albert_lm.data import ReadReport, read_documents

    out.mkdir(parents=True, exist_ok=True)
    names = ("train.jsonl", "heldout.jsonl", "train.paragraphs.txt", "heldout.paragraphs.txt", "train.txt")
    if all((out / n).exists() for n in names):
        return out / "train.jsonl", out / "heldout.jsonl", out / "train.txt"
    docs = list(read_documents([WIKI], ReadReport(), "wiki"))
    parts: dict[str, list] = {"train": [], "heldout": []}
    for i, doc in enumerate(docs):
        parts["heldout" if i % HOLDOUT_EVERY == HOLDOUT_EVERY // 2 else "train"].append(doc)
    if corpus == "all":
        parts["train"] += extra_documents()
    for name, group in parts.items():
        tmp = out / f".{name}.jsonl"
        with open(tmp, "w", encoding="utf-8") as f:
            for doc in group:
                f.write(json.dumps({"text": "\n".join(doc.units)}) + "\n")
        tmp.rename(out / f"{name}.jsonl")
        tmp = out / f".{name}.paragraphs.txt"
        with open(tmp, "w", encoding="utf-8") as f:
            for doc in group:
                f.writelines(u.strip() + "\n" for u in doc.units if u.strip())
                f.write("\n")
        tmp.rename(out / f"{name}.paragraphs.txt")
        print(f"{name}: {len(group)} articles, {sum(d.num_chars for d in group):,} characters")
    tmp = out / ".train.txt"
    with open(tmp, "w", encoding="utf-8") as f:
        for doc in parts["train"]:
            f.writelines(u + "\n" for u in doc.units)
    tmp.rename(out / "train.txt")
    return out / "train.jsonl", out / "heldout.jsonl", out / "train.txt"


def extra_documents() -> list:
    """The English text of ../shared/DATA.md besides the Wikipedia dump, as documents for the training
    side: the SQuAD v1.1 dev contexts (48 Wikipedia articles, a paragraph per context), the State of the
    Union speeches 1790-2021 (a speech per document; 10.8M characters) and the novel Botchan (a chapter per
    document; its lines are hard-wrapped, so a chapter is one paragraph). The polarity sentences are not
    used: they are the probe's and fine-tuning's data."""
    import re

    from albert_lm.data.documents import Document

    data = WIKI.parent.parent
    texts: list[str] = []
    squad = json.loads((data / "squad" / "dev-v1.1.json").read_text(encoding="utf-8"))
    texts += ["\n".join(p["context"].strip() for p in art["paragraphs"]) for art in squad["data"]]
    texts += [
        p.read_text(encoding="utf-8").strip() for p in sorted((data / "sotu" / "speeches").glob("*.txt"))
    ]
    raw = (data / "botchan" / "botchan.txt").read_text(encoding="utf-8-sig").replace("\r", "")
    body = raw[
        raw.find("CHAPTER I\n") : raw.find("End of Project Gutenberg")
    ]  # the Gutenberg header/licence off
    texts += [" ".join(ch.split()) for ch in re.split(r"^CHAPTER [IVX]+\.?\s*$", body, flags=re.M)]
    return [
        Document(source, i + 1, [u.strip() for u in t.splitlines() if u.strip()], presplit=False)
        for source, (i, t) in (("extra", it) for it in enumerate(texts))
        if len(t) >= 200
    ]


def auto_threads() -> int:
    """Torch threads for this machine now: the cores not busy with other work, measured over one second
    from /proc/stat (the load average would still count the set-up steps that just ran). OpenMP threads
    that share a core with another process stall each other at every barrier (measured here with one core
    busy: 1 thread 3,800 tokens/s, 2 threads 1,400)."""
    cores = os.cpu_count() or 1

    def busy_idle() -> tuple[int, int]:
        with open("/proc/stat", encoding="ascii") as f:
            v = [int(x) for x in f.readline().split()[1:]]
        idle = v[3] + (v[4] if len(v) > 4 else 0)  # idle + iowait
        return sum(v) - idle, idle

    try:
        b0, i0 = busy_idle()
        time.sleep(1.0)
        b1, i1 = busy_idle()
        busy = round(cores * (b1 - b0) / max(1, (b1 - b0) + (i1 - i0)))
    except (OSError, ValueError, IndexError):
        busy = int(os.getloadavg()[0] + 0.5) if hasattr(os, "getloadavg") else 0
    return max(1, min(cores, cores - busy))


def standard_error(accuracy: float, n: float) -> float:
    """Binomial standard error of an accuracy measured on ``n`` items."""
    return math.sqrt(max(accuracy * (1 - accuracy), 0.0) / max(n, 1.0))


def verdict(name: str, got: float, floor: float, floor_name: str, se: float, of: str = "") -> str:
    """``name`` relative to a floor: ABOVE / BELOW it when the difference exceeds two standard errors
    ``se`` (``of``: what they are over, said after them), else AT it (indistinguishable on this many
    held-out items)."""
    if math.isnan(got):
        return f"{name}: not measured"
    diff = got - floor
    word = "ABOVE" if diff > 2 * se else "BELOW" if diff < -2 * se else "AT"
    return (
        f"{name}: {word} {floor_name} ({got:.1%} vs {floor:.1%}: {diff * 100:+.1f} points, "
        f"two standard errors {2 * se * 100:.1f}{of})"
    )


def precision_note() -> str:
    """What ``precision: auto`` picks on this CPU, and why (the pretraining logs it too)."""
    from albert_lm.runtime.precision import native_bf16

    native, why = native_bf16("cpu")
    return f"precision auto -> {'bf16' if native else 'fp32'}: {why}"


def main() -> int:
    ap = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    ap.add_argument("--workdir", type=Path, default=REPO / "runs" / "demo")
    ap.add_argument("--minutes", type=float, default=10.0, help="training time budget of the pretraining")
    ap.add_argument(
        "--vocab-size", type=int, default=16000, help="SentencePiece pieces (this corpus allows ~20k)"
    )
    ap.add_argument("--threads", type=int, default=None, help="torch threads (default: the idle cores)")
    ap.add_argument(
        "--steps",
        type=int,
        default=None,
        help="cap on optimizer steps (default: none; the learning rate follows the training time)",
    )
    ap.add_argument("--fresh", action="store_true", help="delete WORKDIR first")
    ap.add_argument(
        "--corpus",
        choices=("all", "wiki"),
        default="wiki",
        help="pretraining text: the Wikipedia dump (the default) or all of the English text of ../shared/DATA.md "
        "(+ SQuAD contexts, State of the Union speeches, Botchan: 6x the text; measured in docs/transfer.md: "
        "no gain on the polarity probe at the demo's budget); held out: Wikipedia either way",
    )
    ap.add_argument("--no-finetune", action="store_true", help="stop after pretraining (skip steps 7-8)")
    ap.add_argument(
        "--seeds",
        type=int,
        default=3,
        help="fine-tuning seeds of each side (the probe compares with 5 random inits)",
    )
    ap.add_argument("--minilm", action="store_true", help="also fine-tune MiniLM (one seed), for context")
    ap.add_argument(
        "--units",
        choices=("sentences", "paragraphs"),
        default="sentences",
        help="what a line of the original's input is: sentences (its documented format; the default) or "
        "whole paragraphs (a long paragraph then fills a chunk alone and B comes from another document: "
        "~40%% off-topic pairs, SOP labels ~70/30)",
    )
    args = ap.parse_args()
    work: Path = args.workdir
    if args.fresh:
        shutil.rmtree(work, ignore_errors=True)
    t0 = time.time()
    retune = args.threads is None  # chosen from a moment's load: the trainer re-decides it while it runs
    if args.threads is None:
        args.threads = auto_threads()
        print(f"torch threads: {args.threads} (idle cores now; --threads to choose)")
    print(precision_note())

    if not WIKI.exists():
        sh(sys.executable, str(REPO / "scripts" / "fetch_data.py"))
    print(f"\n== 1. corpus: {WIKI}")
    marker = work / "corpus" / "CORPUS"  # which text WORKDIR's corpus, vocabulary and shards came from
    built = marker.read_text().strip() if marker.exists() else None
    if built is None and (work / "corpus" / "train.jsonl").exists():
        built = "wiki"  # a WORKDIR of the demo before --corpus
    if built not in (None, args.corpus):
        sys.exit(f"{work} was built from --corpus {built}; pass that, another --workdir, or --fresh")
    if args.corpus == "all" and not (WIKI.parent.parent / "sotu" / "speeches").is_dir():
        sh(sys.executable, str(REPO / "scripts" / "fetch_data.py"), "sotu")
    train_jsonl, held_jsonl, train_txt = split_corpus(work / "corpus", args.corpus)
    marker.write_text(args.corpus + "\n")

    tok = work / "tokenizer"
    print("\n== 2. SentencePiece vocabulary")
    if not (tok / "spiece.model").exists():
        albert("tokenizer", "train", "--input", str(train_txt), "--vocab-size", str(args.vocab_size),
               "--output", str(tok), "--no-progress")  # fmt: skip
    else:
        print(f"(exists: {tok})")

    print("\n== 3. pretraining data")
    data_root = work / ("data" if args.units == "sentences" else "data-paragraphs")
    train_data, held_data = data_root / "train", data_root / "heldout"
    corpus = {"train": train_jsonl, "heldout": held_jsonl}
    fmt: tuple[str, ...] = ()
    if args.units == "paragraphs":
        corpus = {k: work / "corpus" / f"{k}.paragraphs.txt" for k in corpus}
        fmt = ("--format", "lines")
    workers = str(min(os.cpu_count() or 1, 4))
    if not (train_data / "manifest.json").exists():
        albert("prepare", "--input", str(corpus["train"]), *fmt, "--tokenizer", str(tok), "--output",
               str(train_data), "--max-seq-length", "128", "--workers", workers)  # fmt: skip
    if not (held_data / "manifest.json").exists():
        albert("prepare", "--input", str(corpus["heldout"]), *fmt, "--tokenizer", str(tok), "--output",
               str(held_data), "--max-seq-length", "128", "--dupe-factor", "3")  # fmt: skip

    print(f"\n== 4. pretraining ({args.minutes:g} minutes of training)")
    run_dir = work / ("pretrain" if args.units == "sentences" else "pretrain-paragraphs")
    if not (run_dir / "result.json").exists():
        common = ["--set", f"run.max_time_minutes={args.minutes}", "--set", "run.eval_batches=1000"]
        if args.threads:
            common += ["--set", f"run.threads={args.threads}"]
        if retune:
            common += ["--set", "run.adaptive_threads_minutes=2"]
        if (run_dir / "checkpoints").exists():
            albert("pretrain", "--resume", str(run_dir), *common)
        else:
            cap = ("--set", f"schedule.train_steps={args.steps}") if args.steps else ()
            # a run dir without checkpoints: a run stopped before its first one, started over
            again = ("--overwrite",) if run_dir.exists() else ()
            albert(
                "pretrain", "--recipe", "demo", "--data-dir", str(train_data), "--eval-data-dir", str(held_data),
                "--tokenizer", str(tok), "--output", str(run_dir), *again, *cap, *common,
            )  # fmt: skip
    else:
        print(f"(done: {run_dir}; --fresh to redo)")

    print("\n== 5. curves")
    albert("plot", str(run_dir))

    print("\n== 6. held-out accuracy")
    report_heldout(train_data, held_data, run_dir, args.units)
    print(f"curves: {run_dir / 'curves.png'}; model directory: {run_dir / 'model'}")
    verdicts = []
    if not args.no_finetune:
        probe = probe_polarity(work / "finetune", run_dir / "model", args.threads)
        c, p = probe["comparison"], probe["probe"]
        verdicts.append(
            f"linear probe: pretrained {c['verdict']} random initialization ({p['dev_accuracy']:.1%} vs "
            f"{c['random_init_mean']:.1%} over {len(c['random_init_accuracies'])} seeds: "
            f"{c['difference'] * 100:+.1f} points, two standard errors {c['two_standard_errors'] * 100:.1f}, "
            f"paired over the {p['num_dev']:,} cross-fitted sentences)"
        )
        print(verdicts[-1])
        verdicts += finetune_polarity(work / "finetune", run_dir / "model", args.seeds, args.minilm)
        print("\n== verdicts")
        for v in verdicts:
            print(v)
    print(f"\ndemo total {time.time() - t0:.0f}s")
    return 0


def report_heldout(train_data: Path, held_data: Path, run_dir: Path, units: str) -> None:
    """Step 6: the held-out accuracies of the run next to the baselines and floors, and a verdict for each."""
    from albert_lm.data.cues import sop_cues
    from albert_lm.pretrain.run import baselines

    base = baselines(train_data, held_data, max_batches=1000)
    cues = sop_cues(train_data, held_data)["accuracy"]  # `albert data cues TRAIN HELDOUT`, ~20 s
    result = json.loads((run_dir / "result.json").read_text())
    ev = result["eval_metrics"]
    mlm, sop = ev.get("eval_mlm_accuracy", math.nan), ev.get("eval_sop_accuracy", math.nan)
    rows = [
        ("", "MLM accuracy", "SOP accuracy"),
        ("this run (albert pretrain)", f"{mlm:.1%}", f"{sop:.1%}"),
        ("baseline: most frequent token / majority", f"{base['mlm_most_frequent_accuracy']:.1%}",
         f"{base['sop_majority_accuracy']:.1%}"),
        ("baseline: chance", "", "50.0%"),
        ("floor: boundary tokens (logistic regr.)", "", f"{cues['boundary_tokens']:.1%}"),
        ("floor: A/B token overlap (logistic regr.)", "", f"{cues['overlap']:.1%}"),
    ]  # fmt: skip
    for a, b, c in rows:
        print(f"{a:<42}{b:>14}{c:>14}")
    n_mlm, n_sop = ev.get("eval_masked_tokens", 0.0), ev.get("eval_sequences", 0.0)
    print(
        f"\n{result['steps']} steps, {result['tokens']:,} tokens in {result['elapsed_s'] / 60:.1f} min of training "
        f"({result['tokens'] / max(result['elapsed_s'], 1e-9):,.0f} tokens/s; stopped by {result['stop_reason']}); "
        f"held-out: {n_mlm:,.0f} masked tokens, {n_sop:,.0f} sequences"
    )  # fmt: skip
    print(verdict("MLM", mlm, base["mlm_most_frequent_accuracy"], "the most frequent token (unigram baseline)",
                  standard_error(mlm, n_mlm)))  # fmt: skip
    # the SOP floor: the best that the majority class or a shallow feature reaches on these pairs
    floors = {"the majority class": base["sop_majority_accuracy"], "the boundary-token floor":
              cues["boundary_tokens"], "the A/B-overlap floor": cues["overlap"]}  # fmt: skip
    name, floor = max(floors.items(), key=lambda kv: kv[1])
    print(verdict("SOP", sop, floor, f"{name}, the highest SOP floor", standard_error(sop, n_sop)))
    if units == "sentences":
        print("(SOP on sentence units is sentence order proper; see --units paragraphs and this script's")
        print(" docstring for what SOP accuracy measures on paragraph units)")


def probe_polarity(out: Path, pretrained: Path, threads: int | None) -> dict:
    """Step 7: the low-noise measure. `albert probe`: the pretrained encoder frozen, its mean-pooled features
    and a logistic regression, cross-fitted over all 4,000 polarity sentences (5 outer folds); the same for
    ``PROBE_RANDOM_SEEDS`` random initializations; the verdict paired over the 4,000 sentences."""
    print(
        "\n== 7. linear probe on sentence polarity (Pang & Lee, 4,000 sentences, each scored by a probe fitted "
        "without it; frozen encoders)"
    )
    report = out / "probe.json"
    if not report.exists() or not json.loads(report.read_text())["probe"].get("outer_folds"):
        threads_arg = ("--threads", str(threads)) if threads else ()
        albert("probe", "--model", str(pretrained), "--train", str(POLARITY), "--columns", "label,text",
               "--outer-folds", "5", "--max-seq-length", "64", "--compare-random-init", str(PROBE_RANDOM_SEEDS),
               "--output", str(report), *threads_arg)  # fmt: skip
    else:
        print(f"(done: {report})")
    return json.loads(report.read_text())


def finetune_polarity(out: Path, pretrained: Path, seeds: int, minilm: bool) -> list[str]:
    """Step 8: fine-tuning from the pretrained small ALBERT and from the same architecture randomly
    initialized, ``seeds`` seeds each (the seed of the head's initialization, dropout and data order);
    the mean dev accuracy of each side with two standard errors over the seeds, and the verdict on their
    difference. ``minilm``: also the real MiniLM BERT weights, one seed, for context."""
    print(f"\n== 8. fine-tuning on sentence polarity, {seeds} seeds each")
    runs = [("small ALBERT pretrained above", "albert-pretrained", pretrained, ("--learning-rate", SMALL_LR))]
    runs.append(("small ALBERT, random initialization", "albert-random", pretrained,
                 ("--learning-rate", SMALL_LR, "--random-init")))  # fmt: skip
    results: dict[str, list[float]] = {}
    for label, name, init, extra in runs:
        for seed in range(1, seeds + 1):
            acc = _finetune(out / f"{name}-seed{seed}", init, (*extra, "--seed", str(seed)))
            results.setdefault(label, []).append(acc)
    if minilm:
        results["all-MiniLM-L6-v2 (real BERT weights), seed 1"] = [
            _finetune(out / "minilm", MINILM, ("--learning-rate", "5e-5", "--seed", "1"))
        ]
    print(f"\n{'polarity dev accuracy (800 sentences), last':<46}{'mean':>8}{'2 s.e.':>8}  seeds")
    stats = {}
    for label, accs in results.items():
        m, se = mean_se(accs)
        stats[label] = (m, se)
        print(f"{label:<46}{m:>8.1%}{2 * se:>8.1%}  {', '.join(f'{a:.1%}' for a in accs)}")
    print(f"{'(context) transformers on MiniLM, 2 epochs':<46}{FINETUNE_REFERENCE:>8.1%}")
    (pm, pse), (rm, rse) = stats[runs[0][0]], stats[runs[1][0]]
    line = verdict("fine-tuned pretrained small ALBERT", pm, rm, "random initialization", math.hypot(pse, rse),
                   " over the seeds")  # fmt: skip
    print(line)
    return [line]


def _finetune(run: Path, init: Path, extra: tuple[str, ...]) -> float:
    if not (run / "report.json").exists():
        shutil.rmtree(run, ignore_errors=True)
        albert("finetune", "custom", "--train", str(POLARITY), "--columns", "label,text", "--dev-fraction",
               "0.2", "--split-seed", "0", "--model", str(init), "--output", str(run), "--no-progress",
               *FINETUNE_ARGS, *extra)  # fmt: skip
    report = json.loads((run / "report.json").read_text())
    return float(report["checkpoints"]["last"].get("accuracy", math.nan))


def mean_se(values: list[float]) -> tuple[float, float]:
    """Mean and its standard error (sample sd / sqrt(n); 0 for one value)."""
    n = len(values)
    m = sum(values) / n
    if n < 2:
        return m, 0.0
    return m, math.sqrt(sum((v - m) ** 2 for v in values) / (n - 1) / n)


if __name__ == "__main__":
    sys.exit(main())
