"""Your own labelled data: classification or regression from CSV, TSV, JSONL, Parquet or Arrow files, or
``datasets`` directories, with named columns.

The same command then serves sentiment, topic or Chinese sentence-pair tasks::

    albert finetune custom --train train.csv --dev dev.csv --text-column sentence --label-column label \\
        --init MODEL_DIR --output RUN_DIR

* CSV: RFC 4180 quoting (a quoted field may hold commas, quotes and newlines), UTF-8 with or without BOM,
  read strictly (``csv.reader(strict=True)``): a quote that runs to the end of the file, a closing quote
  not followed by a comma or line end, or a record over `MAX_RECORD_LINES` lines (a stray opening quote
  swallowing the rows after it into one example) is an error naming the file and the record's first line.
* TSV: tab-separated, quotes are literal (as GLUE's files), one record per line.
* JSONL: one JSON object per line; columns are keys.
* Parquet, Arrow IPC files and ``datasets`` directories (``save_to_disk``; for a DatasetDict the split
  ``train`` / ``dev`` (or ``validation``) / ``test`` of the file's role): columns are the schema's; the
  number in errors is the row's. All formats are read by `albert_lm._tables.iter_rows`.

A file without a header row gets its column names from ``columns`` (``--columns label,text``). Without a
dev file, a fixed, seeded fraction of the training file is held out (`holdout_split`), and the split is
written to the run directory's report, so a second run (or another library) can use the same one.

Classification labels are compared as strings (``1`` in a CSV and ``1`` in JSON are the same class);
the label set is the sorted set of training labels unless given. A row with the wrong number of
fields, a missing key, a label outside the label set, or a non-numeric regression target is an error
naming the file and line. So is an empty label (an empty cell, JSON ``null`` or blank text) in a
labelled file: it is never a class ``''``. With ``skip_bad_rows`` (``--skip-bad-rows``), rows of a
labelled file with an empty label, a missing field or a non-numeric target are skipped instead, counted
and logged with the first one's file:line (and the counts go into task.json / report.json).

A header (or ``--columns``) naming a column twice is an error: a row read as a dict keeps only the last
of them. A label set inferred from the training file goes through `albert_lm.tasks.labels.check_label_set`:
numbers that are not whole (a regression target without ``--regression``), more classes than the rows can
teach (swapped ``--columns``) and spellings of one label (``pos`` / ``Pos``, ``1`` / ``1.0``) are errors
that name the labels at fault and the flag that fixes it.
"""

from __future__ import annotations

import collections
import functools
import logging
import math
from collections.abc import Mapping, Sequence
from dataclasses import dataclass
from pathlib import Path
from typing import Any

import numpy as np

from albert_lm._tables import TABLE_FORMATS, TableError, read_rows
from albert_lm.tasks import metrics as M
from albert_lm.tasks.base import Example, TaskDataError, UnknownNameError
from albert_lm.tasks.classification import ClassificationTask
from albert_lm.tasks.labels import check_label_set, short_list

logger = logging.getLogger(__name__)

FORMATS = TABLE_FORMATS


def read_records(
    path: str | Path, fmt: str | None = None, columns: Sequence[str] | None = None, split: str | None = None
) -> list[tuple[int, dict[str, Any]]]:
    """(line or row number, record) pairs of a CSV / TSV / JSONL / Parquet / Arrow file or a ``datasets``
    directory (`albert_lm._tables.iter_rows`; ``split``: the split of a DatasetDict directory).

    Raises:
        FileNotFoundError: no such file.
        TaskDataError: a row whose field count differs from the header's, a line that is not a JSON
            object, a column named twice (names file and line).
    """
    try:
        return read_rows(path, fmt, columns=columns, split=split)
    except TableError as e:
        raise TaskDataError(str(e)) from None


def _field(rec: dict[str, Any], where: str, name: str) -> Any:
    if name not in rec:
        raise TaskDataError(f"{where}: no field {name!r} (fields: {', '.join(map(str, rec))})")
    return rec[name]


