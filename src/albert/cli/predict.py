"""`albert predict`: label new text with a fine-tuned model; JSONL out, one line per input."""

from __future__ import annotations

import argparse
import json
import sys
from collections.abc import Iterable
from pathlib import Path
from typing import Any

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


def _lines(path: str) -> list[str]:
    if path == "-":
        return sys.stdin.read().splitlines()
    return Path(path).read_text(encoding="utf-8-sig").splitlines()


def _records(lines: list[str], fmt: str, source: str) -> tuple[list[dict[str, Any]], list[int]]:
    """Input records and their line numbers; blank lines skipped."""
    from albert.tasks.base import TaskDataError

    first = next((ln for ln in lines if ln.strip()), "")
    if fmt == "auto":
        fmt = "jsonl" if source.endswith(".jsonl") or first.lstrip().startswith("{") else "text"
    records, numbers = [], []
    for n, line in enumerate(lines, start=1):
        if not line.strip():
            continue
        if fmt == "jsonl":
            try:
                rec = json.loads(line)
            except json.JSONDecodeError as e:
                raise TaskDataError(f"{source}:{n}: not valid JSON ({e.msg})") from None
            if not isinstance(rec, dict):
                raise TaskDataError(f"{source}:{n}: expected a JSON object")
        else:
            parts = line.split("\t")
            rec = {"_texts": parts}
        records.append(rec)
        numbers.append(n)
    return records, numbers


def build_examples(
    records: list[dict[str, Any]], numbers: list[int], info: dict[str, Any], args: Any, source: str
) -> list[Any]:
    """Examples for the model's task kind from the input records."""
    from albert.tasks.base import Example, TaskDataError

    examples = []
    if info["kind"] == "span":  # question answering: {"question", "context"} or question<TAB>context
        from albert.tasks.squad import predict_examples

        return predict_examples(records, numbers, source)
    if info["kind"] == "multiple_choice":
        for rec, n in zip(records, numbers):
            context = rec.get("context", rec.get("article"))
            opts = rec.get("options")
            if not isinstance(context, str) or not isinstance(opts, list) or len(opts) < 2:
                raise TaskDataError(
                    f"{source}:{n}: a multiple-choice input needs 'context' and a list of 'options'"
                )
            meta = {"question": str(rec.get("question", "")), "options": [str(o) for o in opts]}
            examples.append(Example(str(rec.get("id", n)), (context,), None, meta))
        return examples
    columns = info.get("columns") or {}
    text_field = args.text_field or columns.get("text") or "text"
    pair_field = args.pair_field or columns.get("text_pair") or "text_pair"
    pairs = int(info.get("text_fields", 1)) == 2
    for rec, n in zip(records, numbers):
        if "_texts" in rec:
            texts = rec["_texts"]
            if pairs and len(texts) != 2:
                raise TaskDataError(
                    f"{source}:{n}: a sentence-pair model needs text<TAB>pair, got {len(texts)} field(s)"
                )
            if not pairs:
                texts = ["\t".join(texts)]
        else:
            if text_field not in rec:
                raise TaskDataError(f"{source}:{n}: no field {text_field!r} (use --text-field)")
            texts = [str(rec[text_field])]
            if pairs:
                if pair_field not in rec:
                    raise TaskDataError(
                        f"{source}:{n}: no field {pair_field!r} for the second text (use --pair-field)"
                    )
                texts.append(str(rec[pair_field]))
        examples.append(Example(str(rec.get("id", n)), tuple(texts), None, {}))
    return examples


def _task_for(info: dict[str, Any]) -> Any:
    from albert.tasks.base import ClassificationTask
    from albert.tasks.race import MultipleChoiceData, MultipleChoiceTask

    if info["kind"] == "span":
        from albert.tasks.squad import SquadTask

        return SquadTask.from_info(info)
    if info["kind"] == "multiple_choice":
        files: dict[str, Path] = {"input": Path("-")}
        return MultipleChoiceTask(
            MultipleChoiceData(files=files, max_qa_length=int(info.get("max_qa_length", 128))),
            name=info["task"],
        )
    labels = info.get("labels") if info["kind"] == "classification" else None
    return ClassificationTask(
        info["task"],
        lambda split: [],
        labels,
        info.get("metric_names", ["accuracy"]),
        text_fields=int(info.get("text_fields", 1)),
    )


def _write(records: Iterable[dict[str, Any]], path: str) -> None:
    out = sys.stdout if path == "-" else open(path, "w", encoding="utf-8")  # noqa: SIM115
    try:
        for r in records:
            out.write(json.dumps(r, ensure_ascii=False) + "\n")
    finally:
        if out is not sys.stdout:
            out.close()


def run(args: argparse.Namespace) -> int:
    from albert.tasks.base import (
        ModelDirError,
        TaskDataError,
        load_model_tokenizer,
        model_predict_fn,
        predict,
        read_task_info,
        resolve_model_dir,
    )
    from albert.train.distributed import pick_device

    try:
        model_dir = resolve_model_dir(args.model, args.checkpoint)
        info = read_task_info(model_dir)
        tokenizer = load_model_tokenizer(model_dir)
        source = "<stdin>" if args.input == "-" else args.input
        records, numbers = _records(_lines(args.input), args.format, source)
        examples = build_examples(records, numbers, info, args, source)
    except (TaskDataError, ModelDirError, FileNotFoundError) as e:
        print(f"error: {e}", file=sys.stderr)
        return 2
    if not examples:
        print("error: no input", file=sys.stderr)
        return 2
    task = _task_for(info)
    max_len = args.max_seq_length or int(info.get("max_seq_length", 512))
    features = task.featurize(examples, tokenizer, max_len)
    model = task.build_model(model_dir).to(pick_device(args.device))
    outputs = predict(
        task, features, model_predict_fn(model), batch_size=args.batch_size, pad_id=tokenizer.pad_id
    )
    preds = task.postprocess(outputs, examples, features)
    results = []
    for rec, ex, p in zip(records, examples, preds):
        row: dict[str, Any] = {}
        if "id" in rec:
            row["id"] = rec["id"]
        if info["kind"] == "multiple_choice":
            row.update(prediction=p["prediction"], probabilities=p["probabilities"])
        elif info["kind"] == "span":
            best = p["nbest"][0] if p["nbest"] else {}
            row.update(question=ex.texts[0], answer=p["prediction"], probability=best.get("probability"))
            if "null_odds" in p:
                row["null_odds"] = p["null_odds"]
        else:
            row["text"] = ex.texts[0]
            if len(ex.texts) > 1:
                row["text_pair"] = ex.texts[1]
            row.update({k: v for k, v in p.items() if k != "guid"})
        results.append(row)
    _write(results, args.output)
    return 0
