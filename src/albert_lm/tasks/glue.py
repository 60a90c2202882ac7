"""GLUE: one table of task specs, one reader, one task class (`albert_lm.tasks.classification.ClassificationTask`).

Data layout: the official GLUE TSVs as the GLUE download script writes them, ``DATA_DIR/<TASK>/*.tsv``
(``CoLA``, ``SST-2``, ``MRPC``, ``STS-B``, ``QQP``, ``MNLI``, ``QNLI``, ``RTE``, ``WNLI``) and
``DATA_DIR/diagnostic/diagnostic.tsv`` for AX. Columns are found by the names in each file's header
(CoLA's train/dev files have none; the spec names their four columns). Every row must have as many
fields as the header; a row that does not, or a label outside the task's label set, is an error naming
the file and line.

Test-set predictions are written in the leaderboard's submission format: ``<Task>.tsv`` with a header
``index<TAB>prediction`` and one row per test example (`write_submission`). The AX diagnostic is
predicted by the MNLI model, so the MNLI task predicts it alongside MNLI-m and MNLI-mm.

Presets: the original's per-task fine-tuning hyperparameters (learning rate, batch size, train steps,
warmup steps, max length 512) from google-research/albert ``run_glue.sh`` and the README's table.
"""

from __future__ import annotations

import json
import logging
from collections.abc import Mapping, Sequence
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

from albert_lm._io import atomic_write_text
from albert_lm._tables import TableError, is_datasets_dir, read_rows
from albert_lm.tasks.base import REPORT_FILE, Example, TaskDataError, UnknownNameError
from albert_lm.tasks.classification import ClassificationTask

logger = logging.getLogger(__name__)


@dataclass(frozen=True)
class SplitSpec:
    """Where one split lives and which columns hold what."""

    file: str
    """Path relative to DATA_DIR."""
    text_a: str
    text_b: str | None = None
    label: str | None = None
    """Label column; None for unlabelled (test) files."""
    index: str | None = None
    """Column with the example id (test files: the leaderboard's ``index``); None: the row number."""
    columns: tuple[str, ...] | None = None
    """Names of the columns of a file WITHOUT a header row (CoLA train/dev); None: the file has one."""


@dataclass(frozen=True)
class GlueSpec:
    """One GLUE task. ``labels`` None means regression (STS-B)."""

    name: str
    labels: tuple[str, ...] | None
    metrics: tuple[str, ...]
    splits: Mapping[str, SplitSpec]
    dev_splits: tuple[str, ...] = ("dev",)
    test_splits: tuple[str, ...] = ("test",)
    submission: Mapping[str, str] = field(default_factory=dict)
    """split -> leaderboard submission file name (without .tsv)."""
    preset: dict[str, Any] = field(default_factory=dict)
    positive_label: str | None = None


_MNLI_LABELS = ("contradiction", "entailment", "neutral")  # original classifier_utils.py MnliProcessor
_NLI2 = ("entailment", "not_entailment")  # QNLI, RTE
_BIN = ("0", "1")
_COLA_COLUMNS = ("source", "label", "original_label", "sentence")  # CoLA in_domain_train.tsv layout


def _preset(lr: float, batch: int, steps: int, warmup: int, **kw: Any) -> dict[str, Any]:
    # Common to every GLUE row of the original: max_seq_length 512, --optimizer=adamw, which is
    # AdamWeightDecayOptimizer (our adamw_original, FinetuneConfig's default: no bias correction; weight
    # decay 0.01, eps 1e-6), classifier dropout 0.1 (run_glue.sh COMMON_ARGS; README fine-tuning table,
    # columns MSL, Classifier DR).
    return dict(
        learning_rate=lr, batch_size=batch, train_steps=steps, warmup_steps=warmup, max_seq_length=512, **kw
    )


def _pair(file: str, a: str, b: str, label: str | None, index: str | None = None) -> SplitSpec:
    return SplitSpec(file, a, b, label, index)


