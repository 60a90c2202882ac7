"""`precision: auto`: bf16 where the device runs it natively, else fp32; an explicit bf16 on an emulating CPU
warns (issue 17: ~19x slower than fp32 there)."""

from __future__ import annotations

import logging

import pytest
import torch

from albert_lm.pretrain.config import RECIPES, PretrainConfig, recipe
from albert_lm.runtime import precision as prec
from albert_lm.train import Trainer, TrainerConfig

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
    with caplog.at_level(logging.INFO, logger="albert_lm.runtime.precision"):
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
    with caplog.at_level(logging.INFO, logger="albert_lm.runtime.precision"):
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
    with caplog.at_level(logging.INFO, logger="albert_lm.runtime.precision"):
        assert prec.resolve_precision("bf16", "cpu") == "bf16"  # kept: the user asked for it
        prec.resolve_precision("bf16", "cpu")
    warnings = [r for r in caplog.records if r.levelno == logging.WARNING]
    assert len(warnings) == 1
    assert "19x slower than fp32" in warnings[0].getMessage()


def test_explicit_bf16_on_a_native_cpu_and_fp32_anywhere_say_nothing(monkeypatch, caplog):
    cpu(monkeypatch, {**NO_BF16, "avx512_bf16": True})
    with caplog.at_level(logging.INFO, logger="albert_lm.runtime.precision"):
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
    with caplog.at_level(logging.INFO, logger="albert_lm.runtime.precision"):
        assert prec.resolve_precision("auto", "cuda:0") == want
    assert seen == {"including_emulation": False}  # emulated bf16 does not count
    assert f"compute capability {capability[0]}.{capability[1]}" in caplog.text


def test_auto_elsewhere_is_fp32():
    assert prec.resolve_precision("auto", "meta") == "fp32"


def test_an_unknown_precision_is_an_error():
    with pytest.raises(ValueError, match="auto, fp32, bf16, fp16"):
        prec.resolve_precision("fp8", "cpu")


def test_the_trainer_runs_what_auto_resolves_to(monkeypatch):
    from albert_lm.optim import build_optimizer
    from toy_training import Stream, Toy

    for caps, dtype in ((NO_BF16, torch.float32), ({**NO_BF16, "avx512_bf16": True}, torch.bfloat16)):
        cpu(monkeypatch, caps)
        model = Toy()
        cfg = TrainerConfig(max_steps=1, precision="auto", device="cpu", progress=False)
        trainer = Trainer(model, build_optimizer(model, "adamw", 1e-3), None, cfg)
        trainer.fit(Stream())
        assert (trainer.precision, model.seen_dtype) == ("fp32" if dtype == torch.float32 else "bf16", dtype)


def test_auto_is_the_default_of_every_recipe_and_of_fine_tuning():
    from albert_lm.finetune.config import FinetuneConfig

    assert PretrainConfig().run.precision == "auto"
    for name in RECIPES:
        assert recipe(name).run.precision == "auto", name
    assert FinetuneConfig().precision == "auto"


def test_cpu_capability_names_torchs_dispatch_level(monkeypatch):
    cpu(monkeypatch, NO_BF16)
    line = prec.cpu_capability()
    assert torch.backends.cpu.get_cpu_capability() in line
    assert line.startswith("AMD EPYC, x86_64") and line.endswith("no native bf16")


# ------------------------------------------------------------------ attention under CPU bf16 autocast (issue 24)
@pytest.fixture
def _fresh_attention_choice():
    prec.cpu_attention_by_gemms_pays.cache_clear()  # decided once per process: forget the real CPU's answer
    yield
    prec.cpu_attention_by_gemms_pays.cache_clear()  # and the pretend CPU's


@pytest.mark.usefixtures("_fresh_attention_choice")
def test_attention_runs_as_gemms_only_on_a_cpu_without_amx(monkeypatch, caplog):
    from albert_lm.train.parallelize import cpu_attention_rule

    cpu(monkeypatch, {**NO_BF16, "avx512_bf16": True})
    with caplog.at_level(logging.INFO, logger="albert_lm.runtime.precision"):
        assert cpu_attention_rule(torch.device("cpu"), torch.bfloat16) == "gemms"
        assert cpu_attention_rule(torch.device("cpu"), torch.bfloat16) == "gemms"
    assert [r.getMessage() for r in caplog.records].count(caplog.records[0].getMessage()) == 1  # once
    assert "no AMX" in caplog.records[0].getMessage()
    assert cpu_attention_rule(torch.device("cpu"), None) is None  # fp32 runs: nothing to change
    assert cpu_attention_rule(torch.device("cuda"), torch.bfloat16) is None  # flash attention in bf16 on GPUs
    prec.cpu_attention_by_gemms_pays.cache_clear()
    cpu(monkeypatch, {**NO_BF16, "avx512_bf16": True, "amx_bf16": True})
    assert cpu_attention_rule(torch.device("cpu"), torch.bfloat16) is None  # AMX: torch's fast bf16 kernel


