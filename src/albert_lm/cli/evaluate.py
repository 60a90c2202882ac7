"""`albert evaluate {glue,custom,race,squad,ner}`: metrics and predictions of a fine-tuned model on a split."""

from __future__ import annotations

import argparse
import json
import sys
import time
from pathlib import Path

from albert_lm._io import json_text

HELP = "evaluate a fine-tuned model (run directory or model directory) on a task split"
DESCRIPTION = """Evaluate a fine-tuned model on a split and write its predictions.

  albert evaluate glue --task mnli --data-dir GLUE --model RUN_DIR --split dev_mismatched
  albert evaluate glue --task sst2 --data-dir GLUE --model RUN_DIR --split test    # leaderboard file
  albert evaluate glue --task all --model RUNS     # GLUE average of RUNS/<task> runs (their report.json)
  albert evaluate custom --model RUN_DIR --dev dev.csv --text-column text --label-column label
  albert evaluate race --data-dir RACE_ROOT --model RUN_DIR --split test
  albert evaluate squad --model RUN_DIR --dev-file dev-v2.0.json   # + predictions.json, null_odds.json
  albert evaluate ner --model RUN_DIR --dev dev.conll               # entity-level precision, recall, F1

--model takes a run directory of `albert finetune` (its best checkpoint, or --checkpoint last) or a model
directory written by it; one whose weights lack the task head is refused (the head would be random).
Unlabelled splits get predictions only."""


def add_arguments(parser: argparse.ArgumentParser) -> None:
    from albert_lm.cli.options import add_inference_flags, add_subcommands, runs
    from albert_lm.tasks.registry import TASKS

    sub = add_subcommands(parser, "TASK")
    for name, cls in TASKS.items():
        p = runs(sub.add_parser(name, help=cls.cli_help, description=cls.cli_help), _run_task, task_kind=name)
        p.add_argument("--model", required=True, help="fine-tuning run directory or model directory")
        p.add_argument(
            "--checkpoint", choices=("best", "last"), default="best", help="which checkpoint of a run"
        )
        p.add_argument("--split", default="dev", help="split to evaluate (default: dev)")
        p.add_argument("--output", type=Path, help="predictions file (default: MODEL/eval/<split>.jsonl)")
        add_inference_flags(p)
        cls.cli_arguments(p, "evaluate")


def _run_task(args: argparse.Namespace) -> int:
    from albert_lm._locks import guard_output
    from albert_lm.cli.finetune import task_class
    from albert_lm.cli.options import inference_settings
    from albert_lm.finetune.rundir import load_finetuned
    from albert_lm.infer.predictor import Predictor
    from albert_lm.runtime.device import default_device
    from albert_lm.tasks.base import ModelDirError, write_jsonl
    from albert_lm.tasks.evaluate import evaluate, require_examples
    from albert_lm.tasks.inputs import pad_id_of

    # errors are raised: `albert_lm.cli.main` prints them as one line and exits 1
    summary = task_class(args.task_kind).cli_summary(args)
    if summary is not None:  # e.g. `evaluate glue --task all`: a summary of finished runs
        print(json.dumps(summary, indent=2))
        return 0
    run = inference_settings(args)  # checked before anything is read
    # the model as fine-tuned (task.json: its task, settings and sequence length), the data from args
    tuned = load_finetuned(args.model, args.checkpoint, run.max_seq_length)
    task, _ = task_class(args.task_kind).cli_task(args, tuned.info)
    if task.kind != tuned.task.kind:
        raise ModelDirError(
            f"{tuned.model_dir}: a {tuned.task.kind} model cannot be evaluated on a {task.kind} task"
        )
    examples = require_examples(task, args.split, task.read(args.split))  # no metric of nothing, exit 0
    features = task.featurize(examples, tuned.tokenizer, tuned.max_seq_length)
    predictor = Predictor.load(  # refuses a model without its task head
        tuned.model_dir,
        backend=run.backend,
        int8=run.int8,
        threads=run.threads,
        max_seq_length=tuned.max_seq_length,
        batch_size=run.eval_batch_size,
        device=default_device(run.device, run.backend, run.int8),
    )
    t0 = time.perf_counter()
    res = evaluate(
        task,
        examples,
        features,
        predictor.predict_fn,
        split=args.split,
        batch_size=run.eval_batch_size,
        pad_id=pad_id_of(tuned.tokenizer),
    )
    seconds = time.perf_counter() - t0
    out = args.output or (tuned.model_dir / "eval" / f"{args.split}.jsonl")
    with guard_output(out, {}, False):  # one writer of the predictions file
        write_jsonl(out, res.predictions)
    extra = ""
    if task.writes_submission(args.split):
        path = task.write_test_predictions(args.split, res.predictions, out.parent)
        extra = f", submission file {path}"
    summary = {
        "model": str(tuned.model_dir),
        "split": args.split,
        "num_examples": len(examples),
        **res.metrics,
    }
    if res.metrics:
        summary["score"] = task.score(res.metrics)
    breakdown = getattr(task, "metric_breakdown", None)
    if res.metrics and breakdown is not None:
        summary.update(breakdown(res.predictions, examples))
    print(json_text(summary, "albert evaluate", indent=2))
    if "per_type" in summary:
        from albert_lm.tasks.metrics import format_entity_report

        print(f"per entity type, {args.split}:\n{format_entity_report(summary['per_type'])}", file=sys.stderr)
    print(f"{len(examples)} examples in {seconds:.1f} s; predictions in {out}{extra}", file=sys.stderr)
    return 0
