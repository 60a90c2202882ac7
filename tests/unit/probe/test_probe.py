"""`albert probe`: the logistic regression against scikit-learn, a separable set through a fixed tiny model,
the comparison with random initializations, and bad input."""

from __future__ import annotations

import json
import math
import subprocess
import sys
from pathlib import Path

import numpy as np
import pytest
from standin_tokenizer import make_tiny_model_dir

from albert_lm.probe.run import (
    ProbeConfig,
    ProbeError,
    _standardize,
    fit_logistic_regression,
    probe_crossfit,
    probe_features,
)
from albert_lm.probe.verdict import compare

POSITIVE = ["good", "great"]
NEGATIVE = ["bad", "awful"]
FILLER = ["the", "film", "plot", "was", "an", "actor", "scene", "story", "and", "it", "quite", "really"]


def _sentences(n: int, seed: int) -> list[tuple[str, str]]:
    """(label, text): each text holds filler words and exactly one sentiment word, which alone decides
    the label -- linearly separable through any encoder whose mean-pooled output keeps the word's trace."""
    rng = np.random.default_rng(seed)
    rows = []
    for i in range(n):
        label = "pos" if i % 2 else "neg"
        word = rng.choice(POSITIVE if label == "pos" else NEGATIVE)
        words = list(rng.choice(FILLER, size=int(rng.integers(3, 7))))
        words.insert(int(rng.integers(0, len(words) + 1)), str(word))
        rows.append((label, " ".join(words)))
    return rows


def _csv(path: Path, rows: list[tuple[str, str]]) -> Path:
    path.write_text("label,text\n" + "".join(f"{lab},{text}\n" for lab, text in rows), encoding="utf-8")
    return path


@pytest.fixture(scope="module")
def tiny(tmp_path_factory: pytest.TempPathFactory) -> tuple[Path, Path, Path]:
    root = tmp_path_factory.mktemp("probe")
    train, dev = _sentences(160, seed=1), _sentences(80, seed=2)
    model = make_tiny_model_dir(root / "model", [t for _, t in train + dev], seed=0)
    return model, _csv(root / "train.csv", train), _csv(root / "dev.csv", dev)


def _albert(*args: str) -> subprocess.CompletedProcess[str]:
    """The real command in a subprocess (its exit code, stdout and stderr)."""
    return subprocess.run(
        [sys.executable, "-m", "albert_lm.cli.main", *args], capture_output=True, text=True, timeout=300
    )


def _main(capsys: pytest.CaptureFixture[str], *args: str) -> subprocess.CompletedProcess[str]:
    """`albert_lm.cli.main.main` in this process (no interpreter start-up): the same result fields."""
    from albert_lm.cli.main import main

    code = main(list(args))
    out = capsys.readouterr()
    return subprocess.CompletedProcess(list(args), code, out.out, out.err)


# ---------------------------------------------------------------------------------------------- the regression
@pytest.mark.parametrize("classes", [3, 4])
def test_multinomial_regression_matches_scikit_learn(classes: int) -> None:
    sklearn = pytest.importorskip("sklearn.linear_model")
    rng = np.random.default_rng(0)
    x = rng.normal(size=(300, 12))
    y = (x[:, :classes] + 0.8 * rng.normal(size=(300, classes))).argmax(1)
    x = _standardize(x)[0]
    for c in (0.01, 1.0):
        w, b = fit_logistic_regression(x, y, classes, c)
        ref = sklearn.LogisticRegression(C=c, tol=1e-10, max_iter=10_000).fit(x, y)
        # a multinomial model's logits are defined up to a constant per row
        ours, theirs = x @ w + b, ref.decision_function(x)
        ours, theirs = ours - ours.mean(1, keepdims=True), theirs - theirs.mean(1, keepdims=True)
        np.testing.assert_allclose(ours, theirs, atol=1e-4 * max(1.0, float(np.abs(theirs).max())))


def test_binary_regression_equals_scikit_learn_at_twice_c() -> None:
    """sklearn fits one weight vector for two classes, penalizing |v|^2 / 2; ours fits two, w1 = -w0 = v / 2
    at the optimum, penalizing |v|^2 / 4: the same model at sklearn's C = 2 x ours."""
    sklearn = pytest.importorskip("sklearn.linear_model")
    rng = np.random.default_rng(3)
    x = _standardize(rng.normal(size=(200, 8)))[0]
    y = (x[:, 0] + x[:, 1] + rng.normal(size=200) > 0).astype(np.int64)
    w, b = fit_logistic_regression(x, y, 2, 0.05)
    ref = sklearn.LogisticRegression(C=0.1, tol=1e-10, max_iter=10_000).fit(x, y)
    np.testing.assert_allclose((x @ w + b) @ np.array([-1.0, 1.0]), ref.decision_function(x), atol=1e-4)


