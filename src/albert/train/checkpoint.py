"""Training checkpoints: a model directory plus everything needed to continue exactly.

Layout of one checkpoint (``RUN_DIR/checkpoints/step-00001000/``)::

    config.json, model.safetensors   the model directory (``model.save_pretrained``): Hugging Face reads it,
                                     ``albert finetune`` / ``Model.from_pretrained`` take it as is
    (tokenizer files)                written by the caller's ``on_save`` hook
    optimizer.pt                     optimizer state (moments, per-group lr)
    trainer.pt                       scheduler and GradScaler state
    rank_states.pt                   per rank: RNG states (python, numpy, torch CPU, CUDA) and data position
    trainer_state.json               step, epoch, tokens seen, best metric, ... (human readable)

Writes are atomic (`albert._io.atomic_write_dir`): everything goes to a hidden ``.tmp-*`` directory that is
renamed into place only when complete, so a process killed during the write (SIGKILL, power loss after the
fsyncs) leaves the previous checkpoints intact; stale temporary directories are removed by the next save. `latest_checkpoint` picks the
complete checkpoint with the highest step.
"""

from __future__ import annotations

import json
import logging
import os
import random
import re
import shutil
from pathlib import Path
from typing import Any

import numpy as np
import torch
from torch import nn

from albert._io import TMP_PREFIX, atomic_write_dir
from albert.train.distributed import DistInfo, barrier, gather_objects

logger = logging.getLogger(__name__)

STEP_DIR_RE = re.compile(r"^step-(\d+)$")
STATE_FILE = "trainer_state.json"
OPTIMIZER_FILE = "optimizer.pt"
TRAINER_FILE = "trainer.pt"
RANK_STATES_FILE = "rank_states.pt"
BEST_NAME = "best"


class CheckpointNotFound(FileNotFoundError):
    """No complete checkpoint where one was asked for."""


def step_dir_name(step: int) -> str:
    return f"step-{step:08d}"


# ------------------------------------------------------------------------------------------------ RNG
def rng_state() -> dict[str, Any]:
    """Every random number generator a training step may draw from."""
    state: dict[str, Any] = {
        "python": random.getstate(),
        "numpy": np.random.get_state(),
        "torch": torch.get_rng_state(),
    }
    if torch.cuda.is_available() and torch.cuda.is_initialized():
        state["cuda"] = torch.cuda.get_rng_state_all()
    return state


def set_rng_state(state: dict[str, Any]) -> None:
    random.setstate(state["python"])
    np.random.set_state(state["numpy"])
    torch.set_rng_state(state["torch"])
    if "cuda" in state and torch.cuda.is_available():
        torch.cuda.set_rng_state_all(state["cuda"])


# ------------------------------------------------------------------------------------------------ writing
def save_model(model: nn.Module, path: Path) -> None:
    """``model.save_pretrained(path)`` when the model has it, else its tensors as model.safetensors."""
    if hasattr(model, "save_pretrained"):
        model.save_pretrained(path)  # type: ignore[operator]
    else:
        from safetensors.torch import save_model as save_safetensors

        path.mkdir(parents=True, exist_ok=True)
        save_safetensors(model, str(path / "model.safetensors"))


def write_checkpoint(
    root: Path,
    name: str,
    *,
    model: nn.Module,
    trainer_state: dict[str, Any],
    optimizer: torch.optim.Optimizer | None = None,
    extra_state: dict[str, Any] | None = None,
    rank_states: list[dict[str, Any]] | None = None,
    on_save: Any = None,
) -> Path:
    """Write one checkpoint directory ``root/name`` atomically (an existing one is replaced).

    Args:
        root: the checkpoints directory (created if needed).
        name: ``step_dir_name(step)`` or ``"best"``.
        model: the unwrapped model (not DDP / compiled).
        trainer_state: JSON-serialisable loop state.
        optimizer: its state goes to optimizer.pt (None: model-only checkpoint, e.g. "best").
        extra_state: scheduler / GradScaler states (trainer.pt).
        rank_states: one dict per rank (RNG and data position).
        on_save: ``callable(tmp_dir)`` writing extra files (e.g. the tokenizer) before the rename.
    """
    root.mkdir(parents=True, exist_ok=True)
    for stale in root.glob(TMP_PREFIX + "*"):  # left by a process killed mid-write
        shutil.rmtree(stale, ignore_errors=True)

    def fill(tmp: Path) -> None:
        save_model(model, tmp)
        if optimizer is not None:
            torch.save(optimizer.state_dict(), tmp / OPTIMIZER_FILE)
        if extra_state is not None:
            torch.save(extra_state, tmp / TRAINER_FILE)
        if rank_states is not None:
            torch.save(rank_states, tmp / RANK_STATES_FILE)
        if on_save is not None:
            on_save(tmp)
        (tmp / STATE_FILE).write_text(
            json.dumps(trainer_state, indent=2, sort_keys=True) + "\n", encoding="utf-8"
        )

    # Replacing ("best"): the old directory is moved aside first; `latest_checkpoint` ignores hidden names.
    return atomic_write_dir(root / name, fill)


