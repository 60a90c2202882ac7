"""The settings both training workflows share, declared once: `OptimSettings`, `ScheduleSettings` and
`RunSettings`, the ``optim``, ``schedule`` and ``run`` sections of ``albert pretrain``'s `PretrainConfig`
and of ``albert finetune``'s `FinetuneConfig` (both in `albert_lm.tasks`).

Each field has its one default and, in the string under it, its one help text (`albert_lm._fields`). The
defaults are the original pretraining's (google-research/albert run_pretraining.py, paper Sec. 4.1);
fine-tuning's values (AdamWeightDecayOptimizer at 2e-5, seed 42, ...) are a preset of values over the
same fields (`albert_lm.finetune.config.FINETUNE_DEFAULTS`), never fields of its own.

The same flags set them in both commands: `SHARED_FLAGS` (``--learning-rate`` -> ``optim.learning_rate``), and
``--set SECTION.FIELD=VALUE``, ``--config FILE`` (JSON, or YAML: `parse_yaml`) and ``--print-config``
(YAML that ``--config`` reads back equal) work alike in both.

Validation is one rule style: a table of ``(field, test, what the test asks)`` per section (`RULES`) and
the field types (`albert_lm._fields.coerce`: integers, finite numbers), checked once at the boundary by
`check_sections`, which raises one `albert_lm.config.ConfigError` listing every bad ``section.field``.

This module stays free of torch (the optimizer names are checked lazily against `albert_lm.optim`).
"""

from __future__ import annotations

import copy
import json
import logging
import math
from collections.abc import Callable, Mapping, Sequence
from dataclasses import dataclass, fields
from pathlib import Path
from typing import Any

from albert_lm._fields import FieldError, coerce, dump_yaml, field_types, load_yaml, parse_value
from albert_lm._io import NotTextError, read_utf8
from albert_lm.config import ConfigError
from albert_lm.runtime.choices import CPU_ATTENTIONS, FP32_LINEARS, PRECISIONS
from albert_lm.train.trackers import install_hint, missing_trackers

logger = logging.getLogger(__name__)

__all__ = [
    "FP32_LINEARS",
    "LR_SCHEDULER_TYPES",
    "PRECISIONS",
    "RECORDED_WHEN_SET",
    "REPORT_TO",
    "SCHEDULE_BY",
    "SHARED_FLAGS",
    "ConfigError",
    "OptimSettings",
    "RunSettings",
    "ScheduleSettings",
    "apply_dict",
    "check_sections",
    "load_config_file",
    "parse_assignments",
    "parse_yaml",
    "to_yaml",
]

# ScheduleSettings.by: the learning rate as a function of optimizer steps or of training time
SCHEDULE_BY = ("steps", "time")
# ScheduleSettings.lr_scheduler_type: albert_lm.optim.schedules.DECAY_SHAPES (not imported: no torch here)
LR_SCHEDULER_TYPES = ("polynomial", "cosine")
# RunSettings.report_to: the trackers of albert_lm.train.trackers (besides metrics.jsonl, always written)
REPORT_TO = ("none", "tensorboard", "mlflow", "wandb")


@dataclass
class OptimSettings:
    optimizer: str = "lamb"
    """lamb | adamw | adamw_original (original run_pretraining.py: lamb). adamw_original is the original
    optimization.py AdamWeightDecayOptimizer, without Adam's bias correction (what run_glue.sh, run_squad
    and run_race fine-tune with); adamw is torch.optim.AdamW, with it"""
    learning_rate: float = 0.00176
    """peak learning rate (paper Sec. 4.1: 0.00176 for batch 4096)"""
    weight_decay: float = 0.01
    """decoupled weight decay, LayerNorm and biases excluded (original optimization.py: 0.01)"""
    beta1: float = 0.9
    """Adam / LAMB beta1 (original: 0.9)"""
    beta2: float = 0.999
    """Adam / LAMB beta2 (original: 0.999)"""
    adam_epsilon: float = 1e-6
    """Adam / LAMB epsilon (original optimization.py: 1e-6)"""
    max_grad_norm: float | None = 1.0
    """global-norm gradient clipping (original optimization.py: clip_by_global_norm 1.0); null: none"""
    head_lr_scale: float = 1.0
    """multiplier of the lr for the parts on top of the encoder and its pooler: every parameter outside
    albert.* (pretraining: mlm.*, sop.*; fine-tuning: the task head) and albert.pooler.*. >1 lets parts
    that start from random or were never trained (a classifier on a pretrained encoder; heads added to an
    encoder loaded with --model; a sentence-embedding model's unused pooler) catch up with an encoder
    that already reads (the original has one lr: 1.0)"""
    layer_lr_decay: float = 1.0
    """layer-wise lr decay (ELECTRA, Clark et al. 2020: 0.8 for base): the encoder's weight groups train
    at lr * decay^(G - g) (g = 1..G from the bottom), the embeddings at lr * decay^G, the heads and pooler
    at the full lr. G counts distinct sets of layer weights, not layer applications: with ALBERT's full
    sharing (one group) the shared block is one group at the full lr and only the embeddings are decayed;
    sharing none: one group per layer, as ELECTRA / DeBERTa. 1.0: off (the original)"""


