"""Evaluation metrics, in numpy, as the GLUE leaderboard computes them, and the one softmax of the tasks.

Each function takes predictions and gold labels (any array-likes of equal length) and returns a Python
float. They are tested against scikit-learn and scipy (tests/unit/tasks/test_metrics.py); neither is needed at
run time.

GLUE task metrics (Wang et al. 2019, Table 1): CoLA Matthews correlation; SST-2, MNLI, QNLI, RTE, WNLI
accuracy; MRPC and QQP F1 and accuracy; STS-B Pearson and Spearman correlation. The GLUE score averages
the metrics of a task first, then the tasks (`glue_average`).

Named entities (`entity_spans`, `entity_scores`): entity-level precision, recall and F1 over BIO tag
sequences, as conlleval and seqeval's default mode count them (tested on seqeval's documented examples).
"""

from __future__ import annotations

from collections.abc import Mapping, Sequence
from typing import Any

import numpy as np

__all__ = [
    "accuracy",
    "f1_binary",
    "f1_macro",
    "matthews_corrcoef",
    "pearson",
    "spearman",
    "rankdata",
    "softmax",
    "compute",
    "glue_average",
    "entity_spans",
    "entity_scores",
    "entity_report",
    "format_entity_report",
    "METRICS",
]


def softmax(logits: Any, axis: int = -1) -> np.ndarray:
    """Probabilities from scores along ``axis``, in float64 (the maximum is subtracted first, so large
    logits do not overflow). Classification probabilities, multiple-choice probabilities over the options
    and the SQuAD n-best probabilities all come from here."""
    z = np.asarray(logits, dtype=np.float64)
    if z.size == 0:
        return z
    e = np.exp(z - z.max(axis=axis, keepdims=True))
    return e / e.sum(axis=axis, keepdims=True)


def _pair(predictions: Any, labels: Any) -> tuple[np.ndarray, np.ndarray]:
    p = np.asarray(predictions)
    y = np.asarray(labels)
    if p.shape != y.shape:
        raise ValueError(f"predictions have shape {p.shape} but labels have shape {y.shape}")
    if p.size == 0:
        raise ValueError("cannot compute a metric over zero examples")
    return p, y


def _non_finite(*arrays: np.ndarray) -> bool:
    """Whether a numeric array holds NaN or infinity. Every metric then is NaN (scipy's ``pearsonr`` /
    ``spearmanr`` with ``nan_policy='propagate'``): NaN compares unequal to every label and sorts after
    every number, so counting or ranking it gives a plausible score of nothing."""
    return any(a.dtype.kind in "fc" and not np.isfinite(a).all() for a in arrays)


def accuracy(predictions: Any, labels: Any) -> float:
    """Fraction of predictions equal to the label (NaN when either holds NaN or infinity)."""
    p, y = _pair(predictions, labels)
    if _non_finite(p, y):
        return float("nan")
    return float(np.mean(p == y))


def _f1(tp: float, fp: float, fn: float) -> float:
    # sklearn's convention: F1 is 0 when there are no true positives (precision or recall undefined).
    denom = 2 * tp + fp + fn
    return 0.0 if tp == 0 else float(2 * tp / denom)


def f1_binary(predictions: Any, labels: Any, positive: Any = 1) -> float:
    """F1 of the positive class (MRPC and QQP: label 1, "paraphrase" / "duplicate"); NaN when either
    side holds NaN or infinity."""
    p, y = _pair(predictions, labels)
    if _non_finite(p, y):
        return float("nan")
    tp = float(np.sum((p == positive) & (y == positive)))
    fp = float(np.sum((p == positive) & (y != positive)))
    fn = float(np.sum((p != positive) & (y == positive)))
    return _f1(tp, fp, fn)


