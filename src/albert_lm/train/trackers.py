"""Experiment trackers: the trainer's metrics records, also sent to TensorBoard, MLflow or Weights & Biases.

``RUN_DIR/metrics.jsonl`` stays the record of a run (`albert_lm.train.metrics.MetricsLog` writes it); a
tracker is a copy of each record for a dashboard. ``run.report_to`` (`albert_lm.train.settings.RunSettings`,
the same in ``albert pretrain`` and ``albert finetune``) names them; each is one small class with the one
interface `Tracker` (``log(record)``, ``flush()``, ``close()``), built by `open_trackers`:

* ``tensorboard``: event files in ``RUN_DIR/tb`` (`torch.utils.tensorboard`; extra ``tensorboard``).
* ``mlflow``: one MLflow run with the run's settings as params and every numeric field of a record as a
  metric at its step. Where: ``MLFLOW_TRACKING_URI`` when set, else the local file store
  ``file:RUN_DIR/mlruns`` (read it with ``mlflow ui --backend-store-uri RUN_DIR/mlruns``); the experiment:
  ``MLFLOW_EXPERIMENT_NAME`` or ``albert-lm`` (extra ``mlflow``).
* ``wandb``: one W&B run, offline unless ``WANDB_MODE`` says otherwise, its files under ``RUN_DIR/wandb``
  (``wandb sync RUN_DIR/wandb/offline-run-*`` uploads them); the project: ``WANDB_PROJECT`` or ``albert-lm``
  (extra ``wandb``).

The ids of the MLflow and W&B runs are kept in ``RUN_DIR/tracking.json``, so that a resumed run goes on
logging into the same tracker runs. A tracker asked for whose package is missing is an error
(`TrackerError`, naming the extra to install) before anything trains: `missing_trackers` is what the
settings check at the boundary.
"""

from __future__ import annotations

import importlib.util
import json
import logging
import math
import os
import time
from collections.abc import Mapping
from pathlib import Path
from typing import Any, Protocol

from albert_lm._io import atomic_write_json

logger = logging.getLogger(__name__)

__all__ = [
    "TRACKERS",
    "TRACKING_FILE",
    "Tracker",
    "TrackerError",
    "install_hint",
    "missing_trackers",
    "open_trackers",
]

TRACKING_FILE = "tracking.json"
TENSORBOARD_DIR = "tb"
# tracker -> (the module it imports, the extra of pyproject.toml that installs it)
TRACKERS: dict[str, tuple[str, str]] = {
    "tensorboard": ("tensorboard", "tensorboard"),
    "mlflow": ("mlflow", "mlflow"),
    "wandb": ("wandb", "wandb"),
}


class TrackerError(RuntimeError):
    """A tracker that was asked for and cannot start; the message names the extra to install."""


class Tracker(Protocol):
    """What the metrics log calls: each record (with its ``step``), then ``flush`` / ``close`` (``failed``:
    the run ended on an error, which the tracker records where it can)."""

    def log(self, record: Mapping[str, Any]) -> None: ...

    def flush(self) -> None: ...

    def close(self, failed: bool = False) -> None: ...


def install_hint(name: str) -> str:
    """What a missing tracker package needs: ``"mlflow needs the mlflow package: pip install ..."``."""
    module, extra = TRACKERS[name]
    return f"{name} needs the {module} package, not installed here: pip install 'albert-lm[{extra}]'"


def _install_hint(name: str) -> str:
    return f"run.report_to: {install_hint(name)}"


def missing_trackers(names: list[str]) -> list[str]:
    """The trackers of ``names`` whose package is not installed (a look-up of the module, not an import)."""
    return [n for n in names if n in TRACKERS and importlib.util.find_spec(TRACKERS[n][0]) is None]


def _numbers(record: Mapping[str, Any]) -> dict[str, float]:
    """The finite numbers of a record but its step (NaN and inf: a dashboard shows gaps, not spikes)."""
    return {
        key: float(value)
        for key, value in record.items()
        if key != "step"
        and isinstance(value, int | float)
        and not isinstance(value, bool)
        and math.isfinite(value)
    }


class TensorBoardTracker:
    """Event files in ``RUN_DIR/tb``."""

    def __init__(self, run_dir: Path) -> None:
        try:
            from torch.utils.tensorboard import SummaryWriter
        except ImportError:
            raise TrackerError(_install_hint("tensorboard")) from None
        self.writer = SummaryWriter(str(run_dir / TENSORBOARD_DIR))

    def log(self, record: Mapping[str, Any]) -> None:
        for key, value in _numbers(record).items():
            self.writer.add_scalar(key, value, record["step"])

    def flush(self) -> None:
        self.writer.flush()

    def close(self, failed: bool = False) -> None:
        self.writer.close()