@dataclass
class ScheduleSettings:
    train_steps: int | None = 125_000
    """optimizer steps of the schedule: the lr reaches 0 here (paper: 125,000); fine-tuning: null trains
    finetune.epochs passes over the training set"""
    warmup_steps: int | None = 3125
    """linear warmup steps (original run_pretraining.py: 3125); null: warmup_fraction of the steps"""
    warmup_fraction: float = 0.06
    """the warmup's share of the steps when warmup_steps is null, and with by=time of the time budget
    (Izsak et al. 2021: warmup_proportion 0.06)"""
    power: float = 1.0
    """polynomial decay power (original poly_power: 1.0 = linear)"""
    start_warmup_step: int = 0
    """original start_warmup_step"""
    lr_scheduler_type: str = "polynomial"
    """polynomial | cosine: the decay after the warmup. polynomial: the original's (power; 1.0 = linear),
    counted from step 0; cosine: half a cosine from the end of the warmup to min_lr_rate (Loshchilov &
    Hutter 2017; transformers' get_cosine_schedule_with_warmup)"""
    min_lr_rate: float = 0.0
    """the floor of the decay as a fraction of the peak lr (cosine and polynomial; original: 0)"""
    by: str = "steps"
    """steps | time: lay warmup and decay over optimizer steps (train_steps, warmup_steps: the paper's) or
    over training time (run.max_time_minutes, warmup_fraction; academic-budget BERT, Izsak et al. 2021), so
    that a run stopped by its time budget ends at lr ~0. time: train_steps only caps the steps, and the lr,
    hence the losses, depend on the machine's speed, so reruns are not bit-identical (a resumed run
    continues from its saved training time); steps (the default) reproduces a run exactly"""

    def steps(self, epoch_steps: float | None = None) -> tuple[int, int]:
        """(total optimizer steps, warmup steps): ``train_steps``, or when it is null ``epoch_steps`` (the
        steps of fine-tuning's epochs, ``epochs * examples / batch size``) rounded up; the warmup as
        ``warmup_steps`` says, at most the total."""
        if self.train_steps is not None:
            total = self.train_steps
        elif epoch_steps is not None:
            total = max(1, math.ceil(epoch_steps))
        else:
            raise ConfigError("schedule.train_steps: null needs epochs over a training set (fine-tuning)")
        warmup = self.warmup_steps if self.warmup_steps is not None else int(self.warmup_fraction * total)
        return total, min(warmup, total)


