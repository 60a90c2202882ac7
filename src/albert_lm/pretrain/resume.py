"""What a pretraining run was started with, recorded in its ``run_config.json`` and checked by ``--resume``.

``albert pretrain --resume RUN_DIR`` takes run_config.json as the base of its configuration, and flags may
change any field of it. Only some may change without making the run another one (`MAY_CHANGE_ON_RESUME`:
the time budget and step cap, the save / log / eval cadence, the progress bar, threads and device, and the
paths of data whose content is the same): those are applied and appended to run_config.json's ``changes``
(``{step, field, old, new}``). Any other difference -- another data content (the manifest's sha256), another
tokenizer (its fingerprint), model, optimizer, learning rate, batch or seed -- is refused with one error naming
each differing field, old then new (`albert_lm.train.identity.differences`, as fine-tuning's resume check),
and the refusal happens before anything of the run is written.

A run directory with run_config.json and no checkpoint (a run killed before its first save) is resumed from
step 0 with the recorded settings (`pretrain` removes what the killed run logged).
"""

from __future__ import annotations

import hashlib
import json
import logging
from pathlib import Path
from typing import Any

from albert_lm._io import atomic_write_json
from albert_lm.config import ConfigError
from albert_lm.pretrain.config import RECORD_KEYS, PretrainConfig
from albert_lm.train.identity import CONFIG_KEY, differences

logger = logging.getLogger(__name__)

RUN_CONFIG = "run_config.json"
MAY_CHANGE_ON_RESUME = frozenset(
    {
        "run.max_time_minutes",
        "run.max_steps",
        "run.save_every",
        "run.save_every_minutes",
        "run.keep_last",
        "run.log_every",
        "run.eval_every",
        "run.eval_batch_size",
        "run.progress",
        "run.threads",
        "run.adaptive_threads_minutes",
        "run.device",
        "data.num_workers",
        # paths: what they hold is compared by its fingerprint (``data``, ``eval_data``, ``tokenizer``)
        "run.output",
        "data.data_dir",
        "data.eval_data_dir",
        "data.tokenizer",
    }
)
"""``section.field`` settings a resumed run may set otherwise (none changes what a training step computes)."""


def _flat(cfg: PretrainConfig) -> dict[str, Any]:
    """``{"section.field": value}`` of ``cfg`` (paths absolute), as run_config.json gives it back."""
    sections = json.loads(json.dumps(cfg.with_absolute_paths().to_dict()))
    return {f"{s}.{k}": v for s, values in sections.items() for k, v in values.items()}


def _manifest_sha256(data_dir: str | None) -> str | None:
    """The sha256 of DATA_DIR's manifest.json (which holds every shard's sha256), None without one."""
    if not data_dir:
        return None
    path = Path(data_dir) / "manifest.json"
    try:
        return hashlib.sha256(path.read_bytes()).hexdigest()
    except OSError as e:
        raise ConfigError(f"{path}: cannot read the data's manifest ({e.strerror or e})") from None


def _tokenizer_fingerprint(path: str | None) -> str | None:
    if not path:
        return None
    from albert_lm.tokenizer import load_tokenizer

    return getattr(load_tokenizer(path), "fingerprint", None)


def run_identity(cfg: PretrainConfig) -> dict[str, Any]:
    """What a resumption must share with the run: every setting but `MAY_CHANGE_ON_RESUME` (under
    ``config``), the sha256 of the training and held-out manifests, the tokenizer's fingerprint."""
    return {
        CONFIG_KEY: {k: v for k, v in _flat(cfg).items() if k not in MAY_CHANGE_ON_RESUME},
        "data": _manifest_sha256(cfg.data.data_dir),
        "eval_data": _manifest_sha256(cfg.data.eval_data_dir),
        "tokenizer": _tokenizer_fingerprint(cfg.data.tokenizer),
    }


def _show(value: Any) -> str:
    """A fingerprint as its first 12 hex digits."""
    return f"sha256 {value[:12]}" if isinstance(value, str) and len(value) == 64 else repr(value)


def read_run_config(run_dir: str | Path) -> dict[str, Any] | None:
    """RUN_DIR/run_config.json as a dict (None when there is none).

    Raises:
        ConfigError: not a JSON object, naming the file (and line).
    """
    path = Path(run_dir) / RUN_CONFIG
    if not path.is_file():
        return None
    try:
        raw = json.loads(path.read_text(encoding="utf-8"))
    except json.JSONDecodeError as e:
        raise ConfigError(f"{path}:{e.lineno}: not valid JSON ({e.msg})") from None
    except (OSError, UnicodeDecodeError) as e:
        raise ConfigError(f"{path}: unreadable ({e})") from None
    if not isinstance(raw, dict):
        raise ConfigError(f"{path}: expected a JSON object of sections")
    return raw


