"""The official SQuAD evaluation, v1.1 and v2.0, with the same semantics as the official scripts.

The two official scripts (``evaluate-v1.1.py`` and ``evaluate-v2.0.py``, also copied into
google-research/albert ``squad_utils.py``) differ in more than the no-answer parts:

* answer normalization is the same in both: lower case, drop ASCII punctuation (``string.punctuation``),
  drop the articles ``a``/``an``/``the`` as whole words, collapse whitespace;
* v1.1 scores against every gold answer; v2.0 first drops gold answers that normalize to the empty string
  and, when none is left, the only gold answer is ``""`` (an unanswerable question);
* token F1 of two empty token lists is 0 in v1.1 and 1 in v2.0 (v2.0: "if either is no-answer, F1 is 1
  if they agree, 0 otherwise");
* a missing prediction scores 0 and counts in the total in v1.1; v2.0's script leaves it out of the
  overall total but then fails on the HasAns / NoAns breakdown. Here it scores 0 and counts in every
  total, in both versions, and is logged once with the number of missing ids.

v2.0 adds the no-answer probability (``na_probs``, any score where larger means "more likely
unanswerable"; for ALBERT's answer-verifier head the answerability logit): the prediction counts as "no
answer" when ``na_prob > na_prob_thresh``, and ``best_exact`` / ``best_f1`` give the score at the best
threshold, found as the official ``find_best_thresh`` does.
"""

from __future__ import annotations

import collections
import logging
import re
import string
from collections.abc import Iterable, Mapping, Sequence

logger = logging.getLogger(__name__)

_PUNCT = frozenset(string.punctuation)
# official scripts: re.compile(r'\b(a|an|the)\b', re.UNICODE); Python 3 str patterns are Unicode anyway
_ARTICLES = re.compile(r"\b(a|an|the)\b", re.UNICODE)


def normalize_answer(s: str) -> str:
    """Lower text and remove punctuation, articles and extra whitespace (official script, both versions)."""
    s = s.lower()
    s = "".join(ch for ch in s if ch not in _PUNCT)
    s = _ARTICLES.sub(" ", s)
    return " ".join(s.split())


def get_tokens(s: str) -> list[str]:
    """Normalized whitespace tokens of ``s`` (empty for an empty answer)."""
    if not s:
        return []
    return normalize_answer(s).split()


def exact_match(prediction: str, gold: str) -> int:
    """1 when the normalized strings are equal, else 0."""
    return int(normalize_answer(prediction) == normalize_answer(gold))


def f1_score(prediction: str, gold: str, *, version: str = "2.0") -> float:
    """Bag-of-tokens F1 between normalized prediction and gold.

    Args:
        prediction: the predicted answer text.
        gold: one gold answer text.
        version: "1.1" gives 0 when both are empty; "2.0" gives 1 when both are empty and 0 when only
            one is (the official scripts differ only there).
    """
    pred_toks = get_tokens(prediction)
    gold_toks = get_tokens(gold)
    if version == "2.0" and (not gold_toks or not pred_toks):
        return float(gold_toks == pred_toks)
    common = collections.Counter(pred_toks) & collections.Counter(gold_toks)
    num_same = sum(common.values())
    if num_same == 0:
        return 0.0
    precision = num_same / len(pred_toks)
    recall = num_same / len(gold_toks)
    return 2 * precision * recall / (precision + recall)


def gold_answers_from_dataset(data: Sequence[Mapping]) -> dict[str, list[str]]:
    """``qid -> gold answer texts`` from the ``data`` list of a SQuAD JSON file (``json.load(f)["data"]``)."""
    golds: dict[str, list[str]] = {}
    for article in data:
        for paragraph in article["paragraphs"]:
            for qa in paragraph["qas"]:
                golds[qa["id"]] = [a["text"] for a in qa.get("answers", [])]
    return golds


def _check_version(version: str) -> None:
    if version not in ("1.1", "2.0"):
        raise ValueError(f"SQuAD version must be '1.1' or '2.0', got {version!r}")


