#!/usr/bin/env python3
"""Fine-tuning epoch time: dynamic padding + length-grouped batches vs padding every batch to 128.

The original (classifier_utils.py) and transformers' run_glue example pad every sequence to
max_seq_length; `albert_lm.tasks.collate` pads each batch to its longest member and draws batches from
groups of similar length. Both runs go through the same code path (`albert_lm.finetune.run.finetune`, the
one trainer), on the same data (the polarity training split, 3200 sentences), the same model
(all-MiniLM-L6-v2) and batch size; only ``pad_to_max_length`` / ``group_by_length`` differ.

Prints, side by side: padded tokens per epoch, training time of one epoch (the trainer's clock, without
evaluation) and the speed-up (target: >= 3x).

    python benchmarks/bench_dynamic_padding.py              # one full epoch each (100 steps of 32)
    python benchmarks/bench_dynamic_padding.py --steps 30   # shorter; time scaled to an epoch
"""

from __future__ import annotations

import argparse
import functools
import logging
import shutil
import sys
from pathlib import Path

REPO = Path(__file__).resolve().parent.parent
DATA = REPO / "data" / "polarity" / "polarity-en-pang-lee.csv"
MINILM = REPO / "data" / "minilm"


def main() -> int:
    ap = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    ap.add_argument("--batch-size", type=int, default=32)
    ap.add_argument("--max-len", type=int, default=128)
    ap.add_argument("--steps", type=int, help="steps to time (default: one epoch)")
    ap.add_argument("--repeats", type=int, default=1, help="alternate the two settings this many times")
    ap.add_argument("--threads", type=int, help="torch threads (on a shared machine, 1 gives steadier times)")
    ap.add_argument("--out", type=Path, default=REPO / "runs" / "bench_padding")
    args = ap.parse_args()
    if not DATA.exists() or not MINILM.exists():
        print("data missing: run `python scripts/fetch_data.py`", file=sys.stderr)
        return 2
    logging.basicConfig(level=logging.WARNING)
    import torch

    if args.threads:
        torch.set_num_threads(args.threads)

    from albert_lm.finetune.config import FinetuneConfig
    from albert_lm.tasks.base import finetune, load_model_tokenizer
    from albert_lm.tasks.collate import LengthGroupedBatches, pad_features, padding_stats
    from albert_lm.tasks.custom import CustomData, CustomTask

    task = CustomTask(CustomData(train=DATA, columns=("label", "text"), dev_fraction=0.2, split_seed=0))
    # a tiny dev set: the evaluation is not what is timed
    task._cache["dev"] = task.read("dev")[:32]
    train = task.read("train")
    tok = load_model_tokenizer(MINILM)
    feats = task.featurize(train, tok, args.max_len)
    epoch_steps = len(LengthGroupedBatches(feats, args.batch_size, pad_features))
    steps = args.steps or epoch_steps
    grouped = LengthGroupedBatches(feats, args.batch_size, functools.partial(pad_features), seed=42)
    stats = padding_stats(grouped, fixed_length=args.max_len)

    results: dict[str, float] = {}
    modes = ((f"padded to {args.max_len}", False), ("dynamic + length-grouped", True))
    for rep in range(args.repeats):  # alternate, so both settings see the same machine load
        for name, dynamic in modes:
            cfg = FinetuneConfig(
                learning_rate=5e-5,
                batch_size=args.batch_size,
                train_steps=steps,
                warmup_fraction=0.1,
                max_seq_length=args.max_len,
                group_by_length=dynamic,
                pad_to_max_length=not dynamic,
                eval_every=10**9,
                seed=42 + rep,
                progress=False,
            )
            out = args.out / ("dynamic" if dynamic else "padded")
            if out.exists():
                shutil.rmtree(out)
            res = finetune(task, MINILM, out, cfg, predict_test=False)
            results[name] = results.get(name, 0.0) + res.train_seconds * epoch_steps / steps / args.repeats
            print(f"{name:28s}: {steps} steps in {res.train_seconds:.1f} s", flush=True)

    padded, dynamic = results.values()
    print()
    print(
        f"polarity train split: {len(feats)} sentences, batch {args.batch_size}, {epoch_steps} steps per epoch, "
        f"all-MiniLM-L6-v2, CPU, {torch.get_num_threads()} thread(s), epoch time from {args.repeats} x {steps} steps"
    )
    print(f"{'':28s} {'tokens/epoch':>14s} {'s/epoch':>9s}")
    print(f"{'real tokens':28s} {stats['real_tokens']:14.0f}")
    print(f"{'padded to ' + str(args.max_len):28s} {stats['fixed_tokens']:14.0f} {padded:9.1f}")
    print(f"{'dynamic + length-grouped':28s} {stats['dynamic_tokens']:14.0f} {dynamic:9.1f}")
    print(
        f"speed-up: {padded / dynamic:.2f}x (target >= 3x); padded tokens cut {stats['fixed_tokens'] / stats['dynamic_tokens']:.2f}x"
    )
    return 0


if __name__ == "__main__":
    sys.exit(main())