def _qkv_and_mask(t: int = 16, heads: int = 4, head_dim: int = 64):
    gen = torch.Generator().manual_seed(0)
    q, k, v = (torch.randn(2, heads, t, head_dim, generator=gen).bfloat16() for _ in range(3))
    mask = torch.ones(2, 1, 1, t, dtype=torch.bool)
    mask[1, ..., t - 6 :] = False
    return q, k, v, mask


def test_fp32_attention_under_autocast_is_sdpa_of_the_upcast_inputs():
    import torch.nn.functional as F

    from albert_lm.model.encoder import attention
    from albert_lm.runtime.attention import cpu_attention

    q, k, v, mask = _qkv_and_mask()
    exact = F.scaled_dot_product_attention(q.float(), k.float(), v.float(), attn_mask=mask).bfloat16()
    with torch.autocast("cpu", dtype=torch.bfloat16):
        with cpu_attention("fp32"):
            inside = attention(q, k, v, mask, 0.0)
        with cpu_attention(None):  # torch's SDPA as it is
            outside = attention(q, k, v, mask, 0.0)
    assert inside.dtype == torch.bfloat16 and torch.equal(inside, exact)
    assert torch.equal(outside, F.scaled_dot_product_attention(q, k, v, attn_mask=mask))
    with pytest.raises(RuntimeError), cpu_attention("fp32"):  # the switch is restored on the way out
        raise RuntimeError
    from albert_lm.runtime.attention import cpu_attention_mode

    assert cpu_attention_mode() == "auto"
    with pytest.raises(ValueError, match="'flash' is not one of"), cpu_attention("flash"):
        pass


def test_gemm_attention_is_the_bf16_computation_of_attention():
    """Inside ``cpu_attention("gemms")``: the values of the same computation written out (bf16 products,
    softmax in fp32 stored in bf16), close to exact attention by bf16's precision, the same with an additive
    mask as with a boolean one, and gradients close to exact attention's."""
    import torch.nn.functional as F

    from albert_lm.model.encoder import attention
    from albert_lm.runtime.attention import cpu_attention

    q, k, v, mask = _qkv_and_mask()
    scores = (q.float() @ k.float().transpose(-1, -2)).bfloat16().float() / 8
    written_out = torch.softmax(scores.masked_fill(~mask, float("-inf")), -1).bfloat16().float() @ v.float()
    exact = F.scaled_dot_product_attention(q.double(), k.double(), v.double(), attn_mask=mask)
    leaves = [z.clone().requires_grad_() for z in (q, k, v)]
    with torch.autocast("cpu", dtype=torch.bfloat16), cpu_attention("gemms"):
        y = attention(*leaves, mask, 0.0)
        additive = attention(q, k, v, torch.zeros(mask.shape).masked_fill(~mask, float("-inf")), 0.0)
    assert y.dtype == torch.bfloat16
    torch.testing.assert_close(y.float(), written_out, atol=2e-2, rtol=2e-2)
    torch.testing.assert_close(y.double(), exact, atol=3e-2, rtol=3e-2)  # bf16: 8 bits of mantissa
    assert torch.equal(additive, y)
    assert (y[1].float() - exact[1]).abs().max() < 3e-2  # the padded keys got no weight
    y.float().pow(2).sum().backward()
    ref = [z.double().requires_grad_() for z in (q, k, v)]
    F.scaled_dot_product_attention(*ref, attn_mask=mask).pow(2).sum().backward()
    for got, want in zip(leaves, ref):
        assert (got.grad.double() - want.grad).norm() < 0.03 * want.grad.norm()


def test_gemm_attention_drops_probabilities_in_training():
    from albert_lm.model.encoder import attention
    from albert_lm.runtime.attention import cpu_attention

    q, k, v, mask = _qkv_and_mask()
    torch.manual_seed(0)
    with torch.autocast("cpu", dtype=torch.bfloat16), cpu_attention("gemms"):
        kept = attention(q, k, v, mask, 0.0)
        dropped = attention(q, k, v, mask, 0.5)
    assert not torch.equal(kept, dropped) and torch.isfinite(dropped.float()).all()


