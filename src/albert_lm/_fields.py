"""Dataclass fields as configuration: their docstrings, their real types, and values checked against them.

One mechanism for every typed configuration (the settings both training workflows share,
`albert_lm.train.settings`, and the sections of `albert_lm.pretrain.config.PretrainConfig` and
`albert_lm.finetune.config.FinetuneConfig`): a field's help is the string literal written under it (as litgpt and
jsonargparse read them), its type is the annotation (``int``, ``float | None``, ``dict[str, Any]``,
``bool``, ``Literal[...]``), and `coerce` turns a flag's text or a file's value into that type or raises an
error that names the field. ``albert_lm.cli.options`` builds argparse flags from the same facts.
`load_yaml` / `dump_yaml` are the YAML of configuration files (``--config``, ``--print-config``).

The bottom of the import order with ``_io``: imports nothing from ``albert``.
"""

from __future__ import annotations

import ast
import dataclasses
import functools
import inspect
import json
import math
import re
import textwrap
import types
from typing import Any, Literal, Union, get_args, get_origin, get_type_hints

import yaml

__all__ = [
    "FieldError",
    "coerce",
    "dump_yaml",
    "field_docs",
    "field_types",
    "load_yaml",
    "parse_value",
    "split_optional",
]


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


_FLOAT_TAG = "tag:yaml.org,2002:float"
_TIMESTAMP_TAG = "tag:yaml.org,2002:timestamp"
# YAML 1.2's float (``1e-06``, ``2E5``, ``.5``) and the 1.1 spellings of infinity / not-a-number. PyYAML's
# YAML 1.1 resolver wants a dot in the mantissa and a sign in the exponent, so it reads ``eps: 1e-06`` as
# the STRING "1e-06". It matches ``12`` too, but the int resolver comes first for digits (resolvers are tried
# in the order they were added), so a plain integer stays an int.
_FLOAT = re.compile(
    r"^(?:[-+]?(?:\.[0-9]+|[0-9][0-9_]*(?:\.[0-9_]*)?)(?:[eE][-+]?[0-9]+)?"
    r"|[-+]?\.(?:inf|Inf|INF)|\.(?:nan|NaN|NAN))$"
)


def _resolvers(base: type) -> dict[Any, Any]:
    """``base``'s implicit resolvers without its float and timestamp ones (a date is text to a config)."""
    return {
        first: [(tag, rx) for tag, rx in entries if tag not in (_FLOAT_TAG, _TIMESTAMP_TAG)]
        for first, entries in base.yaml_implicit_resolvers.items()  # type: ignore[attr-defined]
    }


class _Loader(yaml.SafeLoader):
    """SafeLoader with the float of `_FLOAT`, no timestamps, and duplicate keys refused."""

    def construct_mapping(self, node: Any, deep: bool = False) -> dict[Any, Any]:
        seen: set[Any] = set()
        for key_node, _ in node.value:
            key = self.construct_object(key_node, deep=True)
            if key in seen:
                raise yaml.constructor.ConstructorError(
                    None, None, f"key {key!r} given twice in one mapping", key_node.start_mark
                )
            seen.add(key)
        return super().construct_mapping(node, deep=deep)


class _Dumper(yaml.SafeDumper):
    """SafeDumper that resolves as `_Loader` (a string like ``1e-06`` is quoted) and writes tuples as lists."""


for _cls in (_Loader, _Dumper):
    _cls.yaml_implicit_resolvers = _resolvers(yaml.SafeLoader)
    _cls.add_implicit_resolver(_FLOAT_TAG, _FLOAT, list("-+0123456789."))
_Dumper.add_representer(tuple, _Dumper.represent_list)


def load_yaml(text: str, source: str) -> Any:
    """The document in ``text``: YAML 1.1 as PyYAML reads it, except that ``1e-06`` is a float (YAML 1.2),
    a date stays text, and a key given twice in one mapping is an error.

    Raises:
        FieldError: ``source:line: ...`` naming the line (and column) of the problem.
    """
    try:
        return yaml.load(text, Loader=_Loader)  # noqa: S506 - _Loader is a SafeLoader
    except yaml.MarkedYAMLError as e:
        mark = e.problem_mark or e.context_mark
        where = f"{source}:{mark.line + 1}:{mark.column + 1}" if mark is not None else source
        what = " ".join(str(x) for x in (e.context, e.problem) if x)
        raise FieldError(f"{where}: not valid YAML ({what})") from None
    except yaml.YAMLError as e:
        raise FieldError(f"{source}: not valid YAML ({e})") from None


def dump_yaml(obj: Any) -> str:
    """``obj`` as block YAML that `load_yaml` reads back equal (keys in their order, floats as floats)."""
    return yaml.dump(obj, Dumper=_Dumper, default_flow_style=False, sort_keys=False, allow_unicode=True)


def parse_value(text: str) -> Any:
    """A flag (``--set``) scalar: JSON first (numbers, true, null, "s", {...}), then YAML words, else text.

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
