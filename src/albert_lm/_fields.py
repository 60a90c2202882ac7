"""Dataclass fields as configuration: their docstrings, their real types, and values checked against them.

One mechanism for every typed configuration (the settings both training workflows share,
`albert_lm.train.settings`, and the sections of `albert_lm.pretrain.config.PretrainConfig` and
`albert_lm.finetune.config.FinetuneConfig`): a field's help is the string literal written under it (as litgpt and
jsonargparse read them), its type is the annotation (``int``, ``float | None``, ``dict[str, Any]``,
``bool``, ``Literal[...]``), and `coerce` turns a flag's text or a file's value into that type or raises an
error that names the field. ``albert_lm.cli.options`` builds argparse flags from the same facts.

The bottom of the import order with ``_io``: imports nothing from ``albert``.
"""

from __future__ import annotations

import ast
import dataclasses
import functools
import inspect
import json
import math
import textwrap
import types
from typing import Any, Literal, Union, get_args, get_origin, get_type_hints

__all__ = ["FieldError", "coerce", "field_docs", "field_types", "parse_value", "split_optional"]


class FieldError(ValueError):
    """A value does not fit its field; the message names the field (and the file or flag)."""


@functools.cache
def field_docs(cls: type) -> dict[str, str]:
    """``{field: help}`` from the string literal under each field of ``cls`` (and its dataclass bases);
    a field's ``metadata["help"]`` wins where given."""
    docs: dict[str, str] = {}
    for klass in reversed(cls.__mro__):
        if not dataclasses.is_dataclass(klass):
            continue
        try:
            source = textwrap.dedent(inspect.getsource(klass))
        except (OSError, TypeError):
            continue
        body = ast.parse(source).body[0]
        assert isinstance(body, ast.ClassDef)
        stmts = body.body
        for node, nxt in zip(stmts, stmts[1:]):
            if (
                isinstance(node, ast.AnnAssign)
                and isinstance(node.target, ast.Name)
                and isinstance(nxt, ast.Expr)
                and isinstance(nxt.value, ast.Constant)
                and isinstance(nxt.value.value, str)
            ):
                docs[node.target.id] = " ".join(inspect.cleandoc(nxt.value.value).split())
    for f in dataclasses.fields(cls):
        if f.metadata.get("help"):
            docs[f.name] = f.metadata["help"]
    return docs


def field_types(cls: type) -> dict[str, Any]:
    """``{field: resolved type}`` of a dataclass (string annotations evaluated)."""
    hints = get_type_hints(cls)
    return {f.name: hints[f.name] for f in dataclasses.fields(cls)}


def parse_value(text: str) -> Any:
    """A flag / YAML-subset scalar: JSON first (numbers, true, null, "s", {...}), then YAML words, else text.

    ``none`` stays the word "none" (``sharing=none`` is a value, as in YAML, where only ``null`` / ``~`` / empty
    are null); `coerce` reads it as null for an optional field that is not a string.
    """
    text = text.strip()
    try:
        return json.loads(text)
    except json.JSONDecodeError:
        pass
    low = text.lower()
    if low in ("true", "yes", "on"):
        return True
    if low in ("false", "no", "off"):
        return False
    if low in ("null", "~", ""):
        return None
    if len(text) >= 2 and text[0] == text[-1] and text[0] in "'\"":
        return text[1:-1]
    return text


def split_optional(tp: Any) -> tuple[Any, bool]:
    """(the type without None, whether None is allowed)."""
    origin = get_origin(tp)
    if origin is Union or (hasattr(types, "UnionType") and origin is types.UnionType):
        args = [a for a in get_args(tp) if a is not type(None)]
        optional = len(args) < len(get_args(tp))
        if len(args) == 1:
            return args[0], optional
        return Union[tuple(args)], optional  # noqa: UP007 - rebuilt at run time
    return tp, tp is type(None) or tp is Any


def coerce(value: Any, tp: Any, where: str) -> Any:
    """``value`` checked / converted to the field type ``tp``.

    Numbers must be finite: ``inf`` and ``nan`` are refused for every ``float`` field (a learning rate of
    ``inf`` trains a model of NaNs and exits 0).

    Raises:
        FieldError: naming ``where`` (e.g. ``"--optim.learning_rate"`` or ``"run.yaml: optim.learning_rate"``).
    """
    base, optional = split_optional(tp)
    takes_the_word = base is str or (get_origin(base) is Literal and "none" in get_args(base))
    if optional and isinstance(value, str) and value.strip().lower() == "none" and not takes_the_word:
        value = None  # Python's spelling of null, for `--run.max-steps none`
    if value is None:
        if optional:
            return None
        raise FieldError(f"{where}: may not be null")
    if isinstance(value, str) and base is not str and get_origin(base) is not Literal:
        value = parse_value(value)
        if value is None:
            if optional:
                return None
            raise FieldError(f"{where}: may not be null")
    origin = get_origin(base)
    if origin is Literal:
        choices = get_args(base)
        if value not in choices:
            raise FieldError(f"{where}: expected one of {', '.join(map(str, choices))}, got {value!r}")
        return value
    if base is dict or origin is dict:
        if not isinstance(value, dict):
            raise FieldError(f"{where}: expected a mapping, got {value!r}")
        return dict(value)
    if base is list or origin is list:
        if not isinstance(value, (list, tuple)):
            raise FieldError(f"{where}: expected a list, got {value!r}")
        return list(value)
    if base is bool:
        if isinstance(value, bool):
            return value
        if isinstance(value, int) and value in (0, 1):
            return bool(value)
        raise FieldError(f"{where}: expected true/false, got {value!r}")
    if base is int:
        if isinstance(value, int) and not isinstance(value, bool):
            return value
        if isinstance(value, float) and value.is_integer():
            return int(value)
        if isinstance(value, str):
            try:
                return int(value.replace("_", ""))
            except ValueError:
                pass
        raise FieldError(f"{where}: expected an integer, got {value!r}")
    if base is float:
        if isinstance(value, str):
            try:
                value = float(value)
            except ValueError:
                raise FieldError(f"{where}: expected a number, got {value!r}") from None
        if isinstance(value, (int, float)) and not isinstance(value, bool):
            if not math.isfinite(value):
                raise FieldError(f"{where}: must be a finite number, got {value!r}")
            return float(value)
        raise FieldError(f"{where}: expected a number, got {value!r}")
    if base is str:
        if isinstance(value, (str, int, float)) and not isinstance(value, bool):
            return str(value)
        raise FieldError(f"{where}: expected a string, got {value!r}")
    return value
