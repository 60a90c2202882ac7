"""Who may write an output: one writer at a time (`lock_dir`, `lock_output`) and never over the command's own
input (`check_overwrite_inputs`); `guard_output` is both, what every command that writes does first."""

from __future__ import annotations

import contextlib
import os
from collections.abc import Iterator
from pathlib import Path
from typing import Any

from albert_lm._io import FILE_MODE, output_path

LOCK_FILE = ".lock"
"""The lock file `lock_dir` holds inside a directory in use (readers of a directory's content skip it)."""


class DirLockedError(RuntimeError):
    """Another process holds the directory's lock; the message names it."""


@contextlib.contextmanager
def lock_dir(path: str | Path) -> Iterator[Path]:
    """Hold an exclusive lock on the directory ``path`` (created when absent) while inside: ``flock`` on
    ``path/.lock``, which holds the holder's process id. The kernel releases a flock when its process
    ends, however it ends (a SIGKILL too), so a stale lock file is never in the way; on a normal exit the
    file is removed, and a directory this call created and nothing else filled is removed too.

    The lock follows the file, not its name: a rename of the file (`tasks.rundir.replacing` moves it into
    the new run directory) keeps it held. Without ``fcntl`` (Windows) nothing is locked.

    Raises:
        DirLockedError: another process holds the lock (named by its process id).
    """
    path = Path(path)
    created = not path.exists()
    path.mkdir(parents=True, exist_ok=True)
    try:
        with _held(path / LOCK_FILE, path):
            yield path
    finally:
        if created:
            with contextlib.suppress(OSError):  # not empty: the run's content stays
                path.rmdir()


@contextlib.contextmanager
def lock_output(path: str | Path, part: str = "") -> Iterator[Path]:
    """Hold the lock of the output ``path`` (a file or a directory a command writes, replaced whole by
    `atomic_write` / `atomic_write_dir`) while inside: a sibling lock file ``.NAME[.PART].lock``, outside
    the content, so that a swap of the output keeps it. A second writer of the same output fails at once,
    naming the holder; ``part`` locks one part of an output that several processes fill together.

    Raises:
        DirLockedError: another process writes ``path`` (named by its process id).
    """
    path = output_path(path)
    path.parent.mkdir(parents=True, exist_ok=True)
    with _held(path.parent / f".{path.name}{'.' + part if part else ''}.lock", path):
        yield path


@contextlib.contextmanager
def _held(lock: Path, path: Path) -> Iterator[None]:
    """``flock`` on the file ``lock`` (holding this process id) for the output ``path``; see `lock_dir`."""
    try:
        import fcntl
    except ImportError:
        yield
        return
    while True:
        fd = os.open(lock, os.O_RDWR | os.O_CREAT, FILE_MODE)
        try:
            fcntl.flock(fd, fcntl.LOCK_EX | fcntl.LOCK_NB)
        except BlockingIOError:
            holder = os.read(fd, 32).decode("ascii", "replace").strip() or "unknown"
            os.close(fd)
            raise DirLockedError(
                f"{path}: in use by another process (pid {holder}, holding {lock}); wait for it to end, "
                "or choose another output"
            ) from None
        # the holder may have removed the file (its normal exit) between our open and flock: lock the
        # file the name now means, or a third process could lock that one too
        with contextlib.suppress(FileNotFoundError):
            if os.stat(lock).st_ino == os.fstat(fd).st_ino:
                break
        os.close(fd)
    try:
        os.ftruncate(fd, 0)
        os.write(fd, f"{os.getpid()}\n".encode("ascii"))
        yield
    finally:
        with contextlib.suppress(OSError):  # removed before the unlock, so no one locks a dead name
            if os.stat(lock).st_ino == os.fstat(fd).st_ino:
                os.unlink(lock)
        os.close(fd)


class OutputOverlapError(ValueError):
    """An output that would be written over one of the command's inputs; the message names both."""


def check_overwrite_inputs(output: str | Path, inputs: dict[str, Any], *, whole_dir: bool = True) -> None:
    """Refuse to replace ``output`` when that would delete one of the command's ``inputs`` (flag -> path,
    a list of paths or None): an output that IS an input, CONTAINS one, or (``whole_dir``: a directory
    output, whose parts the input may be) LIES INSIDE one.

    Raises:
        OutputOverlapError: naming the output, the flag and the input.
    """
    out = Path(output).resolve()
    for flag, given in inputs.items():
        for value in given if isinstance(given, (list, tuple)) else [given]:
            if value is None or str(value) in ("", "-"):
                continue
            p = Path(value).resolve()
            how = "is" if p == out else "contains" if p.is_relative_to(out) else None
            if how is None and whole_dir and out.is_relative_to(p):
                how = "lies inside"
            if how:
                raise OutputOverlapError(
                    f"{output}: the output {how} {flag} {value}, which replacing it would delete; "
                    "choose an output outside the inputs"
                )


@contextlib.contextmanager
def guard_output(
    output: str | Path, inputs: dict[str, Any], overwrite: bool, *, whole_dir: bool = True, part: str = ""
) -> Iterator[Path]:
    """What every command writing ``output`` does first: with ``overwrite``, `check_overwrite_inputs`;
    then it writes holding `lock_output`."""
    if overwrite:
        check_overwrite_inputs(output, inputs, whole_dir=whole_dir)
    with lock_output(output, part) as path:
        yield path
