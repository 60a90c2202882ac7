"""``albert export onnx``: a model directory (or a fine-tuning run's checkpoint) -> an ONNX directory.

The output directory, written atomically (a failed check leaves no half-written directory behind):

    model.onnx          fp32, dynamic batch and sequence axes, shared layers stored once
    model.int8.onnx     with ``int8``: every weight MatMul quantized (`albert_lm.infer.quantize`)
    config.json         the model's, so that `albert serve` / transformers know the architecture
    task.json           a fine-tuned model's task (labels, head settings), when there is one
    tokenizer files     spiece.model or vocab.txt with their configs
    export_report.json  the report `export_model_dir` returns

Checks that fail the export (`ExportError`): ONNX Runtime differing from PyTorch by more than
`albert_lm.infer.onnx.FP32_TOLERANCE` on a padded batch, and an int8 file with a weight MatMul left in float.
"""

from __future__ import annotations

import logging
import shutil
from collections.abc import Sequence
from pathlib import Path
from typing import Any

from albert_lm._io import atomic_write_dir, atomic_write_json, recover_dir
from albert_lm.convert.card import write_export_card
from albert_lm.infer.onnx_files import INT8_FILE, ONNX_FILE, REPORT_FILE, ExportError, write_checked_onnx

logger = logging.getLogger(__name__)

WEIGHTS_FILE = "model.safetensors"


def check_output_dir(out: Path, overwrite: bool) -> None:
    """An output directory may be new, empty, or replaced with ``overwrite`` (an earlier write killed
    between its renames is finished first: `albert_lm._io.recover_dir`)."""
    recover_dir(out)
    if out.exists() and not out.is_dir():
        raise ExportError(f"{out}: exists and is not a directory")
    if out.is_dir() and any(out.iterdir()) and not overwrite:
        raise ExportError(f"{out}: exists and is not empty (pass --overwrite to replace it)")


def resolve_source(path: str | Path, checkpoint: str = "best") -> Path:
    """The model directory behind ``path`` (a model directory, or a run directory's checkpoint)."""
    from albert_lm.finetune.rundir import resolve_model_dir
    from albert_lm.tasks.base import ModelDirError

    p = Path(path)
    recover_dir(p)
    if not p.exists():
        raise ExportError(f"{p}: no such directory")
    if not p.is_dir():
        raise ExportError(f"{p}: not a directory (expected a model directory or a fine-tuning run)")
    try:
        return resolve_model_dir(p, checkpoint)
    except ModelDirError as e:
        raise ExportError(str(e)) from None


def load_source(model_dir: Path) -> tuple[Any, Any, dict[str, Any] | None]:
    """(model in eval mode, tokenizer, task.json or None) of a model directory."""
    from albert_lm.convert.hf import CheckpointError, load_model
    from albert_lm.finetune.rundir import TASK_FILE, read_task_info, task_from_info
    from albert_lm.tasks.base import ModelDirError
    from albert_lm.tasks.inputs import load_model_tokenizer

    try:
        tokenizer = load_model_tokenizer(model_dir)
        info = read_task_info(model_dir) if (model_dir / TASK_FILE).is_file() else None
        # a fine-tuned model is built by its task (e.g. the SQuAD 2.0 head that config.json of an older
        # directory names only as an encoder), its head required; any other as its config.json names
        if info:
            model = task_from_info(info, model_dir / TASK_FILE).build_model(model_dir, require_head=True)
        else:
            model = load_model(model_dir)
    except (ModelDirError, ValueError, FileNotFoundError, CheckpointError) as e:
        raise ExportError(str(e).splitlines()[0]) from None
    return model.eval(), tokenizer, info


