"""Which parameters get weight decay (and, for LAMB, the trust ratio): the original's rule on our names.

The original (optimization.py `create_optimizer`) excludes every variable whose TF name matches one of
``["LayerNorm", "layer_norm", "bias"]`` (``re.search``) from weight decay, and lamb_optimizer.py uses the
same list for the layer adaptation. In ALBERT that is: all LayerNorm gammas and betas, every dense bias and
the MLM / SOP output biases. Our modules are not named "LayerNorm", so a parameter is excluded when

* its name matches one of the original patterns (``bias`` catches ``mlm.bias`` and every ``*.bias``), or
* it belongs to a normalization module (`torch.nn.LayerNorm`, `torch.nn.RMSNorm`, `torch.nn.GroupNorm`,
  batch norms, or any module class whose name ends in ``Norm``), or
* a component of its dotted name is ``norm`` / ends in ``norm`` (our naming: ``embeddings.norm.weight``).

Optionally (``exclude_1d=True``) every parameter with fewer than two dimensions is excluded too; for
ALBERT and BERT that is the same set (a test checks it), for other modules it may not be.

The learning rate can differ by part, all through one mechanism, ``lr_scales`` (parameter-name prefix ->
multiplier) of `param_groups`: `head_prefixes` names the heads that ``head_lr_scale`` speeds up, and
`layer_decay_scales` the encoder's weight groups that layer-wise lr decay slows down (ELECTRA, Clark et al.
2020, and DeBERTa fine-tune so: lr * decay^depth-from-the-top, the embeddings deepest, the heads at lr).
ALBERT's layers share their weights, so depth is counted in distinct sets of layer weights, not in layer
applications: one rate per set, as a weight cannot train at two rates. With full sharing and one group
(every released ALBERT) the shared block trains at the full lr and only the embeddings are decayed (once);
with ``num_hidden_groups`` G each group is one level; with sharing ``none`` (a BERT) each layer is one, as
in ELECTRA; with attention- or FFN-only sharing the unshared blocks of a layer take its group's level.
"""

from __future__ import annotations

import logging
import re
from collections.abc import Mapping, Sequence
from typing import Any

from torch import nn

logger = logging.getLogger(__name__)

# original optimization.py: exclude_from_weight_decay=["LayerNorm", "layer_norm", "bias"]
ORIGINAL_EXCLUDE_PATTERNS: tuple[str, ...] = ("LayerNorm", "layer_norm", "bias")

_NORM_TYPES: tuple[type[nn.Module], ...] = (
    nn.LayerNorm,
    nn.GroupNorm,
    nn.modules.batchnorm._BatchNorm,
    nn.modules.instancenorm._InstanceNorm,
    nn.LocalResponseNorm,
)
if hasattr(nn, "RMSNorm"):
    _NORM_TYPES = (*_NORM_TYPES, nn.RMSNorm)


def _is_norm_module(module: nn.Module) -> bool:
    return isinstance(module, _NORM_TYPES) or type(module).__name__.endswith("Norm")


def excluded_parameter_names(
    model: nn.Module,
    patterns: Sequence[str] = ORIGINAL_EXCLUDE_PATTERNS,
    exclude_1d: bool = False,
) -> set[str]:
    """Names (as ``model.named_parameters()`` gives them) that get no weight decay and no trust ratio."""
    compiled = [re.compile(p) for p in patterns]
    excluded: set[str] = set()
    for module_name, module in model.named_modules():
        is_norm = _is_norm_module(module)
        for pname, p in module.named_parameters(recurse=False):
            full = f"{module_name}.{pname}" if module_name else pname
            components = full.split(".")[:-1]
            if (
                is_norm
                or any(c.search(full) for c in compiled)
                or any(c.lower().endswith("norm") for c in components)
                or (exclude_1d and p.ndim < 2)
            ):
                excluded.add(full)
    # named_modules / named_parameters drop duplicates of shared modules and tied tensors; keep only names
    # that named_parameters() reports, so the groups below see each tensor once.
    reported = {name for name, _ in model.named_parameters()}
    return excluded & reported


def head_prefixes(model: nn.Module, encoder: str = "albert.") -> list[str]:
    """The parameter-name prefixes of what sits on top of the encoder: each top-level part outside
    ``encoder`` (pretraining: ``mlm.``, ``sop.``; fine-tuning: ``classifier.``, ``qa.``, ``squad.``) and the
    encoder's pooler (``albert.pooler.``), where they have trainable parameters. A tensor tied into the
    encoder (the MLM decoder's word embeddings) is named, hence scaled, as the encoder's. A model with no
    parameter under ``encoder`` has nothing to tell its heads from: none."""
    names = [n for n, p in model.named_parameters() if p.requires_grad]
    if not any(n.startswith(encoder) for n in names):
        return []
    tops = dict.fromkeys(n.split(".", 1)[0] + "." for n in names if not n.startswith(encoder))
    pooler = encoder + "pooler."
    return [*tops, *([pooler] if any(n.startswith(pooler) for n in names) else [])]


