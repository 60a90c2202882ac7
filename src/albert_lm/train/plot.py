"""Training curves from RUN_DIR/metrics.jsonl as a PNG (matplotlib, imported lazily)."""

from __future__ import annotations

from collections.abc import Sequence
from dataclasses import dataclass
from pathlib import Path
from typing import Any

from albert_lm.train.metrics import load_metrics

LOSS_KEYS = ("loss", "mlm_loss", "sop_loss")
LOSS_STYLES = {"loss": "-", "mlm_loss": "--", "sop_loss": ":"}


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


@dataclass
class _Run:
    """One run on the figure: its records split into training and evaluation lines, and its colors."""

    name: str
    train: list[dict[str, Any]]
    evals: list[dict[str, Any]]
    index: int
    runs: int
    colors: list[str]

    @property
    def tag(self) -> str:
        return f"{self.name}: " if self.runs > 1 else ""

    @property
    def color(self) -> str:
        return self.colors[self.index % len(self.colors)]

    def color_of(self, key: str) -> str:
        """Several runs: a color per run. One run: a color per metric family (MLM, SOP, the rest)."""
        if self.runs > 1:
            return self.color
        family = key.removeprefix("eval_")
        c = self.colors
        return c[0] if family.startswith("mlm") else c[1] if family.startswith("sop") else c[2]

    def eval_keys(self, suffix: str) -> list[str]:
        return sorted({k for r in self.evals for k in r if k.startswith("eval_") and k.endswith(suffix)})


def plot_runs(run_dirs: Sequence[str | Path], output: str | Path | None = None, smooth: int = 1) -> Path:
    """Draw loss / accuracy / learning rate / throughput of one or more runs; returns the PNG path."""
    import matplotlib

    matplotlib.use("Agg")
    import matplotlib.pyplot as plt

    loaded = [(Path(d), load_metrics(d)) for d in run_dirs]
    for d, recs in loaded:
        if not recs:
            raise ValueError(f"{d}/metrics.jsonl has no records yet")
    out = Path(output) if output is not None else loaded[0][0] / "curves.png"
    fig, axes = plt.subplots(2, 2, figsize=(12, 8))
    ax_loss, ax_acc, ax_lr, ax_tps = axes.flat
    colors = plt.rcParams["axes.prop_cycle"].by_key()["color"]
    for i, (d, recs) in enumerate(loaded):
        is_eval = [any(k.startswith("eval_") for k in r) for r in recs]
        train = [r for r, e in zip(recs, is_eval) if not e]
        evals = [r for r, e in zip(recs, is_eval) if e]
        run = _Run(d.name, train, evals, i, len(loaded), colors)
        _plot_losses(ax_loss, run, smooth)
        _plot_accuracies(ax_acc, run, smooth)
        _plot_schedule(ax_lr, ax_tps, run, smooth)
    ax_loss.set_title("loss")
    ax_acc.set_title("accuracy (lines: training, markers: held-out)")
    ax_lr.set_title("learning rate")
    ax_tps.set_title("throughput (tokens/s)")
    for ax in axes.flat:
        ax.set_xlabel("step")
        ax.grid(alpha=0.3)
        if ax.get_legend_handles_labels()[0]:
            ax.legend(fontsize=8)
    fig.suptitle(", ".join(str(d) for d, _ in loaded))
    fig.tight_layout()
    out.parent.mkdir(parents=True, exist_ok=True)
    fig.savefig(out, dpi=100)
    plt.close(fig)
    return out


def _plot_losses(ax: Any, run: _Run, smooth: int) -> None:
    for key in LOSS_KEYS:
        xs, ys = _series(run.train, key)
        if xs:
            style = LOSS_STYLES[key]
            ax.plot(xs, _smooth(ys, smooth), style, color=run.color_of(key), label=f"{run.tag}{key}", lw=1)
    for key in run.eval_keys("loss"):
        xs, ys = _series(run.evals, key)
        ax.plot(xs, ys, "o-", color=run.color_of(key), label=f"{run.tag}{key}", ms=4, lw=1, alpha=0.7)


def _plot_accuracies(ax: Any, run: _Run, smooth: int) -> None:
    for j, key in enumerate(sorted({k for r in run.train for k in r if k.endswith("accuracy")})):
        xs, ys = _series(run.train, key)
        line = ["-", "--", ":", "-."][j % 4]
        ax.plot(xs, _smooth(ys, smooth), line, color=run.color_of(key), label=f"{run.tag}{key}", lw=1)
    markers = "os^dv"
    for j, key in enumerate(run.eval_keys("accuracy")):
        xs, ys = _series(run.evals, key)
        marker = markers[j % len(markers)] + "-"
        ax.plot(xs, ys, marker, color=run.color_of(key), label=f"{run.tag}{key}", ms=5, lw=1.5)


def _plot_schedule(ax_lr: Any, ax_tps: Any, run: _Run, smooth: int) -> None:
    xs, ys = _series(run.train, "lr")
    if xs:
        ax_lr.plot(xs, ys, color=run.color, label=f"{run.tag}lr")
    xs, ys = _series(run.train, "tokens_per_s")
    if xs:
        ax_tps.plot(xs, _smooth(ys, max(smooth, 1)), color=run.color, label=f"{run.tag}tokens/s", lw=1)
