#!/usr/bin/env python3
"""Attention under bf16 autocast on a CPU: bf16 or fp32 SDPA, side by side in one run (issue 24).

Two parts:

1. torch's SDPA kernels alone, (B, 12 heads, T, 64) with a padding mask, forward + backward and forward only:
   the flash kernel in bf16, the flash kernel in fp32, and the math kernel in bf16. On a CPU without AMX the
   bf16 flash kernel was the slower one (2-core AMD EPYC with avx512_bf16, one thread: 8x128 forward +
   backward 66 ms vs 37 in fp32), which is why the trainer runs attention in fp32 there
   (`albert.train.parallelize.attention_fp32`).
2. The whole training step (forward, MLM + SOP loss, backward, AdamW) under bf16 autocast, with attention in
   bf16 and in fp32 (`albert.model.encoder.cpu_attention_in_fp32`), the two taking turns step by step in one
   process, so that a drifting machine hits both alike. Prints both medians and their ratio.

    python benchmarks/bench_attention.py                          # albert-base 8x128, 2 threads
    python benchmarks/bench_attention.py --preset albert-small --batch 32 --threads 1 --steps 8
    python benchmarks/bench_attention.py --part kernels
"""

from __future__ import annotations

import argparse
import statistics
import sys
import time


def kernels(threads: int, reps: int) -> None:
    import torch
    import torch.nn.functional as F
    from torch.nn.attention import SDPBackend, sdpa_kernel

    def timed(b: int, t: int, dtype: torch.dtype, train: bool, backend: SDPBackend) -> float:
        q, k, v = (torch.randn(b, 12, t, 64, dtype=dtype, requires_grad=train) for _ in range(3))
        mask = torch.ones(b, 1, 1, t, dtype=torch.bool)
        mask[0, ..., t // 2 :] = False  # one padded sequence, as in a real batch
        times = []
        with sdpa_kernel(backend):
            for i in range(reps + 1):
                t0 = time.perf_counter()
                if train:
                    F.scaled_dot_product_attention(q, k, v, attn_mask=mask).sum().backward()
                else:
                    with torch.no_grad():
                        F.scaled_dot_product_attention(q, k, v, attn_mask=mask)
                if i:  # the first call is a warm-up
                    times.append(time.perf_counter() - t0)
        return statistics.median(times) * 1e3

    print(f"SDPA kernels, heads 12 x 64, one padded sequence, threads {threads}, median of {reps} (ms)")
    print(f"  {'shape':<16s} {'flash bf16':>11s} {'flash fp32':>11s} {'math bf16':>10s}  fp32 / bf16 flash")
    for b, t in ((8, 128), (32, 128), (4, 512)):
        for train in (True, False):
            fb = timed(b, t, torch.bfloat16, train, SDPBackend.FLASH_ATTENTION)
            ff = timed(b, t, torch.float32, train, SDPBackend.FLASH_ATTENTION)
            mb = timed(b, t, torch.bfloat16, train, SDPBackend.MATH)
            what = f"{b}x{t} {'fwd+bwd' if train else 'fwd'}"
            print(
                f"  {what:<16s} {fb:11.1f} {ff:11.1f} {mb:10.1f}  {fb / ff:.2f}x faster in fp32", flush=True
            )


def step(preset: str, batch: int, seq: int, steps: int) -> None:
    import torch

    from albert.config import AlbertConfig
    from albert.model import AlbertForPreTraining
    from albert.model.encoder import cpu_attention_in_fp32
    from albert.optim import build_optimizer

    torch.manual_seed(0)
    config = AlbertConfig.from_preset(preset)
    ids = torch.randint(5, config.vocab_size, (batch, seq))
    labels = torch.full_like(ids, -100)
    n_mask = max(1, min(round(0.15 * seq), 20 * seq // 128))  # the original's 20 predictions per 128
    labels[:, 1 : 1 + n_mask] = ids[:, 1 : 1 + n_mask]
    data = dict(
        input_ids=ids,
        token_type_ids=torch.zeros_like(ids),
        attention_mask=torch.ones_like(ids),
        mlm_labels=labels,
        sop_labels=torch.randint(0, 2, (batch,)),
    )
    model = AlbertForPreTraining(config).train()
    opt = build_optimizer(model, "adamw", 1e-4)

    def one(fp32: bool) -> float:
        t0 = time.perf_counter()
        with torch.autocast("cpu", dtype=torch.bfloat16), cpu_attention_in_fp32(fp32):
            loss = model(**data)["loss"]
        loss.backward()
        opt.step()
        opt.zero_grad(set_to_none=True)
        return time.perf_counter() - t0

    one(False), one(True)  # warm-up (and the optimizer state)
    times: dict[bool, list[float]] = {False: [], True: []}
    for _ in range(steps):
        for upcast in (False, True):
            times[upcast].append(one(upcast))
    bf16, fp32 = statistics.median(times[False]), statistics.median(times[True])
    print(f"training step, {preset} {batch}x{seq}, bf16 autocast, AdamW, {steps} steps each, taking turns:")
    print(f"  attention in bf16 {bf16:.3f} s, in fp32 {fp32:.3f} s: fp32 attention {bf16 / fp32:.3f}x")
    faster = sum(f < b for b, f in zip(times[False], times[True]))
    print(f"  fp32 attention was the faster of the pair in {faster} of {steps} turns")


def main() -> int:
    ap = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    ap.add_argument("--part", choices=("kernels", "step", "both"), default="both")
    ap.add_argument("--preset", default="albert-base-v2")
    ap.add_argument("--batch", type=int, default=8)
    ap.add_argument("--seq", type=int, default=128)
    ap.add_argument("--steps", type=int, default=6, help="timed steps per side (part 2)")
    ap.add_argument("--reps", type=int, default=4, help="timed calls per kernel and shape (part 1)")
    ap.add_argument("--threads", type=int, default=2)
    args = ap.parse_args()
    for name in ("batch", "seq", "steps", "reps", "threads"):
        if getattr(args, name) < 1:
            ap.error(f"--{name} must be >= 1 (got {getattr(args, name)})")

    import torch

    from albert.config import PRESETS
    from albert.train.precision import cpu_capability

    if args.preset not in PRESETS:
        ap.error(f"--preset {args.preset!r} is not a preset: one of {', '.join(sorted(PRESETS))}")

    torch.set_num_threads(args.threads)
    print(f"cpu: {cpu_capability()}; torch {torch.__version__}, threads {args.threads}")
    if args.part in ("kernels", "both"):
        kernels(args.threads, args.reps)
    if args.part in ("step", "both"):
        step(args.preset, args.batch, args.seq, args.steps)
    return 0


if __name__ == "__main__":
    sys.exit(main())