def _label_string(value: Any) -> str:
    if isinstance(value, bool):
        return "true" if value else "false"
    return str(value).strip()


@dataclass(frozen=True)
class CustomData:
    """Where the data is and which columns hold what."""

    train: Path | None = None
    dev: Path | None = None
    test: Path | None = None
    text_column: str = "text"
    text_pair_column: str | None = None
    label_column: str = "label"
    id_column: str | None = None
    regression: bool = False
    labels: tuple[str, ...] | None = None
    """The label set (its order fixes the class ids); None: the sorted training labels."""
    columns: tuple[str, ...] | None = None
    """Column names for files without a header row."""
    format: str | None = None
    """csv | tsv | jsonl | parquet | arrow | datasets; None: from each file's extension."""
    dev_fraction: float = 0.1
    """Held out of ``train`` when there is no dev file."""
    split_seed: int = 0
    name: str = "custom"
    skip_bad_rows: bool = False
    """Skip (and count) rows of labelled files with an empty label, a missing field or a non-numeric
    target instead of stopping at the first with an error."""


def _is_empty(value: Any) -> bool:
    """An empty label cell: nothing, JSON null, or blank text."""
    return value is None or (isinstance(value, str) and not value.strip())


def _label(data: CustomData, raw: Any, where: str, *, labelled: bool) -> Any:
    """The label of one row: a class name (str), a regression target (float), or None for an empty cell
    of an unlabelled file (a test file with an empty label column).

    Raises:
        TaskDataError: an empty label in a labelled file, or a regression target that is not a number.
    """
    if _is_empty(raw):
        if not labelled:
            return None
        raise TaskDataError(f"{where}: empty {data.label_column!r} (a labelled row needs a label)")
    if not data.regression:
        return _label_string(raw)
    try:
        target = float(raw)
    except (TypeError, ValueError):
        raise TaskDataError(f"{where}: {data.label_column} {raw!r} is not a number") from None
    if not math.isfinite(target):
        raise TaskDataError(f"{where}: {data.label_column} {raw!r} is not a finite number")
    return target


def _example(data: CustomData, rec: dict[str, Any], where: str, *, labelled: bool, guid: str) -> Example:
    """One row as an example (``meta`` filled by the caller); raises `TaskDataError` naming ``where``."""
    field = functools.partial(_field, rec, where)
    texts: list[str] = []
    for column in (data.text_column, data.text_pair_column):
        if column is None:
            continue
        text = field(column)
        if not isinstance(text, str):
            raise TaskDataError(f"{where}: field {column!r} is not text: {text!r}")
        texts.append(text)
    label: Any = None
    if labelled or data.label_column in rec:
        label = _label(data, field(data.label_column), where, labelled=labelled)
    if data.id_column:
        guid = str(field(data.id_column))
    return Example(guid, tuple(texts), label)


def read_file(
    data: CustomData, path: Path, *, labelled: bool, split: str, skipped: list[str] | None = None
) -> list[Example]:
    """Examples of one file; unlabelled files (test) may lack the label column or leave it empty.

    Args:
        skipped: with ``data.skip_bad_rows``, the error of each skipped row is appended to it.

    Raises:
        TaskDataError: a bad row (see the module docstring), naming file and line; with
            ``data.skip_bad_rows`` such rows are skipped, counted and logged instead.
    """
    examples = []
    skipped = [] if skipped is None else skipped
    before = len(skipped)
    for line, rec in read_records(path, data.format, data.columns, split=split):
        where = f"{path}:{line}"
        try:
            ex = _example(data, rec, where, labelled=labelled, guid=f"{split}-{line}")
        except TaskDataError as e:
            if not data.skip_bad_rows:
                raise
            skipped.append(str(e))
            continue
        ex.meta.update(file=str(path), line=line)
        examples.append(ex)
    n_skipped = len(skipped) - before
    if n_skipped:
        logger.warning(
            "%s: skipped %d bad row(s) of %d (--skip-bad-rows); the first: %s",
            path, n_skipped, n_skipped + len(examples), skipped[before],
        )  # fmt: skip
    return examples


