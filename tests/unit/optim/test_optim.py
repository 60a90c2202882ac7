"""LAMB, AdamW and the parameter groups against hand-computed values (one and two steps, excluded params)."""

from __future__ import annotations

import io
import math

import pytest
import torch
from torch import nn

from albert_lm.optim import Lamb, build_optimizer, excluded_parameter_names, param_groups

LR = 0.1
B1, B2, EPS = 0.9, 0.999, 1e-6


def reference_lamb(
    w: list[float], grads: list[list[float]], lr: float, wd: float, adapt: bool
) -> list[list[float]]:
    """The update of google-research/albert lamb_optimizer.py written out with Python floats."""
    w = list(w)
    m = [0.0] * len(w)
    v = [0.0] * len(w)
    trace = []
    for g in grads:
        m = [B1 * mi + (1 - B1) * gi for mi, gi in zip(m, g)]
        v = [B2 * vi + (1 - B2) * gi * gi for vi, gi in zip(v, g)]
        u = [mi / (math.sqrt(vi) + EPS) for mi, vi in zip(m, v)]
        u = [ui + wd * wi for ui, wi in zip(u, w)]
        ratio = 1.0
        if adapt:
            w_norm = math.sqrt(sum(x * x for x in w))
            u_norm = math.sqrt(sum(x * x for x in u))
            ratio = (w_norm / u_norm if u_norm > 0 else 1.0) if w_norm > 0 else 1.0
        w = [wi - ratio * lr * ui for wi, ui in zip(w, u)]
        trace.append(w)
    return trace


def run_lamb(w0, grads, *, lr=LR, wd=0.01, adapt=True, foreach=True):
    p = nn.Parameter(torch.tensor(w0, dtype=torch.float64))
    opt = Lamb([p], lr=lr, weight_decay=wd, adapt=adapt, foreach=foreach)
    out = []
    for g in grads:
        p.grad = torch.tensor(g, dtype=torch.float64)
        opt.step()
        out.append(p.detach().tolist())
    return out


@pytest.mark.parametrize("foreach", [True, False])
@pytest.mark.parametrize("adapt,wd", [(True, 0.01), (True, 0.0), (False, 0.0), (False, 0.01)])
def test_lamb_two_steps_match_the_original_formula(foreach, adapt, wd):
    w0 = [0.5, -1.0, 2.0]
    grads = [[0.1, -0.3, 0.2], [-0.2, 0.1, 0.4]]
    got = run_lamb(w0, grads, wd=wd, adapt=adapt, foreach=foreach)
    want = reference_lamb(w0, grads, LR, wd, adapt)
    for g_step, w_step in zip(got, want):
        assert g_step == pytest.approx(w_step, rel=1e-12, abs=1e-12)


def test_lamb_first_step_literal_trust_ratio_and_no_bias_correction():
    # w = (3, 4): ||w|| = 5. g = (1, 2): m = 0.1 g, v = 0.001 g^2, so u_i = 0.1 g_i / (0.0316228 |g_i| + 1e-6)
    # = 3.162178 and 3.162228 (~ sqrt(10); eps makes the difference). ratio = 5 / ||u|| = 1.118046, and
    # coordinate i moves by lr * ratio * u_i = 0.353551 and 0.353556 (~ 0.1 * 5 / sqrt(2)).
    (w1,) = run_lamb([3.0, 4.0], [[1.0, 2.0]], wd=0.0)
    assert w1 == pytest.approx([3.0 - 0.353551, 4.0 - 0.353556], abs=1e-6)
    # Without the trust ratio the first step is lr * u_i ~ lr * sqrt(10) per coordinate: there is no bias
    # correction (Adam with bias correction would move by lr * 1.0).
    (w1,) = run_lamb([3.0, 4.0], [[1.0, 2.0]], wd=0.0, adapt=False)
    assert w1 == pytest.approx([3.0 - 0.316218, 4.0 - 0.316223], abs=1e-6)


def test_lamb_zero_norms_use_ratio_one():
    # ||w|| = 0: ratio 1.0, so a zero-initialised tensor still moves (w/u would give 0 and freeze it).
    (w1,) = run_lamb([0.0, 0.0], [[1.0, -1.0]], wd=0.01)
    assert w1 == pytest.approx([-0.316218, 0.316218], abs=1e-6)
    # ||update|| = 0 (zero gradient, no decay): ratio 1.0 and no NaN; the tensor does not move.
    (w1,) = run_lamb([1.0, 2.0], [[0.0, 0.0]], wd=0.0)
    assert w1 == [1.0, 2.0]