# Columns: GLUE file headers. Presets: google-research/albert run_glue.sh `run_task TASK warmup lr steps
# save batch` and the README table (LR, BSZ, ALBERT DR, TS, WS); encoder dropout ("ALBERT DR") 0 except
# QQP / RTE / WNLI (0.1), per the README table.
SPECS: dict[str, GlueSpec] = {
    "cola": GlueSpec(
        "cola",
        _BIN,
        ("matthews",),
        {
            "train": SplitSpec("CoLA/train.tsv", "sentence", label="label", columns=_COLA_COLUMNS),
            "dev": SplitSpec("CoLA/dev.tsv", "sentence", label="label", columns=_COLA_COLUMNS),
            "test": SplitSpec("CoLA/test.tsv", "sentence", index="index"),
        },
        submission={"test": "CoLA"},
        preset=_preset(1e-5, 16, 5336, 320, encoder_dropout=0.0),  # run_glue.sh: CoLA 320 1e-5 5336 _ 16
    ),
    "sst2": GlueSpec(
        "sst2",
        _BIN,
        ("accuracy",),
        {
            "train": SplitSpec("SST-2/train.tsv", "sentence", label="label"),
            "dev": SplitSpec("SST-2/dev.tsv", "sentence", label="label"),
            "test": SplitSpec("SST-2/test.tsv", "sentence", index="index"),
        },
        submission={"test": "SST-2"},
        preset=_preset(1e-5, 32, 20935, 1256, encoder_dropout=0.0),  # run_glue.sh: SST-2 1256 1e-5 20935 _ 32
    ),
    "mrpc": GlueSpec(
        "mrpc",
        _BIN,
        ("f1", "accuracy"),
        {
            "train": _pair("MRPC/train.tsv", "#1 String", "#2 String", "Quality"),
            "dev": _pair("MRPC/dev.tsv", "#1 String", "#2 String", "Quality"),
            "test": _pair("MRPC/test.tsv", "#1 String", "#2 String", None, "index"),
        },
        submission={"test": "MRPC"},
        preset=_preset(2e-5, 32, 800, 200, encoder_dropout=0.0),  # run_glue.sh: MRPC 200 2e-5 800 _ 32
        positive_label="1",
    ),
    "stsb": GlueSpec(
        "stsb",
        None,
        ("pearson", "spearman"),
        {
            "train": _pair("STS-B/train.tsv", "sentence1", "sentence2", "score", "index"),
            "dev": _pair("STS-B/dev.tsv", "sentence1", "sentence2", "score", "index"),
            "test": _pair("STS-B/test.tsv", "sentence1", "sentence2", None, "index"),
        },
        submission={"test": "STS-B"},
        preset=_preset(2e-5, 16, 3598, 214, encoder_dropout=0.0),  # run_glue.sh: STS-B 214 2e-5 3598 _ 16
    ),
    "qqp": GlueSpec(
        "qqp",
        _BIN,
        ("f1", "accuracy"),
        {
            "train": _pair("QQP/train.tsv", "question1", "question2", "is_duplicate", "id"),
            "dev": _pair("QQP/dev.tsv", "question1", "question2", "is_duplicate", "id"),
            "test": _pair("QQP/test.tsv", "question1", "question2", None, "id"),
        },
        submission={"test": "QQP"},
        preset=_preset(5e-5, 128, 14000, 1000, encoder_dropout=0.1),  # run_glue.sh: QQP 1000 5e-5 14000 _ 128
        positive_label="1",
    ),
    "mnli": GlueSpec(
        "mnli",
        _MNLI_LABELS,
        ("accuracy",),
        {
            "train": _pair("MNLI/train.tsv", "sentence1", "sentence2", "gold_label", "index"),
            "dev": _pair("MNLI/dev_matched.tsv", "sentence1", "sentence2", "gold_label", "index"),
            "dev_mismatched": _pair(
                "MNLI/dev_mismatched.tsv", "sentence1", "sentence2", "gold_label", "index"
            ),
            "test": _pair("MNLI/test_matched.tsv", "sentence1", "sentence2", None, "index"),
            "test_mismatched": _pair("MNLI/test_mismatched.tsv", "sentence1", "sentence2", None, "index"),
            "ax": _pair("diagnostic/diagnostic.tsv", "sentence1", "sentence2", None, "index"),
        },
        dev_splits=("dev", "dev_mismatched"),
        test_splits=("test", "test_mismatched", "ax"),
        submission={"test": "MNLI-m", "test_mismatched": "MNLI-mm", "ax": "AX"},
        preset=_preset(
            3e-5, 128, 10000, 1000, encoder_dropout=0.0
        ),  # run_glue.sh: MNLI 1000 3e-5 10000 _ 128
    ),
    "qnli": GlueSpec(
        "qnli",
        _NLI2,
        ("accuracy",),
        {
            "train": _pair("QNLI/train.tsv", "question", "sentence", "label", "index"),
            "dev": _pair("QNLI/dev.tsv", "question", "sentence", "label", "index"),
            "test": _pair("QNLI/test.tsv", "question", "sentence", None, "index"),
        },
        submission={"test": "QNLI"},
        preset=_preset(1e-5, 32, 33112, 1986, encoder_dropout=0.0),  # run_glue.sh: QNLI 1986 1e-5 33112 _ 32
    ),
    "rte": GlueSpec(
        "rte",
        _NLI2,
        ("accuracy",),
        {
            "train": _pair("RTE/train.tsv", "sentence1", "sentence2", "label", "index"),
            "dev": _pair("RTE/dev.tsv", "sentence1", "sentence2", "label", "index"),
            "test": _pair("RTE/test.tsv", "sentence1", "sentence2", None, "index"),
        },
        submission={"test": "RTE"},
        preset=_preset(3e-5, 32, 800, 200, encoder_dropout=0.1),  # run_glue.sh: RTE 200 3e-5 800 _ 32
    ),
    "wnli": GlueSpec(
        "wnli",
        _BIN,
        ("accuracy",),
        {
            "train": _pair("WNLI/train.tsv", "sentence1", "sentence2", "label", "index"),
            "dev": _pair("WNLI/dev.tsv", "sentence1", "sentence2", "label", "index"),
            "test": _pair("WNLI/test.tsv", "sentence1", "sentence2", None, "index"),
        },
        submission={"test": "WNLI"},
        # Not in run_glue.sh; README fine-tuning table: WNLI LR 2e-5, BSZ 16, ALBERT DR 0.1, TS 2000, WS 250.
        preset=_preset(2e-5, 16, 2000, 250, encoder_dropout=0.1),
    ),
    # AX: the diagnostic set, predicted with an MNLI model (no train or dev data of its own).
    "ax": GlueSpec(
        "ax",
        _MNLI_LABELS,
        ("matthews",),
        {"test": _pair("diagnostic/diagnostic.tsv", "sentence1", "sentence2", None, "index")},
        dev_splits=(),
        test_splits=("test",),
        submission={"test": "AX"},
        preset=_preset(3e-5, 128, 10000, 1000, encoder_dropout=0.0),  # the MNLI row
    ),
}

