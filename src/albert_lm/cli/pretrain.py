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
  albert pretrain --recipe albert-base --data-dir D --eval-data-dir E --micro-batch-size 64 --precision bf16
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

# The flags: one per field of every section, spelled as the field (`albert_lm.train.settings.flag_names`:
# --learning-rate sets optim.learning_rate, --data-dir data.data_dir), and --model for model.init_from (the
# model input, as in every command). A second spelling is an old one, deprecated: --section.field (the config
# file's spelling, which --set keeps), --run-dir and --init.
OLD: dict[str, tuple[str, ...]] = {"output": ("--run-dir",), "model": ("--init",)}


def flags() -> dict[str, str]:
    """``{flag name: section.field}`` of `albert pretrain`."""
    from albert_lm.pretrain.config import SECTIONS
    from albert_lm.train.settings import flag_names

    return {"model": "model.init_from", **flag_names(SECTIONS, exclude=("init_from",))}


def old_spellings() -> dict[str, tuple[str, ...]]:
    """Each flag's deprecated spellings: the dotted ``--section.field`` (and the field's old name's)."""
    from albert_lm.train.settings import RENAMED_FIELDS

    old_names = {new: old for old, new in RENAMED_FIELDS.items()}
    out: dict[str, tuple[str, ...]] = {}
    for name, target in flags().items():
        dotted = [f"--{target}"] + ([f"--{old_names[target]}"] if target in old_names else [])
        out[name] = (*OLD.get(name, ()), *dotted)
    return out


def add_arguments(p: argparse.ArgumentParser) -> None:
    from albert_lm.cli.options import add_config_arguments, add_flat_flags, deprecate
    from albert_lm.pretrain.config import RECIPES, SECTIONS

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
    old = old_spellings()
    add_flat_flags(p, flags(), SECTIONS, old=old)
    for action in p._actions:
        dotted = [o for o in action.option_strings if "." in o or o in ("--run-dir", "--init")]
        if dotted:
            deprecate(action, *dotted)


def resolve(args: argparse.Namespace) -> Any:
    """The PretrainConfig described by recipe / config file / resume dir / flags."""
    from pathlib import Path

    from albert_lm.cli.options import flat_values, resolve_settings
    from albert_lm.pretrain.config import SECTIONS, PretrainConfig, apply_dict, recipe
    from albert_lm.train.settings import load_config_file

    cfg = recipe(args.recipe) if args.recipe else PretrainConfig()
    if isinstance(args.resume, str) and not args.recipe and not args.config:
        saved = Path(args.resume) / "run_config.json"
        if saved.exists():  # the run's own settings are the base of its resume
            cfg = apply_dict(cfg, load_config_file(saved), str(saved))
    flags = flat_values(args)
    if isinstance(args.resume, str):
        flags.setdefault("run", {})["output"] = args.resume
    cfg = resolve_settings(cfg, args, SECTIONS, flags=flags, apply=apply_dict)
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
