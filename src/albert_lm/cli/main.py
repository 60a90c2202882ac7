"""`albert`: one command, a table of subcommands, each a thin layer over the library.

Each subcommand module defines ``HELP`` (one line), ``add_arguments(parser)`` and ``run(args) -> int``;
a command with subcommands (``albert convert tf``) has no ``run``: its ``add_arguments`` adds them with
`albert_lm.cli.options.add_subcommands` and marks each leaf with the function that runs it
(`albert_lm.cli.options.runs`). One mechanism: the leaf's parser sets ``args._run``, and `main` calls it.
Modules keep heavy imports (torch, transformers, ...) inside ``run`` so that ``albert --help`` is fast.

Exit codes: 0 success, 1 an error of the data, the model or the system (one line ``albert <cmd>: error:
<message>``, the traceback with ``-v``; `main` prints it, so ``run`` just raises), 2 a usage error
(argparse), 130 / 143 interrupted.
"""

from __future__ import annotations

import argparse
import importlib
import logging
import sys
import traceback

from albert_lm.cli.hub_ids import add_revision_flags, resolve_hub_ids
from albert_lm.cli.options import DEPRECATIONS, RUN, HelpFormatter, UsageError, mark_deprecated, runs

# name -> module. A plain table: adding a command is adding a line here.
COMMANDS: dict[str, str] = {
    # corpus -> vocab -> shards -> model dir
    "tokenizer": "albert_lm.cli.tokenizer",
    "prepare": "albert_lm.cli.prepare",
    "data": "albert_lm.cli.data",
    "pretrain": "albert_lm.cli.pretrain",
    "plot": "albert_lm.cli.plot",
    # released checkpoints -> model dir
    "convert": "albert_lm.cli.convert",
    # model dir -> run dir
    "finetune": "albert_lm.cli.finetune",
    "evaluate": "albert_lm.cli.evaluate",
    "probe": "albert_lm.cli.probe",
    "predict": "albert_lm.cli.predict",
    "export": "albert_lm.cli.export",
    "serve": "albert_lm.cli.serve",
    "params": "albert_lm.cli.params",
}


def _version() -> str:
    from albert_lm import __version__

    return __version__


def build_parser(command: str | None = None) -> argparse.ArgumentParser:
    """The parser; only ``command``'s arguments are built (some, like finetune's task table, import the
    library), so that ``albert --help`` and every command start fast. None: just the command list."""
    parser = argparse.ArgumentParser(
        prog="albert",
        description="ALBERT in PyTorch: build vocabularies, prepare data, pretrain, convert released "
        "checkpoints, fine-tune and evaluate.",
    )
    parser.add_argument("-v", "--verbose", action="store_true", help="debug logging and full tracebacks")
    parser.add_argument("--version", action="version", version=f"albert {_version()}")
    sub = parser.add_subparsers(dest="command", metavar="COMMAND")
    for name, module_name in COMMANDS.items():
        module = importlib.import_module(module_name)
        p = sub.add_parser(
            name,
            help=module.HELP,
            description=getattr(module, "DESCRIPTION", module.HELP),
            formatter_class=HelpFormatter,
        )
        if name == command:
            module.add_arguments(p)
            mark_deprecated(p)  # old spellings of the convention's flags (docs/cli.md) print one line
            add_revision_flags(p)  # --model may be a Hub id: --revision beside it
            if not subcommands(p):  # a leaf itself; a command with subcommands marked its leaves
                runs(p, module.run)
    return parser


def subcommands(parser: argparse.ArgumentParser) -> dict[str, argparse.ArgumentParser]:
    """``{name: parser}`` of the subcommands of ``parser`` (none: a leaf)."""
    return {
        name: sub
        for action in parser._actions
        if isinstance(action, argparse._SubParsersAction)
        for name, sub in action.choices.items()
    }


def error_message(error: BaseException) -> str | None:
    """The one line that `main` prints for an expected error, or None for a bug (whose traceback is
    shown). Expected: the package's own error classes (ConfigError, CheckpointError, ...: all are
    defined in ``albert_lm``), any OSError (a missing file, a full disk) and a ValueError with a message."""
    if isinstance(error, OSError):
        if error.strerror and error.filename is not None:  # "[Errno 28] ...: 'path'" -> "path: ..."
            return f"{error.filename}: {error.strerror}"
        text = str(error)
    elif any(c.__module__.partition(".")[0] == "albert_lm" for c in type(error).__mro__) or (
        isinstance(error, ValueError) and str(error)
    ):
        text = str(error)
    else:
        return None
    return " ".join(text.split()) or type(error).__name__  # one line


def _joined() -> bool:
    """Whether the command joined a torchrun process group (`albert_lm.train.distributed`, imported only by
    the commands that use it, knows)."""
    distributed = sys.modules.get("albert_lm.train.distributed")
    return bool(distributed is not None and distributed._joined)


def _end(rc: int) -> int:
    """``rc``, or the end of the process when the command joined a process group: then every rank leaves
    through `albert_lm.train.distributed.exit_process` (flushed, without the interpreter's finalization)."""
    if not _joined():
        return rc
    from albert_lm.train.distributed import exit_process

    return exit_process(rc)


def main(argv: list[str] | None = None) -> int:
    argv = sys.argv[1:] if argv is None else argv
    parser = build_parser(next((a for a in argv if not a.startswith("-")), None))
    args = parser.parse_args(argv)
    logging.basicConfig(
        level=logging.DEBUG if args.verbose else logging.INFO,
        format="%(asctime)s %(levelname)s %(name)s: %(message)s",
        datefmt="%H:%M:%S",
    )
    for note in getattr(args, DEPRECATIONS, None) or []:  # old spellings (docs/cli.md), one line each
        logging.getLogger("albert_lm.cli").warning(note)
    run = getattr(args, RUN, None)
    if run is None:  # no command (a missing subcommand is argparse's usage error)
        parser.print_help()
        return 2
    try:
        resolve_hub_ids(args)
        return _end(int(run(args) or 0))
    except UsageError as e:  # as argparse reports its own: the command's usage, exit 2
        subcommands(parser)[args.command].error(str(e))
    except KeyboardInterrupt:
        print("interrupted", file=sys.stderr)
        return _end(130)
    except Exception as e:
        message = error_message(e)
        if message is None:  # a bug: the full traceback
            if not _joined():
                raise
            traceback.print_exc()
            return _end(1)
        if args.verbose:
            traceback.print_exc()
        print(f"albert {args.command}: error: {message}", file=sys.stderr)
        return _end(1)


if __name__ == "__main__":
    sys.exit(main())
