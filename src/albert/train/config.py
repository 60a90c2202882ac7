"""The typed configurations of training: the loop's `TrainerConfig`, and a pretraining run's
`PretrainConfig` with its recipes and how files and flags resolve into it.

A `PretrainConfig` has five sections: ``model`` (preset + overrides), ``data``, ``optim``, ``schedule`` and
``run``. It resolves in this order, later wins:

1. a recipe (`RECIPES`: the paper's albert-base/large/xlarge/xxlarge settings, ``demo``, ``smoke``);
2. a config file (``--config run.json`` or a YAML-style ``run.yaml``, see `parse_yaml_subset`) holding any
   subset of the sections;
3. flags: ``--optim.lr 1e-3``, ``--run.global_batch_size 256`` (one per field, generated from the
   dataclasses below by `albert.cli.options`, with the string under each field as its help), or
   ``--set optim.lr=1e-3``.

Values are checked against the field types by `albert._fields.coerce`; a bad one is a `ConfigError` that
names the file (or flag) and the field.

``albert pretrain --print-config`` shows the result; the run writes it to ``RUN_DIR/run_config.json`` and a
resumed run reads it from there.

The paper's setting (Lan et al. 2020, Sec. 4.1; google-research/albert run_pretraining.py defaults): batch
4096, LAMB, learning rate 0.00176, 125,000 steps, 3,125 warmup steps, linear decay (poly_power 1.0), max
sequence length 512, 20 predictions per sequence, checkpoints every 5000 steps keeping 5.
"""

from __future__ import annotations

import copy
import dataclasses
import json
import math
import os
import re
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

from albert._fields import FieldError, coerce, field_types, parse_value
from albert._io import NotTextError, read_utf8

# ---------------------------------------------------------------------------------------------- the loop
# "auto": bf16 where the device runs it natively, else fp32 (albert.train.precision.resolve_precision)
PRECISIONS = ("auto", "fp32", "bf16", "fp16")
# "auto" and albert.model.fp32_linear.FP32_LINEAR_BACKENDS (not imported: this module stays free of torch)
FP32_LINEARS = ("auto", "torch", "onednn")
# ModelOptions.mlm_bias_init
MLM_BIAS_INITS = ("zeros", "unigram")
# ScheduleOptions.by: the learning rate as a function of optimizer steps or of training time
SCHEDULE_BY = ("steps", "time")