def f1_macro(predictions: Any, labels: Any) -> float:
    """Unweighted mean of per-class F1 over the classes present in labels or predictions (NaN when either
    side holds NaN or infinity)."""
    p, y = _pair(predictions, labels)
    if _non_finite(p, y):
        return float("nan")
    classes = np.unique(np.concatenate([p.ravel(), y.ravel()]))
    return float(np.mean([f1_binary(p, y, positive=c) for c in classes]))


def matthews_corrcoef(predictions: Any, labels: Any) -> float:
    """Matthews correlation coefficient (multi-class form of Gorodkin 2004, as scikit-learn).

    With C the confusion matrix, t_k the true count and p_k the predicted count of class k, c the number
    correct and s the total: ``(c*s - sum_k t_k p_k) / sqrt((s^2 - sum_k p_k^2)(s^2 - sum_k t_k^2))``;
    0 when the denominator is 0 (e.g. a constant prediction), as scikit-learn; NaN when either side holds
    NaN or infinity.
    """
    p, y = _pair(predictions, labels)
    if _non_finite(p, y):
        return float("nan")
    classes, inverse = np.unique(np.concatenate([p.ravel(), y.ravel()]), return_inverse=True)
    n = p.size
    pi, yi = inverse[:n], inverse[n:]
    k = len(classes)
    conf = np.zeros((k, k), dtype=np.float64)  # (true, predicted)
    np.add.at(conf, (yi, pi), 1.0)
    t = conf.sum(axis=1)
    pk = conf.sum(axis=0)
    c = np.trace(conf)
    s = float(n)
    cov_yp = c * s - float(t @ pk)
    cov_pp = s * s - float(pk @ pk)
    cov_yy = s * s - float(t @ t)
    if cov_pp * cov_yy == 0:
        return 0.0
    return float(cov_yp / np.sqrt(cov_pp * cov_yy))


def pearson(predictions: Any, labels: Any) -> float:
    """Pearson correlation; 0 when either side is constant, NaN when either holds NaN or infinity."""
    p, y = _pair(predictions, labels)
    if _non_finite(p, y):
        return float("nan")
    x = p.astype(np.float64).ravel() - p.astype(np.float64).mean()
    z = y.astype(np.float64).ravel() - y.astype(np.float64).mean()
    denom = np.sqrt(np.dot(x, x) * np.dot(z, z))
    if denom == 0:
        return 0.0
    return float(np.dot(x, z) / denom)


def rankdata(values: Any) -> np.ndarray:
    """Ranks starting at 1, ties getting the average of their ranks (scipy.stats.rankdata 'average'); all
    NaN when a value is NaN (scipy's ``nan_policy='propagate'``: no rank for a value that has no order)."""
    a = np.asarray(values, dtype=np.float64).ravel()
    if np.isnan(a).any():
        return np.full(a.size, np.nan)
    order = np.argsort(a, kind="mergesort")
    sorted_a = a[order]
    # boundaries of runs of equal values
    new_run = np.concatenate([[True], sorted_a[1:] != sorted_a[:-1]])
    run_id = np.cumsum(new_run) - 1
    starts = np.flatnonzero(new_run)
    ends = np.concatenate([starts[1:], [a.size]])
    avg_rank = (starts + ends + 1) / 2.0  # mean of ranks start+1 .. end
    ranks = np.empty(a.size, dtype=np.float64)
    ranks[order] = avg_rank[run_id]
    return ranks


def spearman(predictions: Any, labels: Any) -> float:
    """Spearman rank correlation: Pearson correlation of the average ranks; NaN when either side holds NaN
    (infinity ranks as the largest value, as in scipy)."""
    p, y = _pair(predictions, labels)
    if any(a.dtype.kind in "fc" and np.isnan(a).any() for a in (p, y)):
        return float("nan")
    return pearson(rankdata(p), rankdata(y))


METRICS = {
    "accuracy": accuracy,
    "f1": f1_binary,
    "f1_macro": f1_macro,
    "matthews": matthews_corrcoef,
    "pearson": pearson,
    "spearman": spearman,
}
"""Metric name -> function(predictions, labels). Task specs name their metrics from this table."""


