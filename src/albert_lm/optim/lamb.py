"""LAMB, as ALBERT was pretrained with it (google-research/albert lamb_optimizer.py).

The update of one tensor ``w`` with gradient ``g`` (all float32, as the original keeps its slots):

    m      = beta1 * m + (1 - beta1) * g
    v      = beta2 * v + (1 - beta2) * g^2
    u      = m / (sqrt(v) + eps)                  # no bias correction (the original has none)
    u      = u + weight_decay * w                 # only where weight decay applies
    r      = ||w|| / ||u||   if ||w|| > 0 and ||u|| > 0   else 1.0
                                                  # only where layer adaptation applies, else r = 1
    w      = w - r * lr * u

Which tensors get weight decay and the trust ratio is a property of the parameter group (the keys
``weight_decay`` and ``adapt``): `albert_lm.optim.param_groups.param_groups` builds the original's split, where
LayerNorm parameters and biases get neither (original optimization.py: ``exclude_from_weight_decay=
["LayerNorm", "layer_norm", "bias"]``, and lamb_optimizer.py uses the same list for the layer adaptation
when none is given).

With ``adapt=False`` for every group this is exactly the original ``AdamWeightDecayOptimizer`` of
optimization.py (Adam without bias correction plus decoupled weight decay); `build_optimizer` offers it as
``"adamw_original"``.
"""

from __future__ import annotations

from collections.abc import Callable, Iterable
from typing import Any

import torch
from torch import Tensor

from albert_lm.optim._checks import check_finite

# Defaults of the original create_optimizer (optimization.py): beta_1 0.9, beta_2 0.999, epsilon 1e-6,
# weight_decay_rate 0.01.
DEFAULT_BETAS = (0.9, 0.999)
DEFAULT_EPS = 1e-6
DEFAULT_WEIGHT_DECAY = 0.01


class Lamb(torch.optim.Optimizer):
    """LAMB (You et al. 2019) exactly as google-research/albert implements it.

    Args:
        params: parameters or parameter groups. A group may set ``weight_decay`` and ``adapt`` (whether the
            trust ratio ||w|| / ||update|| scales its update).
        lr: learning rate.
        betas: (beta1, beta2) of the moment estimates.
        eps: added to sqrt(v) (original: 1e-6).
        weight_decay: decoupled weight decay rate, added to the update before the trust ratio (original: 0.01).
        adapt: default of the per-group layer adaptation flag.
        foreach: use the multi-tensor kernels (one launch for all tensors of a group); ``False`` runs the
            readable per-tensor loop. Both compute the same values.
    """

    def __init__(
        self,
        params: Iterable[Tensor] | Iterable[dict[str, Any]],
        lr: float = 1e-3,
        betas: tuple[float, float] = DEFAULT_BETAS,
        eps: float = DEFAULT_EPS,
        weight_decay: float = DEFAULT_WEIGHT_DECAY,
        adapt: bool = True,
        foreach: bool = True,
    ) -> None:
        check_finite("Lamb", lr=lr, beta1=betas[0], beta2=betas[1], eps=eps, weight_decay=weight_decay)
        if lr < 0.0:
            raise ValueError(f"Lamb: lr must be >= 0 (got {lr})")
        if not (0.0 <= betas[0] < 1.0 and 0.0 <= betas[1] < 1.0):
            raise ValueError(f"Lamb: betas must be in [0, 1) (got {betas})")
        if eps < 0.0:
            raise ValueError(f"Lamb: eps must be >= 0 (got {eps})")
        if weight_decay < 0.0:
            raise ValueError(f"Lamb: weight_decay must be >= 0 (got {weight_decay})")
        defaults = dict(lr=lr, betas=betas, eps=eps, weight_decay=weight_decay, adapt=adapt, foreach=foreach)
        super().__init__(params, defaults)
        for i, group in enumerate(self.param_groups):  # a group may set its own values
            check_finite(
                f"Lamb param group {i}", lr=group["lr"], eps=group["eps"], weight_decay=group["weight_decay"]
            )

    @torch.no_grad()
    def step(self, closure: Callable[[], float] | None = None) -> float | None:  # type: ignore[override]
        loss = None
        if closure is not None:
            with torch.enable_grad():
                loss = closure()
        for group in self.param_groups:
            params: list[Tensor] = []
            grads: list[Tensor] = []
            ms: list[Tensor] = []
            vs: list[Tensor] = []
            for p in group["params"]:
                if p.grad is None:
                    continue  # as the original: `if grad is None: continue`
                if p.grad.is_sparse:
                    raise RuntimeError("Lamb does not support sparse gradients")
                state = self.state[p]
                if not state:
                    state["exp_avg"] = torch.zeros_like(p, memory_format=torch.preserve_format)
                    state["exp_avg_sq"] = torch.zeros_like(p, memory_format=torch.preserve_format)
                params.append(p)
                grads.append(p.grad)
                ms.append(state["exp_avg"])
                vs.append(state["exp_avg_sq"])
            if not params:
                continue
            if group["foreach"] and _same_device_and_dtype(params):
                _lamb_foreach(params, grads, ms, vs, group)
            else:
                for p, g, m, v in zip(params, grads, ms, vs):
                    _lamb_single(p, g, m, v, group)
        return loss


