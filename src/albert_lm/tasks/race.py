"""RACE and multiple choice in general.

Data:

* the RACE layout, ``DATA_DIR/RACE/{train,dev,test}/{middle,high}/*.txt`` (``DATA_DIR`` may also be the
  ``RACE`` directory itself): each file one JSON object with ``article``, ``questions``, ``options`` (a
  list of 4 options per question), ``answers`` (letters) and ``id``;
* a generic row format for the user's own data, any number of options per question, in JSONL, Parquet,
  Arrow or a ``datasets`` directory:
  ``{"id": ..., "context": ..., "question": ..., "options": [...], "answer": "B" | 1}`` (``article`` is
  accepted for ``context`` and ``example_id`` for ``id``, the columns of the Hugging Face ``race`` set;
  ``answer`` may be missing in unlabelled files).

Inputs as the original (race_utils.py convert_single_example): for each option,
``[CLS] article [SEP] qa [SEP]``, where qa is the question with every ``_`` replaced by the option when
the question has a blank, else ``question + " " + option``; qa keeps its *last* ``max_qa_length`` (128)
tokens; the article is cut to what is left of ``max_seq_length - 3``. Type ids 0 up to the first
``[SEP]``, 1 after.

Head (`albert_lm.model.AlbertForMultipleChoice`): pooled -> dropout -> dense(1) per option, softmax over the
options, cross-entropy. Metrics: accuracy overall and per RACE level (middle / high).
"""

from __future__ import annotations

import json
import logging
from collections.abc import Mapping, Sequence
from dataclasses import dataclass
from pathlib import Path
from typing import Any, ClassVar

import numpy as np

from albert_lm._io import read_utf8
from albert_lm._tables import TableError, read_rows
from albert_lm.tasks.base import Example, Task, TaskDataError, per_example
from albert_lm.tasks.collate import Feature
from albert_lm.tasks.inputs import build_inputs
from albert_lm.tasks.metrics import softmax

logger = logging.getLogger(__name__)

LEVELS: tuple[str, ...] = ("middle", "high")
RACE_NUM_OPTIONS = 4  # original race_utils.py: labels A-D, `for j in range(4)`
MAX_QA_LENGTH = 128  # original run_race.py flag max_qa_length

# The original's v2 RACE setting (google-research/albert README: "For v2 ... except for RACE, where we use
# a learning rate of 1e-5 and 0 ALBERT DR"; run_race.py defaults: batch 32, train_step 12000, warmup_step
# 1000, max_seq_length 512, dropout_prob 0.1 before the classifier).
RACE_PRESET: dict[str, Any] = dict(
    learning_rate=1e-5,
    batch_size=32,
    train_steps=12000,
    warmup_steps=1000,
    max_seq_length=512,
    encoder_dropout=0.0,
    classifier_dropout=0.1,
    eval_batch_size=8,
)


def option_letter(i: int) -> str:
    return chr(ord("A") + i)


# ---------------------------------------------------------------------------------------------------------
# Input building
def build_qa(question: str, option: str) -> str:
    """The second segment for one option (original race_utils.py read_examples)."""
    if "_" in question:
        return question.replace("_", option)
    return " ".join([question, option])


def build_choice(
    tokenizer: Any, context_ids: Sequence[int], qa_ids: Sequence[int], max_length: int, max_qa_length: int
) -> tuple[list[int], list[int]]:
    """``[CLS] context [SEP] qa [SEP]`` and its type ids for one option.

    qa keeps its last ``max_qa_length`` tokens and the context is truncated to fit, as the original.
    Fix: the original slices the context with ``max_seq_length - 3 - len(qa)``, which goes negative
    (and then keeps most of the context, overflowing the sequence) when qa is longer than
    ``max_seq_length - 3``; here qa is then cut to its last ``max_seq_length - 3`` tokens as well.
    """
    room = max_length - 3  # [CLS], [SEP], [SEP]
    if room < 1:
        raise ValueError(f"max_seq_length {max_length} leaves no room for text")
    qa = list(qa_ids)[-max_qa_length:] if max_qa_length > 0 else []
    if len(qa) > room:
        qa = qa[-room:]
    ctx = list(context_ids)[: room - len(qa)]
    return build_inputs(tokenizer, ctx, qa)


