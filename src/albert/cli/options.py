"""Dataclass -> argparse: one flag per field, typed by the field's annotation, helped by its docstring.

The one mechanism behind ``albert pretrain``'s ``--optim.lr`` flags and ``albert finetune``'s
``--learning-rate`` flags (see `albert._fields`). A flag that is not given leaves no attribute behind
(``argparse.SUPPRESS``), so `given_values` returns exactly what the user set, ``None`` included
(``--train-steps null``).
"""

from __future__ import annotations

import argparse
import dataclasses
from typing import Any

from albert._fields import FieldError, coerce, field_docs, field_types, parse_value, split_optional


def _flag(prefix: str, name: str, style: str) -> str:
    if style == "dotted":  # --optim.lr
        return f"--{prefix}.{name}" if prefix else f"--{name}"
    return "--" + (f"{prefix}-{name}" if prefix else name).replace("_", "-")  # --learning-rate


def _converter(tp: Any, where: str, scalar: bool = False) -> Any:
    def convert(text: str) -> Any:
        try:
            return coerce(parse_value(text) if scalar else text, tp, where)
        except FieldError as e:
            raise argparse.ArgumentTypeError(str(e).split(": ", 1)[-1]) from None

    convert.__name__ = str(tp)  # argparse names the type in its message
    return convert


def add_dataclass_flags(
    parser: argparse.ArgumentParser | argparse._ArgumentGroup,
    cls: type,
    *,
    prefix: str = "",
    style: str = "dashed",
    exclude: tuple[str, ...] = (),
    show_defaults: bool = True,
) -> None:
    """Add one flag per field of the dataclass ``cls``.

    Args:
        parser: the parser or argument group to add to.
        prefix: the section name (``"optim"``) put before each field name.
        style: ``"dashed"`` (``--learning-rate``) or ``"dotted"`` (``--optim.lr``).
        exclude: fields without a flag.
        show_defaults: end each help with the field's default; False where the defaults come from
            elsewhere (``albert finetune``: the task's preset).
    """
    docs, hints = field_docs(cls), field_types(cls)
    for f in dataclasses.fields(cls):
        if f.name in exclude:
            continue
        flag = _flag(prefix, f.name, style)
        dest = f"{prefix}.{f.name}" if prefix else f.name
        tp = hints[f.name]
        base, optional = split_optional(tp)
        default = f.default if f.default is not dataclasses.MISSING else None
        help_text = (docs.get(f.name) or f.name.replace("_", " ")) + (
            f" (default: {default})" if show_defaults and f.default is not dataclasses.MISSING else ""
        )
        # dotted (albert pretrain): VALUE reads as in --set and the config file (``null``, ``"text"``), and
        # a bool flag takes an optional value (``--run.compile``, ``--run.compile false``)
        dotted = style == "dotted"
        if base is bool and not optional and not dotted:
            parser.add_argument(
                flag,
                dest=dest,
                action=argparse.BooleanOptionalAction,
                default=argparse.SUPPRESS,
                help=help_text,
            )
            continue
        parser.add_argument(
            flag,
            dest=dest,
            type=_converter(tp, flag, scalar=dotted),
            nargs="?" if dotted and base is bool else None,
            const=True if dotted and base is bool else None,
            default=argparse.SUPPRESS,
            metavar=getattr(base, "__name__", "VALUE").upper(),
            help=help_text,
        )


def given_values(args: argparse.Namespace, cls: type, *, prefix: str = "") -> dict[str, Any]:
    """``{field: value}`` for the flags of ``cls`` that were given on the command line (None included)."""
    out = {}
    for f in dataclasses.fields(cls):
        dest = f"{prefix}.{f.name}" if prefix else f.name
        if hasattr(args, dest):
            out[f.name] = getattr(args, dest)
    return out
