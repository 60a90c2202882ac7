"""The fine-tuning workflow's settings: the ``finetune`` section (`FinetuneOptions`) and the settings shared
with pretraining (``optim``, ``schedule``, ``run``: `albert_lm.train.settings`) at fine-tuning's values
(`FINETUNE_DEFAULTS`). A task's preset (`albert_lm.tasks.registry`: each kind's ``preset``) is plain data over
the same flat names, applied on top of these defaults.
"""

from __future__ import annotations

import copy
import dataclasses
from dataclasses import dataclass
from typing import Any, ClassVar

from albert_lm.config import ConfigError
from albert_lm.train.settings import (
    RECORDED_WHEN_SET,
    SHARED_FLAGS,
    OptimSettings,
    Rule,
    RunSettings,
    ScheduleSettings,
    above,
    at_least,
    check_sections,
    sections_dict,
)

# The one configuration error (albert_lm.config.ConfigError), under the name fine-tuning gave it first: each
# bad field's ``(section.field, reason)`` in ``problems``.
FinetuneConfigError = ConfigError


@dataclass
class FinetuneOptions:
    """What only fine-tuning has; the optimizer, schedule and run settings are the shared sections
    (`albert_lm.train.settings`)."""

    batch_size: int = 32
    """Examples per optimizer step (global, across processes)."""
    epochs: float = 3.0
    """Passes over the training set when train_steps (schedule.train_steps) is null."""
    max_seq_length: int = 512
    """Maximum tokens per sequence (the original's max_seq_length; SQuAD windows longer paragraphs)."""
    classifier_dropout: float = 0.1
    """Dropout before the task head (original run_classifier.py / run_race.py: 0.1)."""
    encoder_dropout: float | None = None
    """Hidden and attention dropout inside the encoder while fine-tuning (the README's 'ALBERT DR');
    null keeps the checkpoint's config."""
    group_by_length: bool = True
    """Batch examples of similar length together (fast); false: plain shuffled batches."""
    pad_to_max_length: bool = False
    """Pad every batch to max_seq_length as the original does (slow; for comparisons)."""

    RULES: ClassVar[list[Rule]] = [
        ("batch_size", at_least(1), "at least 1"),
        ("epochs", above(0), "greater than 0"),
        ("max_seq_length", at_least(3), "at least 3 ([CLS], a token, [SEP])"),  # tasks.inputs
        ("classifier_dropout", lambda v: 0 <= v < 1, "in [0, 1)"),
        ("encoder_dropout", lambda v: 0 <= v < 1, "in [0, 1)"),
    ]


# Fine-tuning's values of the shared settings: a preset over their fields, as every task preset is.
# Without bias correction Adam's step t is (1 - beta1^t) / sqrt(1 - beta2^t) times larger: 3.2x at t = 1,
# 6.5x at 10, 4.1x at 60, 1.3x at 1000. That matters in short runs: MiniLM on the polarity CSV, 60 steps of
# 16 at lr 5e-5 (warmup 6, seq 48, seed 1, fp32), held-out accuracy 0.78 with adamw_original vs 0.59 with
# adamw (one seed). Hence the original's AdamWeightDecayOptimizer (adamw_original).
FINETUNE_DEFAULTS: dict[str, dict[str, Any]] = {
    "optim": {"optimizer": "adamw_original", "learning_rate": 2e-5},
    # train_steps null: epochs; warmup: 10% of the steps (original run_classifier.py warmup_proportion)
    "schedule": {"train_steps": None, "warmup_steps": None, "warmup_fraction": 0.1},
    # A checkpoint every 10 minutes of training: a killed fine-tune loses at most that much whatever its step
    # speed, and a short one (most on a GPU) writes only its final one; a resume needs only the newest.
    "run": {"seed": 42, "log_every": None, "eval_every": None, "save_every": None, "save_every_minutes": 10.0,
            "keep_last": 1},
}  # fmt: skip

SECTIONS: dict[str, type] = {
    "finetune": FinetuneOptions,
    "optim": OptimSettings,
    "schedule": ScheduleSettings,
    "run": RunSettings,
}

# flat name (the flag's spelling, and the record's key) -> section.field
FLAT_NAMES: dict[str, str] = {
    **{f.name: f"finetune.{f.name}" for f in dataclasses.fields(FinetuneOptions)},
    **SHARED_FLAGS,
}
# The keys of report.json's and task.json's "config" (the record every fine-tuned run directory holds, and
# what a resume compares), in their order: the same flat record as before the settings were shared.
RECORD_KEYS = (
    "learning_rate", "batch_size", "train_steps", "epochs", "warmup_steps", "warmup_fraction",
    "max_seq_length", "eval_batch_size", "eval_every", "classifier_dropout", "encoder_dropout", "optimizer",
    "weight_decay", "adam_epsilon", "max_grad_norm", "seed", "group_by_length", "pad_to_max_length",
    "precision", "device", "fp32_linear",
)  # fmt: skip


