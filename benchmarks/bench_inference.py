#!/usr/bin/env python3
"""CPU inference, side by side in one run: transformers, ours eager / torch.compile / torch int8, and our
ONNX export in ONNX Runtime fp32 / int8.

The model is a sequence classifier (albert-base-v2 by default, random weights: speed does not depend on
them) saved once as a model directory, so that transformers loads the very same weights. For each shape
(batch x tokens, no padding) the variants take turns call by call (noise on a shared machine spreads over
all of them), after one warm-up call each (torch.compile compiles there; its time is shown apart).

Prints latency medians, throughput (sequences/s), ratios (>1: faster), the largest output difference to
ours eager, the model file sizes and the CPU's int8-relevant flags; the targets of issue 16: ours eager
>= 1.2x transformers, ORT int8 >= 1.5x ORT fp32 at <= 13 MB (albert-base).

    python benchmarks/bench_inference.py                          # albert-base, 1x128 and 32x128
    python benchmarks/bench_inference.py --shapes 1x128 --reps 9 --threads 2
    python benchmarks/bench_inference.py --variants ours_eager ort_fp32 ort_int8 --json out.json
"""

from __future__ import annotations

import argparse
import copy
import json
import statistics
import sys
import tempfile
import time
from collections.abc import Callable
from pathlib import Path
from typing import Any

import numpy as np

VARIANTS = ("hf_eager", "ours_eager", "ours_compile", "ours_int8", "ort_fp32", "ort_int8")
INT8_FLAGS = ("avx2", "avx512f", "avx512_vnni", "avx_vnni", "amx_int8")


def cpu_line() -> str:
    """The CPU model and the flags that decide int8 speed (VNNI: int8 dot products)."""
    try:
        text = Path("/proc/cpuinfo").read_text()
    except OSError:
        return "cpu: unknown"
    name = next((ln.split(":", 1)[1].strip() for ln in text.splitlines() if ln.startswith("model name")), "?")
    flags = set(next((ln.split(":", 1)[1].split() for ln in text.splitlines() if ln.startswith("flags")), []))
    have = [f for f in INT8_FLAGS if f in flags]
    return f"cpu: {name}; int8-relevant flags: {', '.join(have) or 'none'}"


def build(preset: str, variants: list[str], threads: int, work: Path) -> tuple[dict[str, Callable], dict]:
    """One callable per variant taking (input_ids, attention_mask, token_type_ids) -> logits (numpy)."""
    import torch

    from albert_lm.config import AlbertConfig
    from albert_lm.infer.onnx import export_onnx, load_session, run_session
    from albert_lm.infer.quantize import quantize_onnx_int8, quantize_torch_int8
    from albert_lm.model import AlbertForSequenceClassification

    torch.manual_seed(0)
    ours = AlbertForSequenceClassification(AlbertConfig.from_preset(preset), num_labels=2).eval()
    ours.save_pretrained(work / "model")
    sizes = {"model.safetensors": (work / "model" / "model.safetensors").stat().st_size}
    fns: dict[str, Callable] = {}
    info: dict[str, Any] = {"sizes": sizes}

    def torch_fn(model: Any) -> Callable:
        @torch.inference_mode()
        def run(ids: Any, mask: Any, types: Any) -> np.ndarray:
            out = model(input_ids=ids, attention_mask=mask, token_type_ids=types)
            return (out["logits"] if isinstance(out, dict) else out.logits).float().numpy()

        return run

    if "hf_eager" in variants:
        from transformers import AlbertForSequenceClassification as HFAlbert

        hf = HFAlbert.from_pretrained(work / "model").eval()
        info["hf_attention"] = getattr(hf.config, "_attn_implementation", "?")
        fns["hf_eager"] = torch_fn(hf)
    if "ours_eager" in variants:
        fns["ours_eager"] = torch_fn(ours)
    if "ours_compile" in variants:
        fns["ours_compile"] = torch_fn(torch.compile(copy.deepcopy(ours)))
    if "ours_int8" in variants:
        fns["ours_int8"] = torch_fn(quantize_torch_int8(copy.deepcopy(ours)))
    if "ort_fp32" in variants or "ort_int8" in variants:
        export_onnx(ours, work / "model.onnx")
        sizes["model.onnx"] = (work / "model.onnx").stat().st_size
        if "ort_int8" in variants:
            coverage = quantize_onnx_int8(work / "model.onnx", work / "model.int8.onnx")
            sizes["model.int8.onnx"] = (work / "model.int8.onnx").stat().st_size
            info["int8_weight_matmuls"] = f"{coverage.quantized} of {coverage.total} quantized"
        for name, file in (("ort_fp32", "model.onnx"), ("ort_int8", "model.int8.onnx")):
            if name in variants:
                session = load_session(work / file, threads)
                fns[name] = lambda i, m, t, s=session: run_session(
                    s, {"input_ids": i, "attention_mask": m, "token_type_ids": t}
                )["logits"]
    return {v: fns[v] for v in variants}, info