def export_model_dir(
    path: str | Path,
    output: str | Path,
    *,
    int8: bool = False,
    opset: int | None = None,
    calibrate_on: str | Path | None = None,
    columns: Sequence[str] | None = None,
    checkpoint: str = "best",
    overwrite: bool = False,
    threads: int | None = None,
) -> dict[str, Any]:
    """Export ``path`` to the ONNX directory ``output`` (see the module docstring); returns the report.

    Args:
        path: a model directory or a fine-tuning run directory (its ``checkpoint``).
        output: the directory to write.
        int8: also write ``model.int8.onnx`` and check that every weight MatMul is quantized.
        opset: ONNX opset (None: the exporter's default).
        calibrate_on: a labelled file of the model's task (`albert_lm.infer.labelled.read_labelled`):
            the report gets the task metric of the fp32 and (with ``int8``) the int8 file on it.
        columns: column names of a ``calibrate_on`` file without a header row.
        overwrite: replace a non-empty ``output``.
        threads: ONNX Runtime threads for the checks.

    Raises:
        ExportError: a missing or unusable input, an output in the way, or a failed check.
    """
    out = Path(output)
    check_output_dir(out, overwrite)
    source = resolve_source(path, checkpoint)
    if calibrate_on is not None and not Path(calibrate_on).is_file():
        raise ExportError(f"{calibrate_on}: no such file (--calibrate-on)")
    model, tokenizer, info = load_source(source)
    if calibrate_on is not None and info is None:
        raise ExportError(f"{source}: --calibrate-on needs a fine-tuned model (a task.json names its task)")
    report: dict[str, Any] = {"source": str(source), "model_class": type(model).__name__}

    def write(tmp: Path) -> None:
        sessions = write_checked_onnx(model, tmp, report, int8=int8, opset=opset, threads=threads)
        if calibrate_on is not None:
            assert info is not None
            report["metrics"] = _metrics(info, tokenizer, model, sessions, calibrate_on, columns)
        shutil.copy2(source / "config.json", tmp / "config.json")
        if info is not None:
            shutil.copy2(source / "task.json", tmp / "task.json")
        tokenizer.save_pretrained(tmp)
        report["files"] = _sizes(source, tmp)
        atomic_write_json(tmp / REPORT_FILE, report, indent=2)
        write_export_card(tmp, report, info, out.name)  # README.md (albert_lm.convert.card)

    atomic_write_dir(out, write)
    report["output"] = str(out)
    return report


def _metrics(
    info: dict[str, Any],
    tokenizer: Any,
    model: Any,
    sessions: dict[str, Any],
    path: str | Path,
    columns: Sequence[str] | None,
) -> dict[str, Any]:
    from albert_lm.finetune.rundir import task_from_info, trained_max_seq_length
    from albert_lm.infer.labelled import read_labelled, task_metrics
    from albert_lm.infer.runners import ort_predict_fn
    from albert_lm.tasks.base import TaskDataError

    try:
        examples = read_labelled(info, path, columns)
    except (TaskDataError, FileNotFoundError) as e:
        raise ExportError(str(e)) from None
    if not examples:
        raise ExportError(f"{path}: no examples")
    max_length = min(trained_max_seq_length(info), model.config.max_position_embeddings)
    result: dict[str, Any] = {"file": str(path), "examples": len(examples)}
    for name, session in sessions.items():
        task = task_from_info(info)  # a fresh task each time: nothing chosen on one run carries over
        result[name] = task_metrics(task, examples, tokenizer, max_length, ort_predict_fn(session))
    if "int8" in result:
        result["score_change"] = result["int8"]["score"] - result["fp32"]["score"]
    return result


def _sizes(source: Path, tmp: Path) -> dict[str, Any]:
    sizes: dict[str, Any] = {}
    weights = source / WEIGHTS_FILE
    if weights.is_file():
        sizes[WEIGHTS_FILE] = weights.stat().st_size
    for name in (ONNX_FILE, INT8_FILE):
        if (tmp / name).is_file():
            sizes[name] = (tmp / name).stat().st_size
    if WEIGHTS_FILE in sizes:
        sizes["onnx_to_safetensors"] = round(sizes[ONNX_FILE] / sizes[WEIGHTS_FILE], 4)
    return sizes