def test_probe_features_separable_vs_noise() -> None:
    rng = np.random.default_rng(0)
    y = np.arange(400) % 2
    x = rng.normal(size=(400, 16))
    x[:, 3] += 3.0 * (2 * y - 1)  # one informative direction
    res = probe_features(x[:300], y[:300], x[300:], y[300:], ["a", "b"], ProbeConfig())
    assert res.dev_accuracy > 0.95 and res.cv_accuracy > 0.95
    noise = probe_features(x[:300, 4:], y[:300], x[300:, 4:], y[300:], ["a", "b"], ProbeConfig())
    assert 0.35 < noise.dev_accuracy < 0.65  # chance: 100 dev rows, +-0.1 is three standard errors
    assert noise.majority_accuracy == 0.5


def test_probe_features_refuses_what_it_cannot_fit() -> None:
    x = np.zeros((20, 4))
    with pytest.raises(ProbeError, match="1 class"):
        probe_features(
            x, np.zeros(20, dtype=np.int64), x, np.zeros(20, dtype=np.int64), ["a", "b"], ProbeConfig()
        )
    y = np.array([0] * 17 + [1] * 3)
    with pytest.raises(ProbeError, match="'b' has 3 training row"):
        probe_features(x, y, x, y, ["a", "b"], ProbeConfig())
    with pytest.raises(ProbeError, match="pooling"):
        ProbeConfig(pooling="max")


def test_constant_features_of_a_collapsed_encoder_give_the_majority() -> None:
    y = np.array([0, 1] * 10 + [0] * 10)
    x = np.ones((30, 8))
    res = probe_features(x, y, x, y, ["a", "b"], ProbeConfig())
    assert res.dev_accuracy == pytest.approx(20 / 30) == res.majority_accuracy


def test_crossfit_scores_every_row_by_a_probe_that_never_saw_it() -> None:
    rng = np.random.default_rng(3)
    y = np.arange(300) % 2
    x = rng.normal(size=(300, 12))
    x[:, 0] += 2.5 * (2 * y - 1)
    res = probe_crossfit(x, y, ["a", "b"], ProbeConfig(), outer_folds=5)
    assert res.num_dev == res.num_train == 300 and len(res.extra["dev_correct"]) == 300
    assert res.dev_accuracy > 0.9 and len(res.extra["c_per_fold"]) == 5
    # labels that no feature carries: a probe scored on rows it was fitted on would beat chance (300 rows,
    # 12 features: train accuracy ~0.6); every row held out of its own fit stays at chance
    noise = probe_crossfit(x[:, 1:], rng.permutation(y), ["a", "b"], ProbeConfig(), outer_folds=5)
    assert 0.4 < noise.dev_accuracy < 0.6, noise
    # a row's 0/1 is that of the fold's own probe: refit one fold by hand and compare
    from albert_lm.probe.run import _folds, _standardize, choose_c

    fold = _folds(y, 5, ProbeConfig().seed + 7919)[2]
    held = np.zeros(300, dtype=bool)
    held[fold] = True
    c, _ = choose_c(x[~held], y[~held], 2, ProbeConfig())
    xtr, xte = _standardize(x[~held], x[held])
    w, b = fit_logistic_regression(xtr, y[~held], 2, c)
    expected = ((xte @ w + b).argmax(1) == y[held]).astype(int)
    assert np.array(res.extra["dev_correct"])[held].tolist() == expected.tolist()
    with pytest.raises(ProbeError, match="fewer than the 5 outer x 5 inner"):
        probe_crossfit(x[:40], y[:40], ["a", "b"], ProbeConfig(), outer_folds=5)


