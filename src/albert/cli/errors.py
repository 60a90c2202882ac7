"""The command line's error convention: one line ``albert <command>: error: <what>`` on stderr, exit 1.

The message names the file and line, the field or flag, or the directory at fault (the library's
exceptions already do); ``albert -v`` adds the traceback. Bad *usage* (an unknown flag) stays argparse's
business and exit status 2.
"""

from __future__ import annotations

import logging
import sys

logger = logging.getLogger("albert.cli")

EXIT_ERROR = 1


def message_of(error: BaseException | str) -> str:
    """The one-line text of an error (a KeyError's own text, not its repr)."""
    if isinstance(error, KeyError) and error.args:
        return str(error.args[0])
    return " ".join(str(error).split()) or type(error).__name__


def fail(command: str, error: BaseException | str) -> int:
    """Print ``albert <command>: error: <error>`` (the traceback too, at debug level: ``albert -v``) and
    return the exit status 1."""
    if isinstance(error, BaseException):
        logger.debug("%s failed", command, exc_info=error)
    print(f"albert {command}: error: {message_of(error)}", file=sys.stderr)
    return EXIT_ERROR
