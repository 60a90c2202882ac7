"""`albert pretrain`: pretrain ALBERT on a DATA_DIR made by `albert prepare` (MLM + SOP, LAMB)."""

from __future__ import annotations

import argparse
import json
import os
import sys
from typing import Any

HELP = "pretrain ALBERT (MLM + SOP) on a prepared DATA_DIR; torchrun for several GPUs / nodes"
DESCRIPTION = """Pretrain ALBERT with masked-LM + sentence-order prediction, LAMB and linear warmup/decay, as the
original run_pretraining.py. The configuration is a recipe, then a config file, then flags (later wins);
--print-config shows the result.

  albert pretrain --recipe smoke --data-dir data/pretrain --output runs/smoke
  albert pretrain --recipe albert-base --data-dir D --eval-data-dir E --run.micro_batch_size 64 --run.precision bf16
  albert pretrain --config run.yaml --set optim.lr=1e-3 --print-config
  albert pretrain --resume runs/smoke                      # continue exactly where it stopped
  albert pretrain --recipe smoke --data-dir data/pretrain --output runs/smoke --overwrite   # start it over
  albert pretrain --recipe demo --model data/minilm --data-dir D --tokenizer data/minilm   # from released weights

--model MODEL_DIR continues pretraining an ALBERT or BERT model directory (its architecture; heads it lacks
start fresh); DATA_DIR must have been prepared with that model's tokenizer.

Several GPUs (one node):  torchrun --nproc_per_node=8 -m albert.cli.main pretrain --recipe albert-base ...
Several nodes (run on each, NODE = 0..N-1):
  torchrun --nnodes=N --node_rank=NODE --nproc_per_node=8 --master_addr=HOST0 --master_port=29500 \\
      -m albert.cli.main pretrain --recipe albert-large --data-dir D --output R
The global batch (run.global_batch_size) is kept: micro batch x accumulation x ranks. Ctrl-C / SIGTERM write a
checkpoint and stop; --resume continues. A RUN_DIR that is not empty (an earlier run) is refused unless
--resume (continue it) or --overwrite (replace it; the old run is kept aside until the new one has
finished, and put back if it fails). Recipes: {recipes}.
"""

# The flags of the CLI convention (docs/cli.md), spelled as in every other command, -> the field each sets;
# a second spelling is the old one, deprecated. Every field also has its --section.field flag.
ALIASES: dict[tuple[str, ...], str] = {
    ("--output", "--run-dir"): "run.run_dir",
    ("--model", "--init"): "model.init_from",
    ("--data-dir",): "data.data_dir",
    ("--eval-data-dir",): "data.eval_data_dir",
    ("--tokenizer",): "data.tokenizer",
    ("--preset",): "model.preset",
    ("--learning-rate",): "optim.lr",
    ("--seed",): "run.seed",
    ("--max-seq-length",): "data.max_seq_length",
    ("--max-time-minutes",): "run.max_time_minutes",
    ("--device",): "run.device",
}


