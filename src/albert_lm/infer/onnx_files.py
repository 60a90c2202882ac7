"""The ONNX files the ONNX Runtime backend runs, written and checked: ``model.onnx`` (fp32) and
``model.int8.onnx`` (every weight MatMul quantized). `albert export onnx` (`albert_lm.export.pipeline`) writes
them into a model directory with its report; ``--backend auto`` (`albert_lm.infer.backend`) into its cache.

Checks that fail the write (`ExportError`): ONNX Runtime differing from PyTorch by more than
`albert_lm.infer.onnx.FP32_TOLERANCE` on a padded batch, and an int8 file with a weight MatMul left in float.
"""

from __future__ import annotations

import time
from pathlib import Path
from typing import Any

from albert_lm.infer import onnx as X
from albert_lm.infer.quantize import quantize_onnx_int8, weight_matmul_coverage

ONNX_FILE = "model.onnx"
INT8_FILE = "model.int8.onnx"
REPORT_FILE = "export_report.json"


class ExportError(ValueError):
    """An export that cannot be made or that fails its checks; the message says why in one line."""


def write_checked_onnx(
    model: Any, out: Path, report: dict[str, Any], *, int8: bool, opset: int | None, threads: int | None
) -> dict[str, Any]:
    """Export ``model`` to ``out/model.onnx`` (and, with ``int8``, ``out/model.int8.onnx``), check each
    against PyTorch, and record what was done in ``report``; returns the ONNX Runtime sessions by name
    (``fp32``, ``int8``).

    Raises:
        ExportError: a check failed.
    """
    t0 = time.perf_counter()
    graph = X.export_onnx(model, out / ONNX_FILE, opset=opset)
    report.update(
        inputs=list(graph.input_names),
        outputs=list(graph.output_names),
        opset=X.opset_of(out / ONNX_FILE),
        export_seconds=round(time.perf_counter() - t0, 2),
        initializers=X.initializer_stats(out / ONNX_FILE, model),
    )
    fp32 = X.load_session(out / ONNX_FILE, threads)
    report["parity"] = parity(model, fp32)
    sessions = {"fp32": fp32}
    if int8:
        sessions["int8"] = X.load_session(write_int8(out, model, report), threads)
    return sessions


def parity(model: Any, session: Any) -> dict[str, Any]:
    diffs = X.max_abs_diff(model, session)
    worst = max(diffs.values())
    result: dict[str, Any] = {
        "batch": "3 x 37, rows padded to 37 / 34 / 31 tokens",
        "max_abs_diff": diffs,
        "tolerance": X.FP32_TOLERANCE,
        "ok": worst <= X.FP32_TOLERANCE,
    }
    if not result["ok"]:
        raise ExportError(
            f"ONNX Runtime differs from PyTorch by {worst:.3g} on a padded batch "
            f"(tolerance {X.FP32_TOLERANCE:g}): {diffs}"
        )
    return result


def write_int8(tmp: Path, model: Any, report: dict[str, Any]) -> Path:
    dst = tmp / INT8_FILE
    coverage = quantize_onnx_int8(tmp / ONNX_FILE, dst)
    before = weight_matmul_coverage(tmp / ONNX_FILE)
    report["int8"] = {
        "weight_matmuls": before.total,
        "quantized": coverage.quantized,
        "left_in_float": coverage.float_weight,
        "fraction_quantized": round(coverage.quantized / max(1, before.total), 4),
    }
    if coverage.float_weight or coverage.quantized != before.total:
        raise ExportError(
            f"int8: {coverage.quantized} of {before.total} weight MatMuls quantized, "
            f"{coverage.float_weight} left in float"
        )
    diffs = X.max_abs_diff(model, X.load_session(dst))
    report["int8"]["max_abs_diff_to_pytorch_fp32"] = diffs
    return dst