@dataclass
class RunSettings:
    output: str | None = None
    """the run directory: metrics.jsonl, checkpoints/ and the run's config go here"""
    max_steps: int | None = None
    """stop after this many optimizer steps (default: the schedule's)"""
    max_time_minutes: float | None = None
    """training time budget in minutes (summed over resumed runs; evaluation excluded): then checkpoint
    and stop"""
    precision: str = "auto"
    """auto | fp32 | bf16 | fp16 (autocast; fp16 with dynamic loss scaling; parameters stay fp32). auto:
    bf16 where the device runs it natively (CUDA with bf16, a CPU with AVX-512 BF16 or AMX), else fp32
    (bf16 emulated on a CPU is ~19x slower)"""
    device: str | None = None
    """cpu | cuda | cuda:N (default: a GPU when there is one)"""
    fp32_linear: str = "auto"
    """auto | torch | onednn: the library of the fp32 linear layers on a CPU; auto: measured at start-up,
    oneDNN only where clearly faster. Fix it for runs that must match bit for bit"""
    cpu_attention: str = "auto"
    """auto | gemms | fp32 | sdpa: how attention runs under bf16 / fp16 autocast on a CPU. gemms: two bf16
    batched GEMMs around an fp32 softmax; fp32: torch's SDPA on fp32 copies; sdpa: torch's SDPA in bf16. auto:
    gemms on a CPU without AMX (where torch's bf16 CPU flash attention is slow), sdpa elsewhere"""
    compile: bool = False
    """torch.compile the model"""
    activation_checkpointing: bool = False
    """recompute each transformer layer in the backward pass (less memory, about a third more compute)"""
    seed: int = 12345
    """random seed: initialization, dropout (and fine-tuning's data order; pretraining's is DATA_DIR's)"""
    threads: int | None = None
    """torch CPU threads (default: torch's choice)"""
    adaptive_threads_minutes: float | None = None
    """on a CPU, re-decide the thread count every N minutes of the run: time a few steps at 1, half and all
    the cores, keep the fastest, log a change; null: keep the count of the start"""
    log_every: int | None = 10
    """steps between metrics lines; null (fine-tuning): about ten per epoch, at most every 50"""
    eval_every: int | None = 1000
    """steps between evaluations on held-out data (and one at the end); null: pretraining only at the
    end, fine-tuning once per epoch"""
    eval_batch_size: int = 64
    """batch size of evaluation (original eval_batch_size: 64)"""
    save_every: int | None = 5000
    """steps between checkpoints (original save_checkpoints_steps: 5000); null: only at the end"""
    save_every_minutes: float | None = None
    """also a checkpoint after this many minutes of training since the last one; 0 or null: by steps only"""
    keep_last: int = 5
    """step checkpoints kept (original keep_checkpoint_max: 5)"""
    max_bad_steps: int = 10
    """consecutive non-finite steps before the run stops"""
    spike_rollback: bool = False
    """on a loss spike (a logged loss above 1.5x the median of the last 10) or a non-finite step, go back to
    the last checkpoint written before it and skip the batches read since (PaLM, Chowdhery et al. 2022, Sec.
    5.1); needs a save cadence (save_every or save_every_minutes)"""
    spike_skip_batches: int = 0
    """with spike_rollback: global batches skipped beyond those read up to the spike"""
    spike_max_rollbacks: int = 3
    """with spike_rollback: rollbacks in a run; the next spike stops it (TrainingDiverged)"""
    progress: bool = True
    """a progress bar (--progress / --no-progress)"""
    micro_batch_size: int | None = None
    """examples (sequences) per forward pass per process; the batch of an optimizer step is accumulated
    over batch / processes / micro_batch_size passes, the same step in less memory (default: all of it)"""
    early_stopping_patience: int | None = None
    """stop after this many dev evaluations in a row without an improvement of the best-checkpoint metric
    (fine-tuning: the task score) by more than early_stopping_threshold; null: never"""
    early_stopping_threshold: float = 0.0
    """the least change of the metric that counts as an improvement (Keras' min_delta)"""
    report_to: str = "none"
    """none | tensorboard | mlflow | wandb, or several joined by commas (tensorboard,mlflow): trackers fed
    the logged metrics besides RUN_DIR/metrics.jsonl. mlflow: a local store at RUN_DIR/mlruns unless
    MLFLOW_TRACKING_URI is set; wandb: offline unless WANDB_MODE is set, files under RUN_DIR/wandb. A tracker
    whose package is missing is an error"""

    def cross_field_problems(self, section: str) -> list[tuple[str, str]]:
        """``(section.field, reason)`` for the rules across this section's fields."""
        out = []
        if self.spike_rollback and not (self.save_every or self.save_every_minutes):
            out.append((f"{section}.spike_rollback", "needs checkpoints to go back to: set run.save_every "
                        "(steps) or run.save_every_minutes"))  # fmt: skip
        bad = report_to_problems(self.report_to)
        missing = [] if bad else [install_hint(n) for n in missing_trackers(report_trackers(self.report_to))]
        return out + [(f"{section}.report_to", p) for p in bad + missing]


def flag_names(sections: Mapping[str, type], exclude: Sequence[str] = ()) -> dict[str, str]:
    """``{field name: "section.field"}`` of every field of ``sections``: a flag is its field's name
    (``--learning-rate`` sets ``optim.learning_rate``), so a field name is used in one section only.

    Raises:
        ValueError: a field name in two sections (it could not be its flag in both).
    """
    out: dict[str, str] = {}
    for section, cls in sections.items():
        for f in fields(cls):
            if f.name in exclude:
                continue
            if f.name in out:
                raise ValueError(
                    f"field {f.name!r} is in {out[f.name].split('.')[0]} and {section}: one flag each"
                )
            out[f.name] = f"{section}.{f.name}"
    return out


