#!/usr/bin/env python3
"""What padding costs a batch of random-length inputs, and what skipping it gives (issue 24, serving): the
model alone, no tokenizer or HTTP in the clock.

A server's batch is whatever requests arrived. The same polarity sentences (``--sentences`` drawn at random,
as `benchmarks/bench_serve.py`'s clients draw them) are run in ``--batch``-sentence model calls, five ways:

* sorted, padded / sorted, padding skipped: length-sorted batches (what `albert predict` does with a file);
* random, one padded call: the arrivals' batch padded to its longest;
* random, cut: the arrivals sorted and cut into the calls of least cost (`albert_lm.tasks.collate.cheapest_batches`
  with the predictor's ``CALL_COST_TOKENS``: what the torch server did before padding was skipped, and what the
  ONNX Runtime one does);
* random, padding skipped: one call per batch inside `albert_lm.runtime.attention.skip_padding` (what the torch
  server does now).

The five take turns (``--turns``), so a drifting host slows them alike. Prints the CPU, padded / real tokens and
model calls of each, sentences/s per turn and the median, and the ratio of each to "sorted, padded".

    python benchmarks/bench_padding.py                         # albert-base, 512 sentences, batches of 32
    python benchmarks/bench_padding.py --preset albert-tiny --sentences 128 --turns 1   # a quick check
"""

from __future__ import annotations

import argparse
import random
import statistics
import sys
import tempfile
import time
from pathlib import Path

import bench_serve  # the polarity sentences and the model directory of the serving benchmark
from bench_model import cpu_flags_line


def main() -> int:
    ap = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    ap.add_argument("--preset", default="albert-base-v2")
    ap.add_argument(
        "--sentences", type=int, default=512, help="random polarity sentences (the clients' draw)"
    )
    ap.add_argument("--batch", type=int, default=32, help="sentences per batch (the server's --max-batch)")
    ap.add_argument("--turns", type=int, default=3, help="rounds in which every way runs once")
    ap.add_argument("--threads", type=int, default=2)
    args = ap.parse_args()
    if min(args.sentences, args.batch, args.turns, args.threads) < 1:
        ap.error("--sentences, --batch, --turns and --threads must be positive")

    import torch

    from albert_lm.config import PRESETS
    from albert_lm.infer.predictor import CALL_COST_TOKENS
    from albert_lm.model import AlbertForSequenceClassification
    from albert_lm.runtime.attention import skip_padding
    from albert_lm.runtime.fp32_linear import choose_fp32_linear, fp32_linear
    from albert_lm.tasks.collate import cheapest_batches
    from albert_lm.tokenizer import load_tokenizer

    if args.preset not in PRESETS:
        ap.error(f"--preset {args.preset!r} is not a preset: one of {', '.join(sorted(PRESETS))}")
    torch.set_num_threads(args.threads)
    print(f"torch {torch.__version__}, threads {args.threads}, preset {args.preset} (random weights), fp32")
    print(f"cpu: {cpu_flags_line()}")
    texts = bench_serve.sentences()
    with tempfile.TemporaryDirectory() as tmp:
        model_dir = bench_serve.make_model_dir(Path(tmp) / "model", args.preset, texts)
        tokenizer = load_tokenizer(model_dir)
        model = AlbertForSequenceClassification.from_pretrained(model_dir).eval()
    rng = random.Random(1)
    cls, sep = tokenizer.convert_tokens_to_ids(["[CLS]", "[SEP]"])
    rows = [[cls, *tokenizer.encode_ids(rng.choice(texts))[:126], sep] for _ in range(args.sentences)]
    linear = choose_fp32_linear("auto")  # as model_predict_fn runs them

    arrivals = [rows[i : i + args.batch] for i in range(0, len(rows), args.batch)]
    ordered = sorted(rows, key=len)
    cut = []
    for batch in arrivals:
        batch = sorted(batch, key=len)
        start = 0
        for end in cheapest_batches([len(r) for r in batch], args.batch, CALL_COST_TOKENS):
            cut.append(batch[start:end])
            start = end
    sorted_calls = [ordered[i : i + args.batch] for i in range(0, len(ordered), args.batch)]
    ways = {  # name -> (model calls, padding skipped)
        "sorted, padded": (sorted_calls, False),
        "sorted, padding skipped": (sorted_calls, True),
        "random, one padded call": (arrivals, False),
        "random, cut": (cut, False),
        "random, padding skipped": (arrivals, True),
    }
    real = sum(len(r) for r in rows)
    print(f"{len(rows)} sentences, {real / len(rows):.1f} tokens on average, longest {max(map(len, rows))}; "
          f"fp32 linear {linear}\n")  # fmt: skip

    def run(calls: list[list[list[int]]], skip: bool) -> float:
        t0 = time.perf_counter()
        for batch in calls:
            t = max(len(r) for r in batch)
            ids = torch.tensor([r + [0] * (t - len(r)) for r in batch])
            mask = (torch.arange(t)[None, :] < torch.tensor([len(r) for r in batch])[:, None]).long()
            with torch.inference_mode(), fp32_linear(linear), skip_padding(skip):
                model(input_ids=ids, attention_mask=mask)
        return len(rows) / (time.perf_counter() - t0)

    run(sorted_calls[:2], False)  # warm-up
    rates: dict[str, list[float]] = {name: [] for name in ways}
    for _ in range(args.turns):
        for name, (calls, skip) in ways.items():
            rates[name].append(run(calls, skip))
    base = statistics.median(rates["sorted, padded"])
    print(f"{'way':<26s} {'padded/real':>11s} {'calls':>6s}  sentences/s per turn (median; / sorted, padded)")
    for name, (calls, skip) in ways.items():
        padded = real if skip else sum(len(b) * max(len(r) for r in b) for b in calls)
        med = statistics.median(rates[name])
        turns = " ".join(f"{r:6.1f}" for r in rates[name])
        print(f"{name:<26s} {padded / real:11.2f} {len(calls):6d}  {turns}  ({med:.1f}; {med / base:.2f}x)")
    return 0


if __name__ == "__main__":
    sys.exit(main())