@dataclass
class TrainerConfig:
    """Options of the loop (the optimizer and schedule are built outside)."""

    max_steps: int
    """Optimizer steps to run (a resumed run counts the steps already done)."""
    grad_accum_steps: int = 1
    """Micro-batches per optimizer step on each rank."""
    max_grad_norm: float | None = 1.0
    """Global-norm gradient clipping (original optimization.py: clip_by_global_norm 1.0); None: no clipping."""
    precision: str = "fp32"
    """auto | fp32 | bf16 | fp16 (autocast; fp16 with dynamic loss scaling). Parameters stay fp32. auto: bf16
    where the device runs it natively (CUDA with bf16, a CPU with AVX-512 BF16 or AMX), else fp32."""
    device: str | None = None
    """cpu | cuda | cuda:N | None (GPU if available)."""
    fp32_linear: str = "auto"
    """auto | torch | onednn: the library of the fp32 linear layers on a CPU; auto: measured at start-up,
    oneDNN only where clearly faster. Fix it for runs that must match bit for bit."""
    compile: bool = False
    """torch.compile the model."""
    activation_checkpointing: bool = False
    """Recompute each transformer layer in the backward pass (less memory, ~30% more compute)."""
    log_every: int = 10
    """Write a metrics line every N steps."""
    eval_every: int | None = None
    """Run eval_fn every N steps (None: only at the end)."""
    eval_at_end: bool = True
    save_every: int | None = None
    """Write a checkpoint every N steps (None: only at the end)."""
    save_at_end: bool = True
    keep_last: int = 3
    """Step checkpoints kept (older ones are deleted; `best` is separate). Original keep_checkpoint_max: 5."""
    best_metric: str | None = None
    """Keep RUN_DIR/checkpoints/best for this eval metric (e.g. eval_accuracy)."""
    best_mode: str = "max"
    """max | min."""
    max_bad_steps: int = 10
    """Consecutive non-finite steps tolerated before stopping."""
    max_time_s: float | None = None
    """Wall-clock budget of training time (summed over resumed runs; evaluation excluded); then checkpoint
    and stop."""
    progress_bar: bool = True
    tensorboard: bool = True
    """Also log to RUN_DIR/tb when the tensorboard package is installed."""
    find_unused_parameters: bool = False
    """DDP option, for models with parameters that some batches do not use."""

    def __post_init__(self) -> None:
        def need(cond: bool, name: str, msg: str) -> None:
            if not cond:
                raise ValueError(f"TrainerConfig.{name}: {msg} (got {getattr(self, name)!r})")

        need(self.max_steps >= 0, "max_steps", "must be >= 0")
        need(self.grad_accum_steps >= 1, "grad_accum_steps", "must be >= 1")
        need(self.precision in PRECISIONS, "precision", f"must be one of {PRECISIONS}")
        need(self.fp32_linear in FP32_LINEARS, "fp32_linear", f"must be one of {FP32_LINEARS}")
        need(self.log_every >= 1, "log_every", "must be >= 1")
        need(self.eval_every is None or self.eval_every >= 1, "eval_every", "must be >= 1 or None")
        need(self.save_every is None or self.save_every >= 1, "save_every", "must be >= 1 or None")
        need(self.keep_last >= 1, "keep_last", "must be >= 1")
        need(self.best_mode in ("max", "min"), "best_mode", "must be 'max' or 'min'")
        need(self.max_bad_steps >= 0, "max_bad_steps", "must be >= 0")
        # finite too: NaN fails every comparison and inf passes "> 0" (None says "no clipping" / "no budget")
        for name in ("max_grad_norm", "max_time_s"):
            value = getattr(self, name)
            need(value is None or math.isfinite(value) and value > 0, name, "must be finite and > 0, or None")


# ---------------------------------------------------------------------------------------------- pretraining
@dataclass
class ModelOptions:
    preset: str = "albert-base-v2"
    """the model's size: a named configuration such as albert-base-v2 or albert-tiny (`albert params
    --preset NAME` counts its parameters; an unknown name lists them all)"""
    overrides: dict[str, Any] = field(default_factory=dict)
    """AlbertConfig fields to change, e.g. {"hidden_dropout_prob": 0.1} (with init_from: dropout and
    initializer_range only)"""
    init_from: str | None = None
    """continue pretraining an ALBERT or BERT model directory (flag --model): its architecture, not preset;
    DATA_DIR must be prepared with its tokenizer; heads it lacks start fresh"""
    mlm_bias_init: str = "zeros"
    """zeros | unigram: the masked-LM output bias at the start (original: zeros); unigram: the log frequency
    of each token as a masked-LM label in DATA_DIR, so that the model predicts the unigram distribution
    from step 0 instead of bending its encoder to learn it (a fresh model only; not with --model)"""
    sop_loss_weight: float = 1.0
    """weight of the sentence-order loss in the total loss (original run_pretraining.py: 1.0, loss = mlm + sop);
    0: masked-LM-only pretraining (google-research/albert#202; the SOP head is still built and its accuracy
    logged, but it is not trained)"""


@dataclass
class DataOptions:
    data_dir: str | None = None
    """DATA_DIR made by `albert prepare` (training data)"""
    eval_data_dir: str | None = None
    """held-out DATA_DIR for periodic MLM/SOP evaluation"""
    tokenizer: str | None = None
    """tokenizer dir/file: checked against DATA_DIR and saved with checkpoints"""
    masking: str | None = None
    """static | dynamic (default: what DATA_DIR was prepared with)"""
    max_seq_length: int | None = None
    """the sequence length (default, null: DATA_DIR's); another value is an error, not padding: the
    instances were built for DATA_DIR's length, so to train longer, prepare DATA_DIR at that length"""
    masked_lm_prob: float | None = None
    """dynamic masking: the share of tokens masked (default: DATA_DIR's, the original's 0.15; Wettig et al.
    2022 found 0.3-0.4 better for short budgets)"""
    max_predictions_per_seq: int | None = None
    """dynamic masking: the cap on masked positions per sequence (default: DATA_DIR's; raise it with
    masked_lm_prob, e.g. 40 for 0.3 at length 128)"""
    num_workers: int = 0
    """DataLoader worker processes"""


