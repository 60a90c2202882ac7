"""Training checkpoints: a model directory plus everything needed to continue exactly.

Layout of one checkpoint (``RUN_DIR/checkpoints/step-00001000/``)::

    config.json, model.safetensors   the model directory (``model.save_pretrained``): Hugging Face reads it,
                                     ``albert finetune`` / ``Model.from_pretrained`` take it as is
    (tokenizer files)                written by the caller's ``on_save`` hook
    training_state.json/.safetensors optimizer state (moments, per-group lr), scheduler and GradScaler
                                     state, and per rank: RNG states (python, numpy, torch CPU, CUDA), data
                                     position (`albert_lm.train.state_files`: no pickle, so a crafted
                                     checkpoint cannot run code on ``--resume``)
    trainer_state.json               step, epoch, tokens seen, best metric, ... (human readable)

Checkpoints of the earlier layout (optimizer.pt, trainer.pt, rank_states.pt) still resume: they are read
with ``torch.load(weights_only=True)``, which allows tensors, containers, numbers and numpy's RNG arrays and
refuses anything else. No checkpoint is written while a model tensor is NaN or infinite (`NonFiniteError`).

Writes are atomic (`albert_lm._io.atomic_write_dir`): everything goes to a hidden ``.tmp-*`` directory that is
renamed into place only when complete, so a process killed during the write (SIGKILL, power loss after the
fsyncs) leaves the previous checkpoints intact; stale temporary directories are removed by the next save. `latest_checkpoint` picks the
complete checkpoint with the highest step.
"""

from __future__ import annotations

import json
import logging
import os
import pickle
import random
import re
import shutil
from pathlib import Path
from typing import Any

import numpy as np
import torch
from torch import nn

from albert_lm._io import TMP_PREFIX, atomic_write_dir, recover_dirs_in
from albert_lm.optim._checks import first_non_finite_tensor
from albert_lm.train.distributed import DistInfo, barrier, gather_objects
from albert_lm.train.state_files import load_state, save_state

logger = logging.getLogger(__name__)

STEP_DIR_RE = re.compile(r"^step-(\d+)$")
STATE_FILE = "trainer_state.json"
TRAINING_STATE = "training_state"  # training_state.json + training_state.safetensors
# the earlier, pickled layout (read only)
OPTIMIZER_FILE = "optimizer.pt"
TRAINER_FILE = "trainer.pt"
RANK_STATES_FILE = "rank_states.pt"
BEST_NAME = "best"


class CheckpointNotFound(FileNotFoundError):
    """No complete checkpoint where one was asked for."""


class CheckpointStateError(ValueError):
    """A checkpoint's training state that is refused or does not fit this run; the message says why."""


class NonFiniteError(ValueError):
    """A model (or optimizer) tensor holds NaN or infinity; the message names the first such tensor."""


def step_dir_name(step: int) -> str:
    return f"step-{step:08d}"


def step_of_dir(path: Path) -> int:
    """The step of a step checkpoint's directory (``step-00001000`` -> 1000)."""
    m = STEP_DIR_RE.match(path.name)
    if m is None:
        raise ValueError(f"{path}: not a step checkpoint (expected a name like {step_dir_name(1000)})")
    return int(m.group(1))


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
def first_non_finite(model: nn.Module, optimizer: torch.optim.Optimizer | None = None) -> str | None:
    """The name of the first model tensor (then optimizer state tensor) holding NaN or infinity, or None.

    One host sync for all tensors; the names are looked up only when something is wrong."""
    named: list[tuple[str, torch.Tensor]] = [
        (name, t) for name, t in model.state_dict().items() if t.is_floating_point()
    ]
    if optimizer is not None:
        for group in optimizer.param_groups:
            for i, p in enumerate(group["params"]):
                label = group["names"][i] if "names" in group else f"parameter {i}"
                for key, t in optimizer.state.get(p, {}).items():
                    if isinstance(t, torch.Tensor) and t.is_floating_point():
                        named.append((f"optimizer state {key!r} of {label}", t))
    return first_non_finite_tensor(named)


