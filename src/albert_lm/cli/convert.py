"""`albert convert`: released checkpoints -> model directories (config.json + model.safetensors + tokenizer).

Subcommands are a table (`SUBCOMMANDS`): each has a help line, an ``add_arguments`` and a ``run``.
"""

from __future__ import annotations

import argparse
import json
import time
from collections.abc import Callable
from pathlib import Path

HELP = "convert released checkpoints (TensorFlow 1, albert_zh) into a model directory"
DESCRIPTION = """\
albert convert tf CKPT --output DIR [--config albert_config.json] [--tokenizer 30k-clean.model]
    Converts a TensorFlow 1 checkpoint without TensorFlow. CKPT is a checkpoint prefix
    (albert_base/model.ckpt-best), one of its files, or a directory holding one checkpoint:
      - a release tarball (albert_config.json, model.ckpt-best.*, 30k-clean.model),
      - a TF-Hub module (variables/variables.*, assets/albert_config.json, assets/30k-clean.model),
      - albert_zh, brightmart's layout (albert_config_*.json, albert_model.ckpt.*, vocab.txt) or the
        Google layout (albert_config.json, albert_model.ckpt.*, vocab.txt),
      - a fine-tuned run directory (its `checkpoint` state file names the checkpoint).
    An existing non-empty DIR is an error unless --overwrite, which replaces it atomically.
    Every tensor's CRC32C is verified. Optimizer slots (adam_m/adam_v, lamb_m/lamb_v) and global_step are
    skipped; a variable that matches nothing is an error unless --allow-unused. Fine-tuned classifier
    variables (output_weights/output_bias) become the classification head. The output directory loads
    with albert (AlbertFor*.from_pretrained) and with transformers.
"""


def _add_tf(p: argparse.ArgumentParser) -> None:
    p.add_argument(
        "checkpoint", metavar="CKPT_PREFIX_OR_DIR", help="checkpoint prefix, one of its files, or a directory"
    )
    p.add_argument("--output", "-o", required=True, metavar="MODEL_DIR", help="model directory to write")
    p.add_argument(
        "--model-config",
        "--config",
        dest="config",
        metavar="JSON",
        help="albert_config.json (released, albert_zh or Hugging Face); default: the one next to the checkpoint",
    )
    p.add_argument(
        "--tokenizer",
        metavar="FILE",
        help="SentencePiece .model or WordPiece vocab.txt; default: the one next to the checkpoint",
    )
    p.add_argument(
        "--head",
        default="auto",
        metavar="HEAD",
        help="which model to build: auto (default: from the variables present), none (the encoder), or a head "
        "of the model's table (pretraining, mlm, classification, multiple_choice, question_answering, squad_v2: "
        "the head of the original run_squad_v2.py, ...; a name it does not have is refused listing them)",
    )
    p.add_argument(
        "--allow-unused", action="store_true", help="log variables that match nothing instead of failing"
    )
    p.add_argument(
        "--overwrite",
        action="store_true",
        help="replace an existing non-empty output directory (atomically: the old one stays whole until "
        "the new one is complete)",
    )
    p.add_argument("--json", action="store_true", help="print a machine-readable summary")
    p.add_argument(
        "--revision", metavar="REV", help="with a Hugging Face Hub id as CKPT: branch, tag or commit"
    )


def _local_checkpoint(checkpoint: str, revision: str | None) -> str:
    """CKPT as given, or the snapshot of the Hub repository it names (``owner/name`` whose ``owner`` is no
    local folder: ``albert_base/model.ckpt-best`` is a checkpoint prefix)."""
    from albert_lm._hub import is_hub_id, resolve_model_dir

    if Path(checkpoint).parent.is_dir() and revision is None or not is_hub_id(checkpoint):
        return checkpoint
    return str(resolve_model_dir(checkpoint, revision, everything=True))


def _run_tf(args: argparse.Namespace) -> int:
    from albert_lm._locks import guard_output
    from albert_lm.convert.tf import convert_tf_checkpoint
    from albert_lm.model import HEADS

    heads = ("auto", "none", *(h for h in HEADS if h is not None))
    if args.head not in heads:  # checked here, not by argparse: the table imports torch, --help need not
        raise ValueError(f"--head {args.head!r}: not one of {', '.join(heads)}")
    start = time.perf_counter()
    inputs = {"CHECKPOINT": args.checkpoint, "--model-config": args.config, "--tokenizer": args.tokenizer}
    with guard_output(args.output, inputs, args.overwrite):
        report = convert_tf_checkpoint(
            _local_checkpoint(args.checkpoint, args.revision),
            args.output,
            HEADS,
            config=args.config,
            tokenizer=args.tokenizer,
            head=None if args.head == "none" else args.head,
            allow_unused=args.allow_unused,
            overwrite=args.overwrite,
        )  # errors (ConversionError, CheckpointFormatError, ConfigError, OSError) are reported by cli.main
    seconds = time.perf_counter() - start
    summary = {
        "checkpoint": str(report.prefix),
        "output": str(Path(args.output)),
        "layout": report.layout,
        "head": report.head,
        "config": report.config_source,
        "converted": len(report.used),
        "skipped": len(report.skipped),
        "unused": report.unused,
        "seconds": round(seconds, 3),
    }
    if args.json:
        print(json.dumps(summary))
    else:
        print(
            f"{report.prefix} ({report.layout} layout) -> {args.output}: {len(report.used)} variables converted, "
            f"{len(report.skipped)} optimizer/bookkeeping variables skipped"
            + (f", {len(report.unused)} unused" if report.unused else "")
            + f" in {seconds:.2f}s"
        )
    return 0


#: name -> (help, add_arguments, run)
SUBCOMMANDS: dict[
    str, tuple[str, Callable[[argparse.ArgumentParser], None], Callable[[argparse.Namespace], int]]
] = {
    "tf": (
        "a TensorFlow 1 checkpoint (release tarball, TF-Hub module, albert_zh), without TensorFlow",
        _add_tf,
        _run_tf,
    ),
}


def add_arguments(parser: argparse.ArgumentParser) -> None:
    from albert_lm.cli.options import add_subcommands, runs

    sub = add_subcommands(parser, "SOURCE")
    for name, (help_, add, run_) in SUBCOMMANDS.items():
        add(runs(sub.add_parser(name, help=help_, description=help_), run_))