@dataclass(init=False)
class FinetuneConfig:
    """Fine-tuning hyperparameters: the ``finetune`` section (`FinetuneOptions`) and the settings shared with
    pretraining (``optim``, ``schedule``, ``run``) at fine-tuning's values (`FINETUNE_DEFAULTS`). Task
    presets (e.g. `albert_lm.tasks.glue.SPECS`) set values from the original's tables by their flat names,
    the flags of `albert finetune` (`FLAT_NAMES`: ``FinetuneConfig(learning_rate=3e-5, train_steps=800)``),
    which also read through (``cfg.learning_rate`` is ``cfg.optim.learning_rate``)."""

    finetune: FinetuneOptions
    optim: OptimSettings
    schedule: ScheduleSettings
    run: RunSettings

    def __init__(
        self,
        finetune: FinetuneOptions | None = None,
        optim: OptimSettings | None = None,
        schedule: ScheduleSettings | None = None,
        run: RunSettings | None = None,
        **flat: Any,
    ) -> None:
        self.finetune = finetune or FinetuneOptions()
        self.optim = optim or OptimSettings(**FINETUNE_DEFAULTS["optim"])
        self.schedule = schedule or ScheduleSettings(**FINETUNE_DEFAULTS["schedule"])
        self.run = run or RunSettings(**FINETUNE_DEFAULTS["run"])
        for name, value in flat.items():
            self._set(name, value)

    def _set(self, name: str, value: Any) -> None:
        if name not in FLAT_NAMES:
            raise TypeError(f"FinetuneConfig: unknown setting {name!r} (known: {', '.join(FLAT_NAMES)})")
        section, _, attr = FLAT_NAMES[name].partition(".")
        setattr(getattr(self, section), attr, value)

    def __getattr__(self, name: str) -> Any:
        # only called for names that are not attributes: the flat names read through to their section
        target = FLAT_NAMES.get(name)
        if target is None or target.partition(".")[0] not in self.__dict__:
            raise AttributeError(f"'FinetuneConfig' object has no attribute {name!r}")
        section, _, attr = target.partition(".")
        return getattr(self.__dict__[section], attr)

    def validate(self, model_config: Any = None) -> None:
        """Check every field before anything is read or built: types, finite numbers, ranges, names
        (`albert_lm.train.settings.check_sections`), and with ``model_config`` (an `AlbertConfig`) a
        ``max_seq_length`` the position table holds.

        Raises:
            ConfigError: listing each bad ``section.field`` with the reason, one per field.
        """
        extra = []
        if model_config is not None:
            limit = int(model_config.max_position_embeddings)
            if self.finetune.max_seq_length > limit:
                reason = f"must be at most {limit}, the model's max_position_embeddings, got {self.finetune.max_seq_length}"
                extra.append(("finetune.max_seq_length", reason))
        try:
            check_sections(self, SECTIONS, extra)
        except ConfigError as e:  # listed in the record's order (learning rate first, as the flags' help)
            order = {FLAT_NAMES[k]: i for i, k in enumerate(RECORD_KEYS)}
            raise ConfigError(sorted(e.problems, key=lambda p: order.get(p[0], len(order)))) from None

    def replace(self, **changes: Any) -> FinetuneConfig:
        """A copy with ``changes`` by flat name; None is a value like any other (``train_steps=None``:
        use epochs)."""
        out = copy.deepcopy(self)
        for name, value in changes.items():
            out._set(name, value)
        return out

    def to_dict(self) -> dict[str, Any]:
        """The flat record of report.json and task.json (`RECORD_KEYS`), and each of `RECORDED_WHEN_SET`
        (``head_lr_scale``, ...) where it is not at its default (the records, and resumes, of runs without
        them stay as they were)."""
        out = {name: getattr(self, name) for name in RECORD_KEYS}
        return out | {k: getattr(self, k) for k, off in RECORDED_WHEN_SET.items() if getattr(self, k) != off}

    def sections(self) -> dict[str, dict[str, Any]]:
        """``{section: {field: value}}``: what ``--print-config`` prints and ``--config`` reads."""
        return sections_dict(self, SECTIONS)

    def steps_for(self, num_train_examples: int) -> tuple[int, int]:
        """(total optimizer steps, warmup steps) for a training set of this size."""
        f = self.finetune
        return self.schedule.steps(f.epochs * num_train_examples / f.batch_size)