def compute(names: Sequence[str], predictions: Any, labels: Any) -> dict[str, float]:
    """Compute the named metrics (keys of `METRICS`)."""
    unknown = [n for n in names if n not in METRICS]
    if unknown:
        raise KeyError(f"unknown metric(s) {unknown}; known: {sorted(METRICS)}")
    return {name: METRICS[name](predictions, labels) for name in names}


# The nine tasks of the GLUE score. MNLI counts once, as the mean of matched and mismatched accuracy
# (the leaderboard shows both and averages them into the MNLI task score); AX is diagnostic only and not
# part of the score (Wang et al. 2019, Sec. 4).
GLUE_SCORE_TASKS: tuple[str, ...] = ("cola", "sst2", "mrpc", "stsb", "qqp", "mnli", "qnli", "rte", "wnli")


def task_score(metrics: Mapping[str, float], names: Sequence[str]) -> float:
    """A task's score: the unweighted mean of its metrics (GLUE paper: "for tasks with multiple metrics,
    we use an unweighted average of the metrics as the score for the task")."""
    missing = [n for n in names if n not in metrics]
    if missing:
        raise KeyError(f"missing metric(s) {missing} in {dict(metrics)}")
    return float(np.mean([metrics[n] for n in names]))


def glue_average(task_scores: Mapping[str, float]) -> dict[str, Any]:
    """The GLUE average over the tasks given (scores on a 0-1 scale, see `task_score`).

    ``task_scores`` maps task name -> score; ``mnli`` may be given directly or as ``mnli`` (matched) and
    ``mnli-mm`` (mismatched), which are averaged. Returns ``{"score", "tasks", "missing"}``: the score is
    over the tasks present; ``missing`` lists the GLUE tasks absent, so a partial average is never
    mistaken for the full score.
    """
    scores = dict(task_scores)
    if "mnli-mm" in scores:
        mm = scores.pop("mnli-mm")
        scores["mnli"] = (scores["mnli"] + mm) / 2 if "mnli" in scores else mm
    used = {t: scores[t] for t in GLUE_SCORE_TASKS if t in scores}
    if not used:
        raise ValueError(f"no GLUE score task among {sorted(task_scores)}")
    return {
        "score": float(np.mean(list(used.values()))),
        "tasks": used,
        "missing": [t for t in GLUE_SCORE_TASKS if t not in scores],
    }


# ---------------------------------------------------------------------------------------------------------
# Named entities: BIO tags -> entity spans -> precision / recall / F1
def _bio(tag: str) -> tuple[str, str]:
    """(prefix, type) of a BIO tag: ``("B", "PER")``, ``("O", "")``."""
    if tag == "O":
        return "O", ""
    prefix, _, kind = tag.partition("-")
    return prefix, kind


def entity_spans(tags: Sequence[str]) -> list[tuple[str, int, int]]:
    """The entities of one tag sequence as ``(type, start, end)``, ``end`` exclusive.

    conlleval's chunk rules (also seqeval's default mode): an entity starts at a ``B-`` tag and at an
    ``I-`` tag that does not continue an entity of its type (after ``O``, at the start, or after another
    type: ``O I-PER`` is a PER entity); it continues through ``I-`` tags of its type.
    """
    spans: list[tuple[str, int, int]] = []
    start, kind = -1, ""
    for i, tag in enumerate(tags):
        prefix, t = _bio(tag)
        continues = prefix == "I" and start >= 0 and t == kind
        if start >= 0 and not continues:
            spans.append((kind, start, i))
            start = -1
        if prefix in ("B", "I") and not continues:
            start, kind = i, t
    if start >= 0:
        spans.append((kind, start, len(tags)))
    return spans