# ---------------------------------------------------------------------------------------------------------
# Reading
def _mc_example(
    guid: str,
    context: str,
    question: str,
    options: list[str],
    label: int | None,
    meta: dict[str, Any],
) -> Example:
    return Example(guid, (context,), label, {**meta, "question": question, "options": options})


def _answer_index(answer: Any, num_options: int, where: str) -> int:
    """A letter (``"B"``) or a 0-based index -> index; anything outside the options is an error."""
    if isinstance(answer, bool):
        raise TaskDataError(f"{where}: answer {answer!r} is neither a letter nor an option index")
    if isinstance(answer, int):
        idx = answer
    elif isinstance(answer, str) and len(answer.strip()) == 1 and answer.strip().isalpha():
        idx = ord(answer.strip().upper()) - ord("A")
    else:
        raise TaskDataError(f"{where}: answer {answer!r} is neither a letter nor an option index")
    if not 0 <= idx < num_options:
        letters = f"A-{option_letter(num_options - 1)}"
        raise TaskDataError(f"{where}: answer {answer!r} is not one of the {num_options} options ({letters})")
    return idx


def read_race_file(path: Path, level: str, num_options: int = RACE_NUM_OPTIONS) -> list[Example]:
    """The questions of one RACE file (one JSON object)."""
    try:
        data = json.loads(read_utf8(path))
    except json.JSONDecodeError as e:
        raise TaskDataError(f"{path}: not valid JSON (line {e.lineno}, column {e.colno}: {e.msg})") from None
    if not isinstance(data, dict):
        raise TaskDataError(f"{path}: expected a JSON object")
    for key in ("article", "questions", "options", "answers"):
        if key not in data:
            raise TaskDataError(f"{path}: no field {key!r}")
    questions, options, answers = data["questions"], data["options"], data["answers"]
    if not (len(questions) == len(options) == len(answers)):
        raise TaskDataError(
            f"{path}: {len(questions)} questions, {len(options)} option lists and {len(answers)} answers; "
            "expected one option list and one answer per question"
        )
    file_id = str(data.get("id", path.name))
    examples = []
    for q, (question, opts, answer) in enumerate(zip(questions, options, answers), start=1):
        where = f"{path} question {q}"
        if not isinstance(opts, list) or len(opts) != num_options:
            n = len(opts) if isinstance(opts, list) else type(opts).__name__
            raise TaskDataError(f"{where}: {n} options, expected {num_options}")
        label = _answer_index(answer, num_options, where)
        examples.append(
            _mc_example(
                f"{level}/{file_id}#{q}",
                data["article"],
                question,
                [str(o) for o in opts],
                label,
                {"level": level, "file": str(path), "question_index": q, "id": file_id},
            )
        )
    return examples


def race_split_dir(data_dir: str | Path, split: str) -> Path:
    root = Path(data_dir)
    if (root / "RACE").is_dir():
        root = root / "RACE"
    return root / split


def read_race(data_dir: str | Path, split: str, levels: Sequence[str] = LEVELS) -> list[Example]:
    """Every question of a RACE split, levels in order, files sorted by name (the original lists the
    directory unsorted; sorting makes runs reproducible)."""
    base = race_split_dir(data_dir, split)
    if not base.is_dir():
        raise FileNotFoundError(
            f"{base}: no RACE {split} split (expected RACE/{split}/{{middle,high}}/*.txt)"
        )
    examples: list[Example] = []
    for level in levels:
        d = base / level
        if not d.is_dir():
            logger.warning("%s: missing; no %s questions in %s", d, level, split)
            continue
        for f in sorted(d.glob("*.txt")):
            examples.extend(read_race_file(f, level))
    if not examples:
        raise TaskDataError(f"{base}: no questions found")
    return examples


def read_mc_jsonl(path: str | Path) -> list[Example]:
    """The generic multiple-choice rows (see module docstring) of a JSONL, Parquet or Arrow file or a
    ``datasets`` directory (`albert_lm._tables.iter_rows`); options may vary in number.
    """
    p = Path(path)
    if not p.exists():
        raise FileNotFoundError(f"{p}: not found")
    examples = []
    try:
        records = read_rows(p)
    except TableError as e:
        raise TaskDataError(str(e)) from None
    for n, rec in records:
        where = f"{p}:{n}"
        context = rec.get("context", rec.get("article"))
        if not isinstance(context, str):
            raise TaskDataError(f"{where}: no text field 'context' (or 'article')")
        question = rec.get("question", "")
        opts = rec.get("options")
        if not isinstance(opts, list) or len(opts) < 2:
            raise TaskDataError(f"{where}: 'options' must be a list of at least 2 options")
        label = _answer_index(rec["answer"], len(opts), where) if rec.get("answer") is not None else None
        guid = str(rec.get("id", rec.get("example_id", f"{p.stem}-{n}")))
        meta = {"file": str(p), "line": n, "level": rec.get("level")}
        examples.append(_mc_example(guid, context, str(question), [str(o) for o in opts], label, meta))
    return examples


