"""`albert predict`: label new text with a fine-tuned model; JSONL out, one line per input."""

from __future__ import annotations

import argparse
import io
import json
import sys
from collections.abc import Iterable
from pathlib import Path
from typing import Any

from albert._io import atomic_write_text

HELP = "predict labels (and probabilities) for text from a file or stdin with a fine-tuned model"
DESCRIPTION = """Predict with a fine-tuned model; writes one JSON object per input line.

  echo "a gorgeous, witty film" | albert predict --model RUN_DIR
  albert predict --model RUN_DIR --input sentences.txt --output predictions.jsonl
  albert predict --model RUN_DIR --input pairs.tsv             # sentence-pair model: text<TAB>pair
  albert predict --model RUN_DIR --input items.jsonl           # fields text / text_pair (or --text-field)
  albert predict --model RACE_RUN --input questions.jsonl      # multiple choice: context, question, options
  albert predict --model SQUAD_RUN --input qa.jsonl            # question answering: question, context

Classification: {"text", "label", "probabilities": {label: p}}; regression: {"text", "score"};
multiple choice: {"prediction": "B", "probabilities": [...]}; question answering: {"question", "answer"
("" = no answer, SQuAD 2.0), "probability", "null_odds"}."""


def add_arguments(parser: argparse.ArgumentParser) -> None:
    parser.add_argument("--model", required=True, help="fine-tuning run directory or model directory")
    parser.add_argument(
        "--checkpoint", choices=("best", "last"), default="best", help="which checkpoint of a run"
    )
    parser.add_argument("--input", default="-", help="input file (default: stdin)")
    parser.add_argument(
        "--format",
        choices=("auto", "text", "jsonl"),
        default="auto",
        help="text: one input per line (text<TAB>pair for pair models); jsonl: objects; auto: by extension "
        "(.jsonl) or the first character ({)",
    )
    parser.add_argument(
        "--text-field", help="JSONL field with the text (default: the training column or 'text')"
    )
    parser.add_argument(
        "--pair-field", help="JSONL field with the second text (default: the training column or 'text_pair')"
    )
    parser.add_argument("--output", default="-", help="output JSONL file (default: stdout)")
    parser.add_argument("--batch-size", type=int, default=64)
    parser.add_argument("--max-seq-length", type=int, help="default: the value the model was fine-tuned with")
    parser.add_argument("--device", help="cpu | cuda (default: a GPU when there is one)")


def _read(path: str) -> str:
    if path == "-":
        return sys.stdin.read()
    return Path(path).read_text(encoding="utf-8-sig")  # utf-8-sig: a BOM is not part of the first line


def _records(text: str, fmt: str, source: str) -> tuple[list[dict[str, Any]], list[int]]:
    """Input records and their line numbers; blank lines skipped. Text lines become ``{"_texts": fields}``
    (split at tabs), the form every task's `Task.predict_examples` takes beside JSON objects."""
    from albert._io import JsonlError, iter_jsonl
    from albert.tasks.base import TaskDataError

    lines = text.splitlines()
    first = next((ln for ln in lines if ln.strip()), "")
    if fmt == "auto":
        fmt = "jsonl" if source.endswith(".jsonl") or first.lstrip().startswith("{") else "text"
    if fmt == "jsonl":
        try:
            pairs = list(iter_jsonl(io.StringIO(text), name=source))
        except JsonlError as e:
            raise TaskDataError(str(e)) from None
        return [rec for _, rec in pairs], [n for n, _ in pairs]
    numbered = [(n, line) for n, line in enumerate(lines, start=1) if line.strip()]
    return [{"_texts": line.split("\t")} for _, line in numbered], [n for n, _ in numbered]


def _write(rows: Iterable[dict[str, Any]], path: str) -> None:
    text = "".join(json.dumps(r, ensure_ascii=False) + "\n" for r in rows)
    if path == "-":
        sys.stdout.write(text)
    else:
        atomic_write_text(path, text)


def run(args: argparse.Namespace) -> int:
    from albert.tasks.base import ModelDirError, TaskDataError, model_predict_fn, predict
    from albert.tasks.inputs import pad_id_of
    from albert.tasks.rundir import load_finetuned
    from albert.train.distributed import pick_device

    try:
        tuned = load_finetuned(args.model, args.checkpoint, args.max_seq_length)
        source = "<stdin>" if args.input == "-" else args.input
        records, numbers = _records(_read(args.input), args.format, source)
        examples = tuned.task.predict_examples(
            records, numbers, source, text_field=args.text_field, pair_field=args.pair_field
        )
    except (TaskDataError, ModelDirError, FileNotFoundError) as e:
        print(f"error: {e}", file=sys.stderr)
        return 2
    if not examples:
        print("error: no input", file=sys.stderr)
        return 2
    task = tuned.task
    features = task.featurize(examples, tuned.tokenizer, tuned.max_seq_length)
    model = task.build_model(tuned.model_dir).to(pick_device(args.device))
    outputs = predict(
        task, features, model_predict_fn(model), batch_size=args.batch_size, pad_id=pad_id_of(tuned.tokenizer)
    )
    preds = task.postprocess(outputs, examples, features)
    rows = []
    for rec, ex, p in zip(records, examples, preds):
        row: dict[str, Any] = {"id": rec["id"]} if "id" in rec else {}
        row.update(task.output_row(ex, p))
        rows.append(row)
    _write(rows, args.output)
    return 0
