#!/usr/bin/env python3
"""Model speed and memory, side by side with transformers' AlbertForPreTraining (sdpa), in one run.

Cases (albert-base by default):
  * one training step: forward + MLM + SOP loss + backward + AdamW step, at 8x128 and 4x512,
    in fp32 and under bf16 autocast (ours: `albert_lm.optim.build_optimizer`'s AdamW and the trainer's
    autocast -- in fp32 on a CPU the linear layers on the library `albert_lm.runtime.fp32_linear` measures
    fastest, under bf16 on a CPU without AMX attention as bf16 GEMMs (`albert_lm.runtime.attention.cpu_attention`);
    glibc malloc keeping freed memory, `albert_lm.runtime.allocator`; transformers: a plain
    ``torch.optim.AdamW``, ``torch.autocast`` and the allocator's defaults);
  * AlbertModel inference at 32x128 (fp32).

First it prints the CPU's vendor and GEMM-relevant flags, its capability (torch's dispatch level and whether
the CPU has native bf16: AVX-512 BF16 or AMX) and what ``precision: auto`` picks on the device; without native bf16 the bf16 cases are
expected to be an order of magnitude slower than fp32.

Each (implementation, case) runs in a fresh subprocess (so peak memory is its own), ours and
transformers' alternating. Prints the GEMM peaks (fp32 torch, fp32 numpy/OpenBLAS, the best fp32, and
bf16 where the CPU has it natively), the GEMM rate at the 8x128 step's own projection shapes (are the
GEMMs, or the time between them, what keeps the step below peak?), medians, our/HF speed ratios (>1: we
are faster), the achieved GFLOP/s and its fraction of each peak of the case's precision (matmul FLOPs
counted with torch's FlopCounterMode over what each implementation executes), and peak memory over two
further, untimed steps (CUDA: max_memory_allocated; CPU: peak RSS above the pre-step RSS once malloc has
handed its free memory back, sampled every 2 ms by a thread that would slow the timed steps) with the
our/HF ratio.

    python benchmarks/bench_model.py                   # albert-base, 5 measured steps per case
    python benchmarks/bench_model.py --steps 3 --cases train-fp32-8x128 infer-fp32-32x128
"""

from __future__ import annotations

import argparse
import json
import os
import statistics
import subprocess
import sys
import threading
import time
from typing import Any

CASES = {
    "train-fp32-8x128": ("train", "fp32", 8, 128),
    "train-fp32-4x512": ("train", "fp32", 4, 512),
    "train-bf16-8x128": ("train", "bf16", 8, 128),
    "train-bf16-4x512": ("train", "bf16", 4, 512),
    "infer-fp32-32x128": ("infer", "fp32", 32, 128),
}


class PeakRSS:
    """Samples this process's RSS in a thread (CPU peak memory). The base is taken after handing the memory
    malloc holds free back to the kernel (glibc's ``malloc_trim``): where malloc keeps freed blocks for reuse
    (`albert_lm.runtime.allocator`), the previous step's peak would otherwise still be resident at the base, and
    the peak above it would read ~0."""

    def __init__(self) -> None:
        import contextlib
        import ctypes
        import gc

        import psutil

        gc.collect()
        with contextlib.suppress(OSError, AttributeError):  # not glibc: nothing held to hand back this way
            ctypes.CDLL("libc.so.6").malloc_trim(0)
        self.proc = psutil.Process()
        self.base = self.proc.memory_info().rss
        self.peak = self.base
        self._stop = threading.Event()
        self._t = threading.Thread(target=self._run, daemon=True)

    def _run(self) -> None:
        while not self._stop.is_set():
            self.peak = max(self.peak, self.proc.memory_info().rss)
            time.sleep(0.002)

    def __enter__(self) -> PeakRSS:
        self._t.start()
        return self

    def __exit__(self, *exc: object) -> None:
        self._stop.set()
        self._t.join()


