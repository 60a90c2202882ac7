"""The one sanity rule for a label set read from the user's data, and the short form of a long label list.

A classification label set inferred from a training file (`albert_lm.tasks.custom`) is refused when it cannot
be what the user meant, because training on it "works" and exits 0:

* **numbers that are not classes**: every label is a number and some are not whole numbers (a regression
  target read as 600 classes): pass ``--regression``;
* **more classes than rows can teach**: more than `MAX_SMALL_LABEL_SET` classes and fewer than
  `MIN_ROWS_PER_CLASS` rows per class on average (swapped ``--columns`` make the text column the label
  column): check ``--label-column`` / ``--columns``, or pass ``--regression``;
* **variants of one label**: two labels that differ only in case, spacing or the spelling of a number
  (``pos`` / ``Pos``, ``1`` / ``1.0``) would be two classes: fix the file.

* **abbreviations of one label**: a word label of 3+ characters that begins another (``pos`` / ``positive``,
  ``neg`` / ``Negative``): fix the file, or state the classes with ``--labels``.

Synonyms that share no prefix (``good`` / ``positive``) are not caught: that needs the meaning.
A label set given explicitly (``--labels``) is the user's statement and is not second-guessed; a label
outside it is an error anyway. Every error line stays short: `short_list` shows the first labels and a
count, never all of them (a line listing 600 texts was 70-141 KB).
"""

from __future__ import annotations

import json
import math
from collections.abc import Iterable, Mapping
from pathlib import Path

from albert_lm._io import read_utf8
from albert_lm.tasks.base import ModelDirError, TaskDataError

# Label sets up to this size are never judged too large for their rows: a smoke file of 3 rows and 2
# classes is fine, and so is 10 topics from 12 rows.
MAX_SMALL_LABEL_SET = 10
# Fewer rows per class than this, on average, is no classification task: at most one example to learn
# each class from, and most classes absent from any held-out dev split.
MIN_ROWS_PER_CLASS = 2.0
SHOWN = 10
"""Labels shown in an error line (then "and N more")."""
WIDTH = 40
"""Characters of one shown label (then "...")."""


def short_list(items: Iterable[object], limit: int = SHOWN, width: int = WIDTH) -> str:
    """``'a', 'b', ... (and 590 more)``: the first ``limit`` items, each cut to ``width`` characters."""
    items = list(items)
    shown = [repr(s if len(s := str(x)) <= width else s[: max(0, width - 3)] + "...") for x in items[:limit]]
    rest = len(items) - len(shown)
    return ", ".join(shown) + (f" (and {rest} more)" if rest > 0 else "")


def _number(label: str) -> float | None:
    try:
        value = float(label)
    except ValueError:
        return None
    return value if math.isfinite(value) else None


def _variant_key(label: str) -> str:
    """What two spellings of one label share: the number it spells, else its case-folded words."""
    value = _number(label)
    if value is not None:
        return repr(value)
    return " ".join(label.casefold().split())


def check_label_set(counts: Mapping[str, int], source: str, column: str) -> None:
    """Refuse a label set inferred from ``source`` (``counts``: label -> rows) that cannot be classes.

    Raises:
        TaskDataError: naming ``source`` and the ``column``, what is wrong, the labels at fault (at most
            `SHOWN` of them) and the flag that fixes it.
    """
    labels = sorted(counts)
    rows = sum(counts.values())
    numbers = [_number(x) for x in labels]
    if all(v is not None for v in numbers) and any(v is not None and not v.is_integer() for v in numbers):
        raise TaskDataError(
            f"{source}: column {column!r} holds numbers, not classes ({len(labels)} distinct values from "
            f"{rows} rows: {short_list(labels)}); for a regression target pass --regression, else check "
            "--label-column / --columns"
        )
    if len(labels) > MAX_SMALL_LABEL_SET and rows < MIN_ROWS_PER_CLASS * len(labels):
        raise TaskDataError(
            f"{source}: column {column!r} gives {len(labels)} classes from {rows} rows "
            f"({short_list(labels)}); is it the label column? Check --label-column / --columns (files "
            "without a header), or pass --regression for a numeric target"
        )
    groups: dict[str, list[str]] = {}
    for label in labels:
        groups.setdefault(_variant_key(label), []).append(label)
    clashes = [group for group in groups.values() if len(group) > 1]
    if clashes:
        shown = "; ".join(
            " / ".join(f"{short_list([x])} ({counts[x]} rows)" for x in group[:SHOWN])
            for group in clashes[:SHOWN]
        )
        more = f" (and {len(clashes) - SHOWN} more groups)" if len(clashes) > SHOWN else ""
        raise TaskDataError(
            f"{source}: labels in column {column!r} differ only in case, spacing or number format, so they "
            f"would be separate classes: {shown}{more}; make them one spelling in the file, or give the label "
            "set with --labels"
        )
    keys = sorted({k for k in groups if _number(k) is None}, key=len)
    short = [(a, b) for i, a in enumerate(keys) for b in keys[i + 1 :] if len(a) >= 3 and b.startswith(a)]
    if short:
        shown = "; ".join(
            f"{short_list(groups[a][:1])} ({counts[groups[a][0]]} rows) / {short_list(groups[b][:1])} "
            f"({counts[groups[b][0]]} rows)"
            for a, b in short[:SHOWN]
        )
        raise TaskDataError(
            f"{source}: labels in column {column!r} look like abbreviations of each other, so they would be "
            f"separate classes: {shown}; make them one spelling in the file, or give the label set with --labels"
        )


def check_label_order(labels: object, task_file: Path, config_file: Path) -> None:
    """Refuse a fine-tuned model directory whose task.json lists its labels in another order (or another
    set) than its config.json's ``id2label`` maps the class ids: predictions would name the wrong class
    (``neg`` for ``pos``) with exit 0. Hugging Face's default names (``LABEL_0``, ...: a model written
    without label names) say nothing of the order and pass.

    Raises:
        ModelDirError: naming both files and both orders.
    """
    try:
        config = json.loads(read_utf8(config_file))
    except (OSError, ValueError):  # absent or unreadable: the model's loader says so
        return
    id2label = config.get("id2label") if isinstance(config, dict) else None
    if not isinstance(labels, list) or not isinstance(id2label, dict) or not id2label:
        return
    by_id = {str(k): str(v) for k, v in id2label.items()}
    ordered = [by_id.get(str(i)) for i in range(len(by_id))]
    if all(name == f"LABEL_{i}" for i, name in enumerate(ordered)):
        return
    if ordered != [str(label) for label in labels]:
        raise ModelDirError(
            f"{task_file} lists the labels as [{short_list(labels)}] but {config_file} maps the class ids "
            f"0, 1, ... to [{short_list('<none>' if n is None else n for n in ordered)}] (id2label): the two "
            "disagree, so every prediction could name the wrong class; put back the files the model was "
            "written with"
        )
