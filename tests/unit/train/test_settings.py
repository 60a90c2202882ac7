"""One settings vocabulary (issue 23 item 1): the optimizer, schedule and run settings are one set of
dataclasses for pretraining and fine-tuning, each default declared once; `--config`, `--set` and
`--print-config` work alike in both commands; one `ConfigError` names the bad field in both."""

from __future__ import annotations

import dataclasses
from pathlib import Path

import pytest

from albert_lm.cli.main import main
from albert_lm.config import ConfigError
from albert_lm.finetune import config as finetune_settings
from albert_lm.pretrain import config as pretraining_config
from albert_lm.train import settings
from albert_lm.train.settings import parse_yaml

# Every settings class of the two workflows: the shared sections and each workflow's own.
SETTINGS_CLASSES = [
    settings.OptimSettings,
    settings.ScheduleSettings,
    settings.RunSettings,
    *pretraining_config.SECTIONS.values(),
    *finetune_settings.SECTIONS.values(),
]
# Field names declared in two settings classes on purpose, with the reason.
DECLARED_TWICE = {
    # pretraining's is the DATA_DIR's (null: the length it was prepared at, another is an error, issue 23);
    # fine-tuning's truncates raw text (the original's 512; SQuAD's windows, 384)
    "max_seq_length": {"DataOptions", "FinetuneOptions"},
}


def _declared(cls: type) -> dict[str, dataclasses.Field]:
    """The fields ``cls`` itself declares (not those it inherits)."""
    own = cls.__dict__.get("__annotations__", {})
    return {f.name: f for f in dataclasses.fields(cls) if f.name in own}


def test_each_setting_is_declared_once() -> None:
    where: dict[str, set[str]] = {}
    for cls in dict.fromkeys(SETTINGS_CLASSES):
        for name in _declared(cls):
            where.setdefault(name, set()).add(cls.__name__)
    twice = {name: classes for name, classes in where.items() if len(classes) > 1}
    assert twice == DECLARED_TWICE
    # the walk is real: the shared fields are where the issue found them re-declared
    assert {
        "learning_rate",
        "adam_epsilon",
        "weight_decay",
        "precision",
        "fp32_linear",
        "seed",
        "device",
    } <= set(where)
    assert where["precision"] == {"RunSettings"} and where["adam_epsilon"] == {"OptimSettings"}
    # the two configurations are made of sections, the shared ones or extensions of them
    for sections in (pretraining_config.SECTIONS, finetune_settings.SECTIONS):
        for name, shared in (("optim", settings.OptimSettings), ("schedule", settings.ScheduleSettings),
                             ("run", settings.RunSettings)):  # fmt: skip
            assert issubclass(sections[name], shared)


def test_the_loop_takes_its_shared_fields_from_the_settings() -> None:
    """`TrainerConfig` (the loop built in code) repeats no default of the run / optim sections -- it had
    precision "fp32" where both commands have "auto", and its own keep_last and eval/save cadences -- and
    `TrainerConfig.from_settings`, which both workflows use, copies every shared field."""
    from albert_lm.train.config import TrainerConfig

    run, optim = settings.RunSettings(), settings.OptimSettings()
    shared = [
        f.name for f in dataclasses.fields(TrainerConfig) if hasattr(run, f.name) and f.name != "max_steps"
    ]
    assert {"precision", "fp32_linear", "device", "log_every", "eval_every", "save_every", "keep_last",
            "max_bad_steps", "spike_rollback", "progress"} <= set(shared)  # fmt: skip
    loop = TrainerConfig(max_steps=1)
    assert {name: getattr(loop, name) for name in shared} == {name: getattr(run, name) for name in shared}
    assert loop.max_grad_norm == optim.max_grad_norm and loop.precision == "auto"

    changed = {"precision": "fp32", "fp32_linear": "torch", "cpu_attention": "fp32", "device": "cpu",
               "compile": True, "log_every": 3,
               "eval_every": 7, "save_every": 4, "keep_last": 2, "max_bad_steps": 1, "spike_rollback": True,
               "spike_skip_batches": 5, "spike_max_rollbacks": 6, "progress": False,
               "activation_checkpointing": True, "early_stopping_patience": 2, "early_stopping_threshold": 0.5,
               "report_to": "tensorboard", "adaptive_threads_minutes": 5.0}  # fmt: skip
    assert set(changed) == set(shared)  # a new shared field must be added here
    for name, value in changed.items():
        assert getattr(run, name) != value, name  # each one really changes
    cfg = TrainerConfig.from_settings(
        settings.RunSettings(max_time_minutes=2.0, **changed),
        settings.OptimSettings(max_grad_norm=0.5),
        max_steps=9,
        best_metric="eval_score",  # early stopping's metric
    )
    assert {name: getattr(cfg, name) for name in shared} == changed
    assert (cfg.max_steps, cfg.max_grad_norm, cfg.max_time_s) == (9, 0.5, 120.0)
    with pytest.raises(ConfigError, match="TrainerConfig.precision"):
        TrainerConfig(max_steps=1, precision="fp64")


def test_fine_tuning_overrides_values_and_declares_no_shared_field() -> None:
    cfg = finetune_settings.FinetuneConfig()
    assert {f.name for f in dataclasses.fields(cfg)} == set(finetune_settings.SECTIONS)  # sections only
    assert type(cfg.optim) is settings.OptimSettings and type(cfg.run) is settings.RunSettings
    # the values fine-tuning changes are the preset's, over the shared fields' one default
    for section, values in finetune_settings.FINETUNE_DEFAULTS.items():
        for name, value in values.items():
            assert getattr(getattr(cfg, section), name) == value
            assert getattr(finetune_settings.SECTIONS[section](), name) != value, (section, name)
    # what it does not change is the shared default: eps, weight decay, precision, fp32_linear, ...
    assert (cfg.optim.adam_epsilon, cfg.optim.weight_decay, cfg.run.precision) == (1e-6, 0.01, "auto")
    pre = pretraining_config.PretrainConfig()
    assert (pre.optim.adam_epsilon, pre.optim.weight_decay, pre.run.precision) == (1e-6, 0.01, "auto")
    # the flat names (flags, task presets, report.json) are names of section fields
    for flat, target in finetune_settings.FLAT_NAMES.items():
        section, _, name = target.partition(".")
        assert name in {f.name for f in dataclasses.fields(finetune_settings.SECTIONS[section])}, flat


