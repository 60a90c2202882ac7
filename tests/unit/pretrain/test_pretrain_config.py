"""The pretraining run configuration: recipes, files, flags, --print-config, errors naming the field."""

from __future__ import annotations

import argparse
import dataclasses
import json
import re

import pytest

from albert_lm.pretrain.config import RECIPES, ConfigError, PretrainConfig, apply_dict, recipe
from albert_lm.train.settings import load_config_file, parse_yaml, to_yaml


def parse(argv: list[str]) -> argparse.Namespace:
    from albert_lm.cli import pretrain

    p = argparse.ArgumentParser()
    pretrain.add_arguments(p)
    return p.parse_args(argv)


def resolve(argv: list[str]) -> PretrainConfig:
    from albert_lm.cli.pretrain import resolve as _resolve

    return _resolve(parse(argv))


def test_paper_recipes_have_the_paper_numbers():
    for size in ("base", "large", "xlarge", "xxlarge"):
        cfg = recipe(f"albert-{size}")
        assert cfg.model.preset == f"albert-{size}-v2"
        assert (cfg.run.global_batch_size, cfg.optim.optimizer, cfg.optim.learning_rate) == (
            4096,
            "lamb",
            0.00176,
        )
        assert (cfg.schedule.train_steps, cfg.schedule.warmup_steps, cfg.schedule.power) == (
            125_000,
            3125,
            1.0,
        )
        assert cfg.data.max_seq_length is None  # the DATA_DIR's length, not a silent 512 (issue 23)
        assert (cfg.optim.weight_decay, cfg.optim.adam_epsilon, cfg.optim.max_grad_norm) == (0.01, 1e-6, 1.0)
    assert set(RECIPES) >= {"smoke", "demo"}
    assert recipe("demo").model.preset == "albert-small"


def test_precedence_recipe_then_file_then_flags(tmp_path):
    cfg_file = tmp_path / "run.yaml"
    cfg_file.write_text(
        "# my run\noptim:\n  lr: 0.003   # file wins over the recipe\n  name: adamw\nrun:\n  precision: bf16\n"
        'model:\n  overrides: {"hidden_dropout_prob": 0.1}\n'
    )
    cfg = resolve(
        ["--recipe", "albert-large", "--config", str(cfg_file), "--optim.learning_rate", "0.004", "--set", "run.log_every=7",
         "--data-dir", "D", "--run.compile"]
    )  # fmt: skip
    assert cfg.model.preset == "albert-large-v2"  # recipe
    assert cfg.optim.optimizer == "adamw" and cfg.run.precision == "bf16"  # file
    assert cfg.model.overrides == {"hidden_dropout_prob": 0.1}
    assert cfg.optim.learning_rate == 0.004 and cfg.run.log_every == 7  # flags
    assert cfg.data.data_dir == "D" and cfg.run.compile is True


def test_json_file_and_yaml_round_trip(tmp_path):
    cfg = recipe("smoke")
    (tmp_path / "a.yaml").write_text(to_yaml(cfg.to_dict()))
    assert apply_dict(PretrainConfig(), load_config_file(tmp_path / "a.yaml"), "a") == cfg
    (tmp_path / "b.json").write_text(json.dumps(cfg.to_dict()))
    assert PretrainConfig.from_dict(load_config_file(tmp_path / "b.json")) == cfg


def test_print_config(capsys):
    from albert_lm.cli import pretrain

    assert (
        pretrain.run(parse(["--recipe", "smoke", "--set", "optim.learning_rate=0.5", "--print-config"])) == 0
    )
    out = capsys.readouterr().out
    assert parse_yaml(out, "stdout")["optim"]["learning_rate"] == 0.5
    assert "preset: albert-tiny" in out


@pytest.mark.parametrize(
    "raw, message",
    [
        ({"optim": {"lrate": 1}}, "unknown field optim.lrate"),
        ({"optimizer": {}}, "unknown section 'optimizer'"),
        ({"run": {"global_batch_size": "many"}}, "run.global_batch_size: expected an integer"),
        ({"run": {"compile": "maybe"}}, "run.compile: expected true/false"),
        ({"run": {"output": None}}, "run.output: is required"),
    ],
)
def test_bad_values_name_the_field(raw, message):
    with pytest.raises(ConfigError, match=message):
        apply_dict(PretrainConfig(), raw, "x.json").validate()


def test_validate_and_batch_split():
    cfg = recipe("albert-base")
    cfg.run.micro_batch_size = 64
    assert cfg.grad_accum_steps(world_size=8) == (64, 8)  # 4096 = 64 x 8 x 8
    cfg.run.micro_batch_size = 48
    with pytest.raises(ConfigError, match="not a multiple of run.micro_batch_size=48"):
        cfg.grad_accum_steps(world_size=8)
    with pytest.raises(ConfigError, match="not divisible by the 3 ranks"):
        cfg.grad_accum_steps(world_size=3)
    cfg = recipe("smoke")
    cfg.optim.optimizer = "sgd"
    with pytest.raises(ConfigError, match="optim.optimizer"):
        cfg.validate()
    cfg = recipe("smoke")
    cfg.schedule.warmup_steps = 50
    with pytest.raises(ConfigError, match="warmup_steps"):
        cfg.validate()


