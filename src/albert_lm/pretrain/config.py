"""The configuration of a pretraining run, `PretrainConfig`, its recipes, and how files and flags resolve into
it (``albert pretrain``).

A `PretrainConfig` has five sections: ``model`` (preset + overrides), ``data``, ``optim``, ``schedule`` and
``run``; the last three are the settings fine-tuning shares (`albert_lm.train.settings`), extended here by
what only pretraining has (``run.global_batch_size`` ...). It resolves in this
order, later wins:

1. a recipe (`RECIPES`: the paper's albert-base/large/xlarge/xxlarge settings, ``demo``, ``smoke``);
2. a config file (``--config run.json`` or a YAML ``run.yaml``, see
   `albert_lm.train.settings.parse_yaml`) holding any subset of the sections;
3. flags: the shared flat ones (``--learning-rate``, ``--seed``: `albert_lm.train.settings.SHARED_FLAGS`),
   ``--optim.learning_rate 1e-3`` (one per field, generated from the dataclasses by `albert_lm.cli.options`, with the
   string under each field as its help), then ``--set optim.learning_rate=1e-3``.

Values are checked against the field types by `albert_lm._fields.coerce` and the rules of
`albert_lm.train.settings`; a bad one is an `albert_lm.config.ConfigError` that names the file (or flag) and the
field. ``albert pretrain --print-config`` shows the result; the run writes it to ``RUN_DIR/run_config.json``
and a resumed run reads it from there.

The paper's setting (Lan et al. 2020, Sec. 4.1; google-research/albert run_pretraining.py defaults): batch
4096, LAMB, learning rate 0.00176, 125,000 steps, 3,125 warmup steps, linear decay (poly_power 1.0), max
sequence length 512, 20 predictions per sequence, checkpoints every 5000 steps keeping 5.
"""

from __future__ import annotations

import copy
import os
from dataclasses import dataclass, field
from typing import Any

from albert_lm.config import ConfigError
from albert_lm.train.config import TrainerConfig
from albert_lm.train.settings import (
    OptimSettings,
    RunSettings,
    ScheduleSettings,
    accumulation,
    check_sections,
    sections_dict,
)
from albert_lm.train.settings import apply_dict as apply_sections

__all__ = ["RECIPES", "SECTIONS", "ConfigError", "PretrainConfig", "apply_dict", "recipe"]

# ModelOptions.mlm_bias_init
MLM_BIAS_INITS = ("zeros", "unigram")


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
class PretrainRun(RunSettings):
    global_batch_size: int = 4096
    """sequences per optimizer step over all ranks (paper: 4096)"""
    eval_batches: int = 100
    """held-out batches per evaluation (original max_eval_steps: 100)"""


def _pretrain_run() -> PretrainRun:
    return PretrainRun(output="runs/pretrain")  # a value of the shared field, for a run given no --output


