"""Dataclass -> argparse: one flag per field, typed by the field's annotation, helped by its docstring.

The one mechanism behind ``albert pretrain``'s ``--optim.learning_rate`` flags and ``albert finetune``'s
``--learning-rate`` flags (see `albert_lm._fields`). A flag that is not given leaves no attribute behind
(``argparse.SUPPRESS``), so `given_values` returns exactly what the user set, ``None`` included
(``--train-steps null``).
"""

from __future__ import annotations

import argparse
import copy
import dataclasses
import logging
from typing import Any

from albert_lm._fields import FieldError, coerce, field_docs, field_types, parse_value, split_optional

logger = logging.getLogger("albert_lm.cli")


def _flag(prefix: str, name: str, style: str) -> str:
    if style == "dotted":  # --optim.learning_rate
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
        style: ``"dashed"`` (``--learning-rate``) or ``"dotted"`` (``--optim.learning_rate``).
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
            f" (default: {default})" if show_defaults and f.default not in (dataclasses.MISSING, None) else ""
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


def add_flat_flags(
    parser: argparse.ArgumentParser | argparse._ArgumentGroup,
    flags: dict[str, str],
    sections: dict[str, type],
    *,
    old: dict[str, tuple[str, ...]] | None = None,
    required: tuple[str, ...] = (),
    defaults: dict[str, Any] | None = None,
) -> None:
    """One dashed flag per entry of ``flags`` (``{"learning_rate": "optim.learning_rate"}`` -> ``--learning-rate``),
    typed by the field it sets and helped by its docstring; `flat_values` reads them back by section.

    Args:
        sections: section name -> its dataclass.
        old: flag name -> older spellings kept as second option strings (deprecated by `mark_deprecated`).
        required: flag names argparse requires.
        defaults: flag name -> the value the help shows as its default (the flag itself still sets nothing
            when not given: the default is applied where the configuration is resolved).
    """
    for name, target in flags.items():
        section, _, attr = target.partition(".")
        cls = sections[section]
        tp = field_types(cls)[attr]
        base, optional = split_optional(tp)
        spellings = ["--" + name.replace("_", "-"), *(old or {}).get(name, ())]
        dest = f"{FLAT_DEST}{target}"
        help_text = (field_docs(cls).get(attr) or attr.replace("_", " ")).replace(
            "%", "%%"
        )  # argparse formats it
        if defaults is not None and name in defaults:
            help_text += f" (default: {'null' if defaults[name] is None else defaults[name]})"
        if base is bool and not optional:
            parser.add_argument(*spellings, dest=dest, action=argparse.BooleanOptionalAction,
                                default=argparse.SUPPRESS, help=help_text)  # fmt: skip
            continue
        parser.add_argument(
            *spellings,
            dest=dest,
            type=_converter(tp, spellings[0], scalar=True),  # VALUE reads as in --set and --config
            default=argparse.SUPPRESS,
            required=name in required,
            metavar=base.__name__.upper() if base in (int, float) else name.upper(),
            help=help_text,
        )


FLAT_DEST = "flag:"  # the namespace attributes of `add_flat_flags`: "flag:optim.learning_rate"


def flat_values(args: argparse.Namespace) -> dict[str, dict[str, Any]]:
    """``{section: {field: value}}`` of the `add_flat_flags` flags given on the command line."""
    out: dict[str, dict[str, Any]] = {}
    for key, value in vars(args).items():
        if key.startswith(FLAT_DEST):
            section, _, attr = key.removeprefix(FLAT_DEST).partition(".")
            out.setdefault(section, {})[attr] = value
    return out


def resolve_settings(
    base: Any,
    args: argparse.Namespace,
    sections: dict[str, type],
    *,
    flags: dict[str, dict[str, Any]] | None = None,
    derive: Any = None,
    apply: Any = None,
) -> Any:
    """The one resolver of every command with settings (``albert pretrain``, ``albert finetune``): ``base``
    (a recipe or a task's preset, already built), then ``--config FILE``, then the flags, then ``--set``,
    the later winning (``null`` included). ``derive(given)``: settings that follow from what was given
    (``{section: {field: value}}``, applied last, as flags); ``flags``: the flags' values when the command
    adds its own (default: `flat_values`); ``apply(cfg, raw, source)``: how a source is applied (default
    `albert_lm.train.settings.apply_dict` over ``sections``; pretraining's also reads a run_config.json).

    Raises:
        ConfigError: naming the source (the file, ``flags``, ``--set``) and the field.
    """
    from albert_lm.train.settings import apply_dict, load_config_file, parse_assignments

    sources: list[tuple[str, dict[str, Any]]] = []
    if getattr(args, "config", None):
        sources.append((args.config, load_config_file(args.config)))
    sources.append(("flags", flat_values(args) if flags is None else flags))
    sources.append(("--set", parse_assignments(getattr(args, "set", None) or [])))
    given: dict[str, dict[str, Any]] = {}
    for _, raw in sources:
        for section, values in raw.items():
            if isinstance(values, dict):
                given.setdefault(section, {}).update(values)
    cfg = base
    for source, raw in [*sources, ("flags", derive(given) if derive else {})]:
        if raw:
            cfg = apply(cfg, raw, source) if apply else apply_dict(cfg, raw, source, sections)
    return cfg