@dataclass
class OptimOptions:
    name: str = "lamb"
    """lamb | adamw | adamw_original (original run_pretraining.py: lamb)"""
    lr: float = 0.00176
    """peak learning rate (paper Sec. 4.1: 0.00176 for batch 4096)"""
    weight_decay: float = 0.01
    """decoupled weight decay (original optimization.py: 0.01)"""
    beta1: float = 0.9
    """original: 0.9"""
    beta2: float = 0.999
    """original: 0.999"""
    eps: float = 1e-6
    """original: 1e-6"""
    max_grad_norm: float | None = 1.0
    """global-norm clipping (original: 1.0); null: none"""
    head_lr_scale: float = 1.0
    """multiplier of the lr for the pretraining heads and the pooler under the SOP head (mlm.*, sop.*,
    albert.pooler.*; the tied word embeddings are the encoder's): >1 lets parts that start from random or
    were never trained (--model from an encoder without heads) catch up with an encoder that already reads,
    instead of learning at its small continued-pretraining lr (the original has one lr: 1.0)"""


@dataclass
class ScheduleOptions:
    total_steps: int = 125_000
    """steps of the schedule: lr reaches 0 here (paper: 125,000)"""
    warmup_steps: int = 3125
    """linear warmup steps (original run_pretraining.py: 3125)"""
    power: float = 1.0
    """polynomial decay power (original poly_power: 1.0 = linear)"""
    start_warmup_step: int = 0
    """original start_warmup_step"""
    by: str = "steps"
    """steps | time: lay warmup and decay over optimizer steps (total_steps, warmup_steps: the paper's) or
    over training time (run.max_time_minutes, warmup_fraction; academic-budget BERT, Izsak et al. 2021), so
    that a run stopped by its time budget ends at lr ~0. time: total_steps only caps the steps, and the lr,
    hence the losses, depend on the machine's speed, so reruns are not bit-identical (a resumed run
    continues from its saved training time); steps (the default) reproduces a run exactly"""
    warmup_fraction: float = 0.06
    """by=time: the warmup's share of the time budget (Izsak et al. 2021: warmup_proportion 0.06)"""


@dataclass
class RunOptions:
    run_dir: str = "runs/pretrain"
    """metrics.jsonl, checkpoints/, run_config.json go here"""
    global_batch_size: int = 4096
    """sequences per optimizer step over all ranks (paper: 4096)"""
    micro_batch_size: int | None = None
    """sequences per forward pass per rank (default: all of it)"""
    max_steps: int | None = None
    """stop after this many steps (default: schedule.total_steps)"""
    max_time_minutes: float | None = None
    """stop (with a checkpoint) after this much training time"""
    precision: str = "auto"
    """auto | fp32 | bf16 | fp16; auto: bf16 where the device runs it natively (CUDA with bf16, a CPU with
    AVX-512 BF16 or AMX), else fp32 (bf16 emulated on a CPU is ~19x slower)"""
    device: str | None = None
    """cpu | cuda | cuda:N (default: a GPU when there is one)"""
    fp32_linear: str = "auto"
    """auto | torch | onednn: the library of the fp32 linear layers on a CPU; auto: measured at start-up,
    oneDNN only where clearly faster. Fix it for runs that must match bit for bit"""
    compile: bool = False
    """torch.compile the model"""
    activation_checkpointing: bool = False
    """recompute layers in the backward pass (saves memory)"""
    seed: int = 12345
    """seed of the initialization and dropout (the data order has DATA_DIR's seed)"""
    threads: int | None = None
    """torch CPU threads (default: torch's choice)"""
    log_every: int = 10
    """steps between metrics lines"""
    eval_every: int | None = 1000
    """steps between held-out evaluations (needs data.eval_data_dir)"""
    eval_batches: int = 100
    """held-out batches per evaluation (original max_eval_steps: 100)"""
    eval_batch_size: int = 64
    """held-out batch size (original eval_batch_size: 64)"""
    save_every: int | None = 5000
    """steps between checkpoints (original save_checkpoints_steps: 5000)"""
    keep_last: int = 5
    """checkpoints kept (original keep_checkpoint_max: 5)"""
    max_bad_steps: int = 10
    """consecutive non-finite steps before the run stops"""
    progress_bar: bool = True
    """tqdm progress bar"""