def raw_scores(
    golds: Mapping[str, Sequence[str]], predictions: Mapping[str, str], *, version: str = "2.0"
) -> tuple[dict[str, float], dict[str, float]]:
    """Per-question EM and F1, each the maximum over the gold answers.

    Args:
        golds: ``qid -> gold answer texts`` (an empty list: unanswerable).
        predictions: ``qid -> predicted text`` (``""``: predicted unanswerable).
        version: "1.1" or "2.0" (see the module docstring for the differences).

    Returns:
        ``(exact, f1)``, each ``qid -> score in [0, 1]``; a missing prediction scores 0.
    """
    _check_version(version)
    exact: dict[str, float] = {}
    f1: dict[str, float] = {}
    missing = 0
    for qid, answers in golds.items():
        if version == "2.0":
            gold = [a for a in answers if normalize_answer(a)] or [""]
        else:
            gold = list(answers)
            if not gold:
                raise ValueError(f"question {qid!r} has no gold answer; SQuAD v1.1 needs at least one")
        if qid not in predictions:
            missing += 1
            exact[qid] = f1[qid] = 0.0
            continue
        pred = predictions[qid]
        exact[qid] = float(max(exact_match(pred, g) for g in gold))
        f1[qid] = max(f1_score(pred, g, version=version) for g in gold)
    if missing:
        logger.warning("%d of %d questions have no prediction; each scores 0", missing, len(golds))
    return exact, f1


def apply_no_ans_threshold(
    scores: Mapping[str, float],
    na_probs: Mapping[str, float],
    has_ans: Mapping[str, bool],
    na_prob_thresh: float,
) -> dict[str, float]:
    """Official v2.0: where ``na_prob > thresh`` the prediction is "no answer" (1 if the question has none)."""
    out = {}
    for qid, s in scores.items():
        if na_probs.get(qid, 0.0) > na_prob_thresh:
            out[qid] = float(not has_ans[qid])
        else:
            out[qid] = s
    return out


def find_best_thresh(
    predictions: Mapping[str, str],
    scores: Mapping[str, float],
    na_probs: Mapping[str, float],
    has_ans: Mapping[str, bool],
) -> tuple[float, float]:
    """Official v2.0 ``find_best_thresh``: the best score (in %) over thresholds, and that threshold.

    Start from "every question is no-answer" (score = number of unanswerable questions), then, in
    increasing ``na_prob`` order, answer one more question at a time. The threshold returned is the
    ``na_prob`` of the last question answered at the best point, or 0.0 when answering none is best:
    with logits as ``na_probs`` that 0.0 does *not* reproduce the all-no-answer score (an official-script
    quirk kept for comparability; :func:`choose_null_threshold` returns a threshold that does).
    """
    num_no_ans = sum(1 for q in has_ans if not has_ans[q])
    cur = best = float(num_no_ans)
    best_thresh = 0.0
    for qid in sorted(na_probs, key=lambda k: na_probs[k]):
        if qid not in scores:
            continue
        if has_ans[qid]:
            diff = scores[qid]
        else:
            diff = -1.0 if predictions.get(qid) else 0.0
        cur += diff
        if cur > best:
            best = cur
            best_thresh = na_probs[qid]
    return 100.0 * best / len(scores), best_thresh


def choose_null_threshold(
    predictions: Mapping[str, str],
    scores: Mapping[str, float],
    na_probs: Mapping[str, float],
    has_ans: Mapping[str, bool],
) -> float:
    """A threshold at which ``na_prob > thresh`` -> no answer gives the best score over all thresholds.

    The same search as :func:`find_best_thresh`, except that it returns ``-inf`` when answering no
    question is best (the official 0.0 does not mean that for logits) and that it only cuts between
    distinct ``na_prob`` values (with ties, ``>`` answers all tied questions or none).
    """
    qids = sorted((q for q in na_probs if q in scores), key=lambda k: na_probs[k])
    cur = best = float(sum(1 for q in has_ans if not has_ans[q]))
    best_thresh = float("-inf")
    for i, qid in enumerate(qids):
        if has_ans[qid]:
            cur += scores[qid]
        elif predictions.get(qid):
            cur -= 1.0
        if i + 1 < len(qids) and na_probs[qids[i + 1]] == na_probs[qid]:
            continue  # not a possible cut
        if cur > best:
            best, best_thresh = cur, na_probs[qid]
    return best_thresh