@pytest.mark.parametrize("mode", ["gemms", "fp32"])
def test_trainer_step_under_cpu_bf16_autocast_matches_fp32(mode):
    """The whole model under the trainer's autocast, attention in either CPU mode, stays within bf16's
    tolerance of the fp32 model (the gradient flows through the casts)."""
    from albert_lm.config import AlbertConfig
    from albert_lm.model import AlbertForPreTraining
    from albert_lm.train.parallelize import autocast

    torch.manual_seed(0)
    model = AlbertForPreTraining(AlbertConfig.from_preset("albert-tiny")).eval()
    ids = torch.randint(5, model.config.vocab_size, (2, 24))
    batch = dict(
        input_ids=ids, attention_mask=torch.ones_like(ids), mlm_labels=ids, sop_labels=torch.tensor([0, 1])
    )
    ref = model(**batch)["loss"]
    with autocast(torch.device("cpu"), torch.bfloat16, cpu_attention_mode=mode):
        loss = model(**batch)["loss"]
    loss.backward()
    assert abs(loss.item() - ref.item()) < 0.05 * abs(ref.item())
    assert all(p.grad is None or torch.isfinite(p.grad).all() for p in model.parameters())
    assert model.albert.encoder.attention[0].qkv.weight.grad.abs().sum() > 0  # through attention


@pytest.mark.usefixtures("_fresh_attention_choice")
@pytest.mark.parametrize("amx", [False, True])
def test_the_trainers_autocast_enters_gemm_attention_where_the_rule_says(monkeypatch, amx):
    from albert_lm.runtime.attention import cpu_attention_mode
    from albert_lm.train.parallelize import autocast

    cpu(monkeypatch, {**NO_BF16, "avx512_bf16": True, "amx_bf16": amx})
    with autocast(torch.device("cpu"), torch.bfloat16):  # what Trainer._autocast runs under bf16
        assert cpu_attention_mode(resolve=True) == (None if amx else "gemms")
    with autocast(torch.device("cpu"), None):  # fp32: nothing to change
        assert cpu_attention_mode() == "auto"
    assert cpu_attention_mode() == "auto"
    # outside the trainer the runtime's default is the same choice (a user's own loop under autocast)
    assert cpu_attention_mode(resolve=True) == (None if amx else "gemms")


@pytest.mark.usefixtures("_fresh_attention_choice")
def test_the_cpu_attention_setting_decides_the_trainers_attention(monkeypatch):
    """``run.cpu_attention`` (flag --cpu-attention): auto by the CPU, or as set; nothing under fp32."""
    from torch import nn

    from albert_lm.config import ConfigError
    from albert_lm.runtime.attention import cpu_attention_mode
    from albert_lm.train.trainer import Trainer, TrainerConfig

    cpu(monkeypatch, {**NO_BF16, "avx512_bf16": True})  # no AMX: auto is gemms
    model = nn.Linear(4, 2)
    opt = torch.optim.SGD(model.parameters(), lr=0.1)

    def trainer(**kw):  # type: ignore[no-untyped-def]
        return Trainer(model, opt, None, TrainerConfig(max_steps=1, device="cpu", **kw))

    assert trainer(precision="bf16").cpu_attention == "gemms"
    assert trainer(precision="bf16", cpu_attention="fp32").cpu_attention == "fp32"
    assert trainer(precision="bf16", cpu_attention="sdpa").cpu_attention is None
    # no autocast, nothing to do
    assert trainer(precision="fp32", cpu_attention="gemms").cpu_attention is None
    fp32_attention = trainer(precision="bf16", cpu_attention="fp32")
    with fp32_attention._autocast():
        assert cpu_attention_mode() == "fp32"
    assert cpu_attention_mode() == "auto"
    prec.cpu_attention_by_gemms_pays.cache_clear()
    cpu(monkeypatch, {**NO_BF16, "avx512_bf16": True, "amx_bf16": True})
    assert trainer(precision="bf16").cpu_attention is None  # AMX: torch's SDPA
    assert trainer(precision="bf16", cpu_attention="gemms").cpu_attention == "gemms"
    with pytest.raises(ConfigError, match="cpu_attention: must be one of auto, gemms, fp32, sdpa"):
        TrainerConfig(max_steps=1, cpu_attention="flash")


@pytest.mark.usefixtures("_fresh_attention_choice")
@pytest.mark.parametrize("amx", [False, True])
def test_a_users_own_autocast_loop_gets_the_runtimes_attention(monkeypatch, amx):
    """No trainer, no switch: a bare model step under ``torch.autocast`` runs attention as the runtime
    chooses for this CPU (bf16 GEMMs without AMX), the same computation as inside ``cpu_attention("gemms")``."""
    from albert_lm.model.encoder import attention
    from albert_lm.runtime.attention import cpu_attention

    cpu(monkeypatch, {**NO_BF16, "avx512_bf16": True, "amx_bf16": amx})
    q, k, v, mask = _qkv_and_mask()
    with torch.autocast("cpu", dtype=torch.bfloat16):
        default = attention(q, k, v, mask, 0.0)
        with cpu_attention("gemms"):
            gemms = attention(q, k, v, mask, 0.0)
        with cpu_attention(None):
            sdpa = attention(q, k, v, mask, 0.0)
    assert torch.equal(default, sdpa if amx else gemms)
    assert not torch.equal(gemms, sdpa)  # the two ways differ in the last bits: the check can fail
