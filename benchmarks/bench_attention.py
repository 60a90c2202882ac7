#!/usr/bin/env python3
"""Attention under bf16 autocast on a CPU: torch's bf16 SDPA, SDPA in fp32, or bf16 GEMMs around an fp32
softmax, side by side in one run (issue 24).

Two parts:

1. The kernels alone, (B, 12 heads, T, 64) with a padding mask, forward + backward and forward only: torch's
   flash kernel in bf16, the flash kernel in fp32 (inputs upcast, output cast back, as
   ``cpu_attention("fp32")`` runs it), the math kernel in bf16, and attention as bf16 GEMMs
   (`albert_lm.model.encoder.attention_by_gemms`), the four taking turns call by call. On a CPU without AMX the
   bf16 flash kernel was the slowest in training (2-core AMD EPYC with avx512_bf16, one thread: 8x128
   forward + backward 66 ms vs 37 in fp32), which is why the trainer does not run it there
   (`albert_lm.train.parallelize.cpu_attention_rule`).
2. The whole training step (forward, MLM + SOP loss, backward, AdamW) under bf16 autocast with attention each
   of three ways (`albert_lm.runtime.attention.cpu_attention`: None = torch's bf16 SDPA, "fp32", "gemms"), taking
   turns step by step in one process, so that a drifting machine hits all alike. Prints the medians, the
   ratios to the gemms step and the paired differences with two standard errors.

    python benchmarks/bench_attention.py                          # albert-base 8x128, 2 threads
    python benchmarks/bench_attention.py --preset albert-base-v2 --batch 4 --seq 512 --steps 6 --part step
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

    from albert_lm.model.encoder import attention, attention_by_gemms
    from albert_lm.runtime.attention import cpu_attention

    def flash(q, k, v, mask):  # type: ignore[no-untyped-def]
        with sdpa_kernel(SDPBackend.FLASH_ATTENTION):
            return F.scaled_dot_product_attention(q, k, v, attn_mask=mask)

    def flash_fp32(q, k, v, mask):  # type: ignore[no-untyped-def]
        with sdpa_kernel(SDPBackend.FLASH_ATTENTION), cpu_attention("fp32"):
            return attention(q, k, v, mask, 0.0)

    def math(q, k, v, mask):  # type: ignore[no-untyped-def]
        with sdpa_kernel(SDPBackend.MATH):
            return F.scaled_dot_product_attention(q, k, v, attn_mask=mask)

    ways = {
        "flash bf16": flash,
        "flash fp32": flash_fp32,
        "math bf16": math,
        "gemms bf16": lambda q, k, v, mask: attention_by_gemms(q, k, v, mask, 0.0),
    }

    def timed(b: int, t: int, train: bool) -> dict[str, float]:
        q, k, v = (torch.randn(b, 12, t, 64, dtype=torch.bfloat16, requires_grad=train) for _ in range(3))
        mask = torch.ones(b, 1, 1, t, dtype=torch.bool)
        mask[0, ..., t // 2 :] = False  # one padded sequence, as in a real batch
        times: dict[str, list[float]] = {name: [] for name in ways}
        for i in range(reps + 1):
            for name, way in ways.items():
                t0 = time.perf_counter()
                if train:
                    way(q, k, v, mask).sum().backward()
                else:
                    with torch.no_grad():
                        way(q, k, v, mask)
                if i:  # the first round is a warm-up
                    times[name].append(time.perf_counter() - t0)
        return {name: statistics.median(ts) * 1e3 for name, ts in times.items()}

    print(f"attention kernels, heads 12 x 64, one padded sequence, threads {threads}, median of {reps} (ms)")
    print(f"  {'shape':<16s}" + "".join(f"{name:>12s}" for name in ways) + "   gemms vs the best other")
    for b, t in ((8, 128), (32, 128), (4, 256), (4, 512)):
        for train in (True, False):
            ms = timed(b, t, train)
            best_other = min(v for name, v in ms.items() if name != "gemms bf16")
            what = f"{b}x{t} {'fwd+bwd' if train else 'fwd'}"
            cells = "".join(f"{ms[name]:12.1f}" for name in ways)
            print(f"  {what:<16s}{cells}   {best_other / ms['gemms bf16']:.2f}x", flush=True)


def step(preset: str, batch: int, seq: int, steps: int) -> None:
    import torch

    from albert_lm.config import AlbertConfig
    from albert_lm.model import AlbertForPreTraining
    from albert_lm.optim import build_optimizer
    from albert_lm.runtime.attention import cpu_attention

    torch.manual_seed(0)
    config = AlbertConfig.from_preset(preset)
    ids = torch.randint(5, config.vocab_size, (batch, seq))
    labels = torch.full_like(ids, -100)
    n_mask = max(1, min(round(0.15 * seq), 20 * seq // 128))  # the original's 20 predictions per 128
    labels[:, 1 : 1 + n_mask] = ids[:, 1 : 1 + n_mask]
    mask = torch.ones_like(ids)
    mask[0, seq // 2 :] = 0  # one padded sequence
    data = dict(
        input_ids=ids,
        token_type_ids=torch.zeros_like(ids),
        attention_mask=mask,
        mlm_labels=labels,
        sop_labels=torch.randint(0, 2, (batch,)),
    )
    model = AlbertForPreTraining(config).train()
    opt = build_optimizer(model, "adamw", 1e-4)
    modes: dict[str, str | None] = {"bf16 SDPA": None, "fp32 SDPA": "fp32", "gemms": "gemms"}

    def one(mode: str | None) -> float:
        t0 = time.perf_counter()
        with torch.autocast("cpu", dtype=torch.bfloat16), cpu_attention(mode):
            loss = model(**data)["loss"]
        loss.backward()
        opt.step()
        opt.zero_grad(set_to_none=True)
        return time.perf_counter() - t0

    for mode in modes.values():  # warm-up (and the optimizer state)
        one(mode)
    times: dict[str, list[float]] = {name: [] for name in modes}
    for _ in range(steps):
        for name, mode in modes.items():
            times[name].append(one(mode))
    print(f"training step, {preset} {batch}x{seq}, bf16 autocast, AdamW, {steps} steps each, taking turns:")
    gemms = times["gemms"]
    for name, ts in times.items():
        line = f"  attention {name:<10s} {statistics.median(ts):.3f} s"
        if name != "gemms":
            diffs = [a - b for a, b in zip(ts, gemms)]
            se = statistics.stdev(diffs) / len(diffs) ** 0.5 if len(diffs) > 1 else float("nan")
            faster = sum(d > 0 for d in diffs)
            line += (
                f"   gemms {statistics.median(ts) / statistics.median(gemms):.3f}x faster, "
                f"{statistics.mean(diffs) * 1e3:+.0f} +- {2 * se * 1e3:.0f} ms, the faster in {faster} of {steps}"
            )
        print(line)


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

    from albert_lm.config import PRESETS
    from albert_lm.runtime.precision import cpu_capability

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