def _same_device_and_dtype(tensors: list[Tensor]) -> bool:
    first = tensors[0]
    return all(t.device == first.device and t.dtype == first.dtype for t in tensors)


def _trust_ratio(w_norm: Tensor, u_norm: Tensor) -> Tensor:
    # original: where(||w|| > 0, where(||u|| > 0, ||w|| / ||u||, 1.0), 1.0)
    one = torch.ones_like(w_norm)
    return torch.where(w_norm > 0, torch.where(u_norm > 0, w_norm / u_norm, one), one)


def _lamb_single(p: Tensor, g: Tensor, m: Tensor, v: Tensor, group: dict[str, Any]) -> None:
    beta1, beta2 = group["betas"]
    m.mul_(beta1).add_(g, alpha=1.0 - beta1)
    v.mul_(beta2).addcmul_(g, g, value=1.0 - beta2)
    update = m / (v.sqrt() + group["eps"])
    if group["weight_decay"]:
        update.add_(p, alpha=group["weight_decay"])
    if group["adapt"]:
        ratio = _trust_ratio(torch.linalg.vector_norm(p), torch.linalg.vector_norm(update))
        p.sub_(update * (ratio * group["lr"]))
    else:
        p.sub_(update * group["lr"])


def _lamb_foreach(
    params: list[Tensor], grads: list[Tensor], ms: list[Tensor], vs: list[Tensor], group: dict[str, Any]
) -> None:
    # The same update as `_lamb_single`, in fewer passes over memory (the step is memory-bound): m by one
    # lerp (m + (1 - beta1) (g - m) = beta1 m + (1 - beta1) g), and without the trust ratio the update is
    # never materialized: w (1 - lr wd) - lr m / d equals w - lr (m / d + wd w).
    beta1, beta2 = group["betas"]
    torch._foreach_lerp_(ms, grads, 1.0 - beta1)
    torch._foreach_mul_(vs, beta2)
    torch._foreach_addcmul_(vs, grads, grads, value=1.0 - beta2)
    denom = torch._foreach_sqrt(vs)
    torch._foreach_add_(denom, group["eps"])
    if not group["adapt"]:
        if group["weight_decay"]:
            torch._foreach_mul_(params, 1.0 - group["lr"] * group["weight_decay"])
        torch._foreach_addcdiv_(params, ms, denom, value=-group["lr"])
        return
    updates = torch._foreach_div(ms, denom)
    del denom
    if group["weight_decay"]:
        torch._foreach_add_(updates, params, alpha=group["weight_decay"])
    w_norms = torch.stack(torch._foreach_norm(params))  # (n_tensors,)
    u_norms = torch.stack(torch._foreach_norm(updates))  # (n_tensors,)
    scales = _trust_ratio(w_norms, u_norms) * group["lr"]  # (n_tensors,)
    torch._foreach_mul_(updates, list(scales.unbind(0)))
    torch._foreach_sub_(params, updates)