@dataclass
class PretrainConfig:
    model: ModelOptions = field(default_factory=ModelOptions)
    data: DataOptions = field(default_factory=DataOptions)
    optim: OptimOptions = field(default_factory=OptimOptions)
    schedule: ScheduleOptions = field(default_factory=ScheduleOptions)
    run: RunOptions = field(default_factory=RunOptions)

    def to_dict(self) -> dict[str, Any]:
        return dataclasses.asdict(self)

    def with_absolute_paths(self) -> PretrainConfig:
        """A copy whose `PATH_FIELDS` are absolute: run_config.json stores them so, and a resumed run finds
        its data and tokenizer from any working directory."""
        out = copy.deepcopy(self)
        for section, name in PATH_FIELDS:
            value = getattr(getattr(out, section), name)
            if value:
                setattr(getattr(out, section), name, os.path.abspath(value))
        return out

    @classmethod
    def from_dict(cls, raw: dict[str, Any], source: str = "<dict>") -> PretrainConfig:
        return apply_dict(cls(), raw, source)

    def validate(self) -> None:
        """Cross-field checks; each message names the field."""
        # a config built in code skips coerce's finite check, and NaN / inf pass the range checks below
        for section, cls in SECTIONS.items():
            for name in field_types(cls):
                value = getattr(getattr(self, section), name)
                if isinstance(value, float) and not math.isfinite(value):
                    raise ConfigError(f"{section}.{name} must be a finite number (got {value})")
        r, s = self.run, self.schedule
        if r.global_batch_size < 1:
            raise ConfigError("run.global_batch_size must be >= 1")
        if r.micro_batch_size is not None and r.micro_batch_size < 1:
            raise ConfigError("run.micro_batch_size must be >= 1")
        if s.total_steps < 1:
            raise ConfigError("schedule.total_steps must be >= 1")
        if s.warmup_steps < 0 or s.warmup_steps > s.total_steps:
            raise ConfigError(f"schedule.warmup_steps must be in [0, total_steps={s.total_steps}]")
        if s.by not in SCHEDULE_BY:
            raise ConfigError(f"schedule.by must be one of {', '.join(SCHEDULE_BY)} (got {s.by!r})")
        if s.by == "time" and not (r.max_time_minutes and r.max_time_minutes > 0):
            raise ConfigError("schedule.by=time needs a time budget: run.max_time_minutes > 0")
        if not 0 <= s.warmup_fraction <= 1:
            raise ConfigError(f"schedule.warmup_fraction must be in [0, 1] (got {s.warmup_fraction})")
        if r.precision not in PRECISIONS:
            raise ConfigError(f"run.precision must be one of {', '.join(PRECISIONS)} (got {r.precision!r})")
        if r.fp32_linear not in FP32_LINEARS:
            raise ConfigError(
                f"run.fp32_linear must be one of {', '.join(FP32_LINEARS)} (got {r.fp32_linear!r})"
            )
        from albert.optim import OPTIMIZERS

        if self.optim.name not in OPTIMIZERS:
            raise ConfigError(f"optim.name must be one of {OPTIMIZERS} (got {self.optim.name!r})")
        if self.model.mlm_bias_init not in MLM_BIAS_INITS:
            raise ConfigError(
                f"model.mlm_bias_init must be one of {', '.join(MLM_BIAS_INITS)} (got {self.model.mlm_bias_init!r})"
            )
        if self.model.mlm_bias_init != "zeros" and self.model.init_from:
            raise ConfigError(
                "model.mlm_bias_init applies to a fresh model, not with model.init_from (--model)"
            )
        if not self.model.sop_loss_weight >= 0:
            raise ConfigError(f"model.sop_loss_weight must be >= 0 (got {self.model.sop_loss_weight})")
        d = self.data
        if (d.masked_lm_prob is not None or d.max_predictions_per_seq is not None) and d.masking != "dynamic":
            raise ConfigError("data.masked_lm_prob / data.max_predictions_per_seq need data.masking: dynamic "
                              "(static masks were drawn by `albert prepare`)")  # fmt: skip
        if d.masked_lm_prob is not None and not 0 < d.masked_lm_prob < 1:
            raise ConfigError(f"data.masked_lm_prob must be in (0, 1) (got {d.masked_lm_prob})")
        if d.max_predictions_per_seq is not None and d.max_predictions_per_seq < 1:
            raise ConfigError(f"data.max_predictions_per_seq must be >= 1 (got {d.max_predictions_per_seq})")
        if not self.optim.head_lr_scale > 0:
            raise ConfigError(f"optim.head_lr_scale must be > 0 (got {self.optim.head_lr_scale})")
        from albert.config import PRESETS

        if self.model.preset not in PRESETS:
            raise ConfigError(f"model.preset {self.model.preset!r} unknown; known: {', '.join(PRESETS)}")

    def grad_accum_steps(self, world_size: int) -> tuple[int, int]:
        """(micro batch per rank, accumulation steps) making up ``run.global_batch_size``."""
        g = self.run.global_batch_size
        if g % world_size:
            raise ConfigError(f"run.global_batch_size={g} is not divisible by the {world_size} ranks")
        per_rank = g // world_size
        micro = self.run.micro_batch_size or per_rank
        if per_rank % micro:
            raise ConfigError(
                f"run.global_batch_size={g} over {world_size} rank(s) is {per_rank} per rank, "
                f"not a multiple of run.micro_batch_size={micro}"
            )
        return micro, per_rank // micro

    def trainer_config(self, grad_accum_steps: int, device: str, evaluate: bool) -> TrainerConfig:
        """The loop's options for this run (``evaluate``: a held-out set is given)."""
        r = self.run
        return TrainerConfig(
            max_steps=r.max_steps if r.max_steps is not None else self.schedule.total_steps,
            grad_accum_steps=grad_accum_steps,
            max_grad_norm=self.optim.max_grad_norm,
            precision=r.precision,
            fp32_linear=r.fp32_linear,
            device=device,
            compile=r.compile,
            activation_checkpointing=r.activation_checkpointing,
            log_every=r.log_every,
            eval_every=r.eval_every if evaluate else None,
            save_every=r.save_every,
            keep_last=r.keep_last,
            max_bad_steps=r.max_bad_steps,
            max_time_s=r.max_time_minutes * 60 if r.max_time_minutes else None,
            progress_bar=r.progress_bar,
        )