def _eval_dict(exact: Mapping[str, float], f1: Mapping[str, float], qids: Iterable[str]) -> dict[str, float]:
    qids = list(qids)
    total = len(qids)
    return {
        "exact": 100.0 * sum(exact[k] for k in qids) / total,
        "f1": 100.0 * sum(f1[k] for k in qids) / total,
        "total": total,
    }


def evaluate_v1(golds: Mapping[str, Sequence[str]], predictions: Mapping[str, str]) -> dict[str, float]:
    """Official SQuAD v1.1 evaluation: ``{"exact_match", "f1"}`` in percent."""
    exact, f1 = raw_scores(golds, predictions, version="1.1")
    n = len(golds)
    return {"exact_match": 100.0 * sum(exact.values()) / n, "f1": 100.0 * sum(f1.values()) / n}


def evaluate_v2(
    golds: Mapping[str, Sequence[str]],
    predictions: Mapping[str, str],
    na_probs: Mapping[str, float] | None = None,
    *,
    na_prob_thresh: float = 1.0,
) -> dict[str, float]:
    """Official SQuAD v2.0 evaluation.

    Args:
        golds: ``qid -> gold answer texts`` (empty for unanswerable questions).
        predictions: ``qid -> text``, ``""`` for "no answer".
        na_probs: optional ``qid -> no-answer score``; with it, ``na_prob > na_prob_thresh`` forces "no
            answer" and ``best_exact`` / ``best_f1`` (+ ``_thresh``) are added. Without it every
            ``na_prob`` is 0, as in the official script.
        na_prob_thresh: official default 1.0.

    Returns:
        ``exact, f1, total``, ``HasAns_*`` and ``NoAns_*`` (when there are such questions), and the
        ``best_*`` entries when ``na_probs`` is given. Scores in percent.
    """
    # official make_qid_to_has_ans: bool(qa["answers"]), before the empty-normalizing golds are dropped
    has_ans = {qid: bool(answers) for qid, answers in golds.items()}
    exact_raw, f1_raw = raw_scores(golds, predictions, version="2.0")
    probs = dict(na_probs) if na_probs is not None else dict.fromkeys(golds, 0.0)
    exact_t = apply_no_ans_threshold(exact_raw, probs, has_ans, na_prob_thresh)
    f1_t = apply_no_ans_threshold(f1_raw, probs, has_ans, na_prob_thresh)
    out = _eval_dict(exact_t, f1_t, golds)
    has_ids = [q for q, v in has_ans.items() if v]
    no_ids = [q for q, v in has_ans.items() if not v]
    if has_ids:
        out.update({f"HasAns_{k}": v for k, v in _eval_dict(exact_t, f1_t, has_ids).items()})
    if no_ids:
        out.update({f"NoAns_{k}": v for k, v in _eval_dict(exact_t, f1_t, no_ids).items()})
    if na_probs is not None:
        out["best_exact"], out["best_exact_thresh"] = find_best_thresh(predictions, exact_raw, probs, has_ans)
        out["best_f1"], out["best_f1_thresh"] = find_best_thresh(predictions, f1_raw, probs, has_ans)
    return out


def evaluate(
    golds: Mapping[str, Sequence[str]],
    predictions: Mapping[str, str],
    *,
    version: str = "1.1",
    na_probs: Mapping[str, float] | None = None,
) -> dict[str, float]:
    """The official evaluation of ``version`` ("1.1" or "2.0")."""
    _check_version(version)
    if version == "1.1":
        return evaluate_v1(golds, predictions)
    return evaluate_v2(golds, predictions, na_probs)