def test_cli_outer_folds_scores_all_rows(
    tiny: tuple[Path, Path, Path], capsys: pytest.CaptureFixture[str]
) -> None:
    model, train, dev = tiny
    r = _main(capsys, "probe", "--model", str(model), "--train", str(train), "--outer-folds", "4",
              "--max-seq-length", "16", "--compare-random-init", "2", "--json")  # fmt: skip
    assert r.returncode == 0, r.stderr
    report = json.loads(r.stdout)
    p = report["probe"]
    assert (p["num_train"], p["num_dev"], p["outer_folds"], len(p["dev_correct"])) == (160, 160, 4, 160)
    assert p["dev_accuracy"] >= 0.9 and all(len(x["dev_correct"]) == 160 for x in report["random_init"])
    assert report["comparison"]["standard_error_from"].startswith("paired")
    text = _main(capsys, "probe", "--model", str(model), "--train", str(train), "--outer-folds", "4",
                 "--max-seq-length", "16")  # fmt: skip
    assert (
        "160 rows each scored once (4 outer folds)" in text.stdout and "cross-fitted accuracy" in text.stdout
    )
    bad = _main(
        capsys, "probe", "--model", str(model), "--train", str(train), "--dev", str(dev), "--outer-folds", "4"
    )
    assert bad.returncode == 1 and "--outer-folds" in bad.stderr and "no --dev" in bad.stderr


def test_compare_verdicts() -> None:
    base = {"dev_accuracy": 0.80, "dev_standard_error": 0.014, "num_dev": 800}
    randoms = [{"dev_accuracy": a} for a in (0.60, 0.61, 0.59)]
    assert compare(base, randoms)["verdict"] == "ABOVE"
    assert compare({**base, "dev_accuracy": 0.62}, randoms)["verdict"] == "AT"
    assert compare({**base, "dev_accuracy": 0.50}, randoms)["verdict"] == "BELOW"
    spread = [{"dev_accuracy": a} for a in (0.50, 0.80, 0.65)]  # a wide seed spread widens the margin
    assert compare({**base, "dev_accuracy": 0.72}, spread)["verdict"] == "AT"


def test_compare_is_paired_over_the_dev_rows() -> None:
    """Two probes that agree on most rows: +3 points on 800 rows is within the unpaired margin (~4.8)
    but far outside the paired one -- the rows where both are right or both wrong carry no noise."""
    n = 800
    ours = [1] * 520 + [0] * 280  # 65.0%
    theirs = [1] * 496 + [0] * 304  # 62.0%: the same rows right but 24
    p = {"dev_accuracy": 0.65, "dev_standard_error": math.sqrt(0.65 * 0.35 / n), "num_dev": n}
    randoms = [{"dev_accuracy": 0.62}] * 3
    assert compare(p, randoms)["verdict"] == "AT"
    paired = compare({**p, "dev_correct": ours}, [{**r, "dev_correct": theirs} for r in randoms])
    assert paired["verdict"] == "ABOVE" and paired["two_standard_errors"] < 0.015
    assert paired["standard_error_from"].startswith("paired")
    # disagreement on many rows: the paired error is large again
    shuffled = [1] * 248 + [0] * 304 + [1] * 248
    wide = compare({**p, "dev_correct": ours}, [{**r, "dev_correct": shuffled} for r in randoms])
    assert wide["two_standard_errors"] > 0.04


