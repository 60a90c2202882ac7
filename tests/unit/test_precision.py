"""`precision: auto`: bf16 where the device runs it natively, else fp32; an explicit bf16 on an emulating CPU
warns (issue 17: ~19x slower than fp32 there)."""

from __future__ import annotations

import logging

import pytest
import torch

from albert.tasks.pretraining_config import RECIPES, PretrainConfig, recipe
from albert.train import Trainer, TrainerConfig
from albert.train import precision as prec

NO_BF16 = {"cpu_name": "AMD EPYC", "architecture": "x86_64", "avx2": True, "avx512_bf16": False}


@pytest.fixture(autouse=True)
def _fresh_log_once(monkeypatch):
    monkeypatch.setattr(prec, "_logged", set())


def cpu(monkeypatch, caps: dict, cpuinfo_flags: set[str] = frozenset()) -> None:
    """Pretend this CPU has ``caps`` (torch's probe) and ``cpuinfo_flags`` (/proc/cpuinfo)."""
    monkeypatch.setattr(torch.cpu, "get_capabilities", lambda: dict(caps), raising=False)
    monkeypatch.setattr(prec, "_cpuinfo_flags", lambda: set(cpuinfo_flags))


def test_auto_is_fp32_on_a_cpu_without_native_bf16_and_says_why(monkeypatch, caplog):
    cpu(monkeypatch, NO_BF16)
    with caplog.at_level(logging.INFO, logger="albert.train.precision"):
        assert prec.resolve_precision("auto", "cpu") == "fp32"
        assert prec.resolve_precision("auto", torch.device("cpu")) == "fp32"
    lines = [r.getMessage() for r in caplog.records]
    assert len(lines) == 1, lines  # logged once
    assert (
        "auto -> fp32" in lines[0] and "neither AVX-512 BF16 nor AMX" in lines[0] and "AMD EPYC" in lines[0]
    )


@pytest.mark.parametrize(
    ("caps", "flags", "named"),
    [
        ({**NO_BF16, "avx512_bf16": True}, set(), "avx512_bf16"),
        ({**NO_BF16, "amx_bf16": True}, set(), "amx_bf16"),
        (NO_BF16, {"avx512f", "avx512_bf16"}, "avx512_bf16"),  # /proc/cpuinfo knows what torch missed
    ],
)
def test_auto_is_bf16_on_a_cpu_with_avx512_bf16_or_amx(monkeypatch, caplog, caps, flags, named):
    cpu(monkeypatch, caps, flags)
    with caplog.at_level(logging.INFO, logger="albert.train.precision"):
        assert prec.resolve_precision("auto", "cpu") == "bf16"
    assert f"auto -> bf16 on cpu: the CPU has {named}" in caplog.text


def test_older_torch_without_get_capabilities_uses_its_private_probes(monkeypatch):
    monkeypatch.delattr(torch.cpu, "get_capabilities", raising=False)
    monkeypatch.setattr(prec, "_cpuinfo_flags", lambda: set())
    monkeypatch.setattr(torch.cpu, "_is_avx512_bf16_supported", lambda: False, raising=False)
    monkeypatch.setattr(torch.cpu, "_is_amx_tile_supported", lambda: True, raising=False)
    assert prec.cpu_bf16_features() == ["amx_bf16"]
    monkeypatch.setattr(torch.cpu, "_is_amx_tile_supported", lambda: False, raising=False)
    assert prec.cpu_bf16_features() == []
    assert prec.resolve_precision("auto", "cpu") == "fp32"


def test_cpuinfo_flags_are_read_from_the_flags_line(tmp_path):
    info = tmp_path / "cpuinfo"
    info.write_text(
        "processor\t: 0\nvendor_id\t: AuthenticAMD\nflags\t\t: fpu sse2 avx2 avx512f avx512_bf16\n\n"
    )
    assert prec._cpuinfo_flags(info) == {"fpu", "sse2", "avx2", "avx512f", "avx512_bf16"}
    assert prec._cpuinfo_flags(tmp_path / "absent") == set()


