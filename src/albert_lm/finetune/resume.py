"""What a fine-tuning run was started with, recorded in each of its checkpoints and checked by ``--resume``.

``albert finetune --resume`` takes the task and hyperparameters from its command line again (a checkpoint
holds weights and loop state, not the command). Unchecked, they go wrong
quietly: ``--labels pos,neg`` on a run started with ``neg,pos`` swaps the class ids mid-run (exit 0), another
``--learning-rate`` is ignored by the restored schedule but written to report.json, another
``--batch-size`` ends in a ``StopIteration`` and another training file in a size-mismatch traceback.

So every checkpoint's task.json records the run's identity (`run_identity`, under `RUN_KEY`): the task, its
labels, every `FinetuneConfig` field except those that may change between a run and its resumption
(`MAY_CHANGE_ON_RESUME`), the tokenizer's fingerprint, and a digest of the training and dev features (the
token ids and labels the batches are made of, so another file, another row order, another
``--max-seq-length`` or ``--train-limit`` all show). `check_resume` compares it with the resumed run's,
as the pretraining dataset compares ``num_instances`` with its checkpoint's, and refuses naming each field
that differs, before anything is built or trained.
"""

from __future__ import annotations

import hashlib
import json
import logging
from collections.abc import Mapping, Sequence
from pathlib import Path
from typing import Any

import numpy as np

from albert_lm.finetune.config import FinetuneConfig
from albert_lm.finetune.rundir import TASK_FILE, RunDirError
from albert_lm.tasks.base import Task
from albert_lm.tasks.collate import Feature
from albert_lm.tasks.labels import short_list
from albert_lm.train.identity import differences

logger = logging.getLogger(__name__)

RUN_KEY = "run"
"""The key of task.json holding `run_identity`."""
MAY_CHANGE_ON_RESUME = ("device", "eval_batch_size")
"""`FinetuneConfig` fields a resumed run may set otherwise: where it runs, and how many dev examples go
through the model at once (neither changes a training step)."""


def features_digest(features: Sequence[Feature]) -> dict[str, Any]:
    """``{"features": count, "sha256": hex}`` of featurized examples: every key and value, in order."""
    h = hashlib.sha256()
    for feature in features:
        _update(h, feature)
    return {"features": len(features), "sha256": h.hexdigest()}


def _update(h: Any, value: Any) -> None:
    """Feed ``value`` to the hash ``h``: token-id lists as int64 bytes (fast for long windows), other
    containers element by element with their lengths (ragged option lists of multiple choice, SQuAD's
    feature objects), anything else by its repr."""
    if isinstance(value, (list, tuple)) and all(type(v) is int for v in value):
        h.update(b"i%d:" % len(value) + np.asarray(value, dtype=np.int64).tobytes())
    elif isinstance(value, (list, tuple)):
        h.update(b"l%d:" % len(value))
        for v in value:
            _update(h, v)
    elif isinstance(value, Mapping) or hasattr(value, "__dict__"):
        items = value if isinstance(value, Mapping) else vars(value)
        h.update(b"d%d:" % len(items))
        for key in sorted(items, key=str):
            h.update(str(key).encode() + b"=")
            _update(h, items[key])
    else:
        h.update(repr(value).encode() + b";")


def run_identity(
    task: Task,
    cfg: FinetuneConfig,
    tokenizer: Any,
    train_features: Sequence[Feature],
    dev_features: Mapping[str, Sequence[Feature]],
) -> dict[str, Any]:
    """The settings a resumed run must share with the run it continues (see the module docstring), as
    JSON values."""
    identity = {
        "task": task.name,
        "labels": task.info().get("labels"),
        "config": {k: v for k, v in cfg.to_dict().items() if k not in MAY_CHANGE_ON_RESUME},
        "tokenizer": getattr(tokenizer, "fingerprint", None),
        "train_data": features_digest(train_features),
        "dev_data": {split: features_digest(feats) for split, feats in dev_features.items()},
    }
    result: dict[str, Any] = json.loads(json.dumps(identity))  # as task.json will give it back
    return result


def _differences(saved: Mapping[str, Any], now: Mapping[str, Any]) -> list[str]:
    """``name: then X, now Y`` for each field that differs (hyperparameters by their flag)."""
    return differences(saved, now, flag=lambda name: f"--{name.replace('_', '-')}", show=_show)


def _show(value: Any) -> str:
    """A recorded value, short: a label list as its first labels, a digest as its count and prefix."""
    if isinstance(value, list):
        return f"[{short_list(value)}]"
    if isinstance(value, dict) and "sha256" in value:
        return f"{value['features']} features (sha256 {str(value['sha256'])[:12]})"
    if isinstance(value, dict):
        return "{" + ", ".join(f"{k}: {_show(v)}" for k, v in value.items()) + "}"
    if isinstance(value, str) and len(value) == 64:  # a fingerprint
        return value[:12]
    return repr(value)


def check_resume(output_dir: Path, identity: Mapping[str, Any]) -> None:
    """Refuse to resume the run in ``output_dir`` with settings other than those it was started with.

    The newest checkpoint's task.json holds them; a run with no checkpoint yet has nothing to compare (the
    trainer says so), and one written before they were recorded is resumed with a warning.

    Raises:
        RunDirError: naming the checkpoint and every field that differs, then and now.
    """
    from albert_lm.train.checkpoint import CheckpointNotFound, latest_checkpoint

    try:
        ckpt = latest_checkpoint(output_dir)
    except CheckpointNotFound:
        return
    try:
        saved = json.loads((ckpt / TASK_FILE).read_text(encoding="utf-8")).get(RUN_KEY)
    except (OSError, ValueError, AttributeError) as e:
        raise RunDirError(
            f"{ckpt / TASK_FILE}: unreadable ({e}); cannot check what the run was started with"
        ) from None
    if saved is None:
        logger.warning("%s records no run settings (written by an older version): resuming unchecked", ckpt)
        return
    diffs = _differences(saved, identity)
    if diffs:
        raise RunDirError(
            f"{output_dir}: cannot --resume with other settings than the run's ({ckpt / TASK_FILE}): "
            f"{'; '.join(diffs)}; give the settings that started it, or start afresh with --overwrite"
        )