def add_config_arguments(parser: argparse.ArgumentParser) -> None:
    """``--config FILE``, ``--set SECTION.FIELD=VALUE ...`` and ``--print-config``: the same in `albert
    pretrain` and `albert finetune` (docs/cli.md)."""
    parser.add_argument("--config", metavar="FILE",
                        help="a JSON or YAML file with any of the sections (--print-config writes one)")  # fmt: skip
    parser.add_argument("--set", action="extend", nargs="+", default=[], metavar="SECTION.FIELD=VALUE",
                        help="set fields (repeatable; after --config and the flags)")  # fmt: skip
    parser.add_argument("--print-config", action="store_true",
                        help="print the resolved configuration (YAML, readable by --config) and exit")  # fmt: skip


def given_values(args: argparse.Namespace, cls: type, *, prefix: str = "") -> dict[str, Any]:
    """``{field: value}`` for the flags of ``cls`` that were given on the command line (None included)."""
    out = {}
    for f in dataclasses.fields(cls):
        dest = f"{prefix}.{f.name}" if prefix else f.name
        if hasattr(args, dest):
            out[f.name] = getattr(args, dest)
    return out


# ------------------------------------------------------------------------------------ the CLI convention
# docs/cli.md: one spelling per concept in every command. An old spelling stays for one release as a second
# option string of the same action (so `required` and defaults hold whichever is given) and logs one warning
# (`albert_lm.cli.main` logs those noted while parsing, once logging is set up).

# old spelling -> the convention's; `albert_lm.cli.main` marks every parser's old spellings with `deprecate`
OLD_SPELLINGS: dict[str, str] = {
    "--config": "--model-config",  # convert tf: a model's config, not a settings file (pretrain / finetune)
    "--task": "--sentence-task",  # prepare: sop | nsp, not a GLUE task
    "--init": "--model",
    "--run-dir": "--output",
    "--train-file": "--train",
    "--dev-file": "--dev",
    "--test-file": "--test",
    "--max-length": "--max-seq-length",
    "--quiet": "--no-progress",  # tokenizer train
}


def mark_deprecated(parser: argparse.ArgumentParser) -> None:
    """`deprecate` the `OLD_SPELLINGS` of every flag of ``parser`` and of its subcommands' parsers."""
    for action in parser._actions:
        if isinstance(action, argparse._SubParsersAction):
            for sub in dict.fromkeys(action.choices.values()):
                mark_deprecated(sub)
            continue
        # an old spelling is deprecated where it is a second spelling of the new one (a `--config FILE` of
        # settings is not convert's old `--config JSON`)
        old = [s for s in action.option_strings if OLD_SPELLINGS.get(s) in action.option_strings]
        if old and not hasattr(action, "deprecated"):
            deprecate(action, *old)
        if "--output" in action.option_strings and "-o" not in parser._option_string_actions:
            action.option_strings = [
                *action.option_strings,
                "-o",
            ]  # -o is --output in every command that writes one
            parser._option_string_actions["-o"] = action


RUN = "_run"  # the namespace attribute holding the function that runs the (sub)command given


def add_subcommands(parser: argparse.ArgumentParser, metavar: str) -> Any:
    """The subcommands of ``parser``: required (none given is argparse's usage error, exit 2), with no
    ``dest`` of their own. Each leaf says what runs it (`runs`) on its own parser, never on a parent's:
    argparse has resolved a parent's and a subparser's default for one dest differently across versions
    (bpo-9351; bpo-45235 made the parent's win in 3.9.8 / 3.10.0, reverted in 3.9.9 / 3.10.1), so the
    leaf's default is the only one there is."""
    return parser.add_subparsers(metavar=metavar, required=True)


def runs(parser: argparse.ArgumentParser, run: Any, **defaults: Any) -> argparse.ArgumentParser:
    """Mark ``parser`` as a leaf that ``run(args)`` runs (`albert_lm.cli.main` calls it); ``defaults``: what
    else the leaf tells ``run`` (``task_kind="glue"``)."""
    parser.set_defaults(**{RUN: run}, **defaults)
    return parser


class UsageError(Exception):
    """A usage error beyond argparse's groups ("--merge, or all of --input --tokenizer --output"):
    `albert_lm.cli.main` reports it as argparse does, the command's usage and exit 2."""