# ---------------------------------------------------------------------------------------------- the command
def test_cli_separable_set_through_a_fixed_tiny_model(
    tiny: tuple[Path, Path, Path], tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    model, train, dev = tiny
    out = tmp_path / "not-yet" / "report.json"  # its folder is made (the demo's first run had none)
    r = _albert("probe", "--model", str(model), "--train", str(train), "--dev", str(dev), "--max-seq-length",
                "16", "--compare-random-init", "2", "--output", str(out), "--json")  # fmt: skip
    assert r.returncode == 0, r.stderr
    report = json.loads(r.stdout)
    assert report == json.loads(out.read_text())
    p = report["probe"]
    assert (p["num_train"], p["num_dev"], p["labels"], p["num_features"]) == (160, 80, ["neg", "pos"], 32)
    # one word decides the label: a random tiny encoder's mean-pooled vectors keep it, the probe finds it
    assert p["dev_accuracy"] >= 0.9, p
    assert [r["seed"] for r in report["random_init"]] == [1, 2]
    # the random initializations differ in their weights only: every probe of the comparison uses the same folds
    assert {r["fold_seed"] for r in (p, *report["random_init"])} == {0}
    assert report["comparison"]["verdict"] in ("ABOVE", "AT", "BELOW")
    # deterministic: the same model and data give the same answer
    again = _main(capsys, "probe", "--model", str(model), "--train", str(train), "--dev", str(dev), "--max-seq-length",
                    "16", "--json")  # fmt: skip
    assert json.loads(again.stdout)["probe"]["dev_accuracy"] == p["dev_accuracy"]


def test_cli_text_report_and_held_out_split(
    tiny: tuple[Path, Path, Path], capsys: pytest.CaptureFixture[str]
) -> None:
    model, train, _ = tiny
    r = _main(capsys, "probe", "--model", str(model), "--train", str(train), "--dev-fraction", "0.25",
                "--pooling", "cls", "--max-seq-length", "16")  # fmt: skip
    assert r.returncode == 0, r.stderr
    assert "120 train / 40 dev rows" in r.stdout and "pooling cls" in r.stdout and "dev accuracy" in r.stdout


@pytest.mark.parametrize(
    ("extra", "message"),
    [
        (["--max-seq-length", "0"], "--max-seq-length: must be at least 1"),
        (["--dev-fraction", "1.5"], "--dev-fraction: must be in (0, 1)"),
        (["--random-init", "--compare-random-init", "2"], "choose one"),
        (["--folds", "0"], "--folds: must be at least 1"),
        (["--output", "/"], "is a directory"),
    ],
)
def test_cli_bad_arguments_are_one_line(
    tiny: tuple[Path, Path, Path], extra: list[str], message: str, capsys: pytest.CaptureFixture[str]
) -> None:
    model, train, dev = tiny
    r = _main(capsys, "probe", "--model", str(model), "--train", str(train), "--dev", str(dev), *extra)
    assert r.returncode == 1 and message in r.stderr and "Traceback" not in r.stderr, r.stderr
    assert len(r.stderr.strip().splitlines()) == 1


def test_cli_bad_files_name_the_file(
    tiny: tuple[Path, Path, Path], tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    model, train, dev = tiny
    cases = []
    unknown = _csv(tmp_path / "unknown.csv", [("pos", "good film"), ("maybe", "a film")])
    cases.append(
        (["--model", str(model), "--train", str(train), "--dev", str(unknown)], f"{unknown}:3: label 'maybe'")
    )
    one = _csv(tmp_path / "one.csv", [("pos", "good film")] * 10)
    cases.append((["--model", str(model), "--train", str(one), "--dev", str(dev)], "1 class(es)"))
    cases.append((["--model", str(tmp_path / "nope"), "--train", str(train), "--dev", str(dev)], "nope"))
    ragged = tmp_path / "ragged.csv"
    ragged.write_text("label,text\npos,a,b\n", encoding="utf-8")
    cases.append((["--model", str(model), "--train", str(ragged), "--dev", str(dev)], f"{ragged}:2"))
    empty = tmp_path / "empty.csv"
    empty.write_text("", encoding="utf-8")
    cases.append(
        (["--model", str(model), "--train", str(empty), "--dev", str(dev)], f"{empty}: no labelled rows")
    )
    for args, message in cases:
        r = _main(capsys, "probe", *args)
        assert r.returncode == 1 and message in r.stderr and "Traceback" not in r.stderr, (args, r.stderr)


def test_choose_c_by_held_out_cross_entropy() -> None:
    """C is the grid value with the lowest mean held-out cross-entropy over the folds, recomputed here fold by
    fold with the same fitting function."""
    from albert_lm.probe.run import (
        ProbeConfig,
        _cross_entropy,
        _folds,
        _standardize,
        choose_c,
        fit_logistic_regression,
    )

    rng = np.random.default_rng(3)
    y = rng.integers(0, 2, 300)
    x = rng.normal(size=(300, 6)) + 0.4 * y[:, None] * np.array([1.0, -0.5, 0, 0, 0, 0])  # weak features
    config = ProbeConfig(c_grid=(1e-3, 1e-2, 1e-1, 1.0), folds=5, seed=7)
    c, cv_acc = choose_c(x, y, 2, config)
    losses = {}
    for cand in config.c_grid:
        per_fold = []
        for f in _folds(y, 5, 7):
            held = np.zeros(len(y), dtype=bool)
            held[f] = True
            xtr, xte = _standardize(x[~held], x[held])
            per_fold.append(_cross_entropy(xte, y[held], *fit_logistic_regression(xtr, y[~held], 2, cand)))
        losses[cand] = float(np.mean(per_fold))
    assert c == min(losses, key=lambda k: losses[k]), losses
    assert 0.5 < cv_acc < 1.0