@dataclass
class PretrainConfig:
    model: ModelOptions = field(default_factory=ModelOptions)
    data: DataOptions = field(default_factory=DataOptions)
    optim: OptimSettings = field(default_factory=OptimSettings)
    schedule: ScheduleSettings = field(default_factory=ScheduleSettings)
    run: PretrainRun = field(default_factory=_pretrain_run)

    def to_dict(self) -> dict[str, Any]:
        return sections_dict(self, SECTIONS)

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
        """Every field (`albert_lm.train.settings.check_sections`: types, finite numbers, the rules of the
        shared sections), then what pretraining asks beyond them.

        Raises:
            ConfigError: listing each bad ``section.field`` with the reason.
        """
        check_sections(self, SECTIONS, self._problems())

    def _problems(self) -> list[tuple[str, str]]:
        """(section.field, reason) for the pretraining rules across fields."""
        from albert_lm.config import PRESETS

        r, s, m, d = self.run, self.schedule, self.model, self.data
        out: list[tuple[str, str]] = []

        def need(ok: Any, name: str, reason: str) -> None:
            if not ok:
                out.append((name, reason))

        need(bool(r.output), "run.output", "is required (the run directory, flag --output)")
        need(r.global_batch_size >= 1, "run.global_batch_size", "must be at least 1")
        need(
            r.micro_batch_size is None or r.micro_batch_size >= 1,
            "run.micro_batch_size",
            "must be at least 1",
        )
        need(r.eval_batches >= 1, "run.eval_batches", "must be at least 1")
        need(r.early_stopping_patience is None, "run.early_stopping_patience",
             "is fine-tuning's (its dev score); pretraining keeps no best checkpoint to stop on")  # fmt: skip
        need(r.log_every is not None, "run.log_every", "may not be null in pretraining (no epochs)")
        need(s.train_steps is not None, "schedule.train_steps", "may not be null in pretraining (no epochs)")
        # by=time lays the warmup over the time budget (warmup_fraction): warmup_steps is not used then, and a
        # step cap below the settings' default 3125 (`scripts/demo.py --steps 1`) is no error
        if s.by == "steps" and s.train_steps is not None and s.warmup_steps is not None:
            need(s.warmup_steps <= s.train_steps, "schedule.warmup_steps",
                 f"must be in [0, train_steps={s.train_steps}], got {s.warmup_steps}")  # fmt: skip
        need(s.by != "time" or (r.max_time_minutes or 0) > 0, "schedule.by",
             "time needs a time budget: run.max_time_minutes > 0")  # fmt: skip
        need(m.mlm_bias_init in MLM_BIAS_INITS, "model.mlm_bias_init",
             f"must be one of {', '.join(MLM_BIAS_INITS)}, got {m.mlm_bias_init!r}")  # fmt: skip
        need(m.mlm_bias_init == "zeros" or not m.init_from, "model.mlm_bias_init",
             "applies to a fresh model, not with model.init_from (--model)")  # fmt: skip
        need(isinstance(m.sop_loss_weight, float | int) and m.sop_loss_weight >= 0, "model.sop_loss_weight",
             f"must be at least 0, got {m.sop_loss_weight}")  # fmt: skip
        dynamic = d.masked_lm_prob is not None or d.max_predictions_per_seq is not None
        need(not dynamic or d.masking == "dynamic", "data.masked_lm_prob",
             "and data.max_predictions_per_seq need data.masking: dynamic (static masks were drawn by "
             "`albert prepare`)")  # fmt: skip
        need(d.masked_lm_prob is None or 0 < d.masked_lm_prob < 1, "data.masked_lm_prob",
             f"must be in (0, 1), got {d.masked_lm_prob}")  # fmt: skip
        need(d.max_predictions_per_seq is None or d.max_predictions_per_seq >= 1, "data.max_predictions_per_seq",
             f"must be at least 1, got {d.max_predictions_per_seq}")  # fmt: skip
        need(m.preset in PRESETS, "model.preset", f"{m.preset!r} unknown; known: {', '.join(PRESETS)}")
        return out

    def grad_accum_steps(self, world_size: int) -> tuple[int, int]:
        """(micro batch per rank, accumulation steps) making up ``run.global_batch_size``."""
        r = self.run
        return accumulation(r.global_batch_size, r.micro_batch_size, world_size, "run.global_batch_size",
                            "run.micro_batch_size")  # fmt: skip

    def trainer_config(self, grad_accum_steps: int, device: str, evaluate: bool) -> TrainerConfig:
        """The loop's options for this run (``evaluate``: a held-out set is given)."""
        r = self.run
        total = self.schedule.train_steps
        assert total is not None and r.log_every is not None  # validate() refuses null
        return TrainerConfig.from_settings(
            r,
            self.optim,
            max_steps=r.max_steps if r.max_steps is not None else total,
            grad_accum_steps=grad_accum_steps,
            device=device,
            eval_every=r.eval_every if evaluate else None,
            tracking_params={
                f"{s}.{k}": v for s, fields in self.to_dict().items() for k, v in fields.items()
            },
        )


# The fields naming files or directories, relative to the working directory of the run that was given them.
PATH_FIELDS = (
    ("model", "init_from"),
    ("data", "data_dir"),
    ("data", "eval_data_dir"),
    ("data", "tokenizer"),
    ("run", "output"),
)

SECTIONS: dict[str, type] = {
    "model": ModelOptions,
    "data": DataOptions,
    "optim": OptimSettings,
    "schedule": ScheduleSettings,
    "run": PretrainRun,
}