def save_training(
    root: Path,
    step: int,
    *,
    model: nn.Module,
    optimizer: torch.optim.Optimizer,
    scheduler: Any,
    scaler: torch.amp.GradScaler,
    trainer_state: dict[str, Any],
    rank_state: dict[str, Any],
    dist: DistInfo,
    keep_last: int,
    on_save: Any = None,
) -> Path:
    """Write the step checkpoint ``root/step-N`` of a training run and keep the ``keep_last`` newest.

    Collective: every rank passes its ``rank_state`` (RNG, data position), rank 0 writes them all with the
    model, optimizer, scheduler and GradScaler states. Returns the checkpoint's path (on every rank).
    """
    states = gather_objects(rank_state, dist)
    path = root / step_dir_name(step)
    if dist.is_main:
        extra = {
            "scheduler": scheduler.state_dict() if scheduler is not None else None,
            "scaler": scaler.state_dict(),
        }
        write_checkpoint(
            root,
            path.name,
            model=model,
            trainer_state=trainer_state,
            optimizer=optimizer,
            extra_state=extra,
            rank_states=states,
            on_save=on_save,
        )
        prune_checkpoints(root, keep_last)
        logger.info("checkpoint %s", path)
    barrier(dist)
    return path


def prune_checkpoints(root: Path, keep_last: int) -> list[Path]:
    """Delete all but the ``keep_last`` newest step checkpoints (``best`` is never deleted)."""
    steps = list_checkpoints(root)
    doomed = steps[:-keep_last] if keep_last > 0 else []
    for path in doomed:
        # rename first so that a crash mid-delete never leaves a half-deleted "complete" checkpoint
        trash = root / f"{TMP_PREFIX}del-{path.name}"
        os.rename(path, trash)
        shutil.rmtree(trash, ignore_errors=True)
    return doomed


# ------------------------------------------------------------------------------------------------ reading
def list_checkpoints(root: Path) -> list[Path]:
    """Complete step checkpoints under ``root``, oldest first."""
    if not root.is_dir():
        return []
    found = []
    for p in root.iterdir():
        m = STEP_DIR_RE.match(p.name)
        if m and p.is_dir() and (p / STATE_FILE).exists():
            found.append((int(m.group(1)), p))
    return [p for _, p in sorted(found)]


def latest_checkpoint(path: Path) -> Path:
    """Resolve ``path`` to a checkpoint directory.

    ``path`` may be a checkpoint itself, a checkpoints directory, or a run directory (``checkpoints/``
    inside); the newest complete step checkpoint is chosen.
    """
    path = Path(path)
    if (path / STATE_FILE).exists():
        return path
    for root in (path / "checkpoints", path):
        found = list_checkpoints(root)
        if found:
            return found[-1]
    raise CheckpointNotFound(
        f"no complete checkpoint in {path} (looked for {path}/checkpoints/step-*/{STATE_FILE})"
    )


def read_trainer_state(ckpt: Path) -> dict[str, Any]:
    try:
        return dict(json.loads((ckpt / STATE_FILE).read_text(encoding="utf-8")))
    except FileNotFoundError:
        raise CheckpointNotFound(f"{ckpt}: no {STATE_FILE} (not a training checkpoint)") from None


def load_model_weights(model: nn.Module, ckpt: Path) -> None:
    """Load the weights of a checkpoint's model directory into an existing ``model`` (strict)."""
    if hasattr(type(model), "from_pretrained") and (ckpt / "config.json").exists():
        fresh = type(model).from_pretrained(ckpt)  # type: ignore[attr-defined]
        model.load_state_dict(fresh.state_dict(), strict=True)
    else:
        from safetensors.torch import load_model as load_safetensors

        load_safetensors(model, str(ckpt / "model.safetensors"), strict=True)


def load_torch(path: Path) -> Any:
    # Our own files; weights_only=False because they hold RNG states (numpy arrays, python tuples).
    return torch.load(path, map_location="cpu", weights_only=False)


def load_training(
    ckpt: Path,
    *,
    model: nn.Module,
    optimizer: torch.optim.Optimizer,
    scheduler: Any,
    scaler: torch.amp.GradScaler,
    rank: int,
) -> tuple[dict[str, Any], dict[str, Any]]:
    """Load a `save_training` checkpoint into ``model``, ``optimizer``, ``scheduler`` and ``scaler``.

    Returns ``(trainer_state, rank_state)``: the loop state of trainer_state.json and this rank's RNG / data
    state (rank 0's when the checkpoint was written by fewer ranks).
    """
    state = read_trainer_state(ckpt)
    load_model_weights(model, ckpt)
    optimizer.load_state_dict(load_torch(ckpt / OPTIMIZER_FILE))
    extra = load_torch(ckpt / TRAINER_FILE)
    if scheduler is not None and extra.get("scheduler") is not None:
        scheduler.load_state_dict(extra["scheduler"])
    if extra.get("scaler"):
        scaler.load_state_dict(extra["scaler"])
    ranks = load_torch(ckpt / RANK_STATES_FILE)
    return state, ranks[rank] if rank < len(ranks) else ranks[0]
