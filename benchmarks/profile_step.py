#!/usr/bin/env python3
"""Where the time of one pretraining step goes: torch.profiler over AlbertForPreTraining's forward, MLM + SOP
loss, backward and optimizer step, the operators grouped into kinds (GEMM, attention, GELU, LayerNorm, ...).

    python benchmarks/profile_step.py                                   # albert-small, 32x128, fp32, adamw
    python benchmarks/profile_step.py --preset albert-base-v2 --batch 8 --precision bf16 --optimizer lamb
    python benchmarks/profile_step.py --ops 30                          # also the 30 costliest operators
    python benchmarks/profile_step.py --batch 16 --vocab 16000 --predictions 38   # the demo recipe's step

The step is the trainer's: its autocast at the given precision (`albert_lm.train.parallelize.autocast`),
gradient clipping at 1.0, the optimizer of `albert_lm.optim.build_optimizer`, the allocator setting of
`albert_lm.runtime.allocator` (``ALBERT_MALLOC=system`` profiles glibc's defaults). Self CPU time is summed per
operator, so an operator that calls another (a linear calling addmm) is counted once, in the callee.
"""

from __future__ import annotations

import argparse
import sys
from collections import defaultdict

# operator name fragment -> kind; the first match wins, so specific names come before general ones
KINDS: tuple[tuple[str, str], ...] = (
    ("flash_attention", "attention (SDPA)"),
    ("scaled_dot_product", "attention (SDPA)"),
    ("efficient_attention", "attention (SDPA)"),
    ("_fused_adam", "optimizer"),
    ("_foreach", "optimizer"),
    ("lamb", "optimizer"),
    ("bmm", "attention (GEMMs, softmax)"),  # only attention's products are batched (cpu_attention "gemms")
    ("addmm", "GEMM"),
    ("mm", "GEMM"),  # mm, bmm, matmul's callees
    ("linear", "GEMM"),
    ("gelu", "GELU"),
    ("tanh", "GELU"),
    ("layer_norm", "LayerNorm"),
    ("log_softmax", "log_softmax / loss"),
    ("nll_loss", "log_softmax / loss"),
    ("_softmax", "attention (GEMMs, softmax)"),
    ("dropout", "dropout"),
    ("bernoulli", "dropout"),
    ("embedding", "embedding"),
    ("index", "gather / index"),
    ("masked", "gather / index"),
    ("nonzero", "gather / index"),
    ("copy_", "copies / casts"),
    ("_to_copy", "copies / casts"),
    ("clone", "copies / casts"),
    ("contiguous", "copies / casts"),
    ("cat", "copies / casts"),
    ("norm", "grad clip / norms"),
    ("sum", "reductions"),
    ("mean", "reductions"),
    ("add", "elementwise"),
    ("mul", "elementwise"),
    ("div", "elementwise"),
    ("fill", "elementwise"),
    ("zero", "elementwise"),
)


def kind_of(name: str) -> str:
    low = name.lower()
    for fragment, kind in KINDS:
        if fragment in low:
            return kind
    return "other"


