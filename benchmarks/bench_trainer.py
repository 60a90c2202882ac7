#!/usr/bin/env python3
"""Trainer throughput, side by side in one run.

1. Our whole training loop (`albert_lm.train.Trainer`: LAMB, global-norm clipping, metrics, autocast) around our
   AlbertForPreTraining, against a plain PyTorch loop around transformers' AlbertForPreTraining (sdpa,
   torch AdamW, clipping) at the same model configuration and batch, in fp32 and bf16 autocast. Default: the
   demo's model (E 128, H 256, 4 shared layers, 4 heads, FFN 1024) at 32 x 128, the size of the pretraining
   issue's reference run (3,800 tokens/s with transformers on these 2 cores).
2. ALBERT-large against BERT-large step time in our code (paper Table 2 reports ALBERT-large 1.7x faster
   than BERT-large in training throughput, on TPUs), at a batch that fits here.

Each case runs in a fresh subprocess, ours and the reference alternating. A step is timed from one batch
request to the next (forward, backward, clipping, optimizer, logging); the median over the measured steps
is reported.

    python benchmarks/bench_trainer.py                       # both parts
    python benchmarks/bench_trainer.py --part loop --steps 10
    python benchmarks/bench_trainer.py --part large --large-batch 2 --large-seq 128
"""

from __future__ import annotations

import argparse
import contextlib
import json
import os
import statistics
import subprocess
import sys
import tempfile
import time
from typing import Any