def worker(impl: str, case: str, preset: str, steps: int, device: str) -> dict:
    import torch

    from albert_lm.config import AlbertConfig

    kind, precision, b, t = CASES[case]
    torch.manual_seed(0)
    config = AlbertConfig.from_preset(preset)
    ids = torch.randint(5, config.vocab_size, (b, t), device=device)
    types = torch.zeros_like(ids)
    types[:, t // 2 :] = 1
    mask = torch.ones_like(ids)
    # 15% of positions masked, at most 20 per 128 tokens like the original max_predictions_per_seq
    n_mask = max(1, min(round(0.15 * t), 20 * t // 128))
    labels = torch.full_like(ids, -100)
    for row in range(b):
        pos = torch.randperm(t - 2, device=device)[:n_mask] + 1
        labels[row, pos] = ids[row, pos]
    sop = torch.randint(0, 2, (b,), device=device)

    if impl == "ours":
        from albert_lm.model import AlbertForPreTraining, AlbertModel

        model = (AlbertModel if kind == "infer" else AlbertForPreTraining)(config)
        batch = dict(input_ids=ids, token_type_ids=types, attention_mask=mask)
        train_batch = dict(batch, mlm_labels=labels, sop_labels=sop)
    else:
        import transformers

        hf_cfg = transformers.AlbertConfig(**config.to_hf_dict(), attn_implementation="sdpa")
        hf_cfg.classifier_dropout_prob = 0.0
        cls = transformers.AlbertModel if kind == "infer" else transformers.AlbertForPreTraining
        model = cls(hf_cfg)
        assert model.config._attn_implementation == "sdpa"
        batch = dict(input_ids=ids, token_type_ids=types, attention_mask=mask)
        train_batch = dict(batch, labels=labels, sentence_order_label=sop)
    model.to(device)
    if impl == "ours":  # the trainer's autocast, fp32 linear library, attention precision and allocator
        from albert_lm.runtime.allocator import keep_freed_memory
        from albert_lm.runtime.fp32_linear import choose_fp32_linear
        from albert_lm.train.parallelize import autocast

        keep_freed_memory()  # this process is ours alone (each case and implementation runs in its own)

        dev, dtype = torch.device(device), torch.bfloat16 if precision == "bf16" else None
        linear = choose_fp32_linear("auto") if dtype is None and dev.type == "cpu" else "torch"
        amp = lambda: autocast(dev, dtype, linear)  # noqa: E731 (one context per use)
        # FLOPs are counted on torch's own linear: FlopCounterMode has no formula for oneDNN's
        counting_amp = lambda: autocast(dev, dtype, "torch")  # noqa: E731
    else:
        amp = lambda: torch.autocast(device.split(":")[0], dtype=torch.bfloat16, enabled=precision == "bf16")  # noqa: E731
        counting_amp = amp

    if kind == "train":
        model.train()
        if impl == "ours":  # the project's own AdamW (albert_lm.optim: fused where torch has the kernel)
            from albert_lm.optim import build_optimizer

            opt = build_optimizer(model, "adamw", 1e-4)
        else:  # what a transformers user writes
            opt = torch.optim.AdamW(model.parameters(), lr=1e-4)

        def step(amp: Any = amp) -> None:
            with amp():
                out = model(**train_batch)
            out["loss"].backward()
            opt.step()
            opt.zero_grad(set_to_none=True)
    else:
        model.eval()

        def step(amp: Any = amp) -> None:
            with torch.inference_mode(), amp():
                model(**batch)

    def sync() -> None:
        if device.startswith("cuda"):
            torch.cuda.synchronize()

    from torch.utils.flop_counter import FlopCounterMode

    step()  # warm-up (also allocates the optimizer state)
    sync()
    with FlopCounterMode(display=False) as fc:
        step(counting_amp)
    flops = fc.get_total_flops()
    sync()
    if device.startswith("cuda"):
        torch.cuda.reset_peak_memory_stats()
        base = torch.cuda.memory_allocated()
    times = []
    import gc

    gc.collect()
    for _ in range(steps):
        t0 = time.perf_counter()
        step()
        sync()
        times.append(time.perf_counter() - t0)
    # peak memory over steps of its own: the RSS sampler wakes every 2 ms, and on a 2-core CPU each wake-up
    # takes a core from one of the two compute threads while the other waits for it at the op's end
    with PeakRSS() as rss:
        for _ in range(min(steps, 2)):
            step()
            sync()
    peak = torch.cuda.max_memory_allocated() - base if device.startswith("cuda") else rss.peak - rss.base
    return {"median_s": statistics.median(times), "times": times, "flops": flops, "peak_bytes": peak}


def matmul_peak(
    device: str, precision: str, library: str = "torch", shape: tuple[int, int, int] | None = None
) -> float:
    """FLOP/s of a GEMM (the best of 3 timings), square unless ``shape`` (m, k, n) is given: torch's (MKL
    for fp32 on x86, oneDNN for bf16) or, for fp32 on a CPU, numpy's (OpenBLAS in the wheels), which on
    some CPUs is the faster fp32 GEMM."""
    import torch

    dtype = torch.bfloat16 if precision == "bf16" else torch.float32
    n = 4096 if device.startswith("cuda") else 2048  # the table: square 2048-3072
    m, k, n = shape or (n, n, n)
    a = torch.randn(m, k, device=device, dtype=dtype)
    bm = torch.randn(k, n, device=device, dtype=dtype)
    if library == "numpy":
        an, bn = a.numpy(), bm.numpy()
        mm = lambda: an @ bn  # noqa: E731
    else:
        mm = lambda: a @ bm  # noqa: E731
    for _ in range(2):
        mm()
    reps = 50 if device.startswith("cuda") else (3 if shape is None else 10)
    if device.startswith("cuda"):
        torch.cuda.synchronize()
    best = float("inf")
    for _ in range(3):
        t0 = time.perf_counter()
        for _ in range(reps):
            mm()
        if device.startswith("cuda"):
            torch.cuda.synchronize()
        best = min(best, (time.perf_counter() - t0) / reps)
    return 2 * m * k * n / best


def step_shape_rates(device: str, precision: str, preset: str, rows: int) -> dict[str, float]:
    """FLOP/s of the training step's own projection GEMMs at ``rows`` tokens (forward; the backward's
    products have the same sizes): whether the GEMMs, or the time between them, keep the step below peak."""
    from albert_lm.config import AlbertConfig

    c = AlbertConfig.from_preset(preset)
    h, i = c.hidden_size, c.intermediate_size
    shapes = {"qkv": (rows, h, 3 * h), "out": (rows, h, h), "ffn up": (rows, h, i), "ffn down": (rows, i, h)}
    return {name: matmul_peak(device, precision, shape=shape) for name, shape in shapes.items()}


def gemm_peaks(device: str, native_bf16: bool) -> dict[str, float]:
    """The GEMM peaks the step is compared with: bf16 (only where it is native: emulated bf16 is no
    peak), fp32 torch, fp32 numpy (CPU), and the best fp32."""
    peaks = {"fp32 torch": matmul_peak(device, "fp32")}
    if not device.startswith("cuda"):
        peaks["fp32 numpy"] = matmul_peak(device, "fp32", "numpy")
    peaks["fp32 best"] = max(peaks.values())
    if native_bf16:
        peaks["bf16"] = matmul_peak(device, "bf16")
    return peaks


# CPU flags that decide the GEMM paths (AVX2/FMA fp32, AVX-512, native bf16 and AMX)
GEMM_FLAGS = ("avx2", "fma", "avx512f", "avx512_vnni", "avx512_bf16", "amx_tile", "amx_bf16", "amx_int8")


def open_text(path: str) -> str:
    with open(path, encoding="ascii", errors="replace") as f:
        return f.read()


def cpu_flags_line() -> str:
    from albert_lm.runtime.precision import _cpuinfo_flags

    flags = _cpuinfo_flags()
    try:
        text = open_text("/proc/cpuinfo")
    except OSError:
        text = ""
    ids = {}
    for line in text.splitlines():
        key, _, value = line.partition(":")
        if key.strip() in ("vendor_id", "model name") and key.strip() not in ids:
            ids[key.strip()] = value.strip()
    vendor = " ".join(ids.values())
    have = [f for f in GEMM_FLAGS if f in flags]
    missing = [f for f in GEMM_FLAGS if f not in flags]
    return f"{vendor.strip()}; flags: {' '.join(have) or '-'} (not: {' '.join(missing) or '-'})"


def main() -> int:
    ap = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    ap.add_argument("--preset", default="albert-base-v2")
    ap.add_argument("--steps", type=int, default=5, help="measured steps per case (median reported)")
    ap.add_argument("--cases", nargs="*", default=list(CASES), choices=list(CASES))
    ap.add_argument("--device", default="cuda" if _cuda() else "cpu")
    ap.add_argument("--json", help="also write the results to this file")
    ap.add_argument("--worker", nargs=2, metavar=("IMPL", "CASE"), help=argparse.SUPPRESS)
    args = ap.parse_args()
    if args.worker:
        print(json.dumps(worker(args.worker[0], args.worker[1], args.preset, args.steps, args.device)))
        return 0

    import torch

    from albert_lm.runtime.precision import cpu_capability, native_bf16, resolve_precision

    print(
        f"device {args.device}, torch {torch.__version__}, threads {torch.get_num_threads()}, preset {args.preset}"
    )
    # bf16 autocast is ~19x slower than fp32 on a CPU that emulates it (issue 17): say which kind this is
    print(f"cpu: {cpu_capability()}")
    native, why = native_bf16(args.device)
    print(f"bf16 on {args.device}: {'native' if native else 'not native'} ({why}); "
          f"precision auto -> {resolve_precision('auto', args.device)}")  # fmt: skip
    if not args.device.startswith("cuda"):
        print(f"cpu: {cpu_flags_line()}")
    peaks = gemm_peaks(args.device, native)
    print("GEMM peaks: " + ", ".join(f"{k} {v / 1e9:.0f} GFLOP/s" for k, v in peaks.items()))
    precision = "bf16" if "bf16" in peaks else "fp32"
    shaped = step_shape_rates(args.device, precision, args.preset, 8 * 128)
    print(f"{precision} GEMM at the 8x128 step's shapes: "
          + ", ".join(f"{k} {v / 1e9:.0f} ({v / peaks[precision if precision == 'bf16' else 'fp32 torch']:.2f})"
                      for k, v in shaped.items()) + " GFLOP/s (fraction of the square peak)\n")  # fmt: skip
    results: dict[str, dict[str, dict]] = {}
    for case in args.cases:
        results[case] = {}
        for impl in ("ours", "hf"):
            cmd = [
                sys.executable,
                __file__,
                "--worker",
                impl,
                case,
                "--preset",
                args.preset,
                "--steps",
                str(args.steps),
                "--device",
                args.device,
            ]
            proc = subprocess.run(cmd, capture_output=True, text=True, env=os.environ.copy())
            if proc.returncode != 0:
                print(proc.stderr[-3000:], file=sys.stderr)
                return 1
            results[case][impl] = json.loads(proc.stdout.strip().splitlines()[-1])
        _print_case(case, results[case], peaks)
    if args.json:
        with open(args.json, "w") as f:
            json.dump(
                {"device": args.device, "preset": args.preset, "matmul_peak": peaks, "results": results},
                f,
                indent=2,
            )
    return 0


def _print_case(case: str, r: dict[str, dict], peaks: dict[str, float]) -> None:
    """Times, our/HF speed ratio, each one's achieved GFLOP/s and its fraction of each GEMM peak of its
    precision (fp32: torch's, numpy's and the best; bf16: the native bf16 peak), and peak memory."""
    precision = CASES[case][1]
    o, h = r["ours"], r["hf"]
    rate = lambda x: x["flops"] / x["median_s"]  # noqa: E731
    of = [k for k in peaks if k.startswith(precision)]
    fracs = lambda x: " ".join(f"{rate(x) / peaks[k]:.2f} of {k}" for k in of) or "no native peak"  # noqa: E731
    print(
        f"{case:<20s} ours {o['median_s'] * 1e3:8.1f} ms  hf {h['median_s'] * 1e3:8.1f} ms  "
        f"speed ours/hf {h['median_s'] / o['median_s']:.2f}x  "
        f"mem ours {o['peak_bytes'] / 2**20:5.0f} MiB hf {h['peak_bytes'] / 2**20:5.0f} MiB "
        f"ratio {o['peak_bytes'] / max(h['peak_bytes'], 1):.2f}\n"
        f"{'':<20s} ours {rate(o) / 1e9:6.1f} GFLOP/s ({fracs(o)}); hf {rate(h) / 1e9:6.1f} GFLOP/s ({fracs(h)})",
        flush=True,
    )


def _cuda() -> bool:
    try:
        import torch

        return torch.cuda.is_available()
    except ImportError:
        return False


if __name__ == "__main__":
    sys.exit(main())
