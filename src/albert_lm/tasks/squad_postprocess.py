"""From per-window model outputs to answer texts: n-best spans, no-answer scores, the official files.

Two kinds of model output:

* `SpanResult` (the span head, `AlbertForQuestionAnswering`): start and end logits per position. Spans
  are the ``n_best_size`` best starts x ``n_best_size`` best ends (original ``_get_best_indexes``), scored
  ``start_logit + end_logit`` (google-research/albert ``write_predictions_v1``). With
  ``null_score=True`` it is the BERT-style SQuAD 2.0 recipe (google-research/bert run_squad.py): the null
  score is ``start_logit[CLS] + end_logit[CLS]``, minimal over the windows, and
  ``null_odds = null_score - best_span_score``.
* `V2Result` (ALBERT's answer-verifier head, `albert_lm.model.squad_head`): the top ``start_n_top`` starts,
  for each the top ``end_n_top`` ends (log probabilities), and the answerability logit ``cls_logit``;
  ``null_odds`` is the minimum ``cls_logit`` over the windows (original ``accumulate_predictions_v2``),
  spans are scored ``start_log_prob + end_log_prob``.

In both, a span is kept only when start and end are paragraph tokens of the window, the window is the
"max context" one for the start token, ``end >= start`` and it is at most ``max_answer_length`` tokens
long (the original's checks; the original's v1 code misses the "start before the paragraph" check and
would index its mapping with a negative number, fixed here). Identical texts are merged keeping the best,
the text is the exact paragraph text the tokens cover (offsets), and ``probability`` is the softmax of
the scores over the n-best list.

A question is answered with ``""`` (no answer) when ``null_odds > threshold``. The threshold is chosen
on a labelled set with `choose_threshold` (best F1, as the original ``evaluate_v2`` does) or fixed (e.g. 0.0
for BERT-style scores). The original applies ``score_diff < threshold`` -> answer, i.e. ``>=`` -> no
answer, while the official metric's threshold search means ``>`` -> no answer; ``>`` is used here so that
the chosen threshold reproduces ``best_f1`` exactly.
"""

from __future__ import annotations

import math
from collections.abc import Mapping, Sequence
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

import numpy as np

from albert_lm._io import atomic_write_text, json_text
from albert_lm.tasks.metrics import softmax
from albert_lm.tasks.squad_data import SquadExample, SquadFeature
from albert_lm.tasks.squad_metric import choose_null_threshold, f1_score, normalize_answer

# google-research/albert run_squad_v1.py / run_squad_v2.py flag defaults (start_n_top / end_n_top, the
# verifier head's beam, are albert_lm.model.squad_head.START_N_TOP / END_N_TOP)
N_BEST_SIZE = 20
MAX_ANSWER_LENGTH = 30


@dataclass
class SpanResult:
    """Span-head output for one feature (window): logits over its positions."""

    unique_id: int
    start_logits: np.ndarray
    end_logits: np.ndarray


@dataclass
class V2Result:
    """Answer-verifier-head output for one feature: top-k starts, top-k ends per start, answerability."""

    unique_id: int
    start_top_log_probs: np.ndarray
    """(start_n_top,)"""
    start_top_index: np.ndarray
    """(start_n_top,)"""
    end_top_log_probs: np.ndarray
    """(start_n_top * end_n_top,), row i * end_n_top + j: j-th best end for the i-th best start"""
    end_top_index: np.ndarray
    cls_logit: float
    """Larger: more likely unanswerable (trained on ``is_impossible``)."""


@dataclass
class Predictions:
    """Post-processed predictions of a set of questions."""

    best_text: dict[str, str]
    """Best non-null answer of each question."""
    nbest: dict[str, list[dict[str, Any]]]
    null_odds: dict[str, float] = field(default_factory=dict)
    """Only for SQuAD 2.0 post-processing: larger means "more likely no answer"."""

    def answers(self, threshold: float | None = None) -> dict[str, str]:
        """``qid -> text``: ``""`` where ``null_odds > threshold``; the best span everywhere without a
        threshold (or without null odds)."""
        if threshold is None or not self.null_odds:
            return dict(self.best_text)
        return {q: ("" if self.null_odds[q] > threshold else t) for q, t in self.best_text.items()}

    def records(self, threshold: float | None = None) -> list[dict[str, Any]]:
        """One prediction record per question, in question order: ``guid``, ``prediction`` (the answer at
        ``threshold``, see `answers`), ``best_span``, ``null_odds`` (SQuAD 2.0 post-processing only) and
        ``nbest``: what `write_official_files` writes."""
        answers = self.answers(threshold)
        out = []
        for q, best in self.best_text.items():
            rec: dict[str, Any] = {"guid": q, "prediction": answers[q], "best_span": best}
            if self.null_odds:
                rec["null_odds"] = self.null_odds[q]
            rec["nbest"] = self.nbest[q]
            out.append(rec)
        return out