def measure(fns: dict[str, Callable], batch: int, seq: int, reps: int, vocab: int) -> dict[str, dict]:
    import torch

    gen = torch.Generator().manual_seed(batch * 1000 + seq)
    ids = torch.randint(5, vocab, (batch, seq), generator=gen)
    mask = torch.ones_like(ids)
    types = torch.zeros_like(ids)
    types[:, seq // 2 :] = 1
    results: dict[str, dict] = {}
    outputs = {}
    for name, fn in fns.items():  # warm-up (and compilation)
        t0 = time.perf_counter()
        outputs[name] = fn(ids, mask, types)
        results[name] = {"warmup_s": time.perf_counter() - t0, "times": []}
    for _ in range(reps):
        for name, fn in fns.items():
            t0 = time.perf_counter()
            fn(ids, mask, types)
            results[name]["times"].append(time.perf_counter() - t0)
    reference = outputs.get("ours_eager")
    for name, r in results.items():
        r["median_s"] = statistics.median(r["times"])
        r["seq_per_s"] = batch / r["median_s"]
        if reference is not None:
            r["max_abs_diff"] = float(np.abs(np.asarray(outputs[name]) - reference).max())
    return results


def report(shape: str, res: dict[str, dict]) -> None:
    print(f"\n{shape}:")
    print(f"  {'variant':<13} {'median ms':>10} {'seq/s':>8} {'warm-up s':>9} {'max|d| to ours':>15}")
    for name, r in res.items():
        diff = f"{r['max_abs_diff']:.1e}" if "max_abs_diff" in r else "-"
        print(
            f"  {name:<13} {r['median_s'] * 1e3:>10.1f} {r['seq_per_s']:>8.2f} {r['warmup_s']:>9.1f} {diff:>15}"
        )
    ratios = [
        ("ours eager vs transformers eager", "hf_eager", "ours_eager", 1.2),
        ("ours torch.compile vs ours eager", "ours_eager", "ours_compile", None),
        ("ours torch int8 vs ours eager", "ours_eager", "ours_int8", None),
        ("ORT fp32 vs ours eager", "ours_eager", "ort_fp32", None),
        ("ORT int8 vs ORT fp32", "ort_fp32", "ort_int8", 1.5),
        ("ORT int8 vs transformers eager", "hf_eager", "ort_int8", None),
    ]
    for label, slow, fast, target in ratios:
        if slow in res and fast in res:
            x = res[slow]["median_s"] / res[fast]["median_s"]
            goal = f"  (target >= {target}x: {'met' if x >= target else 'NOT met'})" if target else ""
            print(f"  {label}: {x:.2f}x{goal}")


def main() -> int:
    ap = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    ap.add_argument("--preset", default="albert-base-v2")
    ap.add_argument("--shapes", nargs="+", default=["1x128", "32x128"], help="BATCHxTOKENS")
    ap.add_argument("--reps", type=int, nargs="+", default=[5, 2], help="timed calls per variant, per shape")
    ap.add_argument("--threads", type=int, default=2, help="torch and ONNX Runtime intra-op threads")
    ap.add_argument("--variants", nargs="+", default=list(VARIANTS), choices=VARIANTS)
    ap.add_argument("--json", type=Path, help="also write the results here")
    args = ap.parse_args()

    import torch

    torch.set_num_threads(args.threads)
    print(f"torch {torch.__version__}, threads {args.threads}, preset {args.preset} (random weights)")
    print(cpu_line())
    try:
        import onnxruntime

        print(f"onnxruntime {onnxruntime.__version__}")
    except ImportError:
        pass
    reps = args.reps + [args.reps[-1]] * (len(args.shapes) - len(args.reps))
    with tempfile.TemporaryDirectory() as tmp:
        t0 = time.perf_counter()
        fns, info = build(args.preset, args.variants, args.threads, Path(tmp))
        print(f"built the variants in {time.perf_counter() - t0:.0f}s; {json.dumps(info)}")
        mb = {k: round(v / 1e6, 1) for k, v in info["sizes"].items()}
        print("file sizes (MB): " + ", ".join(f"{k} {v}" for k, v in mb.items()))
        if "model.int8.onnx" in mb:
            print(f"  model.int8.onnx <= 13 MB: {'met' if mb['model.int8.onnx'] <= 13 else 'NOT met'}")
        from albert_lm.config import AlbertConfig

        vocab = AlbertConfig.from_preset(args.preset).vocab_size
        results = {}
        for shape, n in zip(args.shapes, reps):
            batch, seq = (int(x) for x in shape.lower().split("x"))
            results[shape] = measure(fns, batch, seq, n, vocab)
            report(shape, results[shape])
    if args.json:
        args.json.write_text(json.dumps({"info": info, "results": results}, indent=2) + "\n")
    return 0


if __name__ == "__main__":
    sys.exit(main())
