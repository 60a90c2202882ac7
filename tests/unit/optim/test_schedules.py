"""Warmup + polynomial decay, counted from step 0 as google-research/albert optimization.py."""

from __future__ import annotations

import pytest
import torch

from albert_lm.optim import WarmupPolyDecay, build_scheduler


def test_linear_warmup_then_linear_decay_from_step_zero():
    f = WarmupPolyDecay(total_steps=10, warmup_steps=3)
    # warmup: step / 3; then 1 - step / 10 (decay counted from step 0, so step 3 is 0.7, not 1.0)
    want = [0.0, 1 / 3, 2 / 3, 0.7, 0.6, 0.5, 0.4, 0.3, 0.2, 0.1, 0.0, 0.0]
    assert [f(s) for s in range(12)] == pytest.approx(want, abs=1e-12)


def test_polynomial_power_and_no_warmup():
    f = WarmupPolyDecay(total_steps=10, warmup_steps=0, power=2.0)
    assert f(0) == 1.0
    assert f(5) == pytest.approx(0.25)
    assert f(8) == pytest.approx(0.04)
    assert f(20) == 0.0
    assert WarmupPolyDecay(total_steps=10, power=0.0)(9) == 1.0  # constant


def test_start_warmup_step_shifts_warmup_and_is_clamped_at_zero():
    f = WarmupPolyDecay(total_steps=100, warmup_steps=10, start_warmup_step=5)
    assert f(0) == 0.0  # the original would give -0.5 here
    assert f(5) == 0.0
    assert f(10) == pytest.approx(0.5)
    assert f(15) == pytest.approx(0.85)  # warmup over: decay counted from step 0


def test_paper_schedule_values():
    # run_pretraining.py: lr 0.00176, 125000 steps, 3125 warmup steps
    f = WarmupPolyDecay(total_steps=125_000, warmup_steps=3125)
    assert 0.00176 * f(3124) == pytest.approx(0.00176 * 3124 / 3125)
    assert 0.00176 * f(3125) == pytest.approx(0.00176 * 0.975)
    assert 0.00176 * f(62_500) == pytest.approx(0.00088)


def test_scheduler_gives_update_i_the_rate_of_step_i():
    p = torch.nn.Parameter(torch.zeros(1))
    opt = torch.optim.SGD([p], lr=1.0)
    sched = build_scheduler(opt, total_steps=4, warmup_steps=2)
    seen = []
    for _ in range(5):
        seen.append(opt.param_groups[0]["lr"])
        opt.step()
        sched.step()
    assert seen == pytest.approx([0.0, 0.5, 0.5, 0.25, 0.0])


def test_scheduler_state_round_trip():
    p = torch.nn.Parameter(torch.zeros(1))
    opt = torch.optim.SGD([p], lr=2.0)
    sched = build_scheduler(opt, total_steps=10, warmup_steps=2)
    for _ in range(4):
        opt.step()
        sched.step()
    opt2 = torch.optim.SGD([torch.nn.Parameter(torch.zeros(1))], lr=2.0)
    sched2 = build_scheduler(opt2, total_steps=10, warmup_steps=2)
    sched2.load_state_dict(sched.state_dict())
    opt2.load_state_dict(opt.state_dict())
    assert opt2.param_groups[0]["lr"] == pytest.approx(2.0 * 0.6)
    opt2.step()
    sched2.step()
    assert opt2.param_groups[0]["lr"] == pytest.approx(2.0 * 0.5)


@pytest.mark.parametrize(
    "kwargs", [dict(total_steps=0), dict(total_steps=5, warmup_steps=-1), dict(total_steps=5, power=-1)]
)
def test_invalid_schedule_rejected(kwargs):
    with pytest.raises(ValueError, match="schedule"):
        WarmupPolyDecay(**kwargs)