ALIASES: dict[str, str] = {
    "sst-2": "sst2",
    "sts-b": "stsb",
    "mnli-m": "mnli",
    "mnli_matched": "mnli",
    "diagnostic": "ax",
}

TASK_NAMES: tuple[str, ...] = tuple(SPECS)


def get_spec(name: str) -> GlueSpec:
    key = ALIASES.get(name.lower(), name.lower())
    if key == "mnli-mm":
        raise UnknownNameError(
            "MNLI-mm is evaluated by the mnli task (its dev_mismatched / test_mismatched splits)"
        )
    if key not in SPECS:
        raise UnknownNameError(f"unknown GLUE task {name!r}; known: {', '.join(SPECS)}")
    return SPECS[key]


# ---------------------------------------------------------------------------------------------------------
# Reading
def split_file(data_dir: str | Path, file: str) -> tuple[Path, str | None]:
    """Where a split's rows are: the GLUE TSV (``SST-2/train.tsv``), else the same name as Parquet, Arrow,
    JSONL or a ``datasets`` directory (``SST-2/train.parquet``, ``SST-2/train/``), else a DatasetDict
    directory ``SST-2/`` holding the split; with the DatasetDict split to read (None otherwise)."""
    tsv = Path(data_dir) / file
    stem = tsv.with_suffix("")
    for candidate in (tsv, *(stem.with_suffix(f".{x}") for x in ("parquet", "arrow", "jsonl")), stem):
        if candidate.is_file() or is_datasets_dir(candidate):
            return candidate, None
    if is_datasets_dir(tsv.parent):
        return tsv.parent, stem.name
    return tsv, None