def add_arguments(p: argparse.ArgumentParser) -> None:
    from albert._fields import field_docs
    from albert.cli.options import add_dataclass_flags
    from albert.train.config import RECIPES, SECTIONS

    p.description = DESCRIPTION.format(recipes=", ".join(RECIPES))
    p.add_argument("--recipe", help=f"start from a recipe: {', '.join(RECIPES)}")
    p.add_argument("--config", metavar="FILE", help="JSON or YAML-style file with any of the sections")
    p.add_argument(
        "--set",
        action="extend",
        nargs="+",
        default=[],
        metavar="SECTION.FIELD=VALUE",
        help="set fields (repeatable)",
    )
    p.add_argument("--print-config", action="store_true", help="print the resolved configuration and exit")
    p.add_argument(
        "--resume",
        nargs="?",
        const=True,
        default=None,
        metavar="RUN_DIR",
        help="continue from the newest checkpoint (of RUN_DIR, whose run_config.json is then the base)",
    )
    p.add_argument(
        "--overwrite",
        action="store_true",
        help="replace the run in a non-empty run directory (kept until the new run has finished; without "
        "this flag or --resume, a non-empty run directory is an error)",
    )
    for flags, target in ALIASES.items():
        section, _, name = target.partition(".")
        doc = field_docs(SECTIONS[section])[name]
        p.add_argument(
            *flags, dest=f"alias:{target}", default=None, metavar="VALUE", help=f"{doc} (= --{target})"
        )
    p.add_argument(
        "--progress",
        action=argparse.BooleanOptionalAction,
        dest="alias:run.progress_bar",
        default=None,
        help="a progress bar (= --run.progress_bar; default: on)",
    )
    for section, cls in SECTIONS.items():  # --optim.lr, --run.precision, ...: one flag per field
        add_dataclass_flags(p.add_argument_group(f"{section} options"), cls, prefix=section, style="dotted")


def resolve(args: argparse.Namespace) -> Any:
    """The PretrainConfig described by recipe / config file / resume dir / flags."""
    from pathlib import Path

    from albert.cli.options import given_values
    from albert.train.config import (
        SECTIONS,
        PretrainConfig,
        apply_dict,
        load_config_file,
        parse_assignments,
        recipe,
    )

    cfg = recipe(args.recipe) if args.recipe else PretrainConfig()
    if isinstance(args.resume, str) and not args.recipe and not args.config:
        saved = Path(args.resume) / "run_config.json"
        if saved.exists():
            cfg = apply_dict(cfg, load_config_file(saved), str(saved))
    if args.config:
        cfg = apply_dict(cfg, load_config_file(args.config), args.config)
    flags: dict[str, dict[str, Any]] = {}
    for target in [*ALIASES.values(), "run.progress_bar"]:  # these first: --section.field wins over them
        value = getattr(args, f"alias:{target}")
        if value is not None:
            section, _, name = target.partition(".")
            flags.setdefault(section, {})[name] = value
    for section, cls in SECTIONS.items():
        flags.setdefault(section, {}).update(given_values(args, cls, prefix=section))
    if isinstance(args.resume, str):
        flags.setdefault("run", {})["run_dir"] = args.resume
    cfg = apply_dict(cfg, flags, "flags")
    cfg = apply_dict(cfg, parse_assignments(args.set), "--set")
    cfg.validate()
    return cfg


def run(args: argparse.Namespace) -> int:
    import signal

    from albert.train.config import to_yaml

    # errors (ConfigError, DataError, TrainingDiverged, a missing file, ...) are raised: `albert.cli.main`
    # prints them as one line and exits 1
    cfg = resolve(args)
    if args.print_config:
        print(to_yaml(cfg), end="")
        return 0

    from albert.tasks.rundir import check_output_dir, replacing
    from albert.train.pretraining import pretrain

    main_rank = int(os.environ.get("RANK", "0")) == 0  # under torchrun only rank 0 reports
    # a fresh run in an earlier run's directory appended to its metrics.jsonl and mixed the checkpoints
    check_output_dir(
        cfg.run.run_dir, resume=bool(args.resume), overwrite=args.overwrite, init=cfg.model.init_from
    )
    # one process moves the old run aside: every rank runs this command under torchrun
    with replacing(cfg.run.run_dir, enabled=args.overwrite and main_rank):
        result = pretrain(cfg, resume=bool(args.resume))
    if main_rank:
        summary = {k: v for k, v in result.to_dict().items() if k != "eval_history"}
        print(json.dumps(summary, indent=2))
    if result.stop_reason == "signal":
        if main_rank:
            print(
                f"stopped by a signal; continue with: albert pretrain --resume {cfg.run.run_dir}",
                file=sys.stderr,
            )
        return 128 + int(result.stop_signal or signal.SIGINT)  # the shell's convention: 130 / 143
    return 0