# The flags of the settings, the same in `albert pretrain` and `albert finetune` (docs/cli.md): one per field
# of the shared sections, spelled as the field (dashes for underscores).
SHARED_FLAGS: dict[str, str] = flag_names(
    {"optim": OptimSettings, "schedule": ScheduleSettings, "run": RunSettings}
)


# Fields renamed to their flag's name: the old names still read (config files, --set, the run_config.json of
# runs written before) with one warning.
RENAMED_FIELDS: dict[str, str] = {
    "optim.lr": "optim.learning_rate",
    "optim.name": "optim.optimizer",
    "optim.eps": "optim.adam_epsilon",
    "schedule.total_steps": "schedule.train_steps",
    "run.run_dir": "run.output",
    "run.progress_bar": "run.progress",
}

# The settings a fine-tuning record (report.json, task.json: what a resume compares) holds only where they
# differ from these values, so that the record of a run that does not use them stays as it is.
RECORDED_WHEN_SET: dict[str, Any] = {
    "head_lr_scale": 1.0,
    "layer_lr_decay": 1.0,
    "lr_scheduler_type": "polynomial",
    "min_lr_rate": 0.0,
    "micro_batch_size": None,
    "early_stopping_patience": None,
    "early_stopping_threshold": 0.0,
}


def report_trackers(report_to: str) -> list[str]:
    """The trackers a ``run.report_to`` value names (``"none"`` and empty items dropped), in its order."""
    names = [n.strip() for n in str(report_to).split(",")]
    return list(dict.fromkeys(n for n in names if n and n != "none"))


def report_to_problems(report_to: str) -> list[str]:
    """Why a ``run.report_to`` value is bad (one reason per unknown name), or nothing."""
    unknown = [n for n in report_trackers(report_to) if n not in REPORT_TO]
    return [f"{n!r} is not one of {', '.join(REPORT_TO)}" for n in unknown]


def accumulation(
    batch: int, micro: int | None, world_size: int, batch_field: str, micro_field: str
) -> tuple[int, int]:
    """(micro batch per process, micro-batches per optimizer step) making up a global ``batch``.

    Raises:
        ConfigError: ``batch`` not divisible by the processes, or its share per process not a multiple of
            ``micro`` (naming ``batch_field`` / ``micro_field``, the settings the user gave).
    """
    if batch % world_size:
        raise ConfigError(f"{batch_field}={batch} is not divisible by the {world_size} ranks")
    per_rank = batch // world_size
    micro = micro or per_rank
    if per_rank % micro:
        raise ConfigError(
            f"{batch_field}={batch} over {world_size} rank(s) is {per_rank} per rank, "
            f"not a multiple of {micro_field}={micro}"
        )
    return micro, per_rank // micro


# ---------------------------------------------------------------------------------------------- the rules
Rule = tuple[str, Callable[[Any], bool], str]
"""(field, test, what the test asks); a null value passes (where the type allows null, it has a meaning)."""


def at_least(n: float) -> Callable[[Any], bool]:
    return lambda v: v >= n


def above(n: float) -> Callable[[Any], bool]:
    return lambda v: v > n


def one_of(choices: tuple[str, ...]) -> tuple[Callable[[Any], bool], str]:
    return (lambda v: v in choices), f"one of {', '.join(choices)}"


def _optimizer_names() -> tuple[str, ...]:
    from albert_lm.optim import OPTIMIZERS  # torch: only when a config is checked

    return OPTIMIZERS


def _is_optimizer(v: Any) -> bool:
    return v in _optimizer_names()


def rules_of(cls: type) -> list[Rule]:
    """The rules of a settings class and of the settings classes it extends: `RULES` for the shared ones,
    a ``RULES`` class attribute for a workflow's own section."""
    out: list[Rule] = []
    for klass in reversed(cls.__mro__):
        out.extend(RULES.get(klass, klass.__dict__.get("RULES", ())))
    return out