class ConfigError(ValueError):
    """A bad run configuration; the message names the field (and file)."""


# The fields naming files or directories, relative to the working directory of the run that was given them.
PATH_FIELDS = (
    ("model", "init_from"),
    ("data", "data_dir"),
    ("data", "eval_data_dir"),
    ("data", "tokenizer"),
    ("run", "run_dir"),
)

SECTIONS: dict[str, type] = {
    "model": ModelOptions,
    "data": DataOptions,
    "optim": OptimOptions,
    "schedule": ScheduleOptions,
    "run": RunOptions,
}


# ---------------------------------------------------------------------------------------------- recipes
def _paper(size: str, **model_overrides: Any) -> dict[str, Any]:
    # Paper Sec. 4.1 / run_pretraining.py: batch 4096, LAMB 0.00176, 125k steps, warmup 3125. The paper's
    # sequence length, 512, is the DATA_DIR's to fix (`albert prepare --max-seq-length 512`): a recipe that
    # pinned it padded shards prepared at 128 to 512 without a word (issue 23).
    return {
        "model": {"preset": f"albert-{size}-v2", "overrides": model_overrides},
        "optim": {"name": "lamb", "lr": 0.00176},
        "schedule": {"total_steps": 125_000, "warmup_steps": 3125},
        "run": {"global_batch_size": 4096, "save_every": 5000, "keep_last": 5},
    }