def read_split(data_dir: str | Path, spec: GlueSpec, split: str) -> list[Example]:
    """The examples of one split of a GLUE task (rows read by `albert_lm._tables.iter_rows`; columns named
    as in the GLUE files' headers)."""
    if split not in spec.splits:
        raise UnknownNameError(f"GLUE {spec.name} has no split {split!r}; it has {', '.join(spec.splits)}")
    s = spec.splits[split]
    path, dict_split = split_file(data_dir, s.file)
    if not path.exists():
        raise FileNotFoundError(
            f"{path}: not found (GLUE {spec.name} {split}; expected the GLUE download layout, or the same "
            "name as .parquet / .arrow / .jsonl or a datasets directory)"
        )
    try:
        rows = read_rows(path, columns=s.columns, split=dict_split)
    except TableError as e:
        raise TaskDataError(str(e)) from None
    if not rows:
        raise TaskDataError(f"{path}: no rows (GLUE {spec.name} {split})")
    wanted = [c for c in (s.text_a, s.text_b, s.label, s.index) if c is not None]
    examples: list[Example] = []
    for line, row in rows:
        missing = [c for c in wanted if c not in row]
        if missing:
            raise TaskDataError(f"{path}:{line}: no column {missing[0]!r} (columns: {', '.join(row)})")
        label: Any = None
        if s.label is not None:
            raw = str(row[s.label]).strip()
            if spec.labels is None:
                try:
                    label = float(raw)
                except ValueError:
                    raise TaskDataError(f"{path}:{line}: {s.label} {raw!r} is not a number") from None
            elif raw not in spec.labels:
                raise TaskDataError(
                    f"{path}:{line}: unknown label {raw!r} in column {s.label!r}; "
                    f"{spec.name} labels are {', '.join(spec.labels)}"
                )
            else:
                label = raw
        texts = tuple(_text(row, c, path, line) for c in (s.text_a, s.text_b) if c is not None)
        guid = str(row[s.index]) if s.index is not None else f"{split}-{len(examples)}"
        examples.append(Example(guid, texts, label, {"file": str(path), "line": line}))
    return examples


def _text(row: Mapping[str, Any], column: str, path: Path, line: int) -> str:
    value = row[column]
    if not isinstance(value, str):
        raise TaskDataError(f"{path}:{line}: column {column!r} is not text: {value!r}")
    return value