def entity_scores(
    predictions: Sequence[Sequence[str]], references: Sequence[Sequence[str]]
) -> dict[str, float]:
    """Micro-averaged entity-level ``precision``, ``recall`` and ``f1`` of predicted tag sequences against
    gold ones (one sequence per sentence): an entity counts as found when its type, start and end all
    match (conlleval; seqeval ``f1_score`` in its default mode). A ratio with nothing to count is 0.
    """
    if len(predictions) != len(references):
        raise ValueError(f"{len(predictions)} predicted sequences for {len(references)} gold ones")
    found = gold = correct = 0
    for i, (pred, ref) in enumerate(zip(predictions, references)):
        if len(pred) != len(ref):
            raise ValueError(f"sentence {i}: {len(pred)} predicted tags for {len(ref)} words")
        p, g = set(entity_spans(pred)), set(entity_spans(ref))
        found, gold, correct = found + len(p), gold + len(g), correct + len(p & g)
    precision = correct / found if found else 0.0
    recall = correct / gold if gold else 0.0
    f1 = 2 * precision * recall / (precision + recall) if precision + recall else 0.0
    return {"precision": precision, "recall": recall, "f1": f1}


def _ratios(correct: int, found: int, gold: int) -> tuple[float, float, float]:
    precision = correct / found if found else 0.0
    recall = correct / gold if gold else 0.0
    f1 = 2 * precision * recall / (precision + recall) if precision + recall else 0.0
    return precision, recall, f1


def entity_report(
    predictions: Sequence[Sequence[str]], references: Sequence[Sequence[str]]
) -> dict[str, dict[str, float]]:
    """Entity-level ``precision``, ``recall``, ``f1`` and ``support`` (gold entities) per entity type,
    types sorted, then ``micro avg`` (= `entity_scores`), ``macro avg`` and ``weighted avg`` (by support):
    seqeval's ``classification_report`` in its default mode, as numbers.
    """
    if len(predictions) != len(references):
        raise ValueError(f"{len(predictions)} predicted sequences for {len(references)} gold ones")
    counts: dict[str, list[int]] = {}  # type -> [correct, found, gold]
    for i, (pred, ref) in enumerate(zip(predictions, references)):
        if len(pred) != len(ref):
            raise ValueError(f"sentence {i}: {len(pred)} predicted tags for {len(ref)} words")
        p, g = set(entity_spans(pred)), set(entity_spans(ref))
        for spans, slot in ((p & g, 0), (p, 1), (g, 2)):
            for kind, _, _ in spans:
                counts.setdefault(kind, [0, 0, 0])[slot] += 1
    report: dict[str, dict[str, float]] = {}
    for kind in sorted(counts):
        correct, found, gold = counts[kind]
        report[kind] = dict(zip(("precision", "recall", "f1"), _ratios(correct, found, gold)), support=gold)
    total = [sum(v[i] for v in counts.values()) for i in range(3)]
    support = total[2]
    micro = _ratios(total[0], total[1], total[2])
    report["micro avg"] = dict(zip(("precision", "recall", "f1"), micro), support=support)
    rows = [report[k] for k in sorted(counts)]
    for name, weights in (("macro avg", [1.0] * len(rows)), ("weighted avg", [r["support"] for r in rows])):
        w = sum(weights)
        avg = {
            m: sum(r[m] * x for r, x in zip(rows, weights)) / w if w else 0.0
            for m in ("precision", "recall", "f1")
        }
        report[name] = {**avg, "support": support}
    return report


def format_entity_report(report: Mapping[str, Mapping[str, float]]) -> str:
    """`entity_report` as a table (the layout of seqeval's ``classification_report``)."""
    width = max([len(k) for k in report] + [12])
    lines = [f"{'':>{width}}  precision    recall        f1   support"]
    for kind, row in report.items():
        if kind == "micro avg":
            lines.append("")
        lines.append(
            f"{kind:>{width}}  {row['precision']:9.4f} {row['recall']:9.4f} {row['f1']:9.4f} {int(row['support']):9d}"
        )
    return "\n".join(lines)