class MlflowTracker:
    """One MLflow run (`mlflow.tracking.MlflowClient`: no global active run), continued by id on resume."""

    def __init__(self, run_dir: Path, params: Mapping[str, Any], run_id: str | None) -> None:
        try:
            from mlflow.entities import Param
            from mlflow.tracking import MlflowClient
        except ImportError:
            raise TrackerError(_install_hint("mlflow")) from None
        uri = os.environ.get("MLFLOW_TRACKING_URI")
        if not uri:
            # the local file store: mlflow >= 3.7 keeps it only when asked to (its default is a database)
            os.environ.setdefault("MLFLOW_ALLOW_FILE_STORE", "true")
            uri = (run_dir / "mlruns").resolve().as_uri()
        self.client = MlflowClient(tracking_uri=uri)
        if run_id is None:
            name = os.environ.get("MLFLOW_EXPERIMENT_NAME") or "albert-lm"
            experiment = self.client.get_experiment_by_name(name)
            exp_id = experiment.experiment_id if experiment else self.client.create_experiment(name)
            run_id = self.client.create_run(exp_id, run_name=run_dir.name).info.run_id
            params_list = [
                Param(str(k), json.dumps(v) if not isinstance(v, str) else v) for k, v in params.items()
            ]
            for start in range(0, len(params_list), 100):  # MLflow takes at most 100 params a batch
                self.client.log_batch(run_id, params=params_list[start : start + 100])
        self.run_id = run_id
        self.uri = uri

    def log(self, record: Mapping[str, Any]) -> None:
        from mlflow.entities import Metric

        now = int(time.time() * 1000)
        metrics = [Metric(k, v, now, int(record["step"])) for k, v in _numbers(record).items()]
        if metrics:
            self.client.log_batch(self.run_id, metrics=metrics)

    def flush(self) -> None:
        """Nothing to do: every `log` is written when it returns."""

    def close(self, failed: bool = False) -> None:
        self.client.set_terminated(self.run_id, status="FAILED" if failed else "FINISHED")


class WandbTracker:
    """One W&B run, offline by default (``WANDB_MODE``), its files under ``RUN_DIR/wandb``."""

    def __init__(self, run_dir: Path, params: Mapping[str, Any], run_id: str | None) -> None:
        try:
            import wandb
        except ImportError:
            raise TrackerError(_install_hint("wandb")) from None
        self.run = wandb.init(
            project=os.environ.get("WANDB_PROJECT") or "albert-lm",
            name=run_dir.name,
            dir=str(run_dir),
            mode=os.environ.get("WANDB_MODE") or "offline",  # type: ignore[arg-type]
            config=dict(params),
            id=run_id,
            resume="allow" if run_id else None,
            reinit="create_new",
        )
        self.run_id = self.run.id

    def log(self, record: Mapping[str, Any]) -> None:
        self.run.log(_numbers(record), step=int(record["step"]))

    def flush(self) -> None:
        """Nothing to do: the W&B service writes the records as they come."""

    def close(self, failed: bool = False) -> None:
        self.run.finish(exit_code=1 if failed else 0)


def open_trackers(
    names: list[str], run_dir: Path, params: Mapping[str, Any], *, tensorboard_if_installed: bool = False
) -> list[Tracker]:
    """The trackers ``names`` for the run in ``run_dir`` (``params``: the run's settings, flat), continuing
    the MLflow / W&B runs that ``RUN_DIR/tracking.json`` names; ``tensorboard_if_installed``: TensorBoard
    too where its package is installed (the trainer's default in code), silently absent where not.

    Raises:
        TrackerError: a tracker of ``names`` whose package is missing (trackers opened before it closed).
    """
    ids_file = run_dir / TRACKING_FILE
    ids: dict[str, str] = json.loads(ids_file.read_text(encoding="utf-8")) if ids_file.exists() else {}
    out: list[Tracker] = []
    try:
        for name in names:
            if name == "tensorboard":
                out.append(TensorBoardTracker(run_dir))
            elif name == "mlflow":
                out.append(MlflowTracker(run_dir, params, ids.get(name)))
            elif name == "wandb":
                out.append(WandbTracker(run_dir, params, ids.get(name)))
            else:
                raise TrackerError(f"run.report_to: unknown tracker {name!r} (known: {', '.join(TRACKERS)})")
        if tensorboard_if_installed and "tensorboard" not in names:
            try:
                out.append(TensorBoardTracker(run_dir))
            except TrackerError:
                logger.debug("tensorboard not installed: no RUN_DIR/%s", TENSORBOARD_DIR)
    except BaseException:
        for tracker in out:
            tracker.close(failed=True)
        raise
    new_ids = {n: t.run_id for n, t in zip(names, out) if n in ("mlflow", "wandb")}  # type: ignore[attr-defined]
    if new_ids and new_ids != ids:
        atomic_write_json(ids_file, {**ids, **new_ids}, indent=2)
    if out:
        logger.info("tracking: %s", ", ".join(names) or "tensorboard")
    return out