def write_official_files(predictions: Sequence[Mapping[str, Any]], out_dir: Path) -> Path:
    """``predictions.json`` (qid -> answer, "" = no answer), ``nbest_predictions.json`` and, for SQuAD 2.0,
    ``null_odds.json`` from prediction records (`Predictions.records`), in the original's layout
    (``json.dumps(..., indent=4)``), each written atomically; returns the predictions.json path."""
    out_dir.mkdir(parents=True, exist_ok=True)

    def dump(name: str, obj: Any) -> Path:
        path = out_dir / name
        atomic_write_text(path, json_text(obj, str(path), indent=4) + "\n")
        return path

    path = dump("predictions.json", {p["guid"]: p["prediction"] for p in predictions})
    dump("nbest_predictions.json", {p["guid"]: p.get("nbest", []) for p in predictions})
    if predictions and "null_odds" in predictions[0]:
        dump("null_odds.json", {p["guid"]: p["null_odds"] for p in predictions})
    return path


def _top(values: np.ndarray, k: int) -> list[int]:
    """Indexes of the ``k`` largest values, largest first (stable for ties, like the original's sort)."""
    order = np.argsort(-np.asarray(values, dtype=np.float64), kind="stable")
    return [int(i) for i in order[:k]]


def _valid(feature: SquadFeature, start: int, end: int, max_answer_length: int) -> bool:
    n = len(feature.offsets)
    if not (0 <= start < n and 0 <= end < n):
        return False
    if feature.offsets[start] is None or feature.offsets[end] is None:
        return False  # [CLS], question, [SEP] or padding
    if not feature.max_context[start]:
        return False
    return start <= end < start + max_answer_length


def _group(
    examples: Sequence[SquadExample], features: Sequence[SquadFeature], results: Sequence[Any]
) -> list[list[tuple[SquadFeature, Any]]]:
    by_id = {r.unique_id: r for r in results}
    groups: list[list[tuple[SquadFeature, Any]]] = [[] for _ in examples]
    for f in features:
        if f.unique_id not in by_id:
            raise KeyError(f"no model output for feature {f.unique_id} (example {f.example_index})")
        groups[f.example_index].append((f, by_id[f.unique_id]))
    return groups


def _nbest(
    example: SquadExample,
    candidates: list[tuple[float, float, SquadFeature, int, int]],
    n_best_size: int,
) -> list[dict[str, Any]]:
    """Sort by score, merge identical texts, keep ``n_best_size``; add probabilities."""
    candidates.sort(key=lambda c: c[0] + c[1], reverse=True)
    seen: set[str] = set()
    kept: list[tuple[str, float, float, int, int]] = []
    for s_score, e_score, feature, start, end in candidates:
        if len(kept) >= n_best_size:
            break
        if start < 0:  # the BERT-style null candidate
            text, cs, ce = "", -1, -1
        else:
            s_off, e_off = feature.offsets[start], feature.offsets[end]
            assert s_off is not None and e_off is not None
            cs, ce = s_off[0], e_off[1]
            text = example.context[cs:ce].strip()
        if text in seen:
            continue
        seen.add(text)
        kept.append((text, s_score, e_score, cs, ce))
    probs = softmax([s + e for _, s, e, _, _ in kept]).tolist()
    return [
        {"text": t, "probability": p, "start_score": s, "end_score": e, "char_start": cs, "char_end": ce}
        for (t, s, e, cs, ce), p in zip(kept, probs)
    ]