def _printed(capsys: pytest.CaptureFixture[str], argv: list[str]) -> str:
    assert main(argv) == 0
    return capsys.readouterr().out


def test_print_config_is_one_format_that_config_reads_back(tmp_path: Path, capsys) -> None:
    pretrain = ["pretrain", "--recipe", "smoke", "--data-dir", "D", "--output", str(tmp_path / "p"),
                "--learning-rate", "0.5", "--set", "run.seed=3"]  # fmt: skip
    finetune = ["finetune", "glue", "--task", "rte", "--data-dir", "G", "--model", "M",
                "--output", str(tmp_path / "f"), "--learning-rate", "0.5", "--set", "run.seed=3"]  # fmt: skip
    for argv, base in ((pretrain, ["pretrain"]), (finetune, finetune[:10])):
        text = _printed(capsys, [*argv, "--print-config"])
        raw = parse_yaml(text, "stdout")
        assert (raw["optim"]["learning_rate"], raw["run"]["seed"]) == (0.5, 3), argv[0]
        (tmp_path / f"{argv[0]}.yaml").write_text(text, encoding="utf-8")
        again = _printed(capsys, [*base, "--config", str(tmp_path / f"{argv[0]}.yaml"), "--print-config"])
        assert again == text, argv[0]  # round trip: the same configuration, printed the same
        shared = {s: set(raw[s]) for s in ("optim", "schedule", "run")}
        if argv[0] == "pretrain":
            pretrain_shared = shared
    # the same sections, the same field names (each workflow's extra fields aside)
    for section, names in shared.items():
        assert names <= pretrain_shared[section], section
    assert shared["run"] == {f.name for f in dataclasses.fields(settings.RunSettings)}


@pytest.mark.parametrize(
    ("argv", "line"),
    [
        (["pretrain", "--recipe", "smoke", "--precision", "fp8"],
         "albert pretrain: error: run.precision: must be one of auto, fp32, bf16, fp16, got 'fp8'"),
        (["pretrain", "--recipe", "smoke", "--set", "optim.adam_epsilon=0"],
         "albert pretrain: error: optim.adam_epsilon: must be greater than 0, got 0.0"),
        (["finetune", "glue", "--task", "rte", "--data-dir", "G", "--model", "M", "--output", "o",
          "--precision", "fp8"],
         "albert finetune: error: --precision: must be one of auto, fp32, bf16, fp16, got 'fp8'"),
        (["finetune", "glue", "--task", "rte", "--data-dir", "G", "--model", "M", "--output", "o",
          "--set", "optim.adam_epsilon=0"],
         "albert finetune: error: --adam-epsilon: must be greater than 0, got 0.0"),
        (["pretrain", "--recipe", "smoke", "--head-lr-scale", "0"],
         "albert pretrain: error: optim.head_lr_scale: must be greater than 0, got 0.0"),
        (["finetune", "glue", "--task", "rte", "--data-dir", "G", "--model", "M", "--output", "o",
          "--head-lr-scale", "-1"],
         "albert finetune: error: --head-lr-scale: must be greater than 0, got -1.0"),
    ],
)  # fmt: skip
def test_a_bad_value_is_one_config_error_naming_the_field(argv, line, capsys) -> None:
    assert main([*argv, "--print-config"]) == 1
    assert capsys.readouterr().err.splitlines() == [line]


def test_both_workflows_raise_the_one_config_error() -> None:
    cfg = pretraining_config.PretrainConfig()
    cfg.run.precision = "fp8"
    with pytest.raises(ConfigError) as pre:
        cfg.validate()
    with pytest.raises(ConfigError) as fine:
        finetune_settings.FinetuneConfig(precision="fp8").validate()
    assert (
        pre.value.problems
        == fine.value.problems
        == [("run.precision", "must be one of auto, fp32, bf16, fp16, got 'fp8'")]
    )
    assert finetune_settings.FinetuneConfigError is ConfigError  # the old name, kept as an alias


def test_one_builder_makes_both_workflows_optimizers(monkeypatch) -> None:
    import torch

    import albert_lm.optim
    from albert_lm.pretrain.run import _optimizer
    from albert_lm.train import Trainer, TrainerConfig

    calls = []
    real = albert_lm.optim.build_training

    def spy(model, optim, schedule, **kw):
        calls.append((optim.optimizer, schedule.by, kw["total_steps"], kw["warmup_steps"]))
        return real(model, optim, schedule, **kw)

    monkeypatch.setattr(albert_lm.optim, "build_training", spy)
    model = torch.nn.Linear(2, 2)
    _optimizer(pretraining_config.recipe("smoke"), model)
    ft = finetune_settings.FinetuneConfig(train_steps=7, warmup_steps=2)
    Trainer.for_finetuning(
        model, optim=ft.optim, schedule=ft.schedule, total_steps=7, warmup_steps=2,
        config=TrainerConfig(precision="fp32", max_steps=7, device="cpu"),
    )  # fmt: skip
    assert calls == [("lamb", "steps", 20, 2), ("adamw_original", "steps", 7, 2)]
