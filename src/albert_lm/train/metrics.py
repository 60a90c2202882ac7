"""Training metrics: sums kept on the device, the lines of RUN_DIR/metrics.jsonl, and how they read.

The loop knows no metric by name: it logs ``loss`` and whatever other 0-d floating tensors the model returns
(`scalar_metrics`), plus what a ``metrics_fn`` adds. `Meter` sums them without a host sync; `MetricsLog`
writes one JSON object per line (and feeds each to the trackers of `albert_lm.train.trackers`); `load_metrics`
reads the file back (``albert plot``).
"""

from __future__ import annotations

import json
import logging
import math
from collections.abc import Iterator, Mapping
from contextlib import contextmanager
from dataclasses import dataclass
from pathlib import Path
from typing import Any

import torch
from torch import Tensor

from albert_lm._io import atomic_write_text, iter_jsonl
from albert_lm.train.distributed import DistInfo, all_reduce_sum
from albert_lm.train.settings import report_trackers
from albert_lm.train.trackers import open_trackers

logger = logging.getLogger(__name__)

METRICS_FILE = "metrics.jsonl"

MetricValue = Tensor | tuple[Tensor, Tensor]


class Meter:
    """Sums of metrics on the device (no host sync until `values`).

    A metric is a value (averaged over the ``add`` calls) or a ratio ``(numerator, denominator)`` whose
    parts are summed separately, e.g. correct predictions over counted ones pooled over a logging window.
    """

    def __init__(self) -> None:
        self.num: dict[str, Tensor] = {}
        self.den: dict[str, Tensor | float] = {}

    def add(self, name: str, num: Tensor, den: Tensor | float = 1.0) -> None:
        num = num.detach().float()
        if isinstance(den, Tensor):
            den = den.detach().float()
        if name in self.num:
            self.num[name] = self.num[name] + num
            self.den[name] = self.den[name] + den
        else:
            self.num[name], self.den[name] = num, den

    def add_all(self, metrics: Mapping[str, MetricValue]) -> None:
        """Add each value or ``(numerator, denominator)`` of ``metrics``."""
        for name, value in metrics.items():
            if isinstance(value, tuple):
                self.add(name, value[0], value[1])
            else:
                self.add(name, value)

    def merge(self, other: Meter) -> None:
        for k in other.num:
            self.add(k, other.num[k], other.den[k])

    def values(self, dist: DistInfo) -> dict[str, float]:
        """``{name: sum of numerators / sum of denominators}`` over every rank (NaN where nothing counted)."""
        if not self.num:
            return {}
        names = sorted(self.num)
        device = self.num[names[0]].device
        dens = [
            d if isinstance(d, Tensor) else torch.tensor(d, device=device)
            for d in (self.den[k] for k in names)
        ]
        sums: list[float] = all_reduce_sum(torch.stack([self.num[k] for k in names] + dens), dist).tolist()
        n = len(names)
        return {k: (sums[i] / sums[n + i] if sums[n + i] else float("nan")) for i, k in enumerate(names)}

    def clear(self) -> None:
        self.num.clear()
        self.den.clear()

    def state_dict(self) -> dict[str, tuple[Tensor, Tensor | float]]:
        out: dict[str, tuple[Tensor, Tensor | float]] = {}
        for k, num in self.num.items():
            den = self.den[k]
            out[k] = (num.cpu(), den.cpu() if isinstance(den, Tensor) else den)
        return out

    def load_state_dict(self, state: dict[str, tuple[Tensor, Tensor | float]], device: torch.device) -> None:
        self.clear()
        for k, (num, den) in state.items():
            self.num[k] = num.to(device)
            self.den[k] = den.to(device) if isinstance(den, Tensor) else den


def scalar_metrics(output: Mapping[str, Any]) -> dict[str, MetricValue]:
    """Every 0-d floating tensor of a model's output except ``loss`` (the loop logs these as they come)."""
    return {
        k: v
        for k, v in output.items()
        if k != "loss" and isinstance(v, Tensor) and v.ndim == 0 and v.is_floating_point()
    }


def train_record(step: int, values: Mapping[str, float], tail: Mapping[str, Any]) -> dict[str, Any]:
    """One training line: ``step``, ``loss``, the other losses (``*_loss``), the other metrics (sorted),
    then ``tail`` (lr, grad_norm, throughput, ...), whose keys win over same-named metrics."""
    record: dict[str, Any] = {"step": step}
    losses = ["loss", *sorted(k for k in values if k.endswith("_loss"))]
    record.update((k, values[k]) for k in losses if k in values)
    record.update((k, v) for k, v in sorted(values.items()) if k not in record and k not in tail)
    record.update(tail)
    return record