def postprocess_span(
    examples: Sequence[SquadExample],
    features: Sequence[SquadFeature],
    results: Sequence[SpanResult],
    *,
    n_best_size: int = N_BEST_SIZE,
    max_answer_length: int = MAX_ANSWER_LENGTH,
    null_score: bool = False,
) -> Predictions:
    """Answers from span-head logits.

    Args:
        null_score: BERT-style SQuAD 2.0: also score "no answer" as ``start[CLS] + end[CLS]`` and fill
            ``null_odds`` with ``min_windows(null) - best_span_score``.
    """
    best_text: dict[str, str] = {}
    nbest_all: dict[str, list[dict[str, Any]]] = {}
    null_odds: dict[str, float] = {}
    for example, group in zip(examples, _group(examples, features, results)):
        cands: list[tuple[float, float, SquadFeature, int, int]] = []
        score_null, null_pair = math.inf, (0.0, 0.0)
        for feature, r in group:
            sl = np.asarray(r.start_logits, dtype=np.float64)
            el = np.asarray(r.end_logits, dtype=np.float64)
            if null_score:
                s0 = float(sl[0] + el[0])
                if s0 < score_null:
                    score_null, null_pair = s0, (float(sl[0]), float(el[0]))
            for s in _top(sl, n_best_size):
                for e in _top(el, n_best_size):
                    if _valid(feature, s, e, max_answer_length):
                        cands.append((float(sl[s]), float(el[e]), feature, s, e))
        if null_score and group:
            cands.append((null_pair[0], null_pair[1], group[0][0], -1, -1))
        nbest = _nbest(example, cands, n_best_size)
        if null_score and not any(c["text"] == "" for c in nbest):
            nbest.append(
                {"text": "", "probability": 0.0, "start_score": null_pair[0], "end_score": null_pair[1],
                 "char_start": -1, "char_end": -1}
            )  # fmt: skip
        non_null = [c for c in nbest if c["text"]]
        if not non_null:
            # original: "in very rare edge cases we could have no valid predictions" -> a nonce answer
            non_null = [{"text": "empty", "probability": 0.0, "start_score": 0.0, "end_score": 0.0,
                         "char_start": -1, "char_end": -1}]  # fmt: skip
            nbest = nbest + non_null
        best = non_null[0]
        best_text[example.qas_id] = best["text"]
        nbest_all[example.qas_id] = nbest
        if null_score:
            null_odds[example.qas_id] = score_null - best["start_score"] - best["end_score"]
    return Predictions(best_text, nbest_all, null_odds)


def postprocess_v2(
    examples: Sequence[SquadExample],
    features: Sequence[SquadFeature],
    results: Sequence[V2Result],
    *,
    n_best_size: int = N_BEST_SIZE,
    max_answer_length: int = MAX_ANSWER_LENGTH,
) -> Predictions:
    """Answers from ALBERT's answer-verifier head (original ``accumulate_predictions_v2`` +
    ``write_predictions_v2``); ``null_odds`` = the minimum ``cls_logit`` over the windows."""
    best_text: dict[str, str] = {}
    nbest_all: dict[str, list[dict[str, Any]]] = {}
    null_odds: dict[str, float] = {}
    for example, group in zip(examples, _group(examples, features, results)):
        cands: list[tuple[float, float, SquadFeature, int, int]] = []
        score_null = math.inf
        for feature, r in group:
            score_null = min(score_null, float(r.cls_logit))
            k_start = len(r.start_top_index)
            k_end = len(r.end_top_index) // max(k_start, 1)
            for i in range(k_start):
                s = int(r.start_top_index[i])
                for j in range(k_end):
                    e = int(r.end_top_index[i * k_end + j])
                    if _valid(feature, s, e, max_answer_length):
                        cands.append(
                            (float(r.start_top_log_probs[i]), float(r.end_top_log_probs[i * k_end + j]),
                             feature, s, e)
                        )  # fmt: skip
        nbest = _nbest(example, cands, n_best_size)
        if not nbest:  # original: a nonce "" with log probs -1e6
            nbest = [{"text": "", "probability": 1.0, "start_score": -1e6, "end_score": -1e6,
                      "char_start": -1, "char_end": -1}]  # fmt: skip
        best_text[example.qas_id] = nbest[0]["text"]
        nbest_all[example.qas_id] = nbest
        null_odds[example.qas_id] = score_null if group else 0.0
    return Predictions(best_text, nbest_all, null_odds)


def choose_threshold(predictions: Predictions, golds: Mapping[str, Sequence[str]]) -> float:
    """The no-answer threshold with the best F1 on a labelled set (original ``evaluate_v2`` uses
    ``best_f1_thresh``), as a finite value that `Predictions.answers` turns into exactly that F1."""
    has_ans = {q: bool(a) for q, a in golds.items()}
    f1 = {}
    for qid, answers in golds.items():
        gold = [a for a in answers if normalize_answer(a)] or [""]
        f1[qid] = max(f1_score(predictions.best_text.get(qid, ""), g) for g in gold)
    threshold = choose_null_threshold(predictions.best_text, f1, predictions.null_odds, has_ans)
    if threshold == -math.inf and predictions.null_odds:
        # "answer nothing" is best: a finite value below every null score does that (and fits in JSON)
        threshold = min(predictions.null_odds.values()) - 1.0
    return threshold
