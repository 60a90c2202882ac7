"""Training curves from RUN_DIR/metrics.jsonl as a PNG (matplotlib, imported lazily)."""

from __future__ import annotations

from collections.abc import Sequence
from pathlib import Path
from typing import Any

from albert.train.trainer import load_metrics

LOSS_KEYS = ("loss", "mlm_loss", "sop_loss")


def _series(records: list[dict[str, Any]], key: str) -> tuple[list[int], list[float]]:
    xs, ys = [], []
    for r in records:
        v = r.get(key)
        if isinstance(v, (int, float)) and v == v:  # skip NaN
            xs.append(int(r["step"]))
            ys.append(float(v))
    return xs, ys


def _smooth(ys: list[float], n: int) -> list[float]:
    if n <= 1:
        return ys
    out, acc = [], 0.0
    for i, y in enumerate(ys):
        acc += y
        if i >= n:
            acc -= ys[i - n]
        out.append(acc / min(i + 1, n))
    return out


def plot_runs(run_dirs: Sequence[str | Path], output: str | Path | None = None, smooth: int = 1) -> Path:
    """Draw loss / accuracy / learning rate / throughput of one or more runs; returns the PNG path."""
    import matplotlib

    matplotlib.use("Agg")
    import matplotlib.pyplot as plt

    runs = [(Path(d), load_metrics(d)) for d in run_dirs]
    for d, recs in runs:
        if not recs:
            raise ValueError(f"{d}/metrics.jsonl has no records yet")
    out = Path(output) if output is not None else runs[0][0] / "curves.png"
    fig, axes = plt.subplots(2, 2, figsize=(12, 8))
    ax_loss, ax_acc, ax_lr, ax_tps = axes.flat
    colors = plt.rcParams["axes.prop_cycle"].by_key()["color"]
    styles = {"loss": "-", "mlm_loss": "--", "sop_loss": ":"}

    def color_of(i: int, key: str) -> str:
        """Several runs: a color per run. One run: a color per metric family (MLM, SOP, the rest)."""
        if len(runs) > 1:
            return colors[i % len(colors)]
        family = key.removeprefix("eval_")
        return colors[0] if family.startswith("mlm") else colors[1] if family.startswith("sop") else colors[2]

    for i, (d, recs) in enumerate(runs):
        color = colors[i % len(colors)]
        tag = f"{d.name}: " if len(runs) > 1 else ""
        train = [r for r in recs if not any(k.startswith("eval_") for k in r)]
        evals = [r for r in recs if any(k.startswith("eval_") for k in r)]
        for key in LOSS_KEYS:
            xs, ys = _series(train, key)
            if xs:
                ax_loss.plot(
                    xs, _smooth(ys, smooth), styles[key], color=color_of(i, key), label=f"{tag}{key}", lw=1
                )
        for key in sorted({k for r in evals for k in r if k.startswith("eval_") and k.endswith("loss")}):
            xs, ys = _series(evals, key)
            ax_loss.plot(xs, ys, "o-", color=color_of(i, key), label=f"{tag}{key}", ms=4, lw=1, alpha=0.7)
        acc_keys = sorted({k for r in train for k in r if k.endswith("accuracy")})
        for j, key in enumerate(acc_keys):
            xs, ys = _series(train, key)
            ax_acc.plot(
                xs,
                _smooth(ys, smooth),
                ["-", "--", ":", "-."][j % 4],
                color=color_of(i, key),
                label=f"{tag}{key}",
                lw=1,
            )
        eval_acc = sorted({k for r in evals for k in r if k.startswith("eval_") and k.endswith("accuracy")})
        markers = "os^dv"
        for j, key in enumerate(eval_acc):
            xs, ys = _series(evals, key)
            ax_acc.plot(
                xs,
                ys,
                markers[j % len(markers)] + "-",
                color=color_of(i, key),
                label=f"{tag}{key}",
                ms=5,
                lw=1.5,
            )
        xs, ys = _series(train, "lr")
        if xs:
            ax_lr.plot(xs, ys, color=color, label=f"{tag}lr")
        xs, ys = _series(train, "tokens_per_s")
        if xs:
            ax_tps.plot(xs, _smooth(ys, max(smooth, 1)), color=color, label=f"{tag}tokens/s", lw=1)
    ax_loss.set_title("loss")
    ax_acc.set_title("accuracy (lines: training, markers: held-out)")
    ax_lr.set_title("learning rate")
    ax_tps.set_title("throughput (tokens/s)")
    for ax in axes.flat:
        ax.set_xlabel("step")
        ax.grid(alpha=0.3)
        if ax.get_legend_handles_labels()[0]:
            ax.legend(fontsize=8)
    fig.suptitle(", ".join(str(d) for d, _ in runs))
    fig.tight_layout()
    out.parent.mkdir(parents=True, exist_ok=True)
    fig.savefig(out, dpi=100)
    plt.close(fig)
    return out