def holdout_split(n: int, fraction: float, seed: int) -> tuple[list[int], list[int]]:
    """(train indices, dev indices), both sorted: a seeded permutation, the first ``round(n * fraction)``
    to dev. numpy's PCG64 stream makes it the same split on every machine."""
    if not 0 < fraction < 1:
        raise ValueError(f"dev fraction must be in (0, 1), got {fraction}")
    perm = np.random.default_rng(seed).permutation(n)
    n_dev = int(round(n * fraction))
    return sorted(perm[n_dev:].tolist()), sorted(perm[:n_dev].tolist())


class CustomTask(ClassificationTask):
    """Classification (default) or regression on the user's files."""

    def __init__(self, data: CustomData, metrics: Sequence[str] | None = None) -> None:
        self.data = data
        self._cache: dict[str, list[Example]] = {}
        self.skipped_rows: dict[str, int] = {}
        """File -> rows skipped by ``data.skip_bad_rows`` (kept in task.json)."""
        if metrics is None:
            metrics = ("pearson", "spearman") if data.regression else ("accuracy",)
        unknown = [m for m in metrics if m not in M.METRICS]
        if unknown:  # now, not at the first evaluation after training steps
            raise UnknownNameError(f"unknown metric(s) {', '.join(unknown)}; known: {', '.join(M.METRICS)}")
        labels: tuple[str, ...] | None = None
        if not data.regression:
            labels = data.labels if data.labels is not None else self._infer_labels()
        super().__init__(
            data.name,
            self._read,
            labels,
            metrics,
            dev_splits=("dev",),
            test_splits=("test",) if data.test else (),
            text_fields=2 if data.text_pair_column else 1,
        )
        if labels is not None:
            self._check_labels()

    def _all_train(self) -> list[Example]:
        if "_all" not in self._cache:
            if self.data.train is None:
                raise TaskDataError("no training file given (--train)")
            self._cache["_all"] = self._read_file(self.data.train, labelled=True, split="train")
        return self._cache["_all"]

    def _read_file(self, path: Path, *, labelled: bool, split: str) -> list[Example]:
        skipped: list[str] = []
        examples = read_file(self.data, path, labelled=labelled, split=split, skipped=skipped)
        if skipped:
            self.skipped_rows[str(path)] = len(skipped)
        return examples

    def _infer_labels(self) -> tuple[str, ...]:
        if self.data.train is None:
            raise TaskDataError("the label set is unknown: give --labels or a training file")
        counts = collections.Counter(str(e.label) for e in self._all_train())
        labels = sorted(counts)
        if len(labels) < 2:
            raise TaskDataError(
                f"{self.data.train}: only one label value ({labels}); is --label-column right?"
            )
        check_label_set(counts, str(self.data.train), self.data.label_column)
        logger.info("labels (from %s): %s", self.data.train, short_list(labels, limit=50))
        return tuple(labels)

    def _check_labels(self) -> None:
        if self.data.train is None:
            return
        assert self.labels is not None
        known = set(self.labels)
        for ex in self._all_train():
            if ex.label not in known:
                raise TaskDataError(
                    f"{ex.meta['file']}:{ex.meta['line']}: unknown label {ex.label!r}; labels are "
                    f"{short_list(self.labels)}"
                )

    def split_indices(self) -> tuple[list[int], list[int]] | None:
        """The held-out split of the training file (None when a dev file is given)."""
        if self.data.dev is not None:
            return None
        n = len(self._all_train())
        train, dev = holdout_split(n, self.data.dev_fraction, self.data.split_seed)
        if not train or not dev:
            raise TaskDataError(
                f"{self.data.train}: holding out {self.data.dev_fraction} of {n} examples leaves "
                f"{len(train)} to train on and {len(dev)} for dev; give --dev or another --dev-fraction"
            )
        return train, dev

    def _read(self, split: str) -> list[Example]:
        if split in self._cache:
            return self._cache[split]
        if split in ("train", "dev") and self.data.dev is None:
            idx = self.split_indices()
            assert idx is not None
            every = self._all_train()
            self._cache["train"] = [every[i] for i in idx[0]]
            self._cache["dev"] = [every[i] for i in idx[1]]
        elif split == "train":
            self._cache[split] = self._all_train()
        elif split == "dev":
            assert self.data.dev is not None
            self._cache[split] = self._read_file(self.data.dev, labelled=True, split="dev")
        elif split == "test":
            if self.data.test is None:
                raise FileNotFoundError("no test file given (--test)")
            self._cache[split] = self._read_file(self.data.test, labelled=False, split="test")
        else:
            raise UnknownNameError(f"unknown split {split!r}; custom data has train, dev, test")
        examples = self._cache[split]
        if self.labels is not None:
            known = set(self.labels)
            for ex in examples:
                if ex.label is not None and ex.label not in known:
                    raise TaskDataError(
                        f"{ex.meta['file']}:{ex.meta['line']}: unknown label {ex.label!r}; labels are "
                        f"{short_list(self.labels)}"
                    )
        return examples

    def split_source(self, split: str) -> str:
        files = {"train": self.data.train, "dev": self.data.dev, "test": self.data.test}
        if split == "dev" and self.data.dev is None:
            return f"{self.data.train} (the held-out dev part)"
        path = files.get(split)
        return str(path) if path is not None else super().split_source(split)

    def info(self) -> dict[str, Any]:
        info = super().info()
        info["columns"] = {
            "text": self.data.text_column,
            "text_pair": self.data.text_pair_column,
            "label": self.data.label_column,
        }
        idx = self.split_indices()
        if idx is not None:
            info["holdout"] = {
                "from": str(self.data.train),
                "dev_fraction": self.data.dev_fraction,
                "seed": self.data.split_seed,
                "num_train": len(idx[0]),
                "num_dev": len(idx[1]),
            }
        if self.skipped_rows:
            info["skipped_rows"] = dict(self.skipped_rows)
        return info

    @classmethod
    def read_labelled(
        cls, info: Mapping[str, Any], path: str | Path, columns: Sequence[str] | None = None
    ) -> list[Example]:
        """CSV, TSV or JSONL with named columns (`albert_lm.tasks.custom.read_file`): the training ones
        (task.json ``columns`` of custom data, the GLUE spec's dev columns of a GLUE task), else ``text``
        / ``text_pair`` / ``label``; a file without a header row names its columns with ``columns`` (the
        polarity CSV: ``label,text``). A label the model does not know is an error naming file and line."""
        path = Path(path)
        if not path.is_file():
            raise FileNotFoundError(f"{path}: no such file")
        text, pair, label, headerless = _text_columns(info)
        labels = [str(x) for x in info.get("labels") or []]
        data = CustomData(
            text_column=text,
            text_pair_column=pair,
            label_column=label,
            regression=info.get("kind") == "regression",
            labels=tuple(labels) or None,
            columns=tuple(columns) if columns else headerless,
        )
        examples = read_file(data, path, labelled=True, split="calibrate")
        for ex in examples:
            if labels and ex.label not in labels:
                raise TaskDataError(
                    f"{ex.meta['file']}:{ex.meta['line']}: label {ex.label!r} is not one of the model's "
                    f"labels ({', '.join(labels)})"
                )
        return examples

    # ------------------------------------------------------------------------------------ command line
    cli_help = "your own labelled data: classification or regression from CSV, TSV or JSONL columns"

    @classmethod
    def cli_arguments(cls, parser: Any, mode: str) -> None:
        g = parser.add_argument_group("data (CSV, TSV or JSONL with named columns)")
        g.add_argument("--train", type=Path, required=mode == "finetune", help="training file")
        g.add_argument("--dev", type=Path, help="dev file (default: hold out --dev-fraction of --train)")
        g.add_argument("--test", type=Path, help="unlabelled (or labelled) file to predict after training")
        g.add_argument("--format", choices=FORMATS, help="file format (default: from the extension)")
        g.add_argument("--text-column", default="text", help="column with the text (default: text)")
        g.add_argument("--text-pair-column", help="column with the second text of sentence-pair tasks")
        g.add_argument("--label-column", default="label", help="column with the label (default: label)")
        g.add_argument("--id-column", help="column with an example id kept in the predictions")
        g.add_argument("--columns", help="comma-separated column names of files WITHOUT a header row")
        g.add_argument(
            "--regression", action="store_true", help="the label is a number (MSE loss, Pearson/Spearman)"
        )
        g.add_argument(
            "--labels", help="comma-separated label set, in class-id order (default: sorted training labels)"
        )
        g.add_argument(
            "--dev-fraction", type=float, default=0.1, help="held out of --train when there is no --dev"
        )
        g.add_argument("--split-seed", type=int, default=0, help="seed of the held-out split")
        g.add_argument(
            "--metrics", help="comma-separated metrics (default: accuracy; pearson,spearman for regression)"
        )
        g.add_argument("--name", default="custom", help="task name used in reports")
        g.add_argument(
            "--skip-bad-rows",
            action="store_true",
            help="skip (and count) rows with an empty label, a missing field or a non-numeric target instead "
            "of stopping at the first with an error naming its file:line",
        )

    @classmethod
    def cli_task(cls, args: Any, info: Mapping[str, Any] | None = None) -> tuple[CustomTask, dict[str, Any]]:
        labels = tuple(args.labels.split(",")) if args.labels else None
        if info is not None and info.get("labels"):
            labels = tuple(info["labels"])  # a fine-tuned model fixes the class ids
        data = CustomData(
            train=args.train,
            dev=args.dev,
            test=args.test,
            text_column=args.text_column,
            text_pair_column=args.text_pair_column,
            label_column=args.label_column,
            id_column=args.id_column,
            regression=args.regression or (info is not None and info.get("kind") == "regression"),
            labels=labels,
            columns=tuple(c.strip() for c in args.columns.split(",")) if args.columns else None,
            format=args.format,
            dev_fraction=args.dev_fraction,
            split_seed=args.split_seed,
            name=args.name,
            skip_bad_rows=args.skip_bad_rows,
        )
        metrics = tuple(args.metrics.split(",")) if args.metrics else None
        return CustomTask(data, metrics), CUSTOM_PRESET

    @classmethod
    def cli_preset(cls) -> tuple[Mapping[str, Any], str]:
        return CUSTOM_PRESET, ""


# Defaults for your own data: BERT's recommended fine-tuning range (lr 2e-5, batch 32, 3 epochs), warmup
# 10% of the steps, sequences up to 128 tokens (most single sentences and pairs fit).
CUSTOM_PRESET: dict[str, Any] = dict(
    learning_rate=2e-5, batch_size=32, epochs=3.0, warmup_fraction=0.1, max_seq_length=128
)


def _text_columns(info: Mapping[str, Any]) -> tuple[str, str | None, str, tuple[str, ...] | None]:
    """(text, pair, label, headerless column names) of the files of a classification model's task."""
    pairs = int(info.get("text_fields", 1)) == 2
    if info.get("glue_task"):
        from albert_lm.tasks.glue import get_spec

        dev = get_spec(str(info["glue_task"])).splits["dev"]
        return dev.text_a, dev.text_b, dev.label or "label", dev.columns
    columns = info.get("columns") or {}
    text = columns.get("text") or "text"
    pair = (columns.get("text_pair") or "text_pair") if pairs else None
    return text, pair, columns.get("label") or "label", None
