"""What `albert finetune` leaves behind, and how `albert predict` / `albert evaluate` read it back.

A fine-tuning run directory holds two model directories, ``checkpoints/best`` (best on dev by the
task's score) and ``checkpoints/step-N`` (the last weights, with the optimizer state for --resume),
each loadable by `albert predict` / `albert evaluate` and by transformers, plus ``report.json`` saying
which is which and with what dev metrics. Each model directory has a ``task.json`` (`Task.info`) from
which the task rebuilds itself (`task_from_info`: the kind -> class table of `albert_lm.tasks.registry`, each
class with its `Task.from_info`).

A run directory is never written over by accident: `check_output_dir` refuses an existing, non-empty
one unless the run resumes it or replaces it (``--overwrite``), and `replacing` replaces it without
ever leaving old and new content mixed (see there).
"""

from __future__ import annotations

import contextlib
import json
import logging
import os
import shutil
from collections.abc import Iterator, Mapping
from dataclasses import dataclass
from pathlib import Path
from typing import Any

from albert_lm._io import (
    TMP_PREFIX,
    NotTextError,
    atomic_write_json,
    fsync_dir,
    read_utf8,
    recover_dir,
    recover_dirs_in,
)
from albert_lm._locks import LOCK_FILE, check_overwrite_inputs
from albert_lm.finetune.config import FinetuneOptions
from albert_lm.tasks.base import REPORT_FILE, ModelDirError, Task
from albert_lm.tasks.inputs import check_tokenizer, load_model_tokenizer, read_model_config
from albert_lm.tasks.labels import check_label_order

logger = logging.getLogger(__name__)

TASK_FILE = "task.json"


class RunDirError(ValueError):
    """An output directory that a fine-tuning run may not write into; the message says why."""


def write_task_info(task: Task, path: Path, extra: Mapping[str, Any] | None = None) -> None:
    """``path/task.json``: `Task.info` and ``extra`` (e.g. ``max_seq_length``), written atomically."""
    atomic_write_json(path / TASK_FILE, {**task.info(), **(extra or {})}, indent=2)


def read_task_info(model_dir: Path) -> dict[str, Any]:
    """The task.json of a fine-tuned model directory.

    Raises:
        ModelDirError: there is none (the directory was not written by `albert finetune`).
    """
    f = model_dir / TASK_FILE
    if not f.is_file():
        raise ModelDirError(
            f"{model_dir}: no {TASK_FILE}; this model directory was not written by `albert finetune`, so its "
            "task and labels are unknown"
        )
    from albert_lm.tasks.registry import KINDS  # the registry imports the task modules, which import this one

    info = _read_json_object(f)
    if not isinstance(info.get("task"), str) or info.get("kind") not in KINDS:
        raise ModelDirError(
            f"{f}: not a task.json of `albert finetune` (task {info.get('task')!r}, kind "
            f"{info.get('kind')!r}; kinds: {', '.join(KINDS)})"
        )
    return info


def _read_json_object(path: Path) -> dict[str, Any]:
    """The JSON object in ``path`` (task.json, report.json).

    Raises:
        ModelDirError: not UTF-8, not JSON, or not an object, naming the file (and line).
    """
    try:
        value = json.loads(read_utf8(path))
    except NotTextError as e:
        raise ModelDirError(str(e)) from None
    except json.JSONDecodeError as e:
        raise ModelDirError(f"{path}:{e.lineno}: not valid JSON ({e.msg})") from None
    if not isinstance(value, dict):
        raise ModelDirError(f"{path}: expected a JSON object, got {type(value).__name__}")
    return value


def report_dir(run_dir: str | Path, directory: str | Path | None) -> str | None:
    """How report.json records ``directory`` (a checkpoint of the run in ``run_dir``): relative to the run
    directory, so that the report means the same from any working directory and after the run is moved.
    A directory outside the run stays absolute."""
    if directory is None:
        return None
    run, d = Path(run_dir).absolute(), Path(directory).absolute()
    return d.relative_to(run).as_posix() if d.is_relative_to(run) else str(d)


def recorded_dir(run_dir: str | Path, recorded: str) -> Path | None:
    """The checkpoint directory that a run directory's report.json records as ``recorded``, or None.

    The one resolver for a report's paths. A relative path is relative to the run directory that holds
    the report, never to the working directory (reports before 0.2 stored ``--output``'s own relative
    spelling, e.g. ``ft1/checkpoints/best``: tried against the cwd, that loaded another run's model with
    exit 0). Then the run directory's own ``checkpoints/NAME``, which also covers a moved run; an absolute
    path is used only when it lies inside the run directory, since after a copy it may name another run.
    """
    run = Path(run_dir)
    path = Path(recorded)
    candidates = [] if path.is_absolute() else [run / path]
    candidates.append(run / "checkpoints" / path.name)
    if path.is_absolute() and path.resolve().is_relative_to(run.resolve()):
        candidates.append(path)
    return next((c for c in candidates if (c / "config.json").is_file()), None)