def check_finite(model: nn.Module, where: Path, optimizer: torch.optim.Optimizer | None = None) -> None:
    """Raise `NonFiniteError` naming the first NaN / infinite tensor instead of writing ``where``."""
    bad = first_non_finite(model, optimizer)
    if bad is not None:
        raise NonFiniteError(f"not writing {where}: {bad} holds NaN or infinite values")


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
        optimizer: its state goes to the training state (None: model-only checkpoint, e.g. "best").
        extra_state: scheduler / GradScaler states.
        rank_states: one dict per rank (RNG and data position).
        on_save: ``callable(tmp_dir)`` writing extra files (e.g. the tokenizer) before the rename.

    Raises:
        NonFiniteError: a model or optimizer tensor holds NaN / infinity (nothing is written).
    """
    check_finite(model, root / name, optimizer)
    root.mkdir(parents=True, exist_ok=True)
    recover_dirs_in(root)  # a checkpoint complete beside its place (killed between the renames) goes in
    for stale in root.glob(TMP_PREFIX + "*"):  # left by a process killed mid-write
        shutil.rmtree(stale, ignore_errors=True)

    def fill(tmp: Path) -> None:
        save_model(model, tmp)
        if optimizer is not None or extra_state is not None or rank_states is not None:
            training = {
                "optimizer": optimizer.state_dict() if optimizer is not None else None,
                "trainer": extra_state,
                "ranks": rank_states,
            }
            save_state(training, tmp, TRAINING_STATE)
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
    _delete(root, doomed)
    return doomed


def drop_checkpoints_after(root: Path, step: int) -> list[Path]:
    """Delete the step checkpoints after ``step`` (a rollback abandons them; ``best`` is kept)."""
    doomed = [p for p in list_checkpoints(root) if step_of_dir(p) > step]
    _delete(root, doomed)
    return doomed


def _delete(root: Path, paths: list[Path]) -> None:
    for path in paths:
        # rename first so that a crash mid-delete never leaves a half-deleted "complete" checkpoint
        trash = root / f"{TMP_PREFIX}del-{path.name}"
        os.rename(path, trash)
        shutil.rmtree(trash, ignore_errors=True)


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
        recover_dirs_in(root)  # a complete checkpoint left beside its place by a kill between the renames
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


def _numpy_rng_globals() -> list[Any]:
    """What unpickling ``np.random.get_state()``'s uint32 array takes, and nothing more."""
    try:
        from numpy._core.multiarray import _reconstruct
    except ImportError:  # numpy < 2
        from numpy.core.multiarray import _reconstruct  # type: ignore[no-redef]
    return [np.ndarray, np.dtype, type(np.dtype(np.uint32)), _reconstruct]


def load_pickled(path: Path) -> Any:
    """A state file of the earlier layout (optimizer.pt, trainer.pt, rank_states.pt), read with torch's
    weights-only unpickler: tensors, containers, numbers and numpy's RNG arrays; anything else is refused
    before it is built.

    Raises:
        CheckpointStateError: the file asks for other objects (a crafted file's code) or is unreadable.
    """
    try:
        with torch.serialization.safe_globals(_numpy_rng_globals()):
            return torch.load(path, map_location="cpu", weights_only=True)
    except pickle.UnpicklingError as e:
        # Not torch's message: it advises turning weights_only off, which is what a crafted file wants.
        found = re.search(r"GLOBAL (\S+)", str(e))
        asks = f"it asks to call or build {found.group(1)}" if found else "it holds more than tensors"
        raise CheckpointStateError(
            f"{path}: refused to load: {asks}, but training state is only tensors, numbers and RNG arrays; "
            "albert did not write this file (or it was tampered with). Resume from another checkpoint."
        ) from None
    except (RuntimeError, EOFError, OSError) as e:
        raise CheckpointStateError(f"{path}: cannot read ({e})") from None


def read_training_state(ckpt: Path) -> dict[str, Any]:
    """``{"optimizer", "trainer", "ranks"}`` of a step checkpoint, from either layout."""
    if (ckpt / f"{TRAINING_STATE}.json").exists():
        return dict(load_state(ckpt, TRAINING_STATE))
    if (ckpt / OPTIMIZER_FILE).exists():
        return {
            "optimizer": load_pickled(ckpt / OPTIMIZER_FILE),
            "trainer": load_pickled(ckpt / TRAINER_FILE),
            "ranks": load_pickled(ckpt / RANK_STATES_FILE),
        }
    raise CheckpointNotFound(f"{ckpt}: no {TRAINING_STATE}.json (a model-only checkpoint cannot be resumed)")


def load_training(
    ckpt: Path,
    *,
    model: nn.Module,
    optimizer: torch.optim.Optimizer,
    scheduler: Any,
    scaler: torch.amp.GradScaler,
    rank: int,
    world_size: int = 1,
) -> tuple[dict[str, Any], dict[str, Any]]:
    """Load a `save_training` checkpoint into ``model``, ``optimizer``, ``scheduler`` and ``scaler``.

    Returns ``(trainer_state, rank_state)``: the loop state of trainer_state.json and this rank's RNG / data
    state.

    Raises:
        CheckpointStateError: the checkpoint was written by a different number of ranks (each rank's RNG
            and data position cannot be split or merged), or its state files are refused.
    """
    state = read_trainer_state(ckpt)
    training = read_training_state(ckpt)
    ranks = training["ranks"]
    if len(ranks) != world_size:
        raise CheckpointStateError(
            f"{ckpt} was written by {len(ranks)} rank(s), this run has {world_size}: each rank's RNG state "
            f"and data position would be missing or reused. Resume with {len(ranks)} process(es), or start "
            "a new run from its model directory"
        )
    load_model_weights(model, ckpt)
    optimizer.load_state_dict(training["optimizer"])
    extra = training["trainer"]
    if scheduler is not None and extra.get("scheduler") is not None:
        scheduler.load_state_dict(extra["scheduler"])
    if extra.get("scaler"):
        scaler.load_state_dict(extra["scaler"])
    return state, ranks[rank]
