#!/usr/bin/env python3
"""The memory allocator's share of a step: glibc malloc's defaults vs freed memory kept for reuse
(`albert_lm.runtime.allocator.keep_freed_memory`, what `albert pretrain` / `finetune` / `predict` / `serve` /
`probe` do), taking turns, each (case, allocator) in a fresh process (the setting is process-wide).

Cases:
  * demo-train: the demo recipe's step (albert-small, vocabulary 16000, 16x128, 38 masked per sequence:
    30% of the tokens up to 40), forward + MLM + SOP loss + backward + clipping + AdamW, fp32 on the
    CPU (on a CPU with native bf16 the demo runs bf16: --precision bf16 measures that);
  * base-train: albert-base-v2 8x128, 20 masked per sequence (the original's), the same step;
  * base-infer: albert-base-v2 sequence classification, 32x128, under inference mode.

Per case: the median step time of each allocator (the median over turns of each process's median), their
ratio (>1: reusing freed memory is faster), the paired difference with two standard errors over the turns,
minor page faults per measured step, and the process's peak resident memory (ru_maxrss).

    python benchmarks/bench_allocator.py                          # all cases, 3 turns
    python benchmarks/bench_allocator.py --cases demo-train --turns 5
"""

from __future__ import annotations

import argparse
import json
import os
import statistics
import subprocess
import sys
import time

from bench_model import cpu_flags_line

# case: (preset, vocab or None, batch, seq, masked per sequence or None for inference)
CASES = {
    "demo-train": ("albert-small", 16000, 16, 128, 38),
    "base-train": ("albert-base-v2", None, 8, 128, 20),
    "base-infer": ("albert-base-v2", None, 32, 128, None),
}
ALLOCATORS = ("system", "keep")  # the values of ALBERT_MALLOC