def resolve_model_dir(path: str | Path, checkpoint: str = "best") -> Path:
    """A model directory is returned as is; a fine-tuning run directory resolves to its ``best`` or
    ``last`` checkpoint (as recorded in its report.json, read with `recorded_dir`)."""
    p = Path(path)
    recover_dir(p)  # a model directory whose replacement was killed between its two renames
    recover_dirs_in(p / "checkpoints")
    if (p / "config.json").is_file():
        return p
    if checkpoint not in ("best", "last"):
        raise ValueError(f"checkpoint must be 'best' or 'last', got {checkpoint!r}")
    report = p / REPORT_FILE
    if report.is_file():
        d = _report_dir(report, checkpoint)  # a malformed report.json: one line naming it
        found = recorded_dir(p, d) if d else None
        if found is not None:
            return found
    if checkpoint == "best" and (p / "checkpoints" / "best" / "config.json").is_file():
        return p / "checkpoints" / "best"
    raise ModelDirError(
        f"{p}: neither a model directory (config.json) nor a fine-tuning run directory with a {checkpoint} checkpoint"
    )


def _report_dir(report: Path, checkpoint: str) -> str | None:
    """The ``dir`` that report.json gives for ``checkpoint`` (None when it names none).

    Raises:
        ModelDirError: a report.json that is not a JSON object of ``checkpoints``, naming it.
    """
    entry = _read_json_object(report).get("checkpoints")
    entry = entry.get(checkpoint) if isinstance(entry, dict) else None
    if not isinstance(entry, dict) or not isinstance(entry.get("dir"), (str, type(None))):
        raise ModelDirError(f"{report}: no checkpoints.{checkpoint}.dir (not a report of `albert finetune`)")
    return entry.get("dir")


def task_from_info(info: Mapping[str, Any], source: str | Path = TASK_FILE) -> Task:
    """The task a fine-tuned model was trained with, without data, from its task.json (``source``, the
    file named in errors).

    Raises:
        ModelDirError: an unknown kind, or fields its task class cannot use (naming ``source``).
    """
    from albert_lm.tasks.registry import task_class

    cls = task_class(info, source)
    try:
        return cls.from_info(info)
    except (KeyError, TypeError, ValueError, AttributeError) as e:
        # from_info reads fields of a file anyone may have edited: a wrong one is that file's fault,
        # named as such, not a traceback from inside a task class
        detail = f"missing field {e}" if isinstance(e, KeyError) else f"{type(e).__name__}: {e}"
        raise ModelDirError(f"{source}: not a task.json of `albert finetune` ({detail})") from None


def trained_max_seq_length(info: Mapping[str, Any], given: int | None = None) -> int:
    """The sequence length to featurize with: ``given`` (a command-line flag), else the one the model was
    fine-tuned with (task.json; `albert finetune` always records it), else `FinetuneOptions`' default."""
    if given is not None:  # 0 too: refused by the caller's range check, never silently replaced
        return int(given)
    return int(info.get("max_seq_length", FinetuneOptions.max_seq_length))


@dataclass
class FineTuned:
    """A fine-tuned model directory, read back: the task rebuilt from its task.json and its tokenizer."""

    model_dir: Path
    info: dict[str, Any]
    task: Task
    tokenizer: Any
    max_seq_length: int

    def load_model(self, device: Any = None) -> Any:
        """The fine-tuned model (`Task.build_model`) on ``device`` (None: a GPU when there is one).

        Raises:
            CheckpointError: the weights lack some of the model's task head (or pooler), which would be
                initialized at random: predictions would be noise that changes every run.
        """
        from albert_lm.runtime.device import pick_device

        return self.task.build_model(self.model_dir, require_head=True).to(pick_device(device))


def load_finetuned(
    path: str | Path, checkpoint: str = "best", max_seq_length: int | None = None
) -> FineTuned:
    """A run directory's ``checkpoint`` (or a model directory) with its task, tokenizer and the sequence
    length to use (`trained_max_seq_length`); the model itself is `FineTuned.load_model`.

    Raises:
        ModelDirError: not a (fine-tuned) model directory, or a tokenizer that does not fit it (another
            vocabulary size, or another fingerprint than its task.json records).
        ValueError: a ``max_seq_length`` the model's position table does not hold.
    """
    model_dir = resolve_model_dir(path, checkpoint)
    info = read_task_info(model_dir)
    check_label_order(info.get("labels"), model_dir / TASK_FILE, model_dir / "config.json")
    tokenizer = load_model_tokenizer(model_dir)
    check_tokenizer(model_dir, info.get("tokenizer"), tokenizer)  # not another vocabulary of the same size
    length = trained_max_seq_length(info, max_seq_length)
    limit = read_model_config(model_dir).max_position_embeddings
    if not 3 <= length <= limit:  # [CLS] a token [SEP] .. the position table
        raise ValueError(
            f"--max-seq-length {length}: must be between 3 and {limit}, the model's max_position_embeddings"
        )
    return FineTuned(model_dir, info, task_from_info(info, model_dir / TASK_FILE), tokenizer, length)


