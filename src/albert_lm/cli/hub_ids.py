"""Hub ids on the command line: ``--model albert/albert-base-v2 [--revision REV]`` on every command that
reads a model, resolved once, before the command runs, into the local snapshot (`albert_lm._hub`)."""

from __future__ import annotations

import argparse

MODEL_FLAGS = ("--model", "--init")
MODEL_DEST = "_model_dest"  # the namespace attribute naming the dest of the leaf's --model


def add_revision_flags(parser: argparse.ArgumentParser) -> None:
    """``--revision`` beside ``--model`` on every leaf of ``parser`` that has a ``--model`` flag."""
    for action in parser._actions:
        if isinstance(action, argparse._SubParsersAction):
            for sub in action.choices.values():
                add_revision_flags(sub)
    model = next((a for a in parser._actions if set(a.option_strings) & set(MODEL_FLAGS)), None)
    if model is None or any("--revision" in a.option_strings for a in parser._actions):
        return
    parser.add_argument(
        "--revision",
        metavar="REV",
        help="with a Hugging Face Hub id as --model (owner/name): the branch, tag or commit (default main)",
    )
    parser.set_defaults(**{MODEL_DEST: model.dest})


def resolve_hub_ids(args: argparse.Namespace) -> None:
    """Replace a Hub id given as ``--model`` with its local snapshot directory (a path stays as it is).

    Raises:
        HubModelNotFound: the id cannot be resolved (offline and not cached, no such repository, ...).
    """
    dest: str | None = getattr(args, MODEL_DEST, None)
    value = getattr(args, dest, None) if dest else None
    revision = getattr(args, "revision", None)
    if value is None:
        if revision is not None:
            raise ValueError("--revision is for a Hugging Face Hub id given as --model")
        return
    from albert_lm._hub import resolve_model_dir

    assert dest is not None  # a value came from it
    setattr(args, dest, str(resolve_model_dir(str(value), revision)))