def synthetic_batch(vocab: int, b: int, t: int, hf: bool) -> dict[str, Any]:
    import torch

    g = torch.Generator().manual_seed(0)
    ids = torch.randint(5, vocab, (b, t), generator=g)
    types = torch.zeros_like(ids)
    types[:, t // 2 :] = 1
    n_mask = max(1, min(round(0.15 * t), 20 * t // 128))  # original max_predictions_per_seq 20 at 128
    labels = torch.full_like(ids, -100)
    for row in range(b):
        pos = torch.randperm(t - 2, generator=g)[:n_mask] + 1
        labels[row, pos] = ids[row, pos]
    sop = torch.randint(0, 2, (b,), generator=g)
    batch = dict(input_ids=ids, token_type_ids=types, attention_mask=torch.ones_like(ids))
    if hf:
        return dict(batch, labels=labels, sentence_order_label=sop)
    return dict(batch, mlm_labels=labels, sop_labels=sop)


class TimedBatches:
    """Yields the same batch ``n`` times and records when each is requested (step boundaries)."""

    def __init__(self, batch: dict[str, Any], n: int) -> None:
        self.batch, self.n, self.stamps = batch, n, []

    def __iter__(self):
        for _ in range(self.n):
            self.stamps.append(time.perf_counter())
            yield self.batch
        self.stamps.append(time.perf_counter())


def worker(
    impl: str, preset: str, precision: str, b: int, t: int, steps: int, warmup: int, threads: int | None
) -> dict:
    import torch

    from albert_lm.config import AlbertConfig

    if threads:
        torch.set_num_threads(threads)
    torch.manual_seed(0)
    config = AlbertConfig.from_preset(preset)
    n = warmup + steps
    if impl in ("ours", "ours-adamw"):
        from albert_lm.model import AlbertForPreTraining
        from albert_lm.optim import build_optimizer, build_scheduler
        from albert_lm.pretrain.run import pretraining_metrics
        from albert_lm.train import Trainer, TrainerConfig

        model = AlbertForPreTraining(config)
        opt = build_optimizer(model, "lamb" if impl == "ours" else "adamw", 1e-4)
        sched = build_scheduler(opt, total_steps=10_000, warmup_steps=10)
        batches = TimedBatches(synthetic_batch(config.vocab_size, b, t, hf=False), n)
        with tempfile.TemporaryDirectory() as run_dir:
            cfg = TrainerConfig(
                max_steps=n,
                precision=precision,
                log_every=10,
                progress=False,
                save_at_end=False,
                device="cpu",
            )
            Trainer(model, opt, sched, cfg, run_dir=run_dir, metrics_fn=pretraining_metrics).fit(batches)
        stamps = batches.stamps
    else:
        import transformers

        hf_cfg = transformers.AlbertConfig(**config.to_hf_dict(), attn_implementation="sdpa")
        model = transformers.AlbertForPreTraining(hf_cfg)
        model.train()
        opt = torch.optim.AdamW(model.parameters(), lr=1e-4, eps=1e-6, weight_decay=0.01)
        batch = synthetic_batch(config.vocab_size, b, t, hf=True)
        amp = torch.autocast("cpu", dtype=torch.bfloat16, enabled=precision == "bf16")
        stamps = []
        for _ in range(n):
            stamps.append(time.perf_counter())
            with amp:
                out = model(**batch)
            out.loss.backward()
            torch.nn.utils.clip_grad_norm_(model.parameters(), 1.0)
            opt.step()
            opt.zero_grad(set_to_none=True)
            out.loss.item()  # a plain loop reads the loss
        stamps.append(time.perf_counter())
    step_times = [b - a for a, b in zip(stamps, stamps[1:])][warmup:]
    return {"median_s": statistics.median(step_times), "times": step_times, "tokens": b * t}


def run_case(
    impl: str, args: argparse.Namespace, preset: str, precision: str, b: int, t: int, steps: int
) -> dict:
    cmd = [
        sys.executable, __file__, "--worker", impl, preset, precision, str(b), str(t), str(steps),
        "--warmup", str(args.warmup),
    ]  # fmt: skip
    if args.threads:
        cmd += ["--threads", str(args.threads)]
    out = subprocess.run(cmd, check=True, capture_output=True, text=True, env=dict(os.environ)).stdout
    return json.loads(out.strip().splitlines()[-1])


def main() -> int:
    ap = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    ap.add_argument("--part", choices=["loop", "large", "all"], default="all")
    ap.add_argument("--preset", default="albert-small", help="model of part 1")
    ap.add_argument("--batch", type=int, default=32)
    ap.add_argument("--seq", type=int, default=128)
    ap.add_argument("--steps", type=int, default=8, help="measured steps per case (median reported)")
    ap.add_argument("--warmup", type=int, default=2)
    ap.add_argument("--large-batch", type=int, default=2)
    ap.add_argument("--large-seq", type=int, default=128)
    ap.add_argument("--large-steps", type=int, default=3)
    ap.add_argument("--threads", type=int, default=None)
    ap.add_argument("--json", help="also write the results here")
    ap.add_argument("--worker", nargs=6, help=argparse.SUPPRESS)
    args = ap.parse_args()
    if args.worker:
        impl, preset, precision, b, t, steps = args.worker
        print(
            json.dumps(worker(impl, preset, precision, int(b), int(t), int(steps), args.warmup, args.threads))
        )
        return 0

    import torch

    print(
        f"torch {torch.__version__}, threads {args.threads or torch.get_num_threads()}, cpu x{os.cpu_count()}"
    )
    with contextlib.suppress(OSError):
        print(f"load average {os.getloadavg()[0]:.1f} (timings on a shared machine are noisy)")
    results: dict[str, Any] = {}
    if args.part in ("loop", "all"):
        print(
            f"\n1. training loop, {args.preset}, batch {args.batch} x {args.seq}, median of {args.steps} steps"
        )
        print(
            f"{'precision':<10}{'ours LAMB tok/s':>18}{'ours AdamW tok/s':>18}{'HF loop tok/s':>16}{'ours/HF':>10}"
        )
        for precision in ("fp32", "bf16"):
            row = {}
            for impl in ("ours", "ours-adamw", "hf"):
                row[impl] = run_case(impl, args, args.preset, precision, args.batch, args.seq, args.steps)
            tps = {k: v["tokens"] / v["median_s"] for k, v in row.items()}
            results[f"loop-{precision}"] = {"tokens_per_s": tps, "raw": row}
            print(
                f"{precision:<10}{tps['ours']:>18,.0f}{tps['ours-adamw']:>18,.0f}{tps['hf']:>16,.0f}"
                f"{tps['ours'] / tps['hf']:>9.2f}x"
            )
    if args.part in ("large", "all"):
        b, t = args.large_batch, args.large_seq
        print(
            f"\n2. ALBERT-large vs BERT-large in our trainer (LAMB, fp32), batch {b} x {t}, median of {args.large_steps}"
        )
        row = {
            p: run_case("ours", args, p, "fp32", b, t, args.large_steps)
            for p in ("albert-large-v2", "bert-large")
        }
        a, bert = row["albert-large-v2"]["median_s"], row["bert-large"]["median_s"]
        results["large"] = {k: v["median_s"] for k, v in row.items()}
        print(
            f"ALBERT-large {a:.2f} s/step, BERT-large {bert:.2f} s/step: ALBERT-large {bert / a:.2f}x faster (paper: 1.7x)"
        )
    if args.json:
        with open(args.json, "w") as f:
            json.dump(results, f, indent=2)
    return 0


if __name__ == "__main__":
    sys.exit(main())
