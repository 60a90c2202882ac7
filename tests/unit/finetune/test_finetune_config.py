"""`FinetuneConfig` and its command-line flags: docstrings as help, real types, None kept, the preset rules."""

from __future__ import annotations

import argparse
import dataclasses

import pytest

from albert_lm._fields import field_docs
from albert_lm.cli.finetune import add_config_flags, resolve_config
from albert_lm.finetune.config import FLAT_NAMES, SECTIONS, FinetuneConfig

PRESET = FinetuneConfig(learning_rate=3e-5, train_steps=800, warmup_steps=200, max_seq_length=512)


def _parse(*argv: str) -> argparse.Namespace:
    parser = argparse.ArgumentParser()
    add_config_flags(parser)
    return parser.parse_args(list(argv))


def test_every_field_has_a_docstring_that_is_its_flag_help() -> None:
    parser = argparse.ArgumentParser()
    add_config_flags(parser)
    helps = {a.dest.removeprefix("flag:"): a.help for a in parser._actions if a.dest.startswith("flag:")}
    for section, cls in SECTIONS.items():
        docs = field_docs(cls)
        assert set(docs) == {f.name for f in dataclasses.fields(cls)}, section  # every field has one
        for name, help_text in helps.items():
            if name.startswith(f"{section}."):
                assert help_text == docs[name.partition(".")[2]].replace("%", "%%"), name
    # the preset's value is the default, not the field's: no default in the help
    assert helps["schedule.train_steps"] == field_docs(SECTIONS["schedule"])["train_steps"]
    assert "ALBERT DR" in helps["finetune.encoder_dropout"]
    assert set(helps) == set(FLAT_NAMES.values()) - {"run.output"}  # --output: the command's, required


def test_replace_keeps_none() -> None:
    assert PRESET.replace(train_steps=None).train_steps is None
    # then the steps come from epochs: ceil(2 * 100 / 32) = 7, warmup 10% of them
    no_steps = PRESET.replace(train_steps=None, warmup_steps=None, epochs=2.0)
    assert no_steps.steps_for(100) == (7, 0)
    assert no_steps.replace(warmup_fraction=0.5).steps_for(100) == (7, 3)
    assert PRESET.steps_for(100) == (800, 200)


def test_flags_on_real_types_and_null() -> None:
    cfg = resolve_config(PRESET, _parse("--train-steps", "null"))
    assert cfg.train_steps is None and cfg.warmup_steps == 200  # null given: warmup kept
    cfg = resolve_config(PRESET, _parse("--learning-rate", "1e-3", "--no-group-by-length"))
    assert (cfg.learning_rate, cfg.group_by_length, cfg.train_steps) == (1e-3, False, 800)
    with pytest.raises(SystemExit):
        _parse("--learning-rate", "inf")  # finite numbers only
    with pytest.raises(SystemExit):
        _parse("--batch-size", "3.5")


def test_epochs_win_over_the_presets_steps() -> None:
    cfg = resolve_config(PRESET, _parse("--epochs", "2"))
    assert (cfg.epochs, cfg.train_steps, cfg.warmup_steps) == (2.0, None, None)
    cfg = resolve_config(PRESET, _parse("--epochs", "2", "--warmup-steps", "5"))
    assert (cfg.train_steps, cfg.warmup_steps) == (None, 5)
    cfg = resolve_config(PRESET, _parse("--epochs", "2", "--train-steps", "10"))
    assert (cfg.train_steps, cfg.warmup_steps) == (10, 200)


def test_a_given_warmup_fraction_wins_over_the_presets_warmup_steps() -> None:
    """RACE's preset has 1000 warmup steps: a given --warmup-fraction used to be ignored silently."""
    cfg = resolve_config(PRESET, _parse("--train-steps", "20", "--warmup-fraction", "0.1"))
    assert (cfg.train_steps, cfg.warmup_steps) == (20, None) and cfg.steps_for(100) == (20, 2)
    cfg = resolve_config(PRESET, _parse("--warmup-fraction", "0.1", "--warmup-steps", "7"))
    assert cfg.warmup_steps == 7  # both given: the step count, as FinetuneConfig documents


def test_every_preset_fine_tunes_with_the_originals_optimizer() -> None:
    """The original's --optimizer=adamw (run_glue.sh, run_squad_v1/v2.py, run_race.py) is
    AdamWeightDecayOptimizer, without bias correction: our adamw_original, not torch.optim.AdamW."""
    from albert_lm.tasks.custom import CUSTOM_PRESET
    from albert_lm.tasks.glue import SPECS
    from albert_lm.tasks.race import RACE_PRESET
    from albert_lm.tasks.squad import PRESETS as SQUAD_PRESETS

    presets = [
        FinetuneConfig(**p)
        for p in [s.preset for s in SPECS.values()] + [RACE_PRESET, CUSTOM_PRESET, *SQUAD_PRESETS.values()]
    ]
    assert {p.optimizer for p in presets} == {"adamw_original"}
    assert (FinetuneConfig().weight_decay, FinetuneConfig().adam_epsilon) == (0.01, 1e-6)  # optimization.py
