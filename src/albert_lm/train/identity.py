"""Comparing what a run was started with against what its resumption is given.

Fine-tuning (`albert_lm.finetune.resume`) and pretraining (`albert_lm.pretrain.resume`) both record a
run's identity -- a JSON object whose ``config`` entry maps each setting to its value, and whose other
entries are fingerprints (the data, the tokenizer) -- and refuse a ``--resume`` whose identity differs.
`differences` is the one comparison both use: one line per differing field, old then new.
"""

from __future__ import annotations

from collections.abc import Callable, Mapping
from typing import Any

CONFIG_KEY = "config"
"""The entry of an identity that maps setting names to values (named by their flag in a difference)."""


def differences(
    saved: Mapping[str, Any],
    now: Mapping[str, Any],
    *,
    flag: Callable[[str], str],
    show: Callable[[Any], str] = repr,
) -> list[str]:
    """``NAME: X then, Y now`` for each field of two run identities that differs.

    Args:
        saved: the identity the run recorded.
        now: the identity of the resumption.
        flag: how a setting of the ``config`` entry is named (its command-line flag).
        show: how a value of another entry is shown (a fingerprint shortened, say).
    """
    out = []
    for key in dict.fromkeys([*saved, *now]):
        if key == CONFIG_KEY:
            before, after = saved.get(key) or {}, now.get(key) or {}
            for name in dict.fromkeys([*before, *after]):
                if before.get(name) != after.get(name):
                    out.append(f"{flag(name)}: {before.get(name)!r} then, {after.get(name)!r} now")
        elif saved.get(key) != now.get(key):
            out.append(f"{key}: {show(saved.get(key))} then, {show(now.get(key))} now")
    return out
