"""The probe's verdict against random initialization, and its report as text."""

from __future__ import annotations

import math
from typing import Any


def compare(pretrained: dict[str, Any], randoms: list[dict[str, Any]]) -> dict[str, Any]:
    """The verdict of ``pretrained`` against the mean of the random initializations' dev accuracies.

    Both are scored on the same dev rows, so the comparison is paired: per row, the difference between
    the probe's 0/1 and the random probes' mean 0/1; its standard error (sd / sqrt(rows)) counts the dev
    sample once, and the seed-to-seed spread of the random initializations (their standard error of the
    mean) is added. Without per-row results (``dev_correct``) both sides' binomial errors are used."""
    accs = [r["dev_accuracy"] for r in randoms]
    n = len(accs)
    mean = sum(accs) / n
    sd = math.sqrt(sum((a - mean) ** 2 for a in accs) / (n - 1)) if n > 1 else 0.0
    seeds = sd**2 / n if n > 1 else 0.0
    rows = [pretrained.get("dev_correct"), *(r.get("dev_correct") for r in randoms)]
    if all(r is not None for r in rows) and len({len(r) for r in rows if r is not None}) == 1:
        ours = [float(v) for v in rows[0] or []]
        theirs = [sum(float(r[i]) for r in rows[1:] if r is not None) / n for i in range(len(ours))]
        d = [a - b for a, b in zip(ours, theirs)]
        m = sum(d) / len(d)
        paired = sum((x - m) ** 2 for x in d) / max(len(d) - 1, 1) / len(d)
        se, how = math.sqrt(paired + seeds), "paired over the dev rows, plus the seeds' spread"
    else:
        n_dev = max(pretrained["num_dev"], 1)
        se = math.sqrt(pretrained["dev_standard_error"] ** 2 + mean * (1 - mean) / n_dev + seeds)
        how = "binomial errors of both sides, plus the seeds' spread"
    diff = pretrained["dev_accuracy"] - mean
    word = "ABOVE" if diff > 2 * se else "BELOW" if diff < -2 * se else "AT"
    return {
        "random_init_accuracies": accs,
        "random_init_mean": mean,
        "random_init_sd": sd,
        "difference": diff,
        "two_standard_errors": 2 * se,
        "standard_error_from": how,
        "verdict": word,
    }


def format_report(report: dict[str, Any]) -> str:
    p = report["probe"]
    what = "random init (seed {})".format(p["seed"]) if p["random_init"] else str(p["model"])
    rows = (
        f"{p['num_train']} rows each scored once ({p['outer_folds']} outer folds)"
        if p.get("outer_folds")
        else f"{p['num_train']} train / {p['num_dev']} dev rows"
    )
    scored = "cross-fitted" if p.get("outer_folds") else "dev"
    lines = [
        f"linear probe of {what}: pooling {p['pooling']}, {p['num_features']} features, {rows}, "
        f"{len(p['labels'])} labels",
        f"  {scored} accuracy {p['dev_accuracy']:.1%} (two standard errors {2 * p['dev_standard_error']:.1%}); "
        f"cross-validated {p['cv_accuracy']:.1%} at C={p['c']:g}; train {p['train_accuracy']:.1%}; "
        f"majority class {p['majority_accuracy']:.1%}",
        f"  feature spread across texts (median std) {p['feature_spread']:.4g}; "
        f"{p['encode_seconds']:.0f} s encoding, {p['seconds']:.0f} s fitting",
    ]
    if "comparison" in report:
        c = report["comparison"]
        accs = ", ".join(f"{a:.1%}" for a in c["random_init_accuracies"])
        lines += [
            f"random initializations (seeds 1..{len(c['random_init_accuracies'])}): {accs}; "
            f"mean {c['random_init_mean']:.1%}, sd {c['random_init_sd']:.1%}",
            f"verdict: {c['verdict']} random initialization ({p['dev_accuracy']:.1%} vs "
            f"{c['random_init_mean']:.1%}: {c['difference'] * 100:+.1f} points, two standard errors "
            f"{c['two_standard_errors'] * 100:.1f}, {c['standard_error_from']})",
        ]
    return "\n".join(lines)