# ---------------------------------------------------------------------------------------------------------
# The task
class GlueTask(ClassificationTask):
    """A GLUE task from its spec; reads from ``data_dir``."""

    def __init__(self, spec: GlueSpec, data_dir: str | Path) -> None:
        self.spec = spec
        self.data_dir = Path(data_dir)
        super().__init__(
            spec.name,
            lambda split: read_split(self.data_dir, spec, split),
            spec.labels,
            spec.metrics,
            dev_splits=spec.dev_splits,
            test_splits=spec.test_splits,
            positive_label=spec.positive_label,
            text_fields=1 if next(iter(spec.splits.values())).text_b is None else 2,
        )

    def writes_submission(self, split: str) -> bool:
        return split in self.test_splits

    def write_test_predictions(
        self, split: str, predictions: Sequence[Mapping[str, Any]], out_dir: Path
    ) -> Path:
        name = self.spec.submission.get(split, f"{self.spec.name}-{split}")
        return write_submission(out_dir / f"{name}.tsv", predictions, regression=self.labels is None)

    def info(self) -> dict[str, Any]:
        return {**super().info(), "glue_task": self.spec.name}

    # ------------------------------------------------------------------------------------ command line
    cli_help = "GLUE: CoLA, SST-2, MRPC, STS-B, QQP, MNLI (and AX), QNLI, RTE, WNLI from the official TSVs"

    @classmethod
    def cli_arguments(cls, parser: Any, mode: str) -> None:
        """The GLUE arguments of `albert finetune glue` / `albert evaluate glue`."""
        extra = (
            "; evaluate also takes 'all': --model is then a directory of run directories named by task"
            if mode == "evaluate"
            else ""
        )
        parser.add_argument(
            "--task", required=True, metavar="NAME", help=f"GLUE task: {', '.join(TASK_NAMES)}{extra}"
        )
        parser.add_argument(
            "--data-dir",
            required=mode == "finetune",
            type=Path,
            help="GLUE root as the download script writes it (DIR/<TASK>/*.tsv)",
        )

    @classmethod
    def cli_task(cls, args: Any, info: Mapping[str, Any] | None = None) -> tuple[GlueTask, dict[str, Any]]:
        """The task and its preset (the original's hyperparameters) from parsed arguments."""
        spec = get_spec(args.task)
        if info is not None and info.get("labels") not in (None, list(spec.labels or [])):
            raise ValueError(
                f"the model was fine-tuned with labels {info.get('labels')}, GLUE {spec.name} has {spec.labels}"
            )
        if args.data_dir is None:
            raise ValueError("--data-dir is required")
        return GlueTask(spec, args.data_dir), spec.preset

    @classmethod
    def cli_preset(cls) -> tuple[Mapping[str, Any], str]:
        return SPECS[
            "mnli"
        ].preset, "MNLI's; each --task has the original's own values (--print-config shows them)"

    @classmethod
    def cli_summary(cls, args: Any) -> dict[str, Any] | None:
        """`albert evaluate glue --task all --model RUNS`: the GLUE average of finished runs (no re-evaluation)."""
        if str(args.task).lower() != "all":
            return None
        return glue_summary(args.model, getattr(args, "checkpoint", "best"))


def write_submission(path: Path, predictions: Sequence[Mapping[str, Any]], *, regression: bool) -> Path:
    """A GLUE leaderboard file: ``index<TAB>prediction``; labels as their names (``entailment``, ``1``),
    STS-B scores clipped to the label range [0, 5] with 3 decimals."""
    lines = ["index\tprediction\n"]
    for p in predictions:
        if regression:
            value = f"{min(5.0, max(0.0, float(p['score']))):.3f}"
        else:
            value = str(p["label"])
        lines.append(f"{p['guid']}\t{value}\n")
    path.parent.mkdir(parents=True, exist_ok=True)
    atomic_write_text(path, "".join(lines))
    return path


def glue_report(results: Mapping[str, Mapping[str, float]]) -> dict[str, Any]:
    """Task scores and the GLUE average from per-task dev metrics (``{"cola": {"matthews": ..}, ...}``;
    MNLI-mm as ``mnli-mm``)."""
    from albert_lm.tasks.metrics import glue_average, task_score

    scores = {}
    for task, metrics in results.items():
        names = SPECS["mnli"].metrics if task == "mnli-mm" else get_spec(task).metrics
        scores[task] = task_score(metrics, names)
    return glue_average(scores)


def glue_summary(runs_root: str | Path, checkpoint: str = "best") -> dict[str, Any]:
    """Task scores and the GLUE average of a directory of fine-tuning runs, one per task, named by task
    (``RUNS/cola``, ``RUNS/sst2``, ..., ``RUNS/mnli``), from their report.json dev metrics. MNLI
    contributes the mean of matched and mismatched accuracy."""
    root = Path(runs_root)
    results: dict[str, dict[str, float]] = {}
    for name in TASK_NAMES:
        report = root / name / REPORT_FILE
        if not report.is_file():
            continue
        rec = json.loads(report.read_text(encoding="utf-8"))["checkpoints"][checkpoint]
        spec = SPECS[name]
        results[name] = {m: float(rec[m]) for m in spec.metrics}
        if name == "mnli" and "dev_mismatched_accuracy" in rec:
            results["mnli-mm"] = {"accuracy": float(rec["dev_mismatched_accuracy"])}
    if not results:
        raise FileNotFoundError(
            f"{root}: no <task>/report.json of a GLUE fine-tuning run ({', '.join(TASK_NAMES)})"
        )
    return {"dev_metrics": results, **glue_report(results)}