RECIPES: dict[str, dict[str, Any]] = {
    "albert-base": _paper("base"),
    "albert-large": _paper("large"),
    "albert-xlarge": _paper("xlarge"),
    "albert-xxlarge": _paper("xxlarge"),
    # About 10 minutes on 2 CPU cores: the small model of the pretraining issue's reference run
    # (E 128, H 256, 4 shared layers, 4 heads, FFN 1024, seq 128). Not from the paper. AdamW, not LAMB: at
    # batch 32 LAMB's per-layer trust ratio moves the small-init weights too slowly for a few hundred steps
    # (measured here: held-out MLM stuck at the unigram baseline, 4.6-5.3%, after 250 steps with LAMB at lr
    # 0.002 and 0.02, vs 7.9% with AdamW 1e-3); AdamW 2e-3 stalled as well, 5e-4 learned slower than 1e-3.
    # Precision: the default, auto: bf16 autocast (fp32 master weights) where the CPU has avx512_bf16 / AMX,
    # about 2x the fp32 speed there; fp32 on CPUs without, where bf16 is ~19x slower (issue 17).
    # Schedule: over the 10 minutes of training time (by=time, warmup 6% = 36 s, about the 50 steps of the
    # earlier step recipe), so the lr reaches 0 at the budget whatever the machine's speed; total_steps only
    # caps the steps (about 1,000 fit in 10 minutes on 2 cores).
    # Budget knobs kept after the study of docs/transfer.md (same tokens, held-out masked-LM loss and the
    # polarity probe): the masked-LM output bias starts at the label frequencies (mlm_bias_init unigram: the
    # first ~150 steps are not spent learning them; it is what took demo-zh off the unigram plateau); batch
    # 16 (twice the updates for the tokens) with 30% of the tokens masked, redrawn each epoch (Wettig et al.
    # 2022), max 40 predictions: held-out masked-LM loss 6.274 vs 6.390 after the same 6.55M tokens.
    "demo": {
        "model": {"preset": "albert-small", "mlm_bias_init": "unigram"},
        "optim": {"name": "adamw", "lr": 0.001},
        "schedule": {"by": "time", "total_steps": 100_000},
        "data": {"masking": "dynamic", "masked_lm_prob": 0.3, "max_predictions_per_seq": 40},
        "run": {
            "global_batch_size": 16,
            "run_dir": "runs/demo",
            "max_time_minutes": 10.0,
            "log_every": 10,
            "eval_every": 200,
            "eval_batches": 20,
            "eval_batch_size": 64,
            "save_every": 200,
            "keep_last": 2,
        },
    },
    # Seconds: the tiny preset, a few steps, every feature on (eval, checkpoints).
    "smoke": {
        "model": {"preset": "albert-tiny"},
        "optim": {"name": "lamb", "lr": 0.01},
        "schedule": {"total_steps": 20, "warmup_steps": 2},
        "run": {
            "global_batch_size": 8,
            "run_dir": "runs/smoke",
            "log_every": 1,
            "eval_every": 10,
            "eval_batches": 2,
            "eval_batch_size": 8,
            "save_every": 10,
            "keep_last": 2,
            "progress_bar": False,
        },
    },
}


def _derived(base: str, **sections: dict[str, Any]) -> dict[str, Any]:
    """A recipe that is ``base`` with some fields of some sections changed."""
    out = copy.deepcopy(RECIPES[base])
    for section, values in sections.items():
        out.setdefault(section, {}).update(values)
    return out


# The demo's model, optimizer and time budget for Chinese: the People's Daily corpus
# (data/zh_news/people_daily.jsonl, `albert prepare --language chinese --max-seq-length 128`: 12,328
# instances, 1.66M WordPiece tokens of the 21128-entry Chinese vocab) is seen several times in ten minutes,
# so masks are redrawn each epoch (dynamic; whole jieba words, as albert_zh / Google's Chinese models).
# As measured in docs/chinese.md: the demo's model and optimizer with the unigram output bias (without it
# the model sat on the unigram plateau with a collapsed encoder, 30 points below random init), batch 32 and
# the data's masking rate (whole jieba words at 0.30 are not measured).
RECIPES["demo-zh"] = _derived(
    "demo",
    data={"masking": "dynamic", "masked_lm_prob": None, "max_predictions_per_seq": None},
    run={"run_dir": "runs/demo-zh", "global_batch_size": 32},
)