DEPRECATIONS = "_deprecations"  # the namespace attribute listing the old spellings a command line used


def deprecate(action: argparse.Action, *old: str) -> argparse.Action:
    """Mark the option strings ``old`` of ``action`` as deprecated spellings of another: using one still
    works and notes ``--old is deprecated; use --new`` in the namespace for `albert_lm.cli.main` to log."""
    # the first other spelling of the action, or (an action of the old spelling alone) the table's
    canonical = next((s for s in action.option_strings if s not in old), OLD_SPELLINGS.get(old[0], "?"))
    base = type(action)

    class Deprecated(base):  # type: ignore[valid-type,misc]  # the action's own class, plus the warning
        def __call__(
            self, parser: Any, namespace: Any, values: Any, option_string: str | None = None
        ) -> None:
            if option_string in old:
                notes = getattr(namespace, DEPRECATIONS, None) or []
                setattr(namespace, DEPRECATIONS, [*notes, f"{option_string} is deprecated; use {canonical}"])
            super().__call__(parser, namespace, values, option_string)

    Deprecated.__name__ = base.__name__
    action.__class__ = Deprecated
    action.deprecated = old  # type: ignore[attr-defined]  # read by the convention test
    return action


class HelpFormatter(argparse.RawDescriptionHelpFormatter):
    """The commands' help: a flag's deprecated spellings (`deprecate`) work but are not shown."""

    def _format_action_invocation(self, action: argparse.Action) -> str:
        old = getattr(action, "deprecated", ())
        if not old or not action.option_strings:
            return super()._format_action_invocation(action)
        shown = copy.copy(action)
        hidden = {*old, *("--no-" + o.removeprefix("--") for o in old)}  # BooleanOptionalAction's --no-X too
        shown.option_strings = [o for o in action.option_strings if o not in hidden]
        return super()._format_action_invocation(shown)


def warn_deprecated(old: str, new: str) -> None:
    """The deprecation warning for a spelling that `deprecate` cannot carry (a positional, another unit)."""
    logger.warning("%s is deprecated; use %s", old, new)


def add_model_flag(parser: argparse.ArgumentParser, help_text: str, *, positional: bool = False) -> None:
    """``--model MODEL_DIR``, the model a command reads; ``positional``: the command took it as its first
    argument before, which `from_positional` still accepts for one release."""
    parser.add_argument("--model", metavar="MODEL_DIR", help=help_text)
    if positional:
        parser.add_argument("model_positional", nargs="?", metavar="MODEL_DIR", help=argparse.SUPPRESS)


def from_positional(args: argparse.Namespace, dest: str, flag: str, what: str) -> None:
    """Move an old positional ``what`` (``MODEL_DIR``) into ``args.<dest>`` (the flag ``flag``'s), with
    the deprecation line; one of the two is required."""
    old = getattr(args, f"{dest}_positional", None)
    if old is not None:
        if getattr(args, dest) is not None:
            raise ValueError(f"{flag}: given both as {flag} and as a positional {what}")
        warn_deprecated(f"a positional {what}", f"{flag} {what}")
        setattr(args, dest, old)
    if getattr(args, dest) is None:
        raise ValueError(f"{flag} {what} is required")


def add_inference_flags(parser: Any, exclude: tuple[str, ...] = ()) -> None:
    """The flags of `albert_lm.infer.settings.InferenceSettings` (``--eval-batch-size``, ``--max-seq-length``,
    ``--device``, ``--backend``, ``--int8``, ``--threads``), the same in evaluate, predict and serve; the old
    ``--batch-size`` of these commands (a forward batch, where finetune's is an optimizer step's) is a
    deprecated spelling of ``--eval-batch-size``. ``exclude``: fields a command sets otherwise (serve: its
    micro-batcher's ``--max-batch`` is the forward batch)."""
    from albert_lm.infer.settings import BACKENDS, InferenceSettings

    group = parser.add_argument_group("inference")
    add_dataclass_flags(group, InferenceSettings, exclude=exclude)
    for action in parser._actions:
        if "--eval-batch-size" in action.option_strings:
            action.option_strings = [*action.option_strings, "--batch-size"]
            parser._option_string_actions["--batch-size"] = action
            deprecate(action, "--batch-size")
        if "--backend" in action.option_strings:
            action.choices = BACKENDS


def inference_settings(args: argparse.Namespace) -> Any:
    """The `InferenceSettings` of the flags given (the rest at their defaults).

    Raises:
        ValueError: a value out of range, naming its flag.
    """
    from albert_lm.infer.settings import InferenceSettings

    return InferenceSettings(**given_values(args, InferenceSettings))


class MissingExtra(ImportError):
    """An optional dependency is not installed; the message says which extra to install."""