# ---------------------------------------------------------------------------------------------------------
# Writing a run directory: never over an old run by accident, never half old and half new
# What a fine-tuning run writes before its first checkpoint: a directory holding only these (and no
# complete checkpoint) is a run killed before it could be resumed, which --resume starts over.
EARLY_RUN_FILES = frozenset(
    {"metrics.jsonl", "tb", "checkpoints", LOCK_FILE, "tracking.json", "mlruns", "wandb"}
)


def _content(p: Path) -> list[Path]:
    """What a run directory holds, without the lock file of a run in progress."""
    return [e for e in p.iterdir() if e.name != LOCK_FILE] if p.is_dir() else []


def _killed_before_first_checkpoint(p: Path) -> bool:
    """``p`` holds only what a run writes before its first step checkpoint (`EARLY_RUN_FILES`, a hidden
    leftover of an interrupted write, a ``best`` model: no checkpoint to resume and no report)."""
    from albert_lm.train.checkpoint import list_checkpoints

    names = {e.name for e in _content(p) if not e.name.startswith(TMP_PREFIX)}
    return bool(names) and names <= EARLY_RUN_FILES and not list_checkpoints(p / "checkpoints")


def check_output_dir(
    path: str | Path, *, resume: bool = False, overwrite: bool = False, init: str | Path | None = None
) -> bool:
    """Refuse to start a run in ``path`` when that would mix it with, or silently destroy, another.

    An existing non-empty directory is an error unless the run continues it (``resume``) or replaces it
    (``overwrite``, see `replacing`); ``overwrite`` refuses an ``init`` model inside ``path``, which the
    replacement would delete. A run killed before its first checkpoint left nothing to continue: ``resume``
    starts it over (the caller replaces the old content, `replacing`), where it used to refuse too.

    Returns:
        True when the run must start over in place of such a killed run.

    Raises:
        RunDirError: naming the directory and the flag that would allow the run.
    """
    p = Path(path)
    if resume and overwrite:
        raise RunDirError(f"{p}: --resume continues the run there and --overwrite replaces it; give one")
    if p.exists() and not p.is_dir():
        raise RunDirError(f"{p}: exists and is not a directory")
    inside = init is not None and Path(init).resolve().is_relative_to(p.resolve())
    if overwrite and p.exists():
        check_overwrite_inputs(p, {"--init": init})  # --init inside it (or it inside --init)
    if overwrite or not _content(p):
        return False
    if not resume:
        raise RunDirError(
            f"{p}: exists and is not empty (an earlier run?); --resume continues it, --overwrite replaces it"
        )
    if _killed_before_first_checkpoint(p):
        if inside:
            raise RunDirError(f"{p}: --init {init} lies inside it, and starting the run over would delete it")
        return True
    return False


@contextlib.contextmanager
def replacing(path: str | Path, enabled: bool = True) -> Iterator[Path]:
    """Write a new run into ``path`` in place of its old content, never leaving the two mixed.

    The old content is moved aside first, with one rename to a hidden sibling (``.tmp-replaced-NAME.PID``,
    named in the log), and the new run is written at ``path`` itself, so that the paths its checkpoints
    and report record are final and an interrupted run can be resumed there. When the body returns, the
    old content is deleted; when it raises, the partial new run is deleted and the old content renamed
    back. A process killed outright leaves the new, partial run at ``path`` and the old one whole in the
    sibling. (Building the new run in a temporary directory and swapping at the end instead would leave
    the temporary's path in every checkpoint and report, and a killed run where ``--resume`` cannot find
    it.) The lock file of this run (`albert_lm._locks.lock_dir`) moves into the new directory: a rename keeps
    the lock held.

    ``enabled`` False, or no old content: the body simply writes ``path``.
    """
    p = Path(path)
    if not enabled or not _content(p):
        yield p
        return
    aside = p.parent / f"{TMP_PREFIX}replaced-{p.name}.{os.getpid()}"
    shutil.rmtree(aside, ignore_errors=True)  # a leftover of this same process id
    os.rename(p, aside)
    if (aside / LOCK_FILE).exists():
        p.mkdir()
        os.rename(aside / LOCK_FILE, p / LOCK_FILE)
    fsync_dir(p.parent)
    logger.warning("--overwrite: the old content of %s is kept in %s until this run has finished", p, aside)
    try:
        yield p
    except BaseException:
        shutil.rmtree(p, ignore_errors=True)
        os.rename(aside, p)
        fsync_dir(p.parent)
        logger.warning("the run failed; the old content of %s is back in place", p)
        raise
    shutil.rmtree(aside)
    fsync_dir(p.parent)
