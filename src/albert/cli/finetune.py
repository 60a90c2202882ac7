"""`albert finetune {glue,custom,race,...}`: fine-tune a model directory on a task with the one trainer.

The tasks are those of `albert.tasks.registry.TASKS`, the one table of them: each task class declares its
data arguments (``cli_arguments(parser, mode)``, ``mode`` "finetune" or "evaluate"), builds itself and
its hyperparameter preset from them (``cli_task(args, info=None) -> (Task, FinetuneConfig)``; ``info``:
the task.json of a fine-tuned model, which fixes e.g. the label order when evaluating) and has the one
line of help its command shows (``cli_help``).

Adding a task is one class and one line in that table. The hyperparameter
flags (``--learning-rate``, ``--batch-size``, ...) are `FinetuneConfig`'s fields, typed by their
annotations and helped by their docstrings (`albert.cli.options`); the ones given override the preset
(``null`` too: ``--train-steps null``); ``--print-config`` shows the resolved configuration.
"""

from __future__ import annotations

import argparse
import json
import math
from typing import Any

from albert.cli.options import add_dataclass_flags, given_values, warn_deprecated

HELP = (
    "fine-tune a model directory on GLUE, SQuAD, RACE, named entities (CoNLL) or your own CSV/TSV/JSONL data"
)
DESCRIPTION = """Fine-tune a model directory (ours, Hugging Face ALBERT or BERT) on a task.

  albert finetune glue --task sst2 --data-dir GLUE --model MODEL_DIR --output RUN_DIR
  albert finetune custom --train data.csv --text-column text --label-column label --model MODEL_DIR --output RUN_DIR
  albert finetune race --data-dir RACE_ROOT --model MODEL_DIR --output RUN_DIR
  albert finetune squad --version 2.0 --train train-v2.0.json --dev dev-v2.0.json --model MODEL_DIR --output RUN_DIR
  albert finetune ner --train train.conll --dev dev.conll --model MODEL_DIR --output RUN_DIR

The run directory gets two checkpoints, both model directories: checkpoints/best (best on dev) and
checkpoints/step-N (the last weights); report.json says which is which, with their dev metrics.
While training, checkpoints/step-N is rewritten every 10 minutes of training (--save-every-minutes)
and every --save-every steps; a killed run continues exactly where that checkpoint left it with the
same command plus --resume. A non-empty --output is refused unless --resume (continue it) or
--overwrite (replace it; the old run is kept aside until the new one has finished, and put back if it
fails). Hyperparameters are checked
before any data is read: `albert finetune: error: --flag: reason[; --flag: reason]`, exit 1."""


def add_config_flags(parser: argparse.ArgumentParser) -> None:
    """One flag per `FinetuneConfig` field, helped by its docstring; a flag not given keeps the preset."""
    from albert.tasks.base import FinetuneConfig

    group = parser.add_argument_group("hyperparameters (default: the task's preset)")
    add_dataclass_flags(group, FinetuneConfig, show_defaults=False)


def resolve_config(preset: Any, args: argparse.Namespace) -> Any:
    """The task's preset with the flags given on the command line (``null`` included: ``--train-steps
    null``). ``--epochs`` without a step count wins over the preset's (and over its warmup steps, unless
    ``--warmup-steps`` is given); ``--warmup-fraction`` without ``--warmup-steps`` wins over the preset's
    warmup steps (RACE's preset has 1000, which silently overrode a given fraction)."""
    from albert.tasks.base import FinetuneConfig

    given = given_values(args, FinetuneConfig)
    if "epochs" in given and given.get("train_steps") is None:
        given["train_steps"] = None
        given.setdefault("warmup_steps", None)
    if "warmup_fraction" in given:
        given.setdefault("warmup_steps", None)
    cfg: FinetuneConfig = preset.replace(**given)
    return cfg


def task_class(name: str) -> Any:
    """The task class of a command (`albert.tasks.registry.TASKS`)."""
    from albert.tasks.registry import TASKS

    return TASKS[name]