def recipe(name: str) -> PretrainConfig:
    if name not in RECIPES:
        raise ConfigError(f"unknown recipe {name!r}; known recipes: {', '.join(RECIPES)}")
    return apply_dict(PretrainConfig(), RECIPES[name], f"recipe {name}")


# ---------------------------------------------------------------------------------------------- merging
def apply_dict(cfg: PretrainConfig, raw: dict[str, Any], source: str) -> PretrainConfig:
    """A copy of ``cfg`` with the sections / fields of ``raw`` set (unknown names are errors).

    Raises:
        ConfigError: naming ``source`` and the field (``x.json: optim.lr: expected a number``).
    """
    if not isinstance(raw, dict):
        raise ConfigError(f"{source}: expected a mapping of sections {list(SECTIONS)}")
    out = copy.deepcopy(cfg)
    for section, values in raw.items():
        if section not in SECTIONS:
            raise ConfigError(f"{source}: unknown section {section!r} (sections: {', '.join(SECTIONS)})")
        if not isinstance(values, dict):
            raise ConfigError(f"{source}: section {section!r} must be a mapping")
        obj = getattr(out, section)
        types = field_types(type(obj))
        for key, value in values.items():
            if key not in types:
                raise ConfigError(
                    f"{source}: unknown field {section}.{key} (fields of {section}: {', '.join(types)})"
                )
            try:
                setattr(obj, key, coerce(value, types[key], f"{source}: {section}.{key}"))
            except FieldError as e:
                raise ConfigError(str(e)) from None
    return out


def parse_yaml_subset(text: str, source: str) -> dict[str, Any]:
    """The YAML this config needs: ``section:`` lines, indented ``key: value`` lines, ``#`` comments.

    Values are scalars (see `parse_value`) or inline JSON (``overrides: {"hidden_size": 256}``).
    """
    out: dict[str, Any] = {}
    section: dict[str, Any] | None = None
    for lineno, line in enumerate(text.splitlines(), 1):
        stripped = re.sub(r"\s+#.*$", "", line).rstrip()
        if not stripped.strip() or stripped.lstrip().startswith("#"):
            continue
        indented = stripped[0] in " \t"
        if ":" not in stripped:
            raise ConfigError(f"{source}:{lineno}: expected 'key: value' (got {line.strip()!r})")
        key, _, value = stripped.strip().partition(":")
        key = key.strip()
        if not indented:
            if value.strip():
                raise ConfigError(f"{source}:{lineno}: top-level lines are sections ('{key}:' alone)")
            section = out.setdefault(key, {})
        else:
            if section is None:
                raise ConfigError(f"{source}:{lineno}: 'key: value' before any section")
            section[key] = parse_value(value)
    return out


def load_config_file(path: str | Path) -> dict[str, Any]:
    """A config file as a nested dict: JSON (``.json``) or the YAML subset (anything else)."""
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
    return parse_yaml_subset(text, str(path))


def parse_assignments(items: list[str], source: str = "--set") -> dict[str, Any]:
    """``["optim.lr=1e-3", "run.precision=bf16"]`` -> ``{"optim": {"lr": 0.001}, "run": {...}}``."""
    out: dict[str, dict[str, Any]] = {}
    for item in items:
        key, eq, value = item.partition("=")
        if not eq or "." not in key:
            raise ConfigError(f"{source} {item!r}: expected SECTION.FIELD=VALUE")
        section, _, name = key.strip().partition(".")
        out.setdefault(section, {})[name] = parse_value(value)
    return out


def to_yaml(cfg: PretrainConfig) -> str:
    """The resolved config in the YAML subset that `parse_yaml_subset` reads back."""
    lines = []
    for section, values in cfg.to_dict().items():
        lines.append(f"{section}:")
        for key, value in values.items():
            lines.append(f"  {key}: {json.dumps(value)}")
    return "\n".join(lines) + "\n"
