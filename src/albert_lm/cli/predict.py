"""`albert predict`: label new text with a fine-tuned model; JSONL out, one line per input, streamed."""

from __future__ import annotations

import argparse
import collections
import contextlib
import os
import select
import stat
import sys
from collections.abc import Callable, Iterable, Iterator
from typing import IO, Any

from albert_lm._io import json_text
from albert_lm._text import HEAD_BYTES, MAX_LINE_BYTES, check_text_head, iter_lines_bounded, line_too_long

HELP = "predict labels (and probabilities) for text from a file or stdin with a fine-tuned model"
DESCRIPTION = """Predict with a fine-tuned model; writes one JSON object per input line.

  echo "a gorgeous, witty film" | albert predict --model RUN_DIR
  albert predict --model RUN_DIR --input sentences.txt --output predictions.jsonl
  albert predict --model RUN_DIR --input pairs.tsv             # sentence-pair model: text<TAB>pair
  albert predict --model RUN_DIR --input items.jsonl           # fields text / text_pair (or --text-field)
  albert predict --model RACE_RUN --input questions.jsonl      # multiple choice: context, question, options
  albert predict --model SQUAD_RUN --input qa.jsonl            # question answering: question, context
  albert predict --model NER_RUN --input sentences.txt         # named entities: text lines, or {"tokens": [...]}
  albert predict --model RUN_DIR --int8 --threads 2 < big.txt  # CPU: torch.ao dynamic int8

Classification: {"text", "label", "probabilities": {label: p}}; regression: {"text", "score"};
multiple choice: {"prediction": "B", "probabilities": [...]}; question answering: {"question", "answer"
("" = no answer, SQuAD 2.0), "probability", "null_odds"}; named entities: {"text", "tokens", "tags" (one per
word), "entities": [{"type", "text", "start", "end" (words), "char_start", "char_end"}]}. A JSON input's
"id" comes first in its line.

Output line N answers input line N, always: a blank (or all-whitespace) input line gets the record
{"line": N, "error": "empty input"} and the other lines their predictions (exit 0). The input is read as
it comes, in chunks of at most 16 x --batch-size lines, cut short whenever the input pauses (a pipe or a
terminal whose writer is slower than the model); a chunk is one tokenizer call and, sorted by length,
model calls of --batch-size inputs, and its lines are written and flushed as soon as it is done
(--output: written atomically at the end instead). Input that is not UTF-8 text (a binary file) is an
error naming the line, when it is reached; so is a model directory whose weights lack the task head (it
would predict at random), before any input is read. A reader that closes the output early (`| head`)
ends the command quietly with status 141, as SIGPIPE would."""


def add_arguments(parser: argparse.ArgumentParser) -> None:
    from albert_lm.cli.options import add_inference_flags

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
        "(.jsonl) or the first character ({) of the first non-blank line",
    )
    parser.add_argument(
        "--text-field", help="JSONL field with the text (default: the training column or 'text')"
    )
    parser.add_argument(
        "--pair-field", help="JSONL field with the second text (default: the training column or 'text_pair')"
    )
    parser.add_argument("--output", default="-", help="output JSONL file (default: stdout)")
    add_inference_flags(parser)


EMPTY_INPUT = "empty input"
"""The ``error`` of the record written for a blank input line."""

SIGPIPE_STATUS = 128 + 13
"""The exit status when the reader of stdout went away: what a shell reports for a death by SIGPIPE."""

READ_AHEAD_BATCHES = 16
"""A chunk holds up to this many model batches. Sorting a chunk by length before cutting it into batches
is what keeps padding low: on albert-tiny with polarity sentences (benchmarks/bench_predict.py, one
thread) chunks of one batch of 64 ran at ~700 lines/s, of 4 batches ~1050, of 16 ~1400, the whole
input sorted at once ~1300. A pause of the input cuts a chunk short, so a slow writer waits for nothing."""

Numbered = tuple[int, dict[str, Any] | None]
"""(line number, record): a JSON object or ``{"_texts": fields}`` for a text line; None for a blank line."""


