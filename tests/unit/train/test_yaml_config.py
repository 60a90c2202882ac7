"""Config files are YAML read by PyYAML: nested blocks, YAML 1.2 floats, errors naming the line, and
``--print-config`` output that ``--config`` reads back to the same configuration."""

from __future__ import annotations

from pathlib import Path

import pytest

from albert_lm.cli.main import main
from albert_lm.pretrain.config import PretrainConfig, apply_dict
from albert_lm.train.settings import ConfigError, load_config_file


def _load(tmp_path: Path, text: str) -> PretrainConfig:
    path = tmp_path / "run.yaml"
    path.write_text(text, encoding="utf-8")
    return apply_dict(PretrainConfig(), load_config_file(path), str(path))


def test_nested_block_and_scientific_floats(tmp_path: Path) -> None:
    cfg = _load(
        tmp_path,
        "model:\n  preset: albert-tiny\n  overrides:\n    hidden_size: 256\n    layer_norm_eps: 1e-06\n"
        "optim:\n  eps: 1e-06  # YAML 1.1 would read this as a string\n  lr: 2E-4\n",
    )
    assert cfg.model.overrides == {"hidden_size": 256, "layer_norm_eps": 1e-6}
    assert isinstance(cfg.model.overrides["layer_norm_eps"], float)
    assert (cfg.optim.adam_epsilon, cfg.optim.learning_rate) == (1e-6, 2e-4)


@pytest.mark.parametrize(
    "text, message",
    [
        ("optim:\n  lr: 1\n  lr: 2\n", r"run.yaml:3:3: not valid YAML \(key 'lr' given twice"),
        ("optim:\n  lr: 1\n eps: 2\n", r"run.yaml:3:2: not valid YAML"),
        ("optim:\n  lr: [1\n", r"run.yaml:3:1: not valid YAML"),
        ("optim: 1\n", r"run.yaml: section 'optim' must be a mapping"),
    ],
)
def test_errors_name_the_line(tmp_path: Path, text: str, message: str) -> None:
    with pytest.raises(ConfigError, match=message):
        _load(tmp_path, text)


def test_cli_reports_a_yaml_error_as_one_line(tmp_path: Path, capsys: pytest.CaptureFixture[str]) -> None:
    (tmp_path / "run.yaml").write_text("optim:\n  lr: 1\n  lr: 2\n", encoding="utf-8")
    argv = ["pretrain", "--recipe", "smoke", "--data-dir", "D", "--output", str(tmp_path / "p")]
    assert main([*argv, "--config", str(tmp_path / "run.yaml"), "--print-config"]) == 1
    err = capsys.readouterr().err.strip().splitlines()
    assert len(err) == 1 and err[0].startswith("albert pretrain: error: ") and "run.yaml:3:3" in err[0]


def _printed(capsys: pytest.CaptureFixture[str], argv: list[str]) -> str:
    assert main(argv) == 0
    return capsys.readouterr().out


@pytest.mark.parametrize("workflow", ["pretrain", "finetune"])
def test_print_config_round_trips_through_config(
    workflow: str, tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    """print, load, print again: equal, with a nested dict, tiny floats and strings that look like numbers."""
    if workflow == "pretrain":
        base = ["pretrain", "--recipe", "smoke", "--data-dir", "1e-06", "--output", str(tmp_path / "out")]
        extra = ["--set", 'model.overrides={"hidden_size": 64, "layer_norm_eps": 1e-07}']
    else:
        base = ["finetune", "glue", "--task", "rte", "--data-dir", "G", "--model", "M",
                "--output", str(tmp_path / "out")]  # fmt: skip
        extra = []
    text = _printed(capsys, [*base, *extra, "--set", "optim.adam_epsilon=1e-08", "--print-config"])
    assert "adam_epsilon: 1.0e-08" in text
    config = tmp_path / "printed.yaml"
    config.write_text(text, encoding="utf-8")
    again = _printed(capsys, [*base, "--config", str(config), "--print-config"])
    assert again == text
    if workflow == "pretrain":
        cfg = apply_dict(PretrainConfig(), load_config_file(config), str(config))
        assert cfg.model.overrides == {"hidden_size": 64, "layer_norm_eps": 1e-07}
        assert cfg.data.data_dir == "1e-06" and cfg.optim.adam_epsilon == 1e-08
