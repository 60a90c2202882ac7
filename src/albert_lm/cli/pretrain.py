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
  albert pretrain --config run.yaml --set optim.learning_rate=1e-3 --print-config   # YAML, readable by --config
  albert pretrain --resume runs/smoke                      # continue exactly where it stopped
  albert pretrain --recipe smoke --data-dir data/pretrain --output runs/smoke --overwrite   # start it over
  albert pretrain --recipe demo --model data/minilm --data-dir D --tokenizer data/minilm   # from released weights

--model MODEL_DIR continues pretraining an ALBERT or BERT model directory (its architecture; heads it lacks
start fresh); DATA_DIR must have been prepared with that model's tokenizer.

Several GPUs (one node):  torchrun --nproc_per_node=8 -m albert_lm.cli.main pretrain --recipe albert-base ...
Several nodes (run on each, NODE = 0..N-1):
  torchrun --nnodes=N --node_rank=NODE --nproc_per_node=8 --master_addr=HOST0 --master_port=29500 \\
      -m albert_lm.cli.main pretrain --recipe albert-large --data-dir D --output R
The global batch (run.global_batch_size) is kept: micro batch x accumulation x ranks. Ctrl-C / SIGTERM write a
checkpoint and stop; --resume continues (the step cap, time budget and cadences may change and are recorded in
run_config.json; another data, model, optimizer, lr, batch or seed is refused naming each; a run stopped
before its first checkpoint starts over from step 0). A RUN_DIR that is not empty (an earlier run) is refused unless
--resume (continue it) or --overwrite (replace it; the old run is kept aside until the new one has
finished, and put back if it fails). Recipes: {recipes}.
"""

# The flat flags of pretraining's own sections (docs/cli.md), besides the shared settings' flags
# (albert_lm.train.settings.SHARED_FLAGS: --output, --learning-rate, --seed, ...); every field also has its
# --section.field flag. A second spelling is the old one, deprecated.
FLAGS: dict[str, str] = {
    "model": "model.init_from",
    "data_dir": "data.data_dir",
    "eval_data_dir": "data.eval_data_dir",
    "tokenizer": "data.tokenizer",
    "preset": "model.preset",
    "max_seq_length": "data.max_seq_length",
}
OLD: dict[str, tuple[str, ...]] = {"output": ("--run-dir",), "model": ("--init",)}


def add_arguments(p: argparse.ArgumentParser) -> None:
    from albert_lm.cli.options import add_config_arguments, add_dataclass_flags, add_flat_flags
    from albert_lm.pretrain.config import RECIPES, SECTIONS
    from albert_lm.train.settings import SHARED_FLAGS

    p.description = DESCRIPTION.format(recipes=", ".join(RECIPES))
    p.add_argument("--recipe", help=f"start from a recipe: {', '.join(RECIPES)}")
    add_config_arguments(p)
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
    add_flat_flags(p, {**FLAGS, **SHARED_FLAGS}, SECTIONS, old=OLD)
    for section, cls in SECTIONS.items():  # --optim.learning_rate, --run.precision, ...: one flag per field
        add_dataclass_flags(p.add_argument_group(f"{section} options"), cls, prefix=section, style="dotted")


def resolve(args: argparse.Namespace) -> Any:
    """The PretrainConfig described by recipe / config file / resume dir / flags."""
    from pathlib import Path

    from albert_lm.cli.options import flat_values, given_values
    from albert_lm.pretrain.config import SECTIONS, PretrainConfig, apply_dict, recipe
    from albert_lm.train.settings import load_config_file, parse_assignments

    cfg = recipe(args.recipe) if args.recipe else PretrainConfig()
    if isinstance(args.resume, str) and not args.recipe and not args.config:
        saved = Path(args.resume) / "run_config.json"
        if saved.exists():
            cfg = apply_dict(cfg, load_config_file(saved), str(saved))
    if args.config:
        cfg = apply_dict(cfg, load_config_file(args.config), args.config)
    flags = flat_values(args)  # these first: --section.field wins over them
    for section, cls in SECTIONS.items():
        flags.setdefault(section, {}).update(given_values(args, cls, prefix=section))
    if isinstance(args.resume, str):
        flags.setdefault("run", {})["output"] = args.resume
    cfg = apply_dict(cfg, flags, "flags")
    cfg = apply_dict(cfg, parse_assignments(args.set), "--set")
    cfg.validate()
    return cfg


def run(args: argparse.Namespace) -> int:
    import signal

    from albert_lm.train.settings import to_yaml

    # errors (ConfigError, DataError, TrainingDiverged, a missing file, ...) are raised: `albert_lm.cli.main`
    # prints them as one line and exits 1
    cfg = resolve(args)
    if args.print_config:
        print(to_yaml(cfg.to_dict(), "albert pretrain"), end="")
        return 0

    from albert_lm.finetune.rundir import check_output_dir, replacing
    from albert_lm.pretrain.run import pretrain

    run_dir = str(cfg.run.output)  # validate() refused none
    main_rank = int(os.environ.get("RANK", "0")) == 0  # under torchrun only rank 0 reports
    # a fresh run in another run's directory would append to its metrics.jsonl and mix the checkpoints
    check_output_dir(run_dir, resume=bool(args.resume), overwrite=args.overwrite, init=cfg.model.init_from)
    # one process moves the old run aside: every rank runs this command under torchrun
    with replacing(run_dir, enabled=args.overwrite and main_rank):
        result = pretrain(cfg, resume=bool(args.resume))
    if main_rank:
        summary = {k: v for k, v in result.to_dict().items() if k != "eval_history"}
        print(json.dumps(summary, indent=2))
    if result.stop_reason == "signal":
        if main_rank:
            print(
                f"stopped by a signal; continue with: albert pretrain --resume {run_dir}",
                file=sys.stderr,
            )
        return 128 + int(result.stop_signal or signal.SIGINT)  # the shell's convention: 130 / 143
    return 0