# --------------------------------------------------------------------------------------------- input
class InputLines:
    """The raw lines of the input (line ends kept), each as soon as it is complete, and `ready`: whether
    the next one is there without waiting for the writer.

    A pipe or terminal is read straight from its file descriptor, so that `ready` can ask `select`; a
    file, or a stream without a descriptor (tests, notebooks), is always ready: its end is its only wait.
    Lines end at ``\\n`` only, never at the other characters `str.splitlines` treats as line breaks, so
    that line numbers are the editor's.
    """

    def __init__(self, source: Iterable[bytes] | int, where: str = "<stdin>") -> None:
        self._where = where
        if hasattr(source, "readline"):  # a file: at most MAX_LINE_BYTES per line
            source = iter_lines_bounded(source, where)  # type: ignore[arg-type]
        self._lines_of = None if isinstance(source, int) else source
        self._fd = source if isinstance(source, int) else -1
        self._lines: collections.deque[bytes] = collections.deque()
        self._partial: list[bytes] = []  # the pieces of a line whose end has not come yet
        self._eof = False
        self._count = 0  # lines completed so far

    def __iter__(self) -> Iterator[bytes]:
        if self._lines_of is not None:
            yield from self._lines_of
            return
        while self._lines or self._fill():
            yield self._lines.popleft()

    def ready(self) -> bool:
        """Whether the next line (or the end) can be had now, without waiting for the writer."""
        if self._lines_of is not None or self._lines or self._eof:
            return True
        return bool(select.select([self._fd], [], [], 0)[0])

    def _fill(self) -> bool:
        """Reads until a line is complete; False at the end of the input."""
        while not self._lines:
            if self._eof:
                return False
            data = os.read(self._fd, 1 << 16)
            if not data:  # the end; a last line without its line end is a line
                self._eof = True
                if self._partial:
                    self._lines.append(b"".join(self._partial))
                continue
            *complete, rest = data.split(b"\n")
            if complete:
                complete[0] = b"".join([*self._partial, complete[0]])
                self._lines.extend(line + b"\n" for line in complete)
                self._partial = []
            if rest:
                self._partial.append(rest)
                if sum(map(len, self._partial)) > MAX_LINE_BYTES:  # never more than the limit held
                    raise line_too_long(self._where, self._count + 1, MAX_LINE_BYTES)
            self._count += len(complete)
        return True


@contextlib.contextmanager
def open_input(path: str) -> Iterator[InputLines]:
    """The lines of the input file (``-``: stdin). A file is opened on entering, so that a missing one
    fails before the model is loaded."""
    if path != "-":
        with open(path, "rb") as f:
            yield InputLines(f, path)
    elif _is_pipe_or_terminal(sys.stdin):
        yield InputLines(sys.stdin.fileno())
    elif hasattr(sys.stdin, "buffer"):
        yield InputLines(sys.stdin.buffer)
    else:  # a text stream standing in for stdin (tests, notebooks)
        yield InputLines(line.encode("utf-8") for line in sys.stdin)


def _is_pipe_or_terminal(stream: Any) -> bool:
    """A descriptor that `select` can watch (POSIX; not a regular file, which is always ready)."""
    if os.name != "posix":
        return False
    try:
        return not stat.S_ISREG(os.fstat(stream.fileno()).st_mode)
    except (AttributeError, OSError, ValueError):  # io.UnsupportedOperation is an OSError
        return False


def decode_lines(raw_lines: Iterable[bytes], source: str) -> Iterator[str]:
    """UTF-8 text of each line, without its line end (``\\n`` or ``\\r\\n``) and the first line's BOM.

    Raises:
        TaskDataError: ``source:line: ...`` for a line that is not UTF-8 text or holds a NUL byte
            (binary input), when that line is reached.
    """
    from albert_lm.tasks.base import TaskDataError

    for n, line in enumerate(raw_lines, start=1):
        if n == 1:  # the one encoding rule (UTF-16, bare-CR line ends, ...): refused naming the input
            line = line[check_text_head(line[:HEAD_BYTES], source) :]
        line = line.removesuffix(b"\n")
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
        yield text.removesuffix("\r")


def parse_lines(lines: Iterable[str], fmt: str, source: str) -> Iterator[Numbered]:
    """(line number, record) for every input line, None for a blank one. Text lines become
    ``{"_texts": fields}`` (split at tabs), the form every task's `Task.predict_examples` takes beside
    JSON objects. ``auto`` decides at the first non-blank line (blank lines before it have no format)."""
    from albert_lm._io import JsonlError, parse_json_line
    from albert_lm.tasks.base import TaskDataError

    for n, line in enumerate(lines, start=1):
        if not line.strip():
            yield n, None
            continue
        if fmt == "auto":
            fmt = "jsonl" if source.endswith(".jsonl") or line.lstrip().startswith("{") else "text"
        if fmt == "jsonl":
            try:
                yield n, parse_json_line(line, f"{source}:{n}")
            except JsonlError as e:
                raise TaskDataError(str(e)) from None
        else:
            yield n, {"_texts": line.split("\t")}


def chunks(numbered: Iterable[Numbered], most: int, ready: Callable[[], bool]) -> Iterator[list[Numbered]]:
    """Consecutive runs of lines holding ``most`` non-blank ones each, or fewer where ``ready()`` says
    that the next line is not there yet (and at the end); a blank line travels with the run it falls in,
    so that its error record is written in its place."""
    chunk: list[Numbered] = []
    given = 0
    for item in numbered:
        chunk.append(item)
        given += item[1] is not None
        if given == most or not ready():
            yield chunk
            chunk, given = [], 0
    if chunk:
        yield chunk