def _checkpoint_step(run_dir: Path) -> int:
    """The step of the newest checkpoint of ``run_dir``; 0 when it has none."""
    from albert_lm.train.checkpoint import CheckpointNotFound, latest_checkpoint, read_trainer_state

    try:
        return int(read_trainer_state(latest_checkpoint(run_dir)).get("step", 0))
    except CheckpointNotFound:
        return 0


def check_resume(cfg: PretrainConfig, identity: dict[str, Any]) -> list[dict[str, Any]]:
    """Refuse to resume the run in ``cfg.run.output`` as another run; return the allowed changes.

    Reads only: nothing is written, whatever the outcome.

    Returns:
        The run's recorded ``changes`` followed by one ``{step, field, old, new}`` per `MAY_CHANGE_ON_RESUME`
        setting given otherwise now (``step``: the checkpoint the run resumes from).

    Raises:
        ConfigError: naming run_config.json and every differing field, old then new.
    """
    run_dir = Path(cfg.run.output or "")
    saved = read_run_config(run_dir)
    if saved is None:
        logger.warning("%s: no %s; resuming with the settings given, unchecked", run_dir, RUN_CONFIG)
        return []
    recorded = saved.get("identity")
    if not isinstance(recorded, dict):
        logger.warning(
            "%s records no run identity (written by an older version): resuming unchecked", run_dir
        )
        return []
    diffs = differences(recorded, identity, flag=lambda name: f"--{name}", show=_show)
    if diffs:
        raise ConfigError(
            f"{run_dir / RUN_CONFIG}: cannot --resume with other settings than the run's: {'; '.join(diffs)}; "
            "give the settings that started it, or start afresh with --overwrite"
        )
    sections = {s: v for s, v in saved.items() if s not in RECORD_KEYS and isinstance(v, dict)}
    before = {f"{s}.{k}": v for s, values in sections.items() for k, v in values.items()}
    step = _checkpoint_step(run_dir)
    changes = [c for c in saved.get("changes") or [] if isinstance(c, dict)]
    for name, value in _flat(cfg).items():
        if name in MAY_CHANGE_ON_RESUME and name in before and before[name] != value:
            changes.append({"step": step, "field": name, "old": before[name], "new": value})
            logger.info("resumed with %s %r (was %r) from step %d", name, value, before[name], step)
    return changes


def write_run_config(cfg: PretrainConfig, identity: dict[str, Any], changes: list[dict[str, Any]]) -> None:
    """RUN_DIR/run_config.json: the settings (paths absolute), the run's identity, its changes."""
    record = {**cfg.with_absolute_paths().to_dict(), "identity": identity, "changes": changes}
    atomic_write_json(Path(cfg.run.output or "") / RUN_CONFIG, record, indent=2)


# What a run logs before its first checkpoint; a run resumed without one starts over without them.
EARLY_LOGS = ("metrics.jsonl", "tb", "health.json", "result.json")


def resume_plan(cfg: PretrainConfig, resume: bool) -> tuple[dict[str, Any], list[dict[str, Any]], bool]:
    """(identity, changes, whether to restore a checkpoint) of a run about to start; ``resume`` refused by
    `check_resume` as another run. A resumed run with no checkpoint starts from step 0 (logged).

    Reads only: the caller writes, once this has decided."""
    identity = run_identity(cfg)
    if not resume:
        return identity, [], False
    changes = check_resume(cfg, identity)
    from albert_lm.train.checkpoint import CheckpointNotFound, latest_checkpoint

    try:
        latest_checkpoint(Path(cfg.run.output or ""))
    except CheckpointNotFound:
        logger.warning(
            "%s: no checkpoint yet (the run was stopped before its first save): starting it from step 0 "
            "with its recorded settings",
            cfg.run.output,
        )
        return identity, changes, False
    return identity, changes, True


def clear_early_logs(run_dir: str | Path) -> None:
    """Remove what a run killed before its first checkpoint logged (`EARLY_LOGS`), which its start over
    would otherwise append to."""
    import shutil

    for name in EARLY_LOGS:
        path = Path(run_dir) / name
        if path.is_dir():
            shutil.rmtree(path)
        elif path.exists():
            path.unlink()