RULES: dict[type, list[Rule]] = {
    OptimSettings: [
        ("optimizer", _is_optimizer, "one of lamb, adamw, adamw_original"),
        ("learning_rate", at_least(0), "at least 0"),
        ("weight_decay", at_least(0), "at least 0"),
        ("beta1", lambda v: 0 <= v < 1, "in [0, 1)"),
        ("beta2", lambda v: 0 <= v < 1, "in [0, 1)"),
        ("adam_epsilon", above(0), "greater than 0"),
        ("max_grad_norm", above(0), "greater than 0 (or null: no clipping)"),
        ("head_lr_scale", above(0), "greater than 0"),
        ("layer_lr_decay", lambda v: 0 < v <= 1, "in (0, 1]"),
    ],
    ScheduleSettings: [
        ("train_steps", at_least(1), "at least 1 (or null: use epochs)"),
        ("warmup_steps", at_least(0), "at least 0"),
        ("warmup_fraction", lambda v: 0 <= v <= 1, "between 0 and 1"),
        ("power", above(0), "greater than 0"),
        ("start_warmup_step", at_least(0), "at least 0"),
        ("by", *one_of(SCHEDULE_BY)),
        ("lr_scheduler_type", *one_of(LR_SCHEDULER_TYPES)),
        ("min_lr_rate", lambda v: 0 <= v < 1, "in [0, 1)"),
    ],
    RunSettings: [
        ("max_steps", at_least(0), "at least 0"),
        ("max_time_minutes", above(0), "greater than 0 (or null: no budget)"),
        ("precision", *one_of(PRECISIONS)),
        ("fp32_linear", *one_of(FP32_LINEARS)),
        ("cpu_attention", *one_of(CPU_ATTENTIONS)),
        ("seed", at_least(0), "at least 0"),
        ("threads", at_least(1), "at least 1"),
        ("adaptive_threads_minutes", above(0), "greater than 0 (or null: never)"),
        ("log_every", at_least(1), "at least 1"),
        ("eval_every", at_least(1), "at least 1 (or null)"),
        ("eval_batch_size", at_least(1), "at least 1"),
        ("save_every", at_least(1), "at least 1 (or null: only at the end)"),
        ("save_every_minutes", at_least(0), "at least 0 (0 or null: by steps only)"),
        ("keep_last", at_least(1), "at least 1"),
        ("max_bad_steps", at_least(0), "at least 0"),
        ("spike_skip_batches", at_least(0), "at least 0"),
        ("spike_max_rollbacks", at_least(0), "at least 0"),
        ("micro_batch_size", at_least(1), "at least 1 (or null: the whole batch)"),
        ("early_stopping_patience", at_least(1), "at least 1 (or null: never)"),
        ("early_stopping_threshold", at_least(0), "at least 0"),
    ],
}


def section_problems(obj: Any, section: str, rules: list[Rule] | None = None) -> list[tuple[str, str]]:
    """``(section.field, reason)`` for each field of the dataclass ``obj`` whose value breaks its type
    (`albert_lm._fields.coerce`: integers, finite numbers) or its rule; one problem per field."""
    problems: list[tuple[str, str]] = []
    bad: set[str] = set()
    for name, tp in field_types(type(obj)).items():
        where = f"{section}.{name}"
        try:
            coerce(getattr(obj, name), tp, where)
        except FieldError as e:
            problems.append((where, str(e).removeprefix(f"{where}: ")))
            bad.add(name)
    for name, ok, need in rules if rules is not None else rules_of(type(obj)):
        value = getattr(obj, name)
        if name not in bad and value is not None and not ok(value):
            problems.append((f"{section}.{name}", f"must be {need}, got {value!r}"))
            bad.add(name)
    cross = getattr(obj, "cross_field_problems", None)  # rules across fields (e.g. RunSettings')
    if cross is not None:
        problems += [p for p in cross(section) if p[0].removeprefix(f"{section}.") not in bad]
    return problems


def check_sections(cfg: Any, sections: Mapping[str, type], extra: Sequence[tuple[str, str]] = ()) -> None:
    """Check every section of ``cfg`` (`section_problems`) plus the cross-field ``extra`` problems.

    Raises:
        ConfigError: listing each bad ``section.field`` with the reason (``problems``).
    """
    problems = [p for name in sections for p in section_problems(getattr(cfg, name), name)]
    seen = {name for name, _ in problems}
    problems += [p for p in extra if p[0] not in seen]
    if problems:
        raise ConfigError(problems)