def format_metrics(values: Mapping[str, Any], skip: tuple[str, ...] = ()) -> str:
    """``name=value`` pairs for a log line (floats to 4 significant digits)."""
    parts = []
    for k, v in values.items():
        if k in skip:
            continue
        parts.append(f"{k}={v:.4g}" if isinstance(v, float) else f"{k}={v}")
    return " ".join(parts)


def bar_postfix(record: Mapping[str, Any]) -> dict[str, str]:
    """The progress bar's short form of a training line: loss, accuracies, lr, tokens/s."""
    post = {"loss": f"{record['loss']:.3f}"}
    for k, v in record.items():
        if k.endswith("accuracy"):
            post[k.replace("_accuracy", "_acc")] = f"{v:.3f}"
    post["lr"] = f"{record['lr']:.2e}"
    post["tok/s"] = f"{record['tokens_per_s']:,.0f}"
    return post


@contextmanager
def progress_bar(
    total: int,
    initial: int,
    enabled: bool = True,
    time_budget_s: float | None = None,
    elapsed_s: float = 0.0,
    by: str = "steps",
) -> Iterator[Any]:
    """A tqdm bar (log lines go above it, not through it), or None when not ``enabled``; `advance_bar`
    moves it after each optimizer step.

    It counts what ends the run first, as far as that is known before it ends. ``by="steps"`` (a step
    schedule): optimizer steps from ``initial`` to ``total``, the time budget, when there is one, a field
    after them (``01:30 / 16:40:00 training time``); counting the budget showed "00:00 / 16:40:00" for a
    run that ends at step 6400 in half an hour. ``by="time"`` (the lr laid over training time):
    whole seconds of training time from ``elapsed_s`` to ``time_budget_s``, the step and the step cap in
    front (``step 40 of 100000``); counting the cap showed "1000/100000 steps, 14 h remaining" for a
    10-minute run.
    """
    if not enabled:
        yield None
        return
    from tqdm.auto import tqdm
    from tqdm.contrib.logging import logging_redirect_tqdm

    if by not in ("steps", "time") or (by == "time" and time_budget_s is None):
        raise ValueError(f"progress_bar: by must be 'steps', or 'time' with a time budget, got {by!r}")

    class Bar(tqdm):  # type: ignore[misc,valid-type]  # tqdm.auto's class is chosen at import
        counts, train_s, cap = by, elapsed_s, total  # advance_bar sets train_s

        @property
        def format_dict(self) -> dict[str, Any]:
            d = dict(super().format_dict)
            d["train_time"] = self.format_interval(int(self.train_s))
            d["budget"] = self.format_interval(math.ceil(time_budget_s or 0))
            d["cap"] = self.cap
            return d

    budget = "{train_time} / {budget} training time{postfix}"
    if by == "steps":
        steps = "{l_bar}{bar}| {n_fmt}/{total_fmt} [{elapsed}<{remaining}, {rate_fmt}] "
        fmt = None if time_budget_s is None else steps + budget  # None: tqdm's own
        bar = Bar(total=total, initial=initial, unit="step", bar_format=fmt, dynamic_ncols=True)
    else:
        budget_s = math.ceil(time_budget_s or 0)
        bar = Bar(
            total=max(1, budget_s),
            initial=min(int(elapsed_s), budget_s),
            unit="s",
            desc=f"step {initial} of {total}",
            bar_format="{desc} {percentage:3.0f}%|{bar}| " + budget,
            dynamic_ncols=True,
        )
    with logging_redirect_tqdm(), bar:
        yield bar


def advance_bar(bar: Any, step: int, training_s: float) -> None:
    """After optimizer step ``step`` with ``training_s`` seconds of training time: a step bar by one, a time
    bar (see `progress_bar`) to ``training_s`` whole seconds, its description naming the step."""
    bar.train_s = training_s
    if bar.counts == "steps":
        bar.update(1)
        return
    bar.set_description_str(f"step {step} of {bar.cap}", refresh=False)
    bar.update(max(0, min(int(training_s), bar.total) - bar.n))


def step_of(
    step: int, max_steps: int, elapsed_s: float, time_budget_s: float | None, by: str = "steps"
) -> str:
    """A bar-less log line's progress, counting what the bar counts (`progress_bar`): ``step 40/1000``,
    with a time budget ``step 40/1000 (125/600 s)``; by time ``step 40 (125/600 s)``."""
    budget = f" ({elapsed_s:.0f}/{time_budget_s:g} s)" if time_budget_s is not None else ""
    return f"step {step}{budget}" if by == "time" else f"step {step}/{max_steps}{budget}"