def test_lamb_weight_decay_enters_the_update_before_the_ratio():
    # Zero gradient: u = wd * w, ratio = ||w|| / (wd ||w||) = 1 / wd, so w moves by lr * w (a full lr step
    # along w, independent of wd). This is LAMB's (not AdamW's) handling of the decay.
    (w1,) = run_lamb([1.0, -2.0], [[0.0, 0.0]], wd=0.01)
    assert w1 == pytest.approx([1.0 * (1 - LR), -2.0 * (1 - LR)], rel=1e-9)


def test_lamb_skips_parameters_without_grad_and_rejects_sparse():
    a = nn.Parameter(torch.ones(2))
    b = nn.Parameter(torch.ones(2))
    opt = Lamb([a, b], lr=LR)
    a.grad = torch.ones(2)
    opt.step()
    assert torch.equal(b.detach(), torch.ones(2)) and b not in opt.state
    emb = nn.Embedding(4, 2, sparse=True)
    opt = Lamb(emb.parameters())
    emb(torch.tensor([1])).sum().backward()
    with pytest.raises(RuntimeError, match="sparse"):
        opt.step()


def test_lamb_foreach_equals_loop_on_many_tensors():
    torch.manual_seed(1)
    shapes = [(7, 5), (5,), (3, 4, 2), (1,)]
    ps = [[nn.Parameter(torch.randn(s)) for s in shapes] for _ in range(2)]
    for a, b in zip(*ps):
        b.data.copy_(a.data)
    opts = [Lamb(ps[0], lr=0.01, foreach=True), Lamb(ps[1], lr=0.01, foreach=False)]
    for _ in range(3):
        grads = [torch.randn(s) for s in shapes]
        for params, opt in zip(ps, opts):
            for p, g in zip(params, grads):
                p.grad = g.clone()
            opt.step()
    for a, b in zip(*ps):
        torch.testing.assert_close(a, b, rtol=1e-6, atol=1e-7)


def test_lamb_state_dict_round_trip_continues_identically():
    torch.manual_seed(2)
    p = nn.Parameter(torch.randn(4, 3))
    opt = Lamb([p], lr=0.01)
    for _ in range(2):
        p.grad = torch.randn(4, 3)
        opt.step()
    q = nn.Parameter(p.detach().clone())
    opt2 = Lamb([q], lr=0.01)
    buf = io.BytesIO()  # through bytes, as a checkpoint on disk (load_state_dict may alias the tensors)
    torch.save(opt.state_dict(), buf)
    buf.seek(0)
    opt2.load_state_dict(torch.load(buf))
    g = torch.randn(4, 3)
    p.grad, q.grad = g.clone(), g.clone()
    opt.step()
    opt2.step()
    assert torch.equal(p, q)


class Tiny(nn.Module):
    """A module with every kind of parameter the exclusion rule must sort."""

    def __init__(self) -> None:
        super().__init__()
        self.word = nn.Embedding(10, 4)
        self.norm = nn.LayerNorm(4)
        self.dense = nn.Linear(4, 4)
        self.LayerNorm = nn.LayerNorm(4)  # TF-style name, matched by the original pattern too
        self.bias = nn.Parameter(torch.zeros(10))  # like mlm.bias (the original's output_bias)
        self.decoder = nn.Linear(4, 10, bias=False)
        self.decoder.weight = self.word.weight  # tied: must appear once


def test_param_groups_exclude_layernorm_and_bias_and_dedupe_tied():
    model = Tiny()
    excluded = excluded_parameter_names(model)
    assert excluded == {
        "norm.weight",
        "norm.bias",
        "dense.bias",
        "LayerNorm.weight",
        "LayerNorm.bias",
        "bias",
    }
    groups = param_groups(model, weight_decay=0.01)
    assert groups[0]["names"] == ["word.weight", "dense.weight"]
    assert (groups[0]["weight_decay"], groups[0]["adapt"]) == (0.01, True)
    assert (groups[1]["weight_decay"], groups[1]["adapt"]) == (0.0, False)
    assert sorted(groups[1]["names"]) == sorted(excluded)
    # exclude_1d gives the same split here (every excluded tensor is 1-D, every kept one 2-D)
    assert excluded_parameter_names(model, exclude_1d=True) == excluded


def test_param_groups_skip_frozen_parameters():
    model = Tiny()
    model.dense.weight.requires_grad_(False)
    names = [n for g in param_groups(model, 0.01) for n in g["names"]]
    assert "dense.weight" not in names and "word.weight" in names