# ---------------------------------------------------------------------------------------------- files, flags
def apply_dict(cfg: Any, raw: Any, source: str, sections: Mapping[str, type]) -> Any:
    """A copy of the sectioned ``cfg`` with the sections / fields of ``raw`` set (unknown names are errors).

    Raises:
        ConfigError: naming ``source`` and the field (``x.json: optim.learning_rate: expected a number``).
    """
    if not isinstance(raw, dict):
        raise ConfigError(f"{source}: expected a mapping of sections {list(sections)}")
    out = copy.deepcopy(cfg)
    seen_renamed: set[str] = set()
    for section, values in raw.items():
        if section not in sections:
            raise ConfigError(f"{source}: unknown section {section!r} (sections: {', '.join(sections)})")
        if not isinstance(values, dict):
            raise ConfigError(f"{source}: section {section!r} must be a mapping")
        obj = getattr(out, section)
        types = field_types(type(obj))
        for key, value in values.items():
            if (
                f"{section}.{key}" in RENAMED_FIELDS
                and RENAMED_FIELDS[f"{section}.{key}"] not in seen_renamed
            ):
                new = RENAMED_FIELDS[f"{section}.{key}"]
                seen_renamed.add(new)
                logger.warning("%s: %s.%s is now %s (the old name still works)", source, section, key, new)
            key = RENAMED_FIELDS.get(f"{section}.{key}", f"{section}.{key}").partition(".")[2]
            if key not in types:
                raise ConfigError(
                    f"{source}: unknown field {section}.{key} (fields of {section}: {', '.join(types)})"
                )
            try:
                setattr(obj, key, coerce(value, types[key], f"{source}: {section}.{key}"))
            except FieldError as e:
                raise ConfigError(str(e)) from None
    return out


def sections_dict(cfg: Any, sections: Mapping[str, type]) -> dict[str, dict[str, Any]]:
    """``{section: {field: value}}`` of a sectioned config (what `to_yaml` prints and `apply_dict` reads)."""
    return {s: {f.name: copy.deepcopy(getattr(getattr(cfg, s), f.name)) for f in fields(getattr(cfg, s))}
            for s in sections}  # fmt: skip


def parse_yaml(text: str, source: str) -> dict[str, Any]:
    """A YAML config (`albert_lm._fields.load_yaml`): a mapping of sections, each a mapping of fields (an
    empty section, ``optim:`` alone, is an empty mapping). Nested blocks are values (``overrides:`` with
    indented keys under it).

    Raises:
        ConfigError: ``source:line: ...`` for YAML that does not parse; ``source: ...`` for a document
            that is not a mapping of sections.
    """
    try:
        raw = load_yaml(text, source)
    except FieldError as e:
        raise ConfigError(str(e)) from None
    if raw is None:
        return {}
    if not isinstance(raw, dict):
        raise ConfigError(f"{source}: expected a mapping of sections (section: then indented key: value)")
    for section, values in raw.items():
        if values is None:
            raw[section] = {}
        elif not isinstance(values, dict):
            raise ConfigError(
                f"{source}: section {section!r} must be a mapping of fields (got {values!r}); top-level "
                "lines are sections ('section:' alone, its fields indented under it)"
            )
    return raw


def load_config_file(path: str | Path) -> dict[str, Any]:
    """A config file as a nested dict: JSON (``.json``) or YAML (anything else, `parse_yaml`)."""
    path = Path(path)
    try:
        text = read_utf8(path)  # NotTextError names the line, where the codec's error names nothing
    except FileNotFoundError:
        raise ConfigError(f"config file not found: {path}") from None
    except NotTextError as e:
        raise ConfigError(str(e)) from None
    if path.suffix == ".json":
        try:
            raw = json.loads(text)
        except json.JSONDecodeError as e:
            raise ConfigError(f"{path}:{e.lineno}: not valid JSON ({e.msg})") from None
        if not isinstance(raw, dict):
            raise ConfigError(f"{path}: expected a JSON object of sections")
        return raw
    return parse_yaml(text, str(path))


def parse_assignments(items: list[str], source: str = "--set") -> dict[str, Any]:
    """``["optim.learning_rate=1e-3", "run.precision=bf16"]`` -> ``{"optim": {"learning_rate": 0.001}, "run": {...}}``."""
    out: dict[str, dict[str, Any]] = {}
    for item in items:
        key, eq, value = item.partition("=")
        if not eq or "." not in key:
            raise ConfigError(f"{source} {item!r}: expected SECTION.FIELD=VALUE")
        section, _, name = key.strip().partition(".")
        out.setdefault(section, {})[name] = parse_value(value)
    return out


def to_yaml(raw: Mapping[str, Mapping[str, Any]], header: str = "") -> str:
    """Sections as the YAML that `parse_yaml` reads back equal (``header``: ``#`` comment lines)."""
    lines = "".join(f"# {line}\n" for line in header.splitlines())
    return lines + dump_yaml({section: dict(values) for section, values in raw.items()})