# ---------------------------------------------------------------------------------------------------------
# The task
@dataclass(frozen=True)
class MultipleChoiceData:
    """Where the data is: a RACE directory, or JSONL files per split."""

    data_dir: Path | None = None
    """RACE layout root."""
    files: Mapping[str, Path] | None = None
    """split -> JSONL file (generic format)."""
    levels: tuple[str, ...] = LEVELS
    max_qa_length: int = MAX_QA_LENGTH


class MultipleChoiceTask(Task):
    """RACE (``data.data_dir``) or the generic JSONL format (``data.files``)."""

    kind = "multiple_choice"
    kinds = ("multiple_choice",)
    head_outputs: ClassVar[dict[str, tuple[str, ...]]] = {"multiple_choice": ("logits",)}
    metric_names = ("accuracy",)

    def __init__(self, data: MultipleChoiceData, name: str = "race") -> None:
        if (data.data_dir is None) == (data.files is None):
            raise ValueError("give either a RACE data directory or JSONL files per split")
        self.data = data
        self.name = name
        self.max_qa_length = data.max_qa_length
        if data.files is not None:
            self.dev_splits = ("dev",) if "dev" in data.files else ()
            self.test_splits = ("test",) if "test" in data.files else ()
        else:
            self.dev_splits = ("dev",)
            self.test_splits = ("test",)

    @classmethod
    def from_info(cls, info: Mapping[str, Any]) -> MultipleChoiceTask:
        data = MultipleChoiceData(files={}, max_qa_length=int(info.get("max_qa_length", MAX_QA_LENGTH)))
        return cls(data, name=str(info["task"]))

    def read(self, split: str) -> list[Example]:
        if self.data.files is not None:
            if split not in self.data.files:
                raise FileNotFoundError(f"no {split} file given")
            return read_mc_jsonl(self.data.files[split])
        assert self.data.data_dir is not None
        return read_race(self.data.data_dir, split, self.data.levels)

    def featurize(self, examples: Sequence[Example], tokenizer: Any, max_length: int) -> list[Feature]:
        features = []
        context_cache: dict[str, list[int]] = {}  # RACE: several questions share an article
        for i, ex in enumerate(examples):
            context = ex.texts[0]
            if context not in context_cache:
                if len(context_cache) > 64:
                    context_cache.clear()
                context_cache[context] = list(tokenizer.encode_ids(context))
            ctx = context_cache[context]
            all_ids, all_types = [], []
            for option in ex.meta["options"]:
                qa_ids = tokenizer.encode_ids(build_qa(ex.meta["question"], option))
                ids, types = build_choice(tokenizer, ctx, qa_ids, max_length, self.max_qa_length)
                all_ids.append(ids)
                all_types.append(types)
            feat: Feature = {"input_ids": all_ids, "token_type_ids": all_types, "example_index": i}
            if ex.label is not None:
                feat["labels"] = int(ex.label)
            features.append(feat)
        return features

    def build_model(self, init: str | Path, *, require_head: bool = False, **config_overrides: Any) -> Any:
        from albert_lm.model import AlbertForMultipleChoice

        return AlbertForMultipleChoice.from_pretrained(init, require_head=require_head, **config_overrides)

    def postprocess(
        self,
        outputs: Sequence[Mapping[str, np.ndarray]],
        examples: Sequence[Example],
        features: Sequence[Feature],
    ) -> list[dict[str, Any]]:
        return per_example(outputs, examples, features, self._record)

    def _record(self, out: Mapping[str, np.ndarray], feat: Feature, ex: Example) -> dict[str, Any]:
        probs = softmax(np.asarray(out["logits"]).reshape(-1))  # over the options
        pred = int(np.argmax(probs))
        rec: dict[str, Any] = {
            "guid": ex.guid,
            "prediction": option_letter(pred),
            "probabilities": [round(float(p), 6) for p in probs],
        }
        if ex.label is not None:
            rec["answer"] = option_letter(int(ex.label))
            rec["correct"] = pred == int(ex.label)
        if ex.meta.get("level"):
            rec["level"] = ex.meta["level"]
        return rec

    def compute_metrics(
        self, predictions: Sequence[Mapping[str, Any]], examples: Sequence[Example]
    ) -> dict[str, float]:
        """``accuracy`` over all questions and ``accuracy_<level>`` per level present (RACE: middle, high),
        each with its question count ``num_<level>``."""
        correct = np.array(
            [p["prediction"] == option_letter(int(e.label)) for p, e in zip(predictions, examples)]
        )
        out = {"accuracy": float(correct.mean())}
        levels = [e.meta.get("level") for e in examples]
        for level in dict.fromkeys(lv for lv in levels if lv):
            mask = np.array([lv == level for lv in levels])
            out[f"accuracy_{level}"] = float(correct[mask].mean())
            out[f"num_{level}"] = float(mask.sum())
        return out

    def info(self) -> dict[str, Any]:
        return {**super().info(), "max_qa_length": self.max_qa_length}

    # ------------------------------------------------------------------------------------ albert predict
    @classmethod
    def read_labelled(
        cls, info: Mapping[str, Any], path: str | Path, columns: Sequence[str] | None = None
    ) -> list[Example]:
        """The generic multiple-choice JSONL format (`read_mc_jsonl`)."""
        if not Path(path).is_file():
            raise FileNotFoundError(f"{path}: no such file")
        return read_mc_jsonl(path)

    def predict_examples(
        self,
        records: Sequence[Mapping[str, Any]],
        numbers: Sequence[int],
        source: str,
        *,
        text_field: str | None = None,
        pair_field: str | None = None,
    ) -> list[Example]:
        """JSON objects with ``context`` (or ``article``), ``question`` and a list of ``options``."""
        examples = []
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

    def output_row(self, example: Example, prediction: Mapping[str, Any]) -> dict[str, Any]:
        """``{"prediction": "B", "probabilities": [...]}`` (one probability per option)."""
        return {"prediction": prediction["prediction"], "probabilities": prediction["probabilities"]}

    # ------------------------------------------------------------------------------------ command line
    cli_help = "RACE reading comprehension, or your own multiple-choice questions (JSONL)"

    @classmethod
    def cli_arguments(cls, parser: Any, mode: str) -> None:
        g = parser.add_argument_group("data: a RACE directory or multiple-choice row files")
        g.add_argument(
            "--data-dir", type=Path, help="RACE root (DIR/RACE/{train,dev,test}/{middle,high}/*.txt)"
        )
        g.add_argument(
            "--train",
            type=Path,
            help="training rows (generic multiple-choice format): JSONL, Parquet, Arrow or a datasets directory",
        )
        g.add_argument("--dev", type=Path, help="dev rows (same formats)")
        g.add_argument("--test", type=Path, help="test rows (same formats)")
        g.add_argument("--levels", default="middle,high", help="RACE levels to use (default: middle,high)")
        g.add_argument(
            "--max-qa-length",
            type=int,
            default=MAX_QA_LENGTH,
            help="question+option tokens kept (original: 128)",
        )

    @classmethod
    def cli_task(
        cls, args: Any, info: Mapping[str, Any] | None = None
    ) -> tuple[MultipleChoiceTask, dict[str, Any]]:
        files = {s: getattr(args, s) for s in ("train", "dev", "test") if getattr(args, s, None) is not None}
        if args.data_dir is not None and files:
            raise ValueError(
                "give either --data-dir (RACE layout) or --train/--dev/--test JSONL files, not both"
            )
        if args.data_dir is None and not files:
            raise ValueError("give --data-dir (RACE layout) or --train/--dev/--test JSONL files")
        max_qa = args.max_qa_length
        if info is not None and "max_qa_length" in info and max_qa == MAX_QA_LENGTH:
            max_qa = int(info["max_qa_length"])
        data = MultipleChoiceData(
            data_dir=args.data_dir,
            files=files or None,
            levels=tuple(x.strip() for x in args.levels.split(",")),
            max_qa_length=max_qa,
        )
        return MultipleChoiceTask(
            data, name="race" if args.data_dir is not None else "multiple_choice"
        ), RACE_PRESET

    @classmethod
    def cli_preset(cls) -> tuple[Mapping[str, Any], str]:
        return RACE_PRESET, ""
