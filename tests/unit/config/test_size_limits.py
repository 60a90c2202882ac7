"""Model configs with absurd sizes are refused by `AlbertConfig` validation, naming the field, before
anything is allocated: 10^6 layers hung `albert predict`, 10^9 layers in `albert params` ate memory, an
``intermediate_size`` of 10^12 gave a traceback."""

from __future__ import annotations

import json
import time
from pathlib import Path

import pytest

from albert_lm.cli.main import main
from albert_lm.config import MAX_PARAMETERS, PRESETS, AlbertConfig, ConfigError
from albert_lm.params import count_parameters


@pytest.mark.parametrize(
    ("field", "value"),
    [
        ("num_hidden_layers", 10**6),
        ("num_hidden_layers", 10**9),
        ("intermediate_size", 10**12),
        ("hidden_size", 10**9),
        ("vocab_size", 10**10),
        ("max_position_embeddings", 10**9),
    ],
)
def test_an_absurd_size_is_refused_naming_the_field(field: str, value: int) -> None:
    start = time.perf_counter()
    with pytest.raises(ConfigError, match=rf"^AlbertConfig\.{field}: must be at most"):
        AlbertConfig.from_preset("albert-base-v2", **{field: value})
    assert time.perf_counter() - start < 1.0


def test_sizes_within_the_field_limits_but_too_many_parameters_are_refused() -> None:
    # 1000 unshared layers of xxlarge width: ~2.2e11 parameters
    with pytest.raises(
        ConfigError, match=r"^AlbertConfig\.intermediate_size: .* about 2\.\d+e\+11 parameters"
    ):
        AlbertConfig.from_preset("albert-xxlarge-v2", num_hidden_layers=1000, num_hidden_groups=1000)
    # the same depth shared: few parameters (compute bounded by the layer limit)
    assert (
        AlbertConfig.from_preset("albert-xxlarge-v2", num_hidden_layers=1000).approx_parameters()
        < MAX_PARAMETERS
    )


@pytest.mark.parametrize("name", ["albert-tiny", "albert-base-v2", "bert-base", "albert-small"])
def test_the_estimate_is_the_built_models_count(name: str) -> None:
    assert PRESETS[name].approx_parameters() == count_parameters(PRESETS[name])


def test_a_config_json_with_a_million_layers_is_refused_naming_the_file(tmp_path: Path) -> None:
    from albert_lm.convert.hf import load_model

    model = tmp_path / "m"
    model.mkdir()
    raw = PRESETS["albert-tiny"].to_hf_dict() | {"num_hidden_layers": 10**6}
    (model / "config.json").write_text(json.dumps(raw), encoding="utf-8")
    start = time.perf_counter()
    with pytest.raises(
        ConfigError, match=r"config\.json: AlbertConfig\.num_hidden_layers: must be at most 1,000"
    ):
        load_model(model)
    assert time.perf_counter() - start < 1.0


def test_params_with_a_billion_layers_is_one_line(capsys: pytest.CaptureFixture[str]) -> None:
    assert main(["params", "--preset", "albert-base-v2", "--set", f"num_hidden_layers={10**9}"]) == 1
    (line,) = capsys.readouterr().err.strip().splitlines()
    assert line.startswith("albert params: error:") and "num_hidden_layers: must be at most 1,000" in line
