"""A resumed run keeps the fp32 linear library its checkpoint ran on where `auto` measured one at start-up
(the measurement can pick the other library on a loaded machine; the two differ in the last bits)."""

from __future__ import annotations

import logging

import pytest
import torch

from albert_lm.runtime.fp32_linear import onednn_available
from albert_lm.train.config import TrainerConfig
from albert_lm.train.parallelize import resumed_run

CPU = torch.device("cpu")


def test_auto_keeps_the_checkpoints_library(caplog: pytest.LogCaptureFixture) -> None:
    if not onednn_available():
        pytest.skip("this torch has no oneDNN")
    cfg = TrainerConfig(precision="fp32", max_steps=1, fp32_linear="auto")
    with caplog.at_level(logging.INFO, logger="albert_lm.train.parallelize"):
        assert resumed_run({"fp32_linear": "onednn"}, "step-5", cfg, "torch", CPU, None) == "onednn"
    assert "as the checkpoint step-5 ran on (auto measured torch)" in caplog.text
    assert resumed_run({"fp32_linear": "torch"}, "step-5", cfg, "onednn", CPU, None) == "torch"


@pytest.mark.parametrize(
    ("state", "config", "dtype", "why"),
    [
        (
            {"fp32_linear": "onednn"},
            TrainerConfig(precision="fp32", max_steps=1, fp32_linear="torch"),
            None,
            "asked for by name: kept",
        ),
        (
            {"fp32_linear": "onednn"},
            TrainerConfig(precision="fp32", max_steps=1, fp32_linear="auto"),
            torch.bfloat16,
            "bf16: no fp32 linear",
        ),
        (
            {"fp32_linear": "onednn"},
            TrainerConfig(precision="fp32", max_steps=1, fp32_linear="auto", compile=True),
            None,
            "compile traces it",
        ),
        (
            {},
            TrainerConfig(precision="fp32", max_steps=1, fp32_linear="auto"),
            None,
            "a checkpoint of before the field",
        ),
        (
            {"fp32_linear": "mkl"},
            TrainerConfig(precision="fp32", max_steps=1, fp32_linear="auto"),
            None,
            "an unknown name",
        ),
    ],
)
def test_the_current_choice_stays(
    state: dict, config: TrainerConfig, dtype: torch.dtype | None, why: str
) -> None:
    assert resumed_run(state, "step-5", config, "torch", CPU, dtype) == "torch", why


def test_another_grad_accum_is_a_warning(caplog: pytest.LogCaptureFixture) -> None:
    with caplog.at_level(logging.WARNING, logger="albert_lm.train.parallelize"):
        resumed_run(
            {"grad_accum_steps": 2},
            "step-5",
            TrainerConfig(precision="fp32", max_steps=1),
            "torch",
            CPU,
            None,
        )
    assert "grad_accum_steps=2, now 1: the data order will differ" in caplog.text