# ---------------------------------------------------------------------------------------------- recipes
def _paper(size: str, **model_overrides: Any) -> dict[str, Any]:
    # Paper Sec. 4.1 / run_pretraining.py: batch 4096, LAMB 0.00176, 125k steps, warmup 3125. The paper's
    # sequence length, 512, is the DATA_DIR's to fix (`albert prepare --max-seq-length 512`): a recipe that
    # pinned it would pad shards prepared at 128 to 512 without a word.
    return {
        "model": {"preset": f"albert-{size}-v2", "overrides": model_overrides},
        "optim": {"optimizer": "lamb", "learning_rate": 0.00176},
        "schedule": {"train_steps": 125_000, "warmup_steps": 3125},
        "run": {"global_batch_size": 4096, "save_every": 5000, "keep_last": 5},
    }


RECIPES: dict[str, dict[str, Any]] = {
    "albert-base": _paper("base"),
    "albert-large": _paper("large"),
    "albert-xlarge": _paper("xlarge"),
    "albert-xxlarge": _paper("xxlarge"),
    # About 10 minutes on 2 CPU cores: the small model of the pretraining reference run
    # (E 128, H 256, 4 shared layers, 4 heads, FFN 1024, seq 128). Not from the paper. AdamW, not LAMB: at
    # batch 32 LAMB's per-layer trust ratio moves the small-init weights too slowly for a few hundred steps
    # (measured here: held-out MLM stuck at the unigram baseline, 4.6-5.3%, after 250 steps with LAMB at lr
    # 0.002 and 0.02, vs 7.9% with AdamW 1e-3); AdamW 2e-3 stalled as well, 5e-4 learned slower than 1e-3.
    # Precision: the default, auto: bf16 autocast (fp32 master weights) where the CPU has avx512_bf16 / AMX,
    # about 2x the fp32 speed there; fp32 on CPUs without, where bf16 is ~19x slower (`albert_lm.runtime.precision`).
    # Schedule: over the 10 minutes of training time (by=time, warmup 6% = 36 s, about the 50 steps of the
    # earlier step recipe), so the lr reaches 0 at the budget whatever the machine's speed; train_steps only
    # caps the steps (about 1,000 fit in 10 minutes on 2 cores).
    # Budget knobs kept after the study of docs/transfer.md (same tokens, held-out masked-LM loss and the
    # polarity probe): the masked-LM output bias starts at the label frequencies (mlm_bias_init unigram: the
    # first ~150 steps are not spent learning them; it is what took demo-zh off the unigram plateau); batch
    # 16 (twice the updates for the tokens) with 30% of the tokens masked, redrawn each epoch (Wettig et al.
    # 2022), max 40 predictions: held-out masked-LM loss 6.274 vs 6.390 after the same 6.55M tokens.
    "demo": {
        "model": {"preset": "albert-small", "mlm_bias_init": "unigram"},
        "optim": {"optimizer": "adamw", "learning_rate": 0.001},
        "schedule": {"by": "time", "train_steps": 100_000},
        "data": {"masking": "dynamic", "masked_lm_prob": 0.3, "max_predictions_per_seq": 40},
        "run": {
            "global_batch_size": 16,
            "output": "runs/demo",
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
        "optim": {"optimizer": "lamb", "learning_rate": 0.01},
        "schedule": {"train_steps": 20, "warmup_steps": 2},
        "run": {
            "global_batch_size": 8,
            "output": "runs/smoke",
            "log_every": 1,
            "eval_every": 10,
            "eval_batches": 2,
            "eval_batch_size": 8,
            "save_every": 10,
            "keep_last": 2,
            "progress": False,
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
    run={"output": "runs/demo-zh", "global_batch_size": 32},
)


def recipe(name: str) -> PretrainConfig:
    if name not in RECIPES:
        raise ConfigError(f"unknown recipe {name!r}; known recipes: {', '.join(RECIPES)}")
    return apply_dict(PretrainConfig(), RECIPES[name], f"recipe {name}")


# What run_config.json records beside the settings (`albert_lm.pretrain.resume`): read as a config,
# the file gives its settings only.
RECORD_KEYS = ("identity", "changes")


def apply_dict(cfg: PretrainConfig, raw: dict[str, Any], source: str) -> PretrainConfig:
    """A copy of ``cfg`` with the sections / fields of ``raw`` set (`albert_lm.train.settings.apply_dict`)."""
    if isinstance(raw, dict):
        raw = {k: v for k, v in raw.items() if k not in RECORD_KEYS}
    out: PretrainConfig = apply_sections(cfg, raw, source, SECTIONS)
    return out
