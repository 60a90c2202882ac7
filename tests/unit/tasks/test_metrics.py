"""Metrics against scikit-learn and scipy on random and edge-case inputs."""

from __future__ import annotations

import numpy as np
import pytest
from scipy import stats
from sklearn import metrics as skm

from albert_lm.tasks import metrics as M


@pytest.mark.parametrize("seed", range(5))
@pytest.mark.parametrize("num_classes", [2, 3, 5])
def test_classification_metrics_match_sklearn(seed: int, num_classes: int) -> None:
    rng = np.random.default_rng(seed)
    y = rng.integers(0, num_classes, size=200)
    # predictions correlated with labels, so the metrics are not all near zero
    p = np.where(rng.random(200) < 0.6, y, rng.integers(0, num_classes, size=200))
    assert M.accuracy(p, y) == pytest.approx(skm.accuracy_score(y, p), abs=1e-12)
    assert M.matthews_corrcoef(p, y) == pytest.approx(skm.matthews_corrcoef(y, p), abs=1e-12)
    assert M.f1_macro(p, y) == pytest.approx(skm.f1_score(y, p, average="macro"), abs=1e-12)
    assert M.f1_binary(p, y, positive=1) == pytest.approx(
        skm.f1_score(y, p, labels=[1], average="macro", zero_division=0), abs=1e-12
    )


def test_binary_f1_and_string_labels() -> None:
    y = np.array(["0", "1", "1", "0", "1", "1"])
    p = np.array(["0", "1", "0", "1", "1", "1"])
    assert M.f1_binary(p, y, positive="1") == pytest.approx(skm.f1_score(y, p, pos_label="1"))
    # hand count: tp=3, fp=1, fn=1 -> 6/8
    assert M.f1_binary(p, y, positive="1") == pytest.approx(0.75)


def test_matthews_edge_cases_match_sklearn() -> None:
    y = np.array([0, 1, 1, 0, 1])
    const = np.zeros(5, dtype=int)
    assert M.matthews_corrcoef(const, y) == skm.matthews_corrcoef(y, const) == 0.0
    assert M.matthews_corrcoef(y, y) == pytest.approx(1.0)
    assert M.matthews_corrcoef(1 - y, y) == pytest.approx(-1.0)
    # F1 with no positive prediction and no positive label: 0, as sklearn with zero_division=0
    assert M.f1_binary(const, const) == 0.0


@pytest.mark.parametrize("seed", range(5))
def test_correlations_match_scipy(seed: int) -> None:
    rng = np.random.default_rng(seed)
    y = rng.uniform(0, 5, size=150)
    p = y + rng.normal(0, 1.5, size=150)
    assert M.pearson(p, y) == pytest.approx(stats.pearsonr(p, y)[0], abs=1e-12)
    assert M.spearman(p, y) == pytest.approx(stats.spearmanr(p, y)[0], abs=1e-12)


def test_spearman_with_ties_matches_scipy() -> None:
    rng = np.random.default_rng(7)
    y = rng.integers(0, 6, size=300).astype(float)  # STS-B-like: many tied gold scores
    p = np.round(y + rng.normal(0, 1, size=300))
    np.testing.assert_allclose(M.rankdata(p), stats.rankdata(p))
    assert M.spearman(p, y) == pytest.approx(stats.spearmanr(p, y)[0], abs=1e-12)


def test_shape_mismatch_and_empty_are_errors() -> None:
    with pytest.raises(ValueError, match="shape"):
        M.accuracy([1, 0], [1])
    with pytest.raises(ValueError, match="zero examples"):
        M.accuracy([], [])


def test_compute_by_name_and_unknown_name() -> None:
    out = M.compute(["accuracy", "f1"], [1, 0, 1, 1], [1, 0, 0, 1])
    assert out == {"accuracy": 0.75, "f1": pytest.approx(0.8)}
    with pytest.raises(KeyError, match="bleu"):
        M.compute(["bleu"], [1], [1])


def test_glue_average_averages_mnli_and_reports_missing_tasks() -> None:
    scores = {"cola": 0.5, "sst2": 0.9, "mnli": 0.8, "mnli-mm": 0.7, "ax": 0.3}
    out = M.glue_average(scores)
    # mnli -> (0.8 + 0.7) / 2; ax is not part of the score
    assert out["tasks"] == {"cola": 0.5, "sst2": 0.9, "mnli": pytest.approx(0.75)}
    assert out["score"] == pytest.approx((0.5 + 0.9 + 0.75) / 3)
    assert set(out["missing"]) == {"mrpc", "stsb", "qqp", "qnli", "rte", "wnli"}
    assert M.task_score({"f1": 0.9, "accuracy": 0.8}, ["f1", "accuracy"]) == pytest.approx(0.85)


def test_softmax_matches_scipy_and_survives_large_logits() -> None:
    from scipy import special

    rng = np.random.default_rng(0)
    x = rng.normal(size=(4, 7)) * 5
    np.testing.assert_allclose(M.softmax(x), special.softmax(x, axis=-1), rtol=1e-12)
    np.testing.assert_allclose(M.softmax(x, axis=0), special.softmax(x, axis=0), rtol=1e-12)
    big = M.softmax([1000.0, 1000.0, -1000.0])  # exp(1000) overflows without the max subtracted
    np.testing.assert_allclose(big, [0.5, 0.5, 0.0], atol=1e-12)
    assert M.softmax([]).shape == (0,)
