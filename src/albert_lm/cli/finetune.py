"""`albert finetune {glue,custom,race,...}`: fine-tune a model directory on a task with the one trainer.

The tasks are those of `albert_lm.tasks.registry.TASKS`, the one table of them: each task class declares its
data arguments (``cli_arguments(parser, mode)``, ``mode`` "finetune" or "evaluate"), builds itself and
its hyperparameter preset from them (``cli_task(args, info=None) -> (Task, FinetuneConfig)``; ``info``:
the task.json of a fine-tuned model, which fixes e.g. the label order when evaluating) and has the one
line of help its command shows (``cli_help``).

Adding a task is one class and one line in that table. The settings flags (``--learning-rate``,
``--batch-size``, ...) are `FinetuneConfig`'s flat names (`albert_lm.finetune.config.FLAT_NAMES`: its ``finetune``
section and the settings shared with ``albert pretrain``), typed by the fields' annotations and helped by
their docstrings (`albert_lm.cli.options`). The preset, then ``--config FILE``, then the flags (``null`` too:
``--train-steps null``), then ``--set SECTION.FIELD=VALUE``, later wins; ``--print-config`` shows the result
in the YAML ``albert pretrain --print-config`` prints, which ``--config`` reads back.
"""

from __future__ import annotations

import argparse
import json
from pathlib import Path
from typing import Any

from albert_lm.cli.options import (
    add_config_arguments,
    add_flat_flags,
    add_subcommands,
    flat_values,
    runs,
    warn_deprecated,
)

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


def add_config_flags(
    parser: argparse.ArgumentParser, exclude: tuple[str, ...] = ("output",), task: Any = None
) -> None:
    """One flag per field of `FinetuneConfig` (``--learning-rate`` sets ``optim.learning_rate``), helped by
    the field's docstring and, with ``task`` (a task class), the value its preset gives it; a flag not given
    keeps the preset."""
    from albert_lm.finetune.config import FLAT_NAMES, SECTIONS, FinetuneConfig

    preset, note = task.cli_preset() if task is not None else ({}, "")
    cfg = FinetuneConfig(**preset)
    names = {k: v for k, v in FLAT_NAMES.items() if k not in exclude}
    title = "settings (default: the task's preset" + (f", {note}" if note else "") + ")"
    group = parser.add_argument_group(title, "--set SECTION.FIELD=VALUE sets any of them too")
    shown = {k: getattr(cfg, k) for k in names} if task is not None else None
    add_flat_flags(group, names, SECTIONS, defaults=shown)


def resolve_config(preset: Any, args: argparse.Namespace) -> Any:
    """The task's preset with ``--config FILE``, the flags and ``--set`` (later wins; ``null`` included:
    ``--train-steps null``). ``epochs`` given without a step count wins over the preset's steps (and over
    its warmup steps, unless ``warmup_steps`` is given); ``warmup_fraction`` given without
    ``warmup_steps`` wins over the preset's warmup steps (RACE's preset has 1000, which silently overrode
    a given fraction)."""
    from albert_lm.cli.options import resolve_settings
    from albert_lm.finetune.config import SECTIONS

    def derive(given: dict[str, dict[str, Any]]) -> dict[str, dict[str, Any]]:
        schedule = given.get("schedule", {})
        derived: dict[str, Any] = {}
        if "epochs" in given.get("finetune", {}) and schedule.get("train_steps") is None:
            derived = {"train_steps": None, "warmup_steps": schedule.get("warmup_steps")}
        if "warmup_fraction" in schedule:
            derived.setdefault("warmup_steps", schedule.get("warmup_steps"))
        return {"schedule": derived} if derived else {}

    return resolve_settings(preset, args, SECTIONS, derive=derive)


def task_class(name: str) -> Any:
    """The task class of a command (`albert_lm.tasks.registry.TASKS`)."""
    from albert_lm.tasks.registry import TASKS

    return TASKS[name]


def add_arguments(parser: argparse.ArgumentParser) -> None:
    from albert_lm.finetune.config import SECTIONS
    from albert_lm.tasks.registry import TASKS
    from albert_lm.train.settings import SHARED_FLAGS

    sub = add_subcommands(parser, "TASK")
    for name, cls in TASKS.items():
        p = runs(sub.add_parser(name, help=cls.cli_help, description=cls.cli_help), _run_task, task_kind=name)
        p.add_argument(
            "--model",
            "--init",
            dest="init",
            required=True,
            metavar="MODEL_DIR",
            help="model directory to start from (ours, HF ALBERT, HF BERT)",
        )
        add_flat_flags(p, {"output": SHARED_FLAGS["output"]}, SECTIONS)  # or --resume RUN_DIR
        p.add_argument(
            "--random-init",
            action="store_true",
            help="keep --init's architecture and tokenizer, draw fresh weights (the from-scratch baseline)",
        )
        cls.cli_arguments(p, "finetune")
        add_config_arguments(p)
        add_config_flags(p, task=cls)
        r = p.add_argument_group("run")
        r.add_argument("--train-limit", type=int, help="use only the first N training examples (smoke runs)")
        r.add_argument(
            "--no-test", action="store_true", help="do not predict the test split(s) after training"
        )
        again = r.add_mutually_exclusive_group()
        again.add_argument(
            "--resume",
            nargs="?",
            const=True,
            default=None,
            metavar="RUN_DIR",
            help="continue the run in --output (or in RUN_DIR, as albert pretrain --resume RUN_DIR) from its "
            "last checkpoint",
        )
        again.add_argument(
            "--overwrite",
            action="store_true",
            help="replace the run in a non-empty --output (kept until the new run has finished; "
            "without this flag or --resume, a non-empty --output is an error)",
        )
        # the old spelling, in seconds (every other time flag is in the unit its name says)
        r.add_argument("--max-time", type=float, dest="max_time_s_old", help=argparse.SUPPRESS)


