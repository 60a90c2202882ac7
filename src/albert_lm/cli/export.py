"""`albert export onnx`: a model directory -> an ONNX directory (fp32, optionally int8) with a report.
`albert export sentence-transformers`: a model directory -> a sentence-transformers directory."""

from __future__ import annotations

import argparse
import json
from pathlib import Path
from typing import Any

from albert_lm.cli.options import MissingExtra, add_model_flag, add_subcommands, from_positional, runs

HELP = "export a model to ONNX (fp32 and int8) or as a sentence-transformers model, with parity checks"
DESCRIPTION = """Export a model directory (or a fine-tuning run's checkpoint) to ONNX.

  albert export onnx --model RUN_DIR --output ONNX_DIR
  albert export onnx --model RUN_DIR --output ONNX_DIR --int8 --calibrate-on dev.csv
  albert export onnx --model RUN_DIR --output ONNX_DIR --int8 --calibrate-on polarity.csv --columns label,text
  albert serve --model ONNX_DIR --backend onnx --int8          # then serve it

ONNX_DIR gets model.onnx (inputs input_ids, attention_mask, token_type_ids; dynamic batch and sequence
axes), with --int8 model.int8.onnx (every weight MatMul int8), the tokenizer, config.json, task.json and
export_report.json. The export fails (exit 1) when ONNX Runtime differs from PyTorch by more than 1e-4 on a
padded batch or when a weight MatMul is left in float. --calibrate-on FILE reports the task metric of the
fp32 and int8 files on a labelled file of the model's task (CSV/TSV/JSONL with the training columns,
multiple-choice JSONL, SQuAD JSON)."""

ST_DESCRIPTION = """Export a model directory (or a fine-tuning run's checkpoint) as a sentence-embedding model that
sentence-transformers loads: SentenceTransformer("OUT").encode(texts).

  albert export sentence-transformers --model MODEL_DIR --output OUT
  albert export sentence-transformers --model MODEL_DIR --output OUT --normalize --max-seq-length 256

An embedding is the mean of the encoder's last hidden states over the attention mask (with --normalize,
scaled to unit length, as all-MiniLM-L6-v2). OUT gets the encoder (config.json, model.safetensors, which
transformers reads), the tokenizer, modules.json, sentence_bert_config.json,
config_sentence_transformers.json, 1_Pooling/ (2_Normalize/) and export_report.json. A task model gives its
encoder. The export fails (exit 1) when the written directory, read by sentence-transformers (by albert
where it is not installed), embeds test texts differently from the model by more than 1e-5."""


def add_arguments(parser: argparse.ArgumentParser) -> None:
    sub = add_subcommands(parser, "FORMAT")
    p = sub.add_parser("onnx", help="ONNX for ONNX Runtime (fp32, --int8)", description=DESCRIPTION)
    runs(p, _run_onnx)
    p.formatter_class = argparse.RawDescriptionHelpFormatter
    add_model_flag(p, "model directory or fine-tuning run directory", positional=True)
    p.add_argument("--output", "-o", required=True, type=Path, help="directory to write")
    p.add_argument("--int8", action="store_true", help="also write model.int8.onnx (dynamic int8 weights)")
    p.add_argument("--opset", type=int, help="ONNX opset version (default: the exporter's)")
    p.add_argument(
        "--calibrate-on", type=Path, metavar="FILE", help="labelled file: task metric in fp32 and in int8"
    )
    p.add_argument("--columns", help="comma-separated column names of a --calibrate-on file without header")
    p.add_argument("--checkpoint", choices=("best", "last"), default="best", help="which checkpoint of a run")
    p.add_argument("--overwrite", action="store_true", help="replace a non-empty --output directory")
    p.add_argument("--threads", type=int, help="ONNX Runtime threads for the checks")
    p.add_argument("--json", action="store_true", help="print the report as JSON")

    st = sub.add_parser(
        "sentence-transformers",
        help="a sentence-embedding model (mean pooling) for sentence-transformers",
        description=ST_DESCRIPTION,
        formatter_class=argparse.RawDescriptionHelpFormatter,
    )
    runs(st, _run_sentence_transformers)
    add_model_flag(st, "model directory or fine-tuning run directory", positional=True)
    st.add_argument("--output", "-o", type=Path, help="directory to write")
    st.add_argument("output_positional", nargs="?", type=Path, metavar="OUT", help=argparse.SUPPRESS)
    st.add_argument("--normalize", action="store_true", help="unit-length embeddings (a Normalize module)")
    st.add_argument(
        "--max-seq-length",
        type=int,
        help="truncate inputs to this many tokens (default: the model's maximum)",
    )
    st.add_argument(
        "--checkpoint", choices=("best", "last"), default="best", help="which checkpoint of a run"
    )
    st.add_argument("--overwrite", action="store_true", help="replace a non-empty --output directory")
    st.add_argument("--json", action="store_true", help="print the report as JSON")