def test_yaml_errors_name_the_line(tmp_path):
    with pytest.raises(ConfigError, match=r"run.yaml:4:2: not valid YAML"):
        parse_yaml("# c\noptim:\n  lr: 1\n lr: 2\n", "run.yaml")
    with pytest.raises(
        ConfigError, match="run.yaml: section 'optim' must be a mapping.*top-level lines are sections"
    ):
        parse_yaml("optim: 1\n", "run.yaml")
    (tmp_path / "bad.json").write_text('{\n  "optim": \n}')
    with pytest.raises(ConfigError, match=r"bad.json:3: not valid JSON"):
        load_config_file(tmp_path / "bad.json")


def test_cli_reports_config_errors_as_one_error_line_with_exit_code_1(capsys):
    """A bad --set value or a missing field is an error of the configuration, reported by cli/main's one
    handler (argparse's own usage errors, e.g. a bad --optim.learning_rate value, stay exit 2)."""
    from albert_lm.cli.main import main

    assert main(["pretrain", "--set", "optim.learning_rate=fast"]) == 1
    assert re.search(
        r"^albert pretrain: error: .*optim\.learning_rate: expected a number", capsys.readouterr().err, re.M
    )
    assert main(["pretrain", "--recipe", "smoke"]) == 1  # no data dir
    assert re.search(r"^albert pretrain: error: .*data\.data_dir is required", capsys.readouterr().err, re.M)


def test_resume_dir_supplies_the_saved_config(tmp_path):
    saved = recipe("smoke")
    saved.optim.learning_rate = 0.123
    (tmp_path / "run_config.json").write_text(json.dumps(saved.to_dict()))
    cfg = resolve(["--resume", str(tmp_path), "--run.log_every", "3"])
    assert cfg.optim.learning_rate == 0.123 and cfg.run.log_every == 3 and cfg.run.output == str(tmp_path)


def test_one_flag_per_field_reads_values_as_set_does():
    """A flag is its field (--max-steps is run.max_steps); VALUE reads as --set and the YAML file read it
    (``null``, JSON for a mapping); a bool field is --x / --no-x; the dotted --section.field spelling is the
    same flag, deprecated; --set, the long form, comes after the flags."""
    cfg = resolve(["--no-compile", "--no-progress", "--device", "null",
                   "--max-steps", "null", "--output", "123", "--overrides", '{"hidden_size": 64}'])  # fmt: skip
    assert cfg.run.compile is False and cfg.run.progress is False
    assert cfg.run.device is None and cfg.run.max_steps is None
    assert cfg.run.output == "123" and cfg.model.overrides == {"hidden_size": 64}
    assert resolve(["--activation-checkpointing", "--data-dir", "D"]).run.activation_checkpointing is True
    assert resolve(["--data.data_dir", "old", "--recipe", "smoke"]).data.data_dir == "old"  # deprecated alias
    assert resolve(["--learning-rate", "0.1", "--set", "optim.learning_rate=0.2"]).optim.learning_rate == 0.2
    p = argparse.ArgumentParser()
    from albert_lm.cli import pretrain
    from albert_lm.pretrain.config import SECTIONS

    pretrain.add_arguments(p)
    fields = {f"{s}.{f.name}" for s, c in SECTIONS.items() for f in dataclasses.fields(c)}
    dests = [a.dest.removeprefix("flag:") for a in p._actions if a.dest.startswith("flag:")]
    assert sorted(dests) == sorted(fields)  # every setting exactly one flag


def test_bad_flag_values_and_field_help(capsys):
    with pytest.raises(SystemExit) as e:
        parse(["--optim.learning_rate", "fast"])
    assert e.value.code == 2
    assert "--learning-rate/--optim.learning_rate/--optim.lr: expected a number" in capsys.readouterr().err
    with pytest.raises(SystemExit):
        parse(["--optim.learning_rate", "inf"])  # a learning rate of inf trains a model of NaNs
    assert "finite" in capsys.readouterr().err
    p = argparse.ArgumentParser()
    from albert_lm.cli import pretrain

    pretrain.add_arguments(p)
    text = " ".join(p.format_help().split())  # argparse wraps the help lines
    assert "paper Sec. 4.1: 0.00176 for batch 4096" in text  # the docstring under OptimOptions.lr
    assert "--run.global_batch_size" in text and "--set" in text and "--data-dir" in text


def test_apply_dict_refuses_non_finite_numbers():
    with pytest.raises(ConfigError, match=r"x.json: optim.learning_rate: must be a finite number"):
        apply_dict(PretrainConfig(), {"optim": {"learning_rate": float("nan")}}, "x.json")