# ---------------------------------------------------------------------------------------- predicting
def chunk_rows(
    predictor: Any,
    chunk: list[Numbered],
    source: str,
    text_field: str | None = None,
    pair_field: str | None = None,
) -> list[dict[str, Any]]:
    """One output row per line of ``chunk``, in order: the prediction (after the record's ``id``, when it
    has one) or, for a blank line, ``{"line": n, "error": "empty input"}``."""
    given = [(n, rec) for n, rec in chunk if rec is not None]
    examples = predictor.examples(
        [rec for _, rec in given], [n for n, _ in given], source, text_field=text_field, pair_field=pair_field
    )
    predicted = iter(predictor.rows(examples))
    rows: list[dict[str, Any]] = []
    for n, rec in chunk:
        if rec is None:  # one output line per input line: a blank line gets an error record, not a gap
            rows.append({"line": n, "error": EMPTY_INPUT})
            continue
        row: dict[str, Any] = {"id": rec["id"]} if "id" in rec else {}
        row.update(next(predicted))
        rows.append(row)
    return rows


def write_predictions(predictor: Any, lines: InputLines, args: argparse.Namespace, out: IO[str]) -> int:
    """Reads ``lines`` (of ``args.input``) and writes each chunk's rows to ``out`` as soon as they are
    predicted, flushing after each; returns the number of lines.

    Raises:
        ValueError: the input holds no line at all.
        TaskDataError: a line that is binary, bad JSON or not an input of the task, when it is reached
            (the lines before it are written).
    """
    source = "<stdin>" if args.input == "-" else args.input
    numbered = parse_lines(decode_lines(lines, source), args.format, source)
    # a pause of the input cuts a chunk short for a reader waiting on stdout; --output waits for the end
    ready = lines.ready if out is sys.stdout else lambda: True
    count = 0
    for chunk in chunks(numbered, READ_AHEAD_BATCHES * args.inference.eval_batch_size, ready):
        rows = chunk_rows(predictor, chunk, source, args.text_field, args.pair_field)
        out.write("".join(json_text(r, f"{source}:{r.get('line', '?')}") + "\n" for r in rows))
        out.flush()
        count += len(chunk)
    if count == 0:
        raise ValueError(f"{source}: no input")
    return count


def load_predictor(args: argparse.Namespace) -> Any:
    """The `albert_lm.infer.predictor.Predictor` the flags ask for (the model is loaded, and checked,
    before any input is read)."""
    from albert_lm.infer.predictor import Predictor
    from albert_lm.runtime.device import default_device

    device = default_device(args.inference.device, args.inference.backend, args.inference.int8)
    try:
        return Predictor.load(
            args.model,
            backend=args.inference.backend,
            int8=args.inference.int8,
            checkpoint=args.checkpoint,
            threads=args.inference.threads,
            max_seq_length=args.inference.max_seq_length,
            batch_size=args.inference.eval_batch_size,
            device=device,
        )
    except ImportError as e:
        if args.inference.backend != "onnx":  # auto: a backend that cannot load is not a candidate
            raise
        raise ValueError(f"--backend onnx: {e.name or e} is missing; pip install 'albert-lm[onnx]'") from e


def run(args: argparse.Namespace) -> int:
    from albert_lm._io import atomic_write
    from albert_lm._locks import check_overwrite_inputs, lock_output
    from albert_lm.cli.options import inference_settings

    # errors are raised: `albert_lm.cli.main` prints them as one line and exits 1
    args.inference = inference_settings(args)  # checked before anything is read
    if args.output != "-":
        check_overwrite_inputs(args.output, {"--input": args.input}, whole_dir=False)  # never the input
    held = lock_output(args.output) if args.output != "-" else contextlib.nullcontext()  # one writer
    with held, open_input(args.input) as lines:
        predictor = load_predictor(args)
        if args.output != "-":

            def write(tmp: str) -> None:
                with open(tmp, "w", encoding="utf-8") as f:
                    write_predictions(predictor, lines, args, f)

            atomic_write(args.output, write)  # an error leaves no (or the old) file, never half of one
            return 0
        try:
            write_predictions(predictor, lines, args, sys.stdout)
        except BrokenPipeError:
            # the reader went away (`| head`): nothing more to say, and nothing at exit either, where
            # Python flushes stdout again and would fail the same way
            os.dup2(os.open(os.devnull, os.O_WRONLY), sys.stdout.fileno())
            return SIGPIPE_STATUS
    return 0