def worker(case: str, steps: int, precision: str) -> dict[str, float]:
    """One process: the allocator as ALBERT_MALLOC says, 2 warm-up steps, then ``steps`` timed ones."""
    import resource

    import torch

    from albert_lm.config import AlbertConfig
    from albert_lm.model import AlbertForPreTraining, AlbertForSequenceClassification
    from albert_lm.optim import build_optimizer
    from albert_lm.runtime.allocator import keep_freed_memory
    from albert_lm.runtime.fp32_linear import choose_fp32_linear
    from albert_lm.train.parallelize import autocast

    keep_freed_memory()
    torch.manual_seed(0)
    preset, vocab, b, t, masked = CASES[case]
    config = AlbertConfig.from_preset(preset, **({"vocab_size": vocab} if vocab else {}))
    ids = torch.randint(5, config.vocab_size, (b, t))
    if masked is None:
        model = AlbertForSequenceClassification(config, num_labels=2).eval()

        def step() -> None:
            with torch.inference_mode():
                model(input_ids=ids, attention_mask=torch.ones_like(ids))

    else:
        labels = torch.full_like(ids, -100)
        for row in range(b):
            pos = torch.randperm(t - 2)[:masked] + 1
            labels[row, pos] = ids[row, pos]
        types = torch.zeros_like(ids)
        types[:, t // 2 :] = 1
        batch = dict(input_ids=ids, token_type_ids=types, attention_mask=torch.ones_like(ids),
                     mlm_labels=labels, sop_labels=torch.randint(0, 2, (b,)))  # fmt: skip
        model = AlbertForPreTraining(config).train()
        opt = build_optimizer(model, "adamw", 1e-4)
        dtype = torch.bfloat16 if precision == "bf16" else None
        linear = choose_fp32_linear("auto") if dtype is None else "torch"

        def step() -> None:
            with autocast(torch.device("cpu"), dtype, linear):
                loss = model(**batch)["loss"]
            loss.backward()
            torch.nn.utils.clip_grad_norm_(model.parameters(), 1.0)
            opt.step()
            opt.zero_grad(set_to_none=True)

    for _ in range(2):
        step()
    faults0 = resource.getrusage(resource.RUSAGE_SELF).ru_minflt
    times = []
    for _ in range(steps):
        t0 = time.perf_counter()
        step()
        times.append(time.perf_counter() - t0)
    usage = resource.getrusage(resource.RUSAGE_SELF)
    return {
        "median_s": statistics.median(times),
        "faults_per_step": (usage.ru_minflt - faults0) / steps,
        "max_rss_mib": usage.ru_maxrss / 1024,  # KiB on Linux
    }


def run_worker(case: str, allocator: str, args: argparse.Namespace) -> dict[str, float]:
    env = {**os.environ, "ALBERT_MALLOC": allocator}
    cmd = [
        sys.executable,
        __file__,
        "--worker",
        case,
        "--steps",
        str(args.steps),
        "--precision",
        args.precision,
    ]
    out = subprocess.run(cmd, env=env, capture_output=True, text=True)
    if out.returncode != 0:
        sys.exit(f"worker {case} {allocator} failed:\n{out.stderr[-2000:]}")
    result: dict[str, float] = json.loads(out.stdout.strip().splitlines()[-1])
    return result


def main() -> int:
    ap = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    ap.add_argument("--cases", nargs="+", default=list(CASES), choices=list(CASES))
    ap.add_argument("--turns", type=int, default=3, help="processes per (case, allocator), taking turns")
    ap.add_argument("--steps", type=int, default=6, help="timed steps per process (after 2 warm-up)")
    ap.add_argument("--precision", choices=("fp32", "bf16"), default="fp32", help="of the training cases")
    ap.add_argument("--json", help="also write the results to this file")
    ap.add_argument("--worker", help=argparse.SUPPRESS)
    args = ap.parse_args()
    if args.turns < 1 or args.steps < 1:
        ap.error("--turns and --steps must be at least 1")
    if args.worker:
        print(json.dumps(worker(args.worker, args.steps, args.precision)))
        return 0

    import torch

    print(cpu_flags_line())
    print(f"torch {torch.__version__}, {torch.get_num_threads()} threads; {args.turns} turns x {args.steps} "
          f"steps, {args.precision} training")  # fmt: skip
    results: dict[str, dict[str, list[dict[str, float]]]] = {}
    for case in args.cases:
        runs: dict[str, list[dict[str, float]]] = {a: [] for a in ALLOCATORS}
        for turn in range(args.turns):
            for allocator in ALLOCATORS if turn % 2 == 0 else ALLOCATORS[::-1]:
                runs[allocator].append(run_worker(case, allocator, args))
        results[case] = runs
        report(case, runs)
    if args.json:
        with open(args.json, "w") as f:
            json.dump({"cpu": cpu_flags_line(), "results": results}, f, indent=2)
    return 0


def report(case: str, runs: dict[str, list[dict[str, float]]]) -> None:
    def med(allocator: str, key: str) -> float:
        return statistics.median(r[key] for r in runs[allocator])

    sys_ms, keep_ms = med("system", "median_s") * 1e3, med("keep", "median_s") * 1e3
    diffs = [(s["median_s"] - k["median_s"]) * 1e3 for s, k in zip(runs["system"], runs["keep"], strict=True)]
    two_se = 2 * statistics.stdev(diffs) / len(diffs) ** 0.5 if len(diffs) > 1 else float("nan")
    print(f"{case:<11s} system {sys_ms:8.1f} ms  keep {keep_ms:8.1f} ms  speed keep/system {sys_ms / keep_ms:.2f}x  "
          f"(paired: {statistics.mean(diffs):+.1f} ms, two s.e. {two_se:.1f})")  # fmt: skip
    print(f"{'':<11s} page faults per step: system {med('system', 'faults_per_step'):,.0f}, keep "
          f"{med('keep', 'faults_per_step'):,.0f}; peak RSS: system {med('system', 'max_rss_mib'):,.0f} MiB, "
          f"keep {med('keep', 'max_rss_mib'):,.0f} MiB")  # fmt: skip


if __name__ == "__main__":
    sys.exit(main())
