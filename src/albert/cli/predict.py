"""`albert predict`: label new text with a fine-tuned model; JSONL out, one line per input."""

from __future__ import annotations

import argparse
import codecs
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
("" = no answer, SQuAD 2.0), "probability", "null_odds"}.

Output line N answers input line N, always: a blank (or all-whitespace) input line gets the record
{"line": N, "error": "empty input"} and the other lines their predictions (exit 0). Input that is not
UTF-8 text (a binary file) is an error naming the line; so is a model directory whose weights lack the
task head (it would predict at random)."""


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


EMPTY_INPUT = "empty input"
"""The ``error`` of the record written for a blank input line."""


def read_lines(path: str) -> tuple[list[str], str]:
    """The lines of the input file (``-``: stdin), without their line ends, and its name for messages."""
    source = "<stdin>" if path == "-" else path
    if path != "-":
        data = Path(path).read_bytes()
    elif hasattr(sys.stdin, "buffer"):
        data = sys.stdin.buffer.read()
    else:  # a text stream standing in for stdin (tests, notebooks)
        data = sys.stdin.read().encode("utf-8")
    return decode_lines(data, source), source


def decode_lines(data: bytes, source: str) -> list[str]:
    """UTF-8 lines of ``data`` (a BOM dropped; split at ``\\n`` only, ``\\r\\n`` too, never at the other
    characters `str.splitlines` treats as line breaks, so that line numbers are the editor's).

    Raises:
        TaskDataError: ``source:line: ...`` for a line that is not UTF-8 text or holds a NUL byte
            (binary input).
    """
    from albert.tasks.base import TaskDataError

    data = data.removeprefix(codecs.BOM_UTF8)
    raw = data.split(b"\n")
    if raw[-1] == b"":
        raw.pop()  # the line end of the last line starts no new line
    lines = []
    for n, line in enumerate(raw, start=1):
        try:
            text = line.decode("utf-8")
        except UnicodeDecodeError as e:
            raise TaskDataError(
                f"{source}:{n}: not UTF-8 text (byte 0x{line[e.start]:02x} at byte {e.start + 1} of the line); "
                "is the input a binary file?"
            ) from None
        if "\0" in text:
            raise TaskDataError(
                f"{source}:{n}: a NUL byte at column {text.index(chr(0)) + 1}; is the input a binary file?"
            )
        lines.append(text.removesuffix("\r"))
    return lines


def parse_lines(lines: list[str], fmt: str, source: str) -> list[tuple[int, dict[str, Any] | None]]:
    """(line number, record) for every input line, None for a blank one. Text lines become
    ``{"_texts": fields}`` (split at tabs), the form every task's `Task.predict_examples` takes beside
    JSON objects."""
    from albert._io import JsonlError, parse_json_line
    from albert.tasks.base import TaskDataError

    first = next((ln for ln in lines if ln.strip()), "")
    if fmt == "auto":
        fmt = "jsonl" if source.endswith(".jsonl") or first.lstrip().startswith("{") else "text"
    out: list[tuple[int, dict[str, Any] | None]] = []
    for n, line in enumerate(lines, start=1):
        if not line.strip():
            out.append((n, None))
        elif fmt == "jsonl":
            try:
                out.append((n, parse_json_line(line, f"{source}:{n}")))
            except JsonlError as e:
                raise TaskDataError(str(e)) from None
        else:
            out.append((n, {"_texts": line.split("\t")}))
    return out


def _write(rows: Iterable[dict[str, Any]], path: str) -> None:
    text = "".join(json.dumps(r, ensure_ascii=False) + "\n" for r in rows)
    if path == "-":
        sys.stdout.write(text)
    else:
        atomic_write_text(path, text)


def run(args: argparse.Namespace) -> int:
    from albert.tasks.rundir import load_finetuned

    # errors are raised: `albert.cli.main` prints them as one line and exits 1
    if args.batch_size < 1:
        raise ValueError(f"--batch-size: must be at least 1, got {args.batch_size}")
    tuned = load_finetuned(args.model, args.checkpoint, args.max_seq_length)
    lines, source = read_lines(args.input)
    if not lines:
        raise ValueError(f"{source}: no input")
    numbered = parse_lines(lines, args.format, source)
    given = [(n, rec) for n, rec in numbered if rec is not None]
    examples = tuned.task.predict_examples(
        [rec for _, rec in given],
        [n for n, _ in given],
        source,
        text_field=args.text_field,
        pair_field=args.pair_field,
    )
    model = tuned.load_model(args.device)  # refuses a model without its task head
    predicted = _predict_rows(tuned, model, given, examples, args.batch_size)
    # one output line per input line, in order: a blank line gets an error record, not a gap
    _write([predicted.get(n, {"line": n, "error": EMPTY_INPUT}) for n, _ in numbered], args.output)
    return 0


def _predict_rows(
    tuned: Any, model: Any, given: list[tuple[int, dict[str, Any]]], examples: list[Any], batch_size: int
) -> dict[int, dict[str, Any]]:
    """Line number -> output row, for the non-blank lines."""
    from albert.tasks.base import model_predict_fn, predict
    from albert.tasks.inputs import pad_id_of

    if not examples:
        return {}
    task = tuned.task
    features = task.featurize(examples, tuned.tokenizer, tuned.max_seq_length)
    outputs = predict(
        task, features, model_predict_fn(model), batch_size=batch_size, pad_id=pad_id_of(tuned.tokenizer)
    )
    preds = task.postprocess(outputs, examples, features)
    rows: dict[int, dict[str, Any]] = {}
    for (n, rec), ex, p in zip(given, examples, preds):
        row: dict[str, Any] = {"id": rec["id"]} if "id" in rec else {}
        row.update(task.output_row(ex, p))
        rows[n] = row
    return rows