def improves(value: float, best: float | None, mode: str = "max") -> bool:
    """Whether ``value`` is a new best: strictly higher (``mode="max"``) or lower (``"min"``) than ``best``
    (None: nothing yet); NaN never is. The one rule for the best checkpoint."""
    if math.isnan(value):
        return False
    return best is None or (value > best if mode == "max" else value < best)


@dataclass
class BestMetric:
    """The best value so far of the evaluation metric ``name`` (None: none tracked) and its step."""

    name: str | None
    mode: str = "max"
    value: float | None = None
    step: int | None = None

    def update(self, metrics: Mapping[str, float], step: int) -> bool:
        """Take ``metrics[name]`` (``eval_`` prefixed) of ``step`` if it `improves`; returns whether it did.

        Raises:
            KeyError: the metric is not among ``metrics``.
        """
        if self.name is None:
            return False
        key = self.name if self.name.startswith("eval_") else f"eval_{self.name}"
        if key not in metrics:
            raise KeyError(
                f"TrainerConfig.best_metric {self.name!r} is not among the eval metrics {sorted(metrics)}"
            )
        if not improves(metrics[key], self.value, self.mode):
            return False
        self.value, self.step = metrics[key], step
        return True


class MetricsLog:
    """RUN_DIR/metrics.jsonl (one JSON object per line), each record also sent to the trackers
    (`albert_lm.train.trackers`): those ``report_to`` names, and with ``tensorboard`` RUN_DIR/tb where the
    tensorboard package is installed.

    ``path`` None (no run directory, or a rank other than 0) makes every call a no-op.
    """

    def __init__(
        self,
        path: Path | None,
        tensorboard: bool = True,
        report_to: str = "none",
        params: Mapping[str, Any] | None = None,
    ) -> None:
        self.path = path
        self.tensorboard = tensorboard
        self.report_to = report_to
        self.params = dict(params or {})
        self.trackers: list[Any] = []
        self._opened = False

    def open(self) -> None:
        """Create the run directory and start the trackers (`albert_lm.train.trackers.TrackerError` for one
        that cannot start)."""
        if self.path is None:
            return
        self.path.parent.mkdir(parents=True, exist_ok=True)
        if not self._opened:
            names = report_trackers(self.report_to)
            self.trackers = open_trackers(
                names, self.path.parent, self.params, tensorboard_if_installed=self.tensorboard
            )
            self._opened = True

    def write(self, record: Mapping[str, Any]) -> None:
        """Append ``record`` (which has a ``step``); its numbers also go to the trackers."""
        if self.path is None:
            return
        with open(self.path, "a", encoding="utf-8") as f:
            f.write(json.dumps(record) + "\n")
        for tracker in self.trackers:
            tracker.log(record)

    def truncate(self, step: int) -> None:
        """Drop the lines after ``step`` (see `truncate_metrics`)."""
        if self.path is not None:
            truncate_metrics(self.path, step)

    def flush(self) -> None:
        for tracker in self.trackers:
            tracker.flush()

    def close(self, failed: bool = False) -> None:
        """Flush and end the trackers' runs, ``failed`` where an error ended the run (a later `open` starts
        them again, continuing the same runs)."""
        trackers, self.trackers, self._opened = self.trackers, [], False
        for tracker in trackers:
            tracker.close(failed)

    def close_on_exit(self, exc_type: type[BaseException] | None, *_: Any) -> bool:
        """`close` as an exit callback (`contextlib.ExitStack.push`): failed when an exception ends the run."""
        self.close(failed=exc_type is not None)
        return False


def truncate_metrics(path: Path, step: int) -> None:
    """Keep the records up to ``step``: an interrupted run wrote lines after its last checkpoint, and its
    last line may be cut by the kill (skipped)."""
    if not path.exists():
        return
    kept = [rec for _, rec in iter_jsonl(path, skip_invalid=True) if rec.get("step", 0) <= step]
    atomic_write_text(path, "".join(json.dumps(rec) + "\n" for rec in kept))


def load_metrics(run_dir: str | Path) -> list[dict[str, Any]]:
    """The records of RUN_DIR/metrics.jsonl (training and eval lines).

    Raises:
        FileNotFoundError: no metrics.jsonl in ``run_dir``.
        albert_lm._io.JsonlError: a line that is not a JSON object (the message names ``file:line``).
    """
    path = Path(run_dir) / METRICS_FILE
    if not path.exists():
        raise FileNotFoundError(f"{path} not found (is {run_dir} a run directory?)")
    return [rec for _, rec in iter_jsonl(path)]
