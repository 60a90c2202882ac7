#!/usr/bin/env python3
"""The GPU check of issue 24 item 5: one script that, on a CUDA machine, prints in a few minutes

1. albert-base pretraining (MLM + SOP, LAMB) at seq 512 under bf16 autocast: tokens/s, the step's
   matmul + attention FLOPs (torch's FlopCounterMode) per second, and that as a fraction (MFU) of the
   GPU's bf16 dense peak: the datasheet's where the GPU is in `BF16_DENSE_PEAK`, and the measured GEMM peak;
2. which SDPA kernel runs (flash / efficient / cudnn / math, from the profiler) for a batch without a mask,
   with an all-ones mask (what `albert pretrain` passes: the mask is never dropped, see
   `albert_lm.model.encoder.attention_mask_for_sdpa`) and with a padded batch;
3. albert-large vs bert-large step time (paper Table 2: ALBERT-large trains 1.7x as fast as BERT-large);
4. torch.compile on / off for the albert-base step.

    bash benchmarks/gpu_check.sh                 # the CUDA run (exit 2 with a message where there is no GPU)
    python benchmarks/gpu_check.py --smoke       # the same code path on the CPU in seconds (tiny sizes)

``--smoke`` runs every part with the tiny preset at seq 32 on the CPU, torch.compile with the ``eager``
backend (Dynamo's tracing without code generation), so that a unit test exercises the script.
"""

from __future__ import annotations

import argparse
import contextlib
import statistics
import sys
import time
from collections.abc import Callable
from typing import Any

import torch

# Datasheet bf16 dense tensor-core peaks (FLOP/s, no sparsity), matched on torch.cuda.get_device_name.
# H100 / H200 SXM: NVIDIA H100 datasheet 989.4 TFLOPS; A100: 312; L4: 121; A10: 125; L40S: 362.
BF16_DENSE_PEAK: tuple[tuple[str, float], ...] = (
    ("H200", 989e12),
    ("H100", 989e12),
    ("A100", 312e12),
    ("L40S", 362e12),
    ("L4", 121e12),
    ("A10", 125e12),
)
# aten operator -> the SDPA kernel it is
SDPA_KERNELS = (
    ("_scaled_dot_product_flash_attention_for_cpu", "flash (cpu)"),
    ("_scaled_dot_product_flash_attention", "flash"),
    ("_scaled_dot_product_efficient_attention", "efficient"),
    ("_scaled_dot_product_cudnn_attention", "cudnn"),
    ("_scaled_dot_product_attention_math", "math"),
)


class Sizes:
    """The run's sizes: the real ones on a GPU, tiny ones for --smoke."""

    def __init__(self, smoke: bool, batch: int, seq: int, steps: int) -> None:
        self.smoke = smoke
        self.base = "albert-tiny" if smoke else "albert-base-v2"
        self.overrides: dict[str, Any] = {"num_hidden_layers": 2} if smoke else {}
        # (label, preset, overrides) of the paper's pair; the smoke's stand-ins differ in sharing only
        self.pair: tuple[tuple[str, str, dict[str, Any]], ...] = (
            (("albert-tiny", "albert-tiny", {}), ("albert-tiny unshared", "albert-tiny", {"sharing": "none"}))
            if smoke
            else (("albert-large", "albert-large-v2", {}), ("bert-large", "bert-large", {}))
        )
        self.batch, self.seq, self.steps = (2, 32, 1) if smoke else (batch, seq, steps)
        self.warmup = 1 if smoke else 2