def param_groups(
    model: nn.Module,
    weight_decay: float,
    patterns: Sequence[str] = ORIGINAL_EXCLUDE_PATTERNS,
    exclude_1d: bool = False,
    extra: dict[str, Any] | None = None,
    lr_scales: Mapping[str, float] | None = None,
) -> list[dict[str, Any]]:
    """Two optimizer parameter groups: decayed + adapted, and excluded (no decay, no trust ratio); with
    ``lr_scales`` (parameter-name prefix -> lr multiplier) each of the two is split further by scale, the
    unscaled groups first, each scaled group carrying its ``"lr_scale"``.

    Args:
        model: the module whose trainable parameters are grouped (frozen ones, requires_grad=False, are left
            out). Tied / shared tensors appear once.
        weight_decay: rate for the first group.
        patterns: regular expressions searched in parameter names (the original's list by default).
        exclude_1d: also exclude every parameter with fewer than 2 dimensions.
        extra: keys added to both groups (e.g. ``{"lr": ...}``).

    Returns:
        ``[{"params": [...], "names": [...], "weight_decay": wd, "adapt": True},
           {"params": [...], "names": [...], "weight_decay": 0.0, "adapt": False}]`` (an empty group is dropped).
    """
    excluded = excluded_parameter_names(model, patterns, exclude_1d)
    scales = dict(lr_scales or {})
    unmatched = [
        prefix for prefix in scales if not any(n.startswith(prefix) for n, _ in model.named_parameters())
    ]
    if unmatched:
        raise ValueError(f"lr_scales: no parameter name starts with {', '.join(map(repr, unmatched))}")
    # (scale, decayed?) -> members; the unscaled groups first, so param_groups[0] is the base rate
    members: dict[tuple[float, bool], list[tuple[str, nn.Parameter]]] = {}
    for name, p in model.named_parameters():
        if not p.requires_grad:
            continue
        scale = next((s for prefix, s in scales.items() if name.startswith(prefix)), 1.0)
        members.setdefault((scale, name not in excluded), []).append((name, p))
    one_d = [n for (_, decayed), group in members.items() if decayed for n, p in group if p.ndim < 2]
    if one_d:
        logger.debug("weight decay applies to 1-D parameters %s", one_d)
    groups = []
    for scale in sorted({s for s, _ in members}, key=lambda s: s != 1.0):
        for decayed in (True, False):
            group_members = members.get((scale, decayed))
            if not group_members:
                continue
            group: dict[str, Any] = {
                "params": [p for _, p in group_members],
                "names": [n for n, _ in group_members],
                "weight_decay": weight_decay if decayed else 0.0,
                "adapt": decayed,
            }
            if scale != 1.0:
                group["lr_scale"] = scale
            group.update(extra or {})
            groups.append(group)
    return groups


def layer_decay_scales(model: nn.Module, decay: float, encoder: str = "albert.") -> dict[str, float]:
    """Layer-wise lr decay as ``lr_scales`` for `param_groups` (see the module docstring): the encoder's
    weight groups g = 1..G from the bottom at ``decay ** (G - g)``, its embeddings at ``decay ** G``; what
    is not listed (the heads, the pooler) keeps the full lr.

    Raises:
        ValueError: ``model`` has no ALBERT encoder under ``encoder`` (with a ``config``), or trainable
            encoder parameters this rule places nowhere.
    """
    body = getattr(model, encoder.rstrip("."), None)
    cfg = getattr(body, "config", None)
    if cfg is None or not hasattr(cfg, "num_attention_blocks"):
        raise ValueError(f"layer-wise lr decay: {type(model).__name__} has no ALBERT encoder at {encoder}*")
    levels = cfg.num_hidden_layers if cfg.sharing == "none" else cfg.num_hidden_groups

    def level(shared: bool, block: int) -> int:  # 0-based from the bottom
        outer = block // cfg.inner_group_num  # the group when shared, else the layer
        return outer if shared or cfg.sharing == "none" else cfg.group_of_layer(outer)

    scales = {f"{encoder}embeddings.": decay**levels}
    for kind, shared, count in (("attention", cfg.shares_attention, cfg.num_attention_blocks),
                                ("ffn", cfg.shares_ffn, cfg.num_ffn_blocks)):  # fmt: skip
        for b in range(count):
            scales[f"{encoder}encoder.{kind}.{b}."] = decay ** (levels - 1 - level(shared, b))
    placed = (*scales, f"{encoder}pooler.")
    stray = [n for n, p in model.named_parameters()
             if p.requires_grad and n.startswith(encoder) and not n.startswith(placed)]  # fmt: skip
    if stray:
        raise ValueError(f"layer-wise lr decay: no layer level for {', '.join(stray)}")
    return scales
