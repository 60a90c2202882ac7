"""SQuAD metric: official semantics, checked on a real span set in the SQuAD v1.1 layout (the PubMed
population spans `make data` builds) against torchmetrics and against an independent re-implementation of
the official v2.0 script's logic."""

from __future__ import annotations

import json
import random
import re
import string
from collections import Counter

import pytest

from albert_lm.tasks import squad_metric as M
from conftest import data_path


@pytest.fixture(scope="module")
def dev():
    with data_path("pubmed_spans", "pubmed-spans-v1.1.json").open(encoding="utf-8") as f:
        return json.load(f)["data"]


@pytest.fixture(scope="module")
def golds(dev):
    return M.gold_answers_from_dataset(dev)


def _perturb(golds: dict[str, list[str]], seed: int = 0) -> dict[str, str]:
    """Predictions of every kind of partial credit: exact, case/punctuation/article noise, truncation,
    extension, another question's answer, empty, whitespace only."""
    rng = random.Random(seed)
    all_answers = [a for answers in golds.values() for a in answers]
    preds = {}
    for qid, answers in golds.items():
        a = rng.choice(answers)
        words = a.split()
        kind = rng.randrange(9)
        if kind == 0:
            p = a
        elif kind == 1:
            p = "The " + a.upper() + "!!"
        elif kind == 2:
            p = " ".join(words[: max(1, len(words) // 2)])
        elif kind == 3:
            p = a + " " + " ".join(rng.choice(all_answers).split()[:3])
        elif kind == 4:
            p = rng.choice(all_answers)
        elif kind == 5:
            p = ""
        elif kind == 6:
            p = "  \t "
        elif kind == 7:
            p = " ".join(words[1:]) + " a an the"
        else:
            p = " ".join(w + rng.choice(["", ",", "'s", "."]) for w in words)
        preds[qid] = p
    return preds


@pytest.mark.data
def test_first_gold_answer_scores_100(golds):
    preds = {q: a[0] for q, a in golds.items()}
    assert len(golds) == 497 and sum(map(len, golds.values())) == 693  # 497 abstracts, 693 spans
    assert M.evaluate_v1(golds, preds) == {"exact_match": 100.0, "f1": 100.0}
    v2 = M.evaluate_v2(golds, preds)
    assert v2["exact"] == v2["f1"] == v2["HasAns_exact"] == 100.0
    assert v2["total"] == v2["HasAns_total"] == len(golds) and "NoAns_total" not in v2


def _check_against_torchmetrics(golds, n_single):
    tm = pytest.importorskip("torchmetrics.functional.text")
    preds = _perturb(golds)
    ours = M.evaluate_v1(golds, preds)

    def target(q):
        return {"id": q, "answers": {"text": golds[q], "answer_start": [0] * len(golds[q])}}

    theirs = tm.squad([{"id": q, "prediction_text": p} for q, p in preds.items()], [target(q) for q in golds])
    assert 20.0 < ours["exact_match"] < 60.0 and 30.0 < ours["f1"] < 80.0  # a real mix of partial credit
    # torchmetrics accumulates in float32 tensors: agreement to float32 precision over many questions
    assert ours["exact_match"] == pytest.approx(float(theirs["exact_match"]), rel=1e-5)
    assert ours["f1"] == pytest.approx(float(theirs["f1"]), rel=1e-5)
    # and question by question on a sample
    for q in random.Random(3).sample(sorted(golds), n_single):
        one = tm.squad({"id": q, "prediction_text": preds[q]}, target(q))
        mine = M.evaluate_v1({q: golds[q]}, {q: preds[q]})
        assert mine["exact_match"] == pytest.approx(float(one["exact_match"]), abs=1e-4), q
        assert mine["f1"] == pytest.approx(float(one["f1"]), abs=1e-4), q


@pytest.mark.data
def test_agrees_with_torchmetrics_on_perturbed_predictions(golds):
    sample = random.Random(0).sample(sorted(golds), 300)
    _check_against_torchmetrics({q: golds[q] for q in sample}, n_single=100)


@pytest.mark.data
@pytest.mark.slow
def test_agrees_with_torchmetrics_on_the_whole_set(golds):
    _check_against_torchmetrics(golds, n_single=len(golds))


# --- an independent re-implementation of the official evaluate-v2.0.py logic (different code shape) ----
def _norm(s):
    s = "".join(c for c in s.lower() if c not in set(string.punctuation))
    return " ".join(re.sub(r"\b(a|an|the)\b", " ", s).split())


def _f1(gold, pred):
    g, p = (_norm(gold).split() if gold else []), (_norm(pred).split() if pred else [])
    if not g or not p:
        return float(g == p)
    same = sum((Counter(g) & Counter(p)).values())
    return 0.0 if same == 0 else 2 * same / (len(g) + len(p))


def _official_v2(golds, preds, na):
    res = {}
    em, f1 = {}, {}
    for q, answers in golds.items():
        gs = [a for a in answers if _norm(a)] or [""]
        em[q] = max(float(_norm(g) == _norm(preds[q])) for g in gs)
        f1[q] = max(_f1(g, preds[q]) for g in gs)
    has = {q: bool(a) for q, a in golds.items()}
    for name, sc in (("exact", em), ("f1", f1)):
        thr = {q: (float(not has[q]) if na[q] > 1.0 else s) for q, s in sc.items()}
        res[name] = 100 * sum(thr.values()) / len(thr)
        res["HasAns_" + name] = 100 * sum(thr[q] for q in has if has[q]) / sum(has.values())
        res["NoAns_" + name] = 100 * sum(thr[q] for q in has if not has[q]) / sum(not v for v in has.values())
        score = best = sum(not v for v in has.values())
        best_t = 0.0
        for q in sorted(na, key=na.get):
            score += sc[q] if has[q] else (-1 if preds[q] else 0)
            if score > best:
                best, best_t = score, na[q]
        res["best_" + name], res[f"best_{name}_thresh"] = 100 * best / len(sc), best_t
    return res


@pytest.mark.data
def test_v2_agrees_with_independent_official_logic(golds):
    rng = random.Random(1)
    qids = sorted(golds)
    # a SQuAD-2.0-like gold set: a third of the questions unanswerable
    g2 = {q: ([] if rng.random() < 0.33 else golds[q]) for q in qids}
    base = _perturb({q: golds[q] for q in qids}, seed=2)
    preds = {q: ("" if rng.random() < 0.3 else base[q]) for q in qids}
    na = {q: rng.gauss(0.0, 2.0) for q in qids}
    ours = M.evaluate_v2(g2, preds, na)
    ref = _official_v2(g2, preds, na)
    for key, value in ref.items():
        assert ours[key] == pytest.approx(value, abs=1e-9), key
    assert ours["total"] == 497 and ours["HasAns_total"] + ours["NoAns_total"] == 497
    assert 100 < ours["NoAns_total"] < 250  # a real mix of answerable and unanswerable


def test_normalization_and_f1_semantics():
    assert M.normalize_answer("  The  Denver Broncos!! ") == "denver broncos"
    assert M.normalize_answer("an apple, a theory") == "apple theory"
    assert M.normalize_answer("theater") == "theater"  # articles only as whole words
    assert M.exact_match("Denver Broncos.", "the denver broncos") == 1
    assert M.f1_score("Denver", "Denver Broncos") == pytest.approx(2 / 3)
    assert M.f1_score("a", "the", version="1.1") == 0.0  # both normalize to nothing: v1.1 gives 0
    assert M.f1_score("a", "the", version="2.0") == 1.0  # v2.0: "no answer" agrees with "no answer"
    assert M.f1_score("", "Denver", version="2.0") == 0.0
    # repeated tokens count as a multiset (Counter intersection)
    assert M.f1_score("gold gold gold", "gold") == pytest.approx(0.5)


def test_missing_prediction_scores_zero_and_counts():
    golds = {"a": ["x"], "b": ["y"]}
    assert M.evaluate_v1(golds, {"a": "x"}) == {"exact_match": 50.0, "f1": 50.0}
    out = M.evaluate_v2({"a": ["x"], "b": []}, {"a": "x"})
    assert out["total"] == 2 and out["exact"] == 50.0 and out["NoAns_exact"] == 0.0


def test_best_threshold_search_on_a_small_case():
    golds = {"a": ["x"], "b": ["y"], "c": [], "d": []}
    preds = {"a": "x", "b": "wrong", "c": "z", "d": "w"}
    na = {"a": -3.0, "b": -1.0, "c": 0.5, "d": 2.0}
    out = M.evaluate_v2(golds, preds, na)
    # answering only "a" (threshold -3.0): a right, b no-answer (wrong), c and d no-answer (right) = 3/4
    assert out["best_exact"] == 75.0 and out["best_exact_thresh"] == -3.0
    thr = M.choose_null_threshold(
        preds, {"a": 1.0, "b": 0.0, "c": 0.0, "d": 0.0}, na, {q: bool(a) for q, a in golds.items()}
    )
    assert thr == -3.0
    applied = {q: ("" if na[q] > thr else p) for q, p in preds.items()}
    assert M.evaluate_v2(golds, applied)["exact"] == out["best_exact"]


def test_choose_threshold_returns_minus_inf_when_all_no_answer_is_best():
    preds = {"a": "x", "b": "y"}
    na = {"a": -1.0, "b": -2.0}
    has = {"a": False, "b": False}
    # official: best is "answer nothing", reported with the threshold 0.0 ...
    assert M.find_best_thresh(preds, {"a": 0.0, "b": 0.0}, na, has) == (100.0, 0.0)
    # ... which would answer both here (na < 0); ours returns a threshold that really answers nothing
    assert M.choose_null_threshold(preds, {"a": 0.0, "b": 0.0}, na, has) == float("-inf")


def test_bad_version():
    with pytest.raises(ValueError, match="1.1"):
        M.evaluate({"a": ["x"]}, {"a": "x"}, version="3")