def make_batch(vocab: int, b: int, t: int, device: str, padded: bool = False) -> dict[str, torch.Tensor]:
    gen = torch.Generator().manual_seed(0)
    ids = torch.randint(5, vocab, (b, t), generator=gen)
    types = torch.zeros_like(ids)
    types[:, t // 2 :] = 1
    mask = torch.ones_like(ids)
    if padded:  # every other row ends at 3/4 of the length
        mask[::2, 3 * t // 4 :] = 0
    labels = torch.full_like(ids, -100)
    n_mask = max(1, min(round(0.15 * t), 20 * t // 128))  # original max_predictions_per_seq: 20 per 128
    for row in range(b):
        pos = torch.randperm(t - 2, generator=gen)[:n_mask] + 1
        labels[row, pos] = ids[row, pos]
    batch = dict(input_ids=ids, token_type_ids=types, attention_mask=mask, mlm_labels=labels)
    batch["sop_labels"] = torch.randint(0, 2, (b,), generator=gen)
    return {k: v.to(device) for k, v in batch.items()}


def build(
    preset: str, sizes: Sizes, device: str, **extra: Any
) -> tuple[torch.nn.Module, torch.optim.Optimizer]:
    from albert_lm.config import AlbertConfig
    from albert_lm.model import AlbertForPreTraining
    from albert_lm.optim import build_optimizer

    torch.manual_seed(0)
    overrides = dict(sizes.overrides, **extra)
    if sizes.seq > 512:
        overrides["max_position_embeddings"] = sizes.seq
    model = AlbertForPreTraining(AlbertConfig.from_preset(preset, **overrides)).to(device).train()
    return model, build_optimizer(model, "lamb", 1e-4)


def sync(device: str) -> None:
    if device == "cuda":
        torch.cuda.synchronize()


def time_steps(step: Callable[[], None], sizes: Sizes, device: str) -> float:
    """Median seconds of ``sizes.steps`` steps after ``sizes.warmup`` warm-up steps."""
    for _ in range(sizes.warmup):
        step()
    sync(device)
    times = []
    for _ in range(sizes.steps):
        t0 = time.perf_counter()
        step()
        sync(device)
        times.append(time.perf_counter() - t0)
    return statistics.median(times)


def train_step(
    model: torch.nn.Module, opt: torch.optim.Optimizer, batch: dict[str, torch.Tensor], device: str
) -> Callable[[], None]:
    def step() -> None:
        with torch.autocast(device_type=device, dtype=torch.bfloat16):
            loss = model(**batch)["loss"]
        loss.backward()
        opt.step()
        opt.zero_grad(set_to_none=True)

    return step


def step_flops(step: Callable[[], None]) -> int:
    from torch.utils.flop_counter import FlopCounterMode

    with FlopCounterMode(display=False) as counter:
        step()
    return counter.get_total_flops()


def gemm_peak(device: str, smoke: bool) -> float:
    """Measured bf16 GEMM FLOP/s (square, the best of 3)."""
    n = 256 if smoke else 8192
    a = torch.randn(n, n, device=device, dtype=torch.bfloat16)
    b = torch.randn(n, n, device=device, dtype=torch.bfloat16)
    reps = 2 if smoke else 20
    a @ b
    best = float("inf")
    for _ in range(3):
        sync(device)
        t0 = time.perf_counter()
        for _ in range(reps):
            a @ b
        sync(device)
        best = min(best, (time.perf_counter() - t0) / reps)
    return 2 * n**3 / best


def datasheet_peak(device: str) -> tuple[str, float | None]:
    if device != "cuda":
        return "cpu", None
    name = torch.cuda.get_device_name()
    return name, next((peak for key, peak in BF16_DENSE_PEAK if key in name), None)


def sdpa_kernels(model: torch.nn.Module, batch: dict[str, torch.Tensor], device: str) -> str:
    """The SDPA kernels the forward of ``batch`` runs, from the profiler's operator names."""
    from torch.profiler import ProfilerActivity, profile

    from albert_lm.runtime.attention import cpu_attention

    activities = [ProfilerActivity.CPU] + ([ProfilerActivity.CUDA] if device == "cuda" else [])
    with (
        torch.no_grad(),
        torch.autocast(device_type=device, dtype=torch.bfloat16),
        cpu_attention(None),  # torch's SDPA as it is (a CPU without AMX would run attention as GEMMs)
        profile(activities=activities) as prof,
    ):
        model(**{k: v for k, v in batch.items() if k not in ("mlm_labels", "sop_labels")})
    names = {e.key for e in prof.key_averages()}
    found = []
    for op, kernel in SDPA_KERNELS:
        if any(op in n for n in names) and kernel not in found:
            found.append(kernel)
            names = {n for n in names if op not in n}  # "flash_for_cpu" is not also "flash"
    return ", ".join(found) or "none found"


def main() -> int:
    ap = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    ap.add_argument("--smoke", action="store_true", help="tiny sizes on the CPU, in seconds (for the tests)")
    ap.add_argument("--batch", type=int, default=32, help="sequences per step (default 32)")
    ap.add_argument("--seq", type=int, default=512, help="sequence length (default 512)")
    ap.add_argument("--steps", type=int, default=5, help="measured steps per case (median; default 5)")
    ap.add_argument("--no-compile", action="store_true", help="skip the torch.compile case")
    args = ap.parse_args()
    if not args.smoke and not torch.cuda.is_available():
        print(
            f"gpu_check: no CUDA device (torch {torch.__version__}, cuda build: {torch.version.cuda}); run it "
            "on a GPU machine, or with --smoke for the CPU code path",
            file=sys.stderr,
        )
        return 2
    device = "cpu" if args.smoke else "cuda"
    sizes = Sizes(args.smoke, args.batch, args.seq, args.steps)
    if device == "cuda":
        torch.backends.cuda.matmul.allow_tf32 = True
    name, sheet = datasheet_peak(device)
    print(
        f"gpu_check: {name}, torch {torch.__version__}, {sizes.base} {sizes.batch}x{sizes.seq} bf16 autocast"
    )

    # 1. the albert-base step: tokens/s and MFU
    model, opt = build(sizes.base, sizes, device)
    batch = make_batch(model.config.vocab_size, sizes.batch, sizes.seq, device)
    step = train_step(model, opt, batch, device)
    seconds = time_steps(step, sizes, device)
    flops = step_flops(step)
    measured = gemm_peak(device, args.smoke)
    achieved = flops / seconds
    tokens = sizes.batch * sizes.seq
    sheet_part = f", {achieved / sheet:.1%} of the datasheet's {sheet / 1e12:.0f}" if sheet else ""
    print(
        f"pretraining step: {seconds * 1e3:.1f} ms, {tokens / seconds:,.0f} tokens/s, "
        f"{achieved / 1e12:.2f} TFLOP/s = MFU {achieved / measured:.1%} of the measured bf16 GEMM peak "
        f"{measured / 1e12:.1f} TFLOP/s{sheet_part}"
    )

    # 2. the SDPA kernel of each kind of batch
    no_mask = {k: v for k, v in batch.items() if k != "attention_mask"}
    padded = make_batch(model.config.vocab_size, sizes.batch, sizes.seq, device, padded=True)
    for what, b in (("no mask", no_mask), ("all-ones mask", batch), ("padded", padded)):
        print(f"SDPA kernel, {what}: {sdpa_kernels(model, b, device)}")

    # 4. torch.compile on / off (before 3, on the model already built)
    if not args.no_compile:
        backend = "eager" if args.smoke else "inductor"
        compiled = torch.compile(model, backend=backend)
        t0 = time.perf_counter()
        compiled_s = time_steps(train_step(compiled, opt, batch, device), sizes, device)  # type: ignore[arg-type]
        took = time.perf_counter() - t0
        print(
            f"torch.compile ({backend}): {compiled_s * 1e3:.1f} ms vs eager {seconds * 1e3:.1f} ms "
            f"= {seconds / compiled_s:.2f}x (compiling and measuring took {took:.0f} s)"
        )
    del model, opt, step
    with contextlib.suppress(Exception):
        torch.cuda.empty_cache()

    # 3. albert-large vs bert-large, the paper's speed-up
    per: dict[str, float] = {}
    for label, preset, extra in sizes.pair:
        m, o = build(preset, sizes, device, **extra)
        per[label] = time_steps(train_step(m, o, batch, device), sizes, device)
        del m, o
    (a, a_s), (b, b_s) = per.items()
    print(
        f"step {a} {a_s * 1e3:.1f} ms, {b} {b_s * 1e3:.1f} ms: {a} is {b_s / a_s:.2f}x as fast "
        "(paper Table 2: albert-large 1.7x bert-large)"
    )
    return 0


if __name__ == "__main__":
    sys.exit(main())