def test_explicit_bf16_on_an_emulating_cpu_warns_with_the_slowdown(monkeypatch, caplog):
    cpu(monkeypatch, NO_BF16)
    with caplog.at_level(logging.INFO, logger="albert.train.precision"):
        assert prec.resolve_precision("bf16", "cpu") == "bf16"  # kept: the user asked for it
        prec.resolve_precision("bf16", "cpu")
    warnings = [r for r in caplog.records if r.levelno == logging.WARNING]
    assert len(warnings) == 1
    assert "19x slower than fp32" in warnings[0].getMessage()


def test_explicit_bf16_on_a_native_cpu_and_fp32_anywhere_say_nothing(monkeypatch, caplog):
    cpu(monkeypatch, {**NO_BF16, "avx512_bf16": True})
    with caplog.at_level(logging.INFO, logger="albert.train.precision"):
        assert prec.resolve_precision("bf16", "cpu") == "bf16"
        assert prec.resolve_precision("fp32", "cpu") == "fp32"
        assert prec.resolve_precision("fp16", "cpu") == "fp16"
    assert caplog.records == []


@pytest.mark.parametrize(("capability", "native", "want"), [((8, 0), True, "bf16"), ((7, 5), False, "fp32")])
def test_auto_on_cuda_follows_native_bf16_support(monkeypatch, caplog, capability, native, want):
    monkeypatch.setattr(torch.cuda, "get_device_name", lambda i: "Some GPU")
    monkeypatch.setattr(torch.cuda, "get_device_capability", lambda i: capability)
    seen: dict[str, bool] = {}

    def is_bf16_supported(including_emulation: bool = True) -> bool:
        seen["including_emulation"] = including_emulation
        return native

    monkeypatch.setattr(torch.cuda, "is_bf16_supported", is_bf16_supported)
    with caplog.at_level(logging.INFO, logger="albert.train.precision"):
        assert prec.resolve_precision("auto", "cuda:0") == want
    assert seen == {"including_emulation": False}  # emulated bf16 does not count
    assert f"compute capability {capability[0]}.{capability[1]}" in caplog.text


def test_auto_elsewhere_is_fp32():
    assert prec.resolve_precision("auto", "meta") == "fp32"


def test_an_unknown_precision_is_an_error():
    with pytest.raises(ValueError, match="auto, fp32, bf16, fp16"):
        prec.resolve_precision("fp8", "cpu")


def test_the_trainer_runs_what_auto_resolves_to(monkeypatch):
    from albert.optim import build_optimizer
    from toy_training import Stream, Toy

    for caps, dtype in ((NO_BF16, torch.float32), ({**NO_BF16, "avx512_bf16": True}, torch.bfloat16)):
        cpu(monkeypatch, caps)
        model = Toy()
        cfg = TrainerConfig(max_steps=1, precision="auto", device="cpu", progress_bar=False)
        trainer = Trainer(model, build_optimizer(model, "adamw", 1e-3), None, cfg)
        trainer.fit(Stream())
        assert (trainer.precision, model.seen_dtype) == ("fp32" if dtype == torch.float32 else "bf16", dtype)


def test_auto_is_the_default_of_every_recipe_and_of_fine_tuning():
    from albert.tasks.base import FinetuneConfig

    assert PretrainConfig().run.precision == "auto"
    for name in RECIPES:
        assert recipe(name).run.precision == "auto", name
    assert FinetuneConfig().precision == "auto"


def test_cpu_capability_names_torchs_dispatch_level(monkeypatch):
    cpu(monkeypatch, NO_BF16)
    line = prec.cpu_capability()
    assert torch.backends.cpu.get_cpu_capability() in line
    assert line.startswith("AMD EPYC, x86_64") and line.endswith("no native bf16")