def main() -> int:
    ap = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    ap.add_argument("--preset", default="albert-small")
    ap.add_argument("--batch", type=int, default=32)
    ap.add_argument("--seq", type=int, default=128)
    ap.add_argument("--precision", choices=("fp32", "bf16"), default="fp32")
    ap.add_argument("--optimizer", choices=("adamw", "adamw_original", "lamb"), default="adamw")
    ap.add_argument("--vocab", type=int, help="vocabulary size (default: the preset's)")
    ap.add_argument(
        "--predictions",
        type=int,
        help="masked positions per sequence (default: the original's 20 per 128 tokens, at most 15%%; "
        "the demo recipe masks 30%% up to 40, about 38 per sequence)",
    )
    ap.add_argument("--steps", type=int, default=3, help="profiled steps (after 2 warm-up steps)")
    ap.add_argument("--ops", type=int, default=0, help="also print the N costliest operators")
    args = ap.parse_args()

    import torch
    from torch.profiler import ProfilerActivity, profile, record_function

    from albert_lm.config import AlbertConfig
    from albert_lm.model import AlbertForPreTraining
    from albert_lm.optim import build_optimizer
    from albert_lm.runtime.allocator import keep_freed_memory

    keep_freed_memory()  # as `albert pretrain` does (ALBERT_MALLOC=system: glibc's defaults)
    torch.manual_seed(0)
    overrides = {"vocab_size": args.vocab} if args.vocab else {}
    config = AlbertConfig.from_preset(args.preset, **overrides)
    b, t = args.batch, args.seq
    ids = torch.randint(5, config.vocab_size, (b, t))
    types = torch.zeros_like(ids)
    types[:, t // 2 :] = 1
    labels = torch.full_like(ids, -100)
    n_mask = max(1, min(round(0.15 * t), 20 * t // 128))  # the original's max_predictions_per_seq 20 per 128
    if args.predictions is not None:
        if not 1 <= args.predictions <= t - 2:
            ap.error(
                f"--predictions must be in 1..{t - 2} (the sequence's positions between [CLS] and [SEP])"
            )
        n_mask = args.predictions
    for row in range(b):
        pos = torch.randperm(t - 2)[:n_mask] + 1
        labels[row, pos] = ids[row, pos]
    batch = dict(
        input_ids=ids,
        token_type_ids=types,
        attention_mask=torch.ones_like(ids),
        mlm_labels=labels,
        sop_labels=torch.randint(0, 2, (b,)),
    )
    model = AlbertForPreTraining(config).train()
    opt = build_optimizer(model, args.optimizer, 1e-4)
    # the trainer's autocast: fp32 linear layers on the library measured fastest, under bf16 attention as
    # bf16 GEMMs on a CPU without AMX (albert_lm.train.parallelize.autocast)
    from albert_lm.runtime.fp32_linear import choose_fp32_linear
    from albert_lm.train.parallelize import autocast

    cpu, dtype = torch.device("cpu"), torch.bfloat16 if args.precision == "bf16" else None
    linear = choose_fp32_linear("auto") if dtype is None else "torch"

    def step() -> None:
        with record_function("forward"), autocast(cpu, dtype, linear):
            loss = model(**batch)["loss"]
        with record_function("backward"):
            loss.backward()
        with record_function("clip"):
            torch.nn.utils.clip_grad_norm_(model.parameters(), 1.0)
        with record_function("optimizer"):
            opt.step()
            opt.zero_grad(set_to_none=True)

    for _ in range(2):
        step()
    with profile(activities=[ProfilerActivity.CPU]) as prof:
        for _ in range(args.steps):
            step()
    events = prof.key_averages()
    phases = {
        e.key: e.cpu_time_total / args.steps / 1e3
        for e in events
        if e.key in ("forward", "backward", "clip", "optimizer")
    }
    by_kind: dict[str, float] = defaultdict(float)
    for e in events:
        if e.key in phases:
            continue
        by_kind[kind_of(e.key)] += e.self_cpu_time_total / args.steps / 1e3
    total = sum(by_kind.values())
    print(f"{args.preset} {b}x{t}, {n_mask} masked per sequence, {args.precision} {args.optimizer}, "
          f"threads {torch.get_num_threads()}: "
          f"{total:.1f} ms per step (self CPU time)")  # fmt: skip
    print("phases: " + ", ".join(f"{k} {v:.1f} ms" for k, v in phases.items()))
    for kind, ms in sorted(by_kind.items(), key=lambda kv: -kv[1]):
        print(f"  {kind:<22s} {ms:8.1f} ms  {ms / total:6.1%}")
    if args.ops:
        print(events.table(sort_by="self_cpu_time_total", row_limit=args.ops))
    return 0


if __name__ == "__main__":
    sys.exit(main())