def add_arguments(parser: argparse.ArgumentParser) -> None:
    from albert.tasks.finetune import SAVE_EVERY_S
    from albert.tasks.registry import TASKS

    sub = parser.add_subparsers(dest="task_kind", metavar="TASK", required=True)
    for name, cls in TASKS.items():
        p = sub.add_parser(name, help=cls.cli_help, description=cls.cli_help)
        p.add_argument(
            "--model",
            "--init",
            dest="init",
            required=True,
            metavar="MODEL_DIR",
            help="model directory to start from (ours, HF ALBERT, HF BERT)",
        )
        p.add_argument("--output", required=True, help="run directory to write")
        p.add_argument(
            "--random-init",
            action="store_true",
            help="keep --init's architecture and tokenizer, draw fresh weights (the from-scratch baseline)",
        )
        cls.cli_arguments(p, "finetune")
        add_config_flags(p)
        r = p.add_argument_group("run")
        r.add_argument("--train-limit", type=int, help="use only the first N training examples (smoke runs)")
        r.add_argument(
            "--no-test", action="store_true", help="do not predict the test split(s) after training"
        )
        again = r.add_mutually_exclusive_group()
        again.add_argument(
            "--resume", action="store_true", help="continue the run in --output from its last checkpoint"
        )
        again.add_argument(
            "--overwrite",
            action="store_true",
            help="replace the run in a non-empty --output (kept until the new run has finished; "
            "without this flag or --resume, a non-empty --output is an error)",
        )
        r.add_argument(
            "--max-time-minutes",
            type=float,
            metavar="M",
            help="training time budget in minutes (then checkpoint and stop)",
        )
        # the old spelling, in seconds (every other time flag is in the unit its name says)
        r.add_argument("--max-time", type=float, dest="max_time_s_old", help=argparse.SUPPRESS)
        r.add_argument("--save-every", type=int, metavar="N", help="also write a checkpoint every N steps")
        r.add_argument(
            "--save-every-minutes",
            type=float,
            default=SAVE_EVERY_S / 60,
            metavar="M",
            help=f"write a checkpoint every M minutes of training (default {SAVE_EVERY_S / 60:g}; 0: only "
            "at the end)",
        )
        r.add_argument(
            "--progress",
            action=argparse.BooleanOptionalAction,
            default=True,
            help="a progress bar (default: on)",
        )
        r.add_argument(
            "--print-config", action="store_true", help="print the resolved configuration and exit"
        )


def run(args: argparse.Namespace) -> int:
    from albert.tasks.base import FinetuneConfig
    from albert.tasks.finetune import finetune
    from albert.tasks.inputs import read_model_config
    from albert.tasks.rundir import check_output_dir

    # errors are raised: `albert.cli.main` prints them as one line and exits 1
    if not args.print_config:  # before reading any data
        check_output_dir(args.output, resume=args.resume, overwrite=args.overwrite, init=args.init)
    _check_run_flags(args)
    # --print-config shows a preset even where it does not fit --init (e.g. a longer max_seq_length)
    model_config = None if args.print_config else read_model_config(args.init)
    # The flags first, over the defaults: building the task may read the training file (custom data
    # infers its labels), and a bad flag is bad whatever the preset (issue 22 item 5).
    _validate(resolve_config(FinetuneConfig(), args), model_config)
    task, preset = task_class(args.task_kind).cli_task(args)
    cfg = resolve_config(preset, args)
    _validate(cfg, model_config)  # the preset's own values with them
    if args.print_config:
        print(json.dumps({"task": task.info(), "init": args.init, "config": cfg.to_dict()}, indent=2))
        return 0
    result = finetune(
        task,
        args.init,
        args.output,
        cfg,
        train_limit=args.train_limit,
        predict_test=not args.no_test,
        resume=args.resume,
        overwrite=args.overwrite,
        max_time_s=args.max_time_minutes * 60 if args.max_time_minutes is not None else None,
        progress_bar=args.progress,
        random_init=args.random_init,
        save_every=args.save_every,
        save_every_s=args.save_every_minutes * 60 or None,
    )
    for which in ("best", "last"):
        rec = getattr(result, which)
        metrics = {k: v for k, v in rec.items() if isinstance(v, float)}
        shown = ", ".join(f"{k} {v:.4f}" for k, v in metrics.items())
        print(f"{which:>4}: step {rec.get('step')}  {shown}  -> {rec.get('dir')}")
    print(f"report: {result.report_path}  (training {result.train_seconds:.0f} s)")
    return 0


def _validate(cfg: Any, model_config: Any) -> None:
    """`FinetuneConfig.validate`, its problems named by their flags."""
    from albert.tasks.base import FinetuneConfigError

    try:
        cfg.validate(model_config)
    except FinetuneConfigError as e:
        raise FinetuneConfigError([(f"--{n.replace('_', '-')}", why) for n, why in e.problems]) from None


def _check_run_flags(args: argparse.Namespace) -> None:
    """The run flags that are not `FinetuneConfig` fields: a positive --train-limit, --max-time-minutes and
    --save-every, a finite --save-every-minutes >= 0 (the deprecated --max-time seconds converted)."""
    for flag, value in (("--train-limit", args.train_limit), ("--save-every", args.save_every)):
        if value is not None and value < 1:
            raise ValueError(f"{flag}: must be at least 1, got {value}")
    if args.max_time_s_old is not None:
        if args.max_time_minutes is not None:
            raise ValueError("--max-time (seconds, deprecated) and --max-time-minutes: give one")
        warn_deprecated("--max-time SECONDS", "--max-time-minutes")
        args.max_time_minutes = args.max_time_s_old / 60
    budget = args.max_time_minutes
    if budget is not None and not (math.isfinite(budget) and budget > 0):
        raise ValueError(f"--max-time-minutes: must be a positive number of minutes, got {budget:g}")
    minutes = args.save_every_minutes
    if not (math.isfinite(minutes) and minutes >= 0):
        raise ValueError(f"--save-every-minutes: must be a number of minutes >= 0, got {minutes}")