def _run_task(args: argparse.Namespace) -> int:
    from albert_lm.finetune.config import FinetuneConfig
    from albert_lm.finetune.run import finetune
    from albert_lm.finetune.rundir import check_output_dir
    from albert_lm.tasks.inputs import read_model_config
    from albert_lm.train.settings import to_yaml

    # errors are raised: `albert_lm.cli.main` prints them as one line and exits 1
    _check_run_flags(args)
    output = _output(args)
    if not args.print_config:  # before reading any data
        check_output_dir(output, resume=bool(args.resume), overwrite=args.overwrite, init=args.init)
    # --print-config shows a preset even where it does not fit --init (e.g. a longer max_seq_length)
    model_config = None if args.print_config else read_model_config(args.init)
    # The flags first, over the defaults: building the task may read the training file (custom data
    # infers its labels), and a bad flag is bad whatever the preset.
    _validate(resolve_config(FinetuneConfig(), args), None)  # the flags alone: the model fit is the preset's
    task, preset = task_class(args.task_kind).cli_task(args)
    cfg = resolve_config(FinetuneConfig(**preset), args)
    _validate(cfg, model_config)  # the preset's own values with them
    if args.print_config:
        header = f"albert finetune {args.task_kind}: task {json.dumps(task.info())}, model {args.init}"
        print(to_yaml(cfg.sections(), header), end="")
        return 0
    result = finetune(
        task,
        args.init,
        str(cfg.run.output),
        cfg,
        train_limit=args.train_limit,
        predict_test=not args.no_test,
        resume=bool(args.resume),
        overwrite=args.overwrite,
        random_init=args.random_init,
    )
    for which in ("best", "last"):
        rec = getattr(result, which)
        metrics = {k: v for k, v in rec.items() if isinstance(v, float)}
        shown = ", ".join(f"{k} {v:.4f}" for k, v in metrics.items())
        print(f"{which:>4}: step {rec.get('step')}  {shown}  -> {rec.get('dir')}")
    print_breakdown(result.breakdown, "best checkpoint")
    print(f"report: {result.report_path}  (training {result.train_seconds:.0f} s)")
    return 0


def print_breakdown(breakdown: dict[str, Any], what: str) -> None:
    """The per-entity-type table of each split (NER's `metric_breakdown`), after the metrics."""
    from albert_lm.tasks.metrics import format_entity_report

    for split, parts in breakdown.items():
        if parts.get("per_type"):
            print(f"per entity type, {split} ({what}):")
            print(format_entity_report(parts["per_type"]))


def flag_of(name: str) -> str:
    """The flag that sets ``section.field`` (``optim.learning_rate`` -> ``--learning-rate``), else its ``--set``."""
    from albert_lm.finetune.config import FLAT_NAMES

    flat = next((k for k, v in FLAT_NAMES.items() if v == name), None)
    return f"--{flat.replace('_', '-')}" if flat else f"--set {name}"


def _validate(cfg: Any, model_config: Any) -> None:
    """`FinetuneConfig.validate`, its problems named by their flags."""
    from albert_lm.config import ConfigError

    try:
        cfg.validate(model_config)
    except ConfigError as e:
        if not e.problems:
            raise
        raise ConfigError([(flag_of(n), why) for n, why in e.problems]) from None


def _output(args: argparse.Namespace) -> str:
    """The run directory: ``--output``, or ``--resume RUN_DIR`` (the same directory if both are given).

    Raises:
        ValueError: neither given, or two different directories.
    """
    given = flat_values(args).get("run", {}).get("output")
    resumed = args.resume if isinstance(args.resume, str) else None
    if given is None and resumed is None:
        raise ValueError("--output: the run directory is required (or --resume RUN_DIR to continue one)")
    if given is not None and resumed is not None and Path(given).resolve() != Path(resumed).resolve():
        raise ValueError(f"--output {given} and --resume {resumed}: two run directories; give one")
    out = str(given if given is not None else resumed)
    setattr(args, "flag:run.output", out)  # the resolved configuration records it
    return out


def _check_run_flags(args: argparse.Namespace) -> None:
    """The run flags that are not settings: a positive --train-limit; the deprecated --max-time seconds
    converted to --max-time-minutes."""
    if args.train_limit is not None and args.train_limit < 1:
        raise ValueError(f"--train-limit: must be at least 1, got {args.train_limit}")
    if args.max_time_s_old is not None:
        if hasattr(args, "flag:run.max_time_minutes"):
            raise ValueError("--max-time (seconds, deprecated) and --max-time-minutes: give one")
        warn_deprecated("--max-time SECONDS", "--max-time-minutes")
        setattr(args, "flag:run.max_time_minutes", args.max_time_s_old / 60)