def _summary(report: dict[str, Any]) -> list[str]:
    files, inits, parity = report["files"], report["initializers"], report["parity"]
    mb = lambda n: f"{n / 1e6:.1f} MB"  # noqa: E731
    lines = [f"exported {report['model_class']} from {report['source']} to {report['output']}"]
    size = f"model.onnx {mb(files['model.onnx'])}"
    if "model.safetensors" in files:
        size += f" (model.safetensors {mb(files['model.safetensors'])}, x{files['onnx_to_safetensors']})"
    lines.append(f"  {size}, opset {report['opset']}")
    lines.append(
        f"  weights: {inits['float_initializers']} float initializers for {inits['model_parameters']} "
        f"distinct parameters, {mb(inits['initializer_bytes'])} "
        f"({'stored once' if inits['stored_once'] else 'DUPLICATED'})"
    )
    worst = max(parity["max_abs_diff"].values())
    lines.append(
        f"  parity on a padded batch: max |ORT - PyTorch| = {worst:.2e} (<= {parity['tolerance']:g})"
    )
    if "int8" in report:
        q = report["int8"]
        lines.append(
            f"  int8: model.int8.onnx {mb(files['model.int8.onnx'])}, {q['quantized']} of "
            f"{q['weight_matmuls']} weight MatMuls quantized; max |int8 - fp32 PyTorch| = "
            f"{max(q['max_abs_diff_to_pytorch_fp32'].values()):.2e}"
        )
    if "metrics" in report:
        m = report["metrics"]
        for name in ("fp32", "int8"):
            if name in m:
                shown = ", ".join(f"{k} {v:.4f}" for k, v in m[name].items())
                lines.append(f"  {name} on {m['file']} ({m['examples']} examples): {shown}")
        if "score_change" in m:
            lines.append(f"  int8 score change: {m['score_change']:+.4f}")
    return lines


def _st_summary(report: dict[str, Any]) -> list[str]:
    check = report["check"]
    pooling = "mean pooling" + (", normalized" if report["normalize"] else "")
    lines = [f"exported the {report['model_type']} encoder of {report['source']} to {report['output']}"]
    lines.append(
        f"  {report['embedding_dimension']}-dimensional embeddings, {pooling}, "
        f"max_seq_length {report['max_seq_length']}"
    )
    if report["written_sharing"] != report["sharing"]:
        lines.append(
            f"  sharing {report['sharing']!r} written with one block per layer (no transformers layout)"
        )
    lines.append(
        f"  read by {check['read_by']}: max |embedding - ours| = {check['max_abs_diff']:.2e} on "
        f"{check['texts']} texts (<= {check['tolerance']:g})"
    )
    return lines


# errors are raised: `albert_lm.cli.main` prints them as one line and exits 1


def _run_sentence_transformers(args: argparse.Namespace) -> int:
    from_positional(args, "model", "--model", "MODEL_DIR")
    from_positional(args, "output", "--output", "OUT")
    from albert_lm._locks import guard_output
    from albert_lm.export.sentence_transformers import export_sentence_transformers

    with guard_output(args.output, {"--model": args.model}, args.overwrite):
        report = export_sentence_transformers(
            args.model,
            args.output,
            normalize=args.normalize,
            max_seq_length=args.max_seq_length,
            checkpoint=args.checkpoint,
            overwrite=args.overwrite,
        )
    print(json.dumps(report, indent=2) if args.json else "\n".join(_st_summary(report)))
    return 0


def _run_onnx(args: argparse.Namespace) -> int:
    from_positional(args, "model", "--model", "MODEL_DIR")
    from albert_lm._locks import guard_output
    from albert_lm.export.pipeline import export_model_dir

    try:
        with guard_output(
            args.output, {"--model": args.model, "--calibrate-on": args.calibrate_on}, args.overwrite
        ):
            report = export_model_dir(
                args.model,
                args.output,
                int8=args.int8,
                opset=args.opset,
                calibrate_on=args.calibrate_on,
                columns=[c.strip() for c in args.columns.split(",")] if args.columns else None,
                checkpoint=args.checkpoint,
                overwrite=args.overwrite,
                threads=args.threads,
            )
    except ImportError as e:
        raise MissingExtra(f"{e.name or e} is missing; pip install 'albert-lm[onnx]'") from e
    print(json.dumps(report, indent=2) if args.json else "\n".join(_summary(report)))
    return 0