def test_excluded_parameters_neither_decay_nor_adapt_in_a_real_step():
    # One step of build_optimizer("lamb") on Tiny with a zero gradient: excluded tensors (no decay, zero
    # update) stay put; included ones move by lr * w (the weight-decay-only LAMB step, see above).
    model = Tiny()
    with torch.no_grad():
        for p in model.parameters():
            p.fill_(0.5)
    before = {n: p.detach().clone() for n, p in model.named_parameters()}
    opt = build_optimizer(model, "lamb", lr=LR)
    for p in model.parameters():
        p.grad = torch.zeros_like(p)
    opt.step()
    after = dict(model.named_parameters())
    for name in excluded_parameter_names(model):
        assert torch.equal(after[name], before[name]), name
    for name in ("word.weight", "dense.weight"):
        torch.testing.assert_close(after[name], before[name] * (1 - LR))


def test_excluded_parameters_get_plain_adam_step_without_trust_ratio():
    # A LayerNorm weight with a gradient: the update is lr * m / (sqrt(v) + eps) = lr * 3.16228 (no ratio).
    model = Tiny()
    opt = build_optimizer(model, "lamb", lr=LR)
    w0 = model.norm.weight.detach().clone()  # ones: ||w|| = 2, a ratio would change the step
    for p in model.parameters():
        p.grad = torch.zeros_like(p)
    model.norm.weight.grad = torch.full((4,), 0.5)
    opt.step()
    torch.testing.assert_close(
        model.norm.weight.detach(), w0 - LR * 0.5 * 0.1 / (math.sqrt(0.001) * 0.5 + EPS)
    )


def test_build_optimizer_adamw_is_torch_adamw_with_groups():
    model = Tiny()
    opt = build_optimizer(model, "adamw", lr=2e-5)
    assert isinstance(opt, torch.optim.AdamW)
    assert [g["weight_decay"] for g in opt.param_groups] == [0.01, 0.0]
    assert opt.defaults["eps"] == 1e-6
    # one step: bias-corrected Adam moves every coordinate by ~lr (unlike the original's sqrt(10) * lr)
    for p in model.parameters():
        p.grad = torch.ones_like(p)
    b0 = model.dense.bias.detach().clone()
    opt.step()
    torch.testing.assert_close(model.dense.bias.detach(), b0 - 2e-5, rtol=0, atol=1e-9)


def test_build_optimizer_adamw_original_has_no_bias_correction_and_no_ratio():
    model = Tiny()
    opt = build_optimizer(model, "adamw_original", lr=LR)
    assert all(not g["adapt"] for g in opt.param_groups)
    w0 = model.dense.weight.detach().clone()
    for p in model.parameters():
        p.grad = torch.ones_like(p)
    opt.step()
    # u = 0.1 / (sqrt(0.001) + eps) + 0.01 * w
    want = w0 - LR * (0.1 / (math.sqrt(0.001) + EPS) + 0.01 * w0)
    torch.testing.assert_close(model.dense.weight.detach(), want)


def test_build_optimizer_rejects_unknown_name():
    with pytest.raises(ValueError, match="unknown optimizer 'sgd'"):
        build_optimizer(Tiny(), "sgd", lr=0.1)


@pytest.mark.parametrize("name", ["adamw", "adamw_original", "lamb"])
def test_lr_scales_multiply_the_rate_of_the_named_parameters_through_the_schedule(name):
    from albert_lm.optim import build_scheduler

    model = Tiny()
    opt = build_optimizer(model, name, lr=LR, lr_scales={"norm.": 10.0})
    # the unscaled groups first (param_groups[0] is the base rate the trainer logs), decay before no-decay
    assert [(g["names"], g["lr"], g.get("lr_scale")) for g in opt.param_groups] == [
        (["word.weight", "dense.weight"], LR, None),
        (["bias", "dense.bias", "LayerNorm.weight", "LayerNorm.bias"], LR, None),
        (["norm.weight", "norm.bias"], pytest.approx(10 * LR), 10.0),
    ]
    sched = build_scheduler(opt, total_steps=10, warmup_steps=0)
    for p in model.parameters():
        p.grad = torch.ones_like(p)
    opt.step()
    sched.step()
    lrs = [g["lr"] for g in opt.param_groups]
    assert lrs == pytest.approx([LR * 0.9, LR * 0.9, 10 * LR * 0.9])  # the decay applies to both rates


def test_lr_scales_that_match_nothing_or_are_not_positive_are_refused():
    with pytest.raises(ValueError, match="no parameter name starts with 'heads.'"):
        build_optimizer(Tiny(), "adamw", lr=LR, lr_scales={"heads.": 10.0})
    for bad in (0.0, -1.0, float("nan"), float("inf")):
        with pytest.raises(ValueError, match="lr scale of 'norm.' must be a finite number > 0"):
            build_optimizer(Tiny(), "adamw", lr=LR, lr_scales={"norm.": bad})
