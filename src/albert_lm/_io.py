"""File facts that everything shares: atomic writes (with fsync), JSON-lines reading with file:line errors,
the protobuf varint (the SentencePiece model and TF checkpoint readers both parse protobuf by hand), and
`IGNORE_INDEX`, the label the model's losses skip and the data writes at unlabelled positions (both sides
of that contract import it from here, below them both).

The bottom of the import order: this module imports nothing from ``albert``.
"""

from __future__ import annotations

import contextlib
import errno
import json
import logging
import math
import os
import re
import shutil
import struct
import tempfile
from collections.abc import Callable, Iterator
from pathlib import Path
from typing import Any, BinaryIO, TextIO

from albert_lm._text import HEAD_BYTES, NotTextError, check_text_head

__all__ = [
    "IGNORE_INDEX",
    "TMP_PREFIX",
    "JsonlError",
    "NonFiniteJsonError",
    "NotTextError",
    "atomic_write",
    "atomic_write_bytes",
    "atomic_write_dir",
    "atomic_write_json",
    "atomic_write_text",
    "decode_utf8",
    "first_non_finite_json",
    "fsync_dir",
    "fsync_tree",
    "iter_jsonl",
    "json_text",
    "output_path",
    "parse_json_line",
    "proto_fields",
    "read_utf8",
    "read_varint",
    "recover_dir",
    "write_varint",
]

# The label of a position without a target (unmasked tokens, padding, tokens after a word's first piece):
# torch.nn.functional.cross_entropy's default ignore_index.
IGNORE_INDEX = -100

logger = logging.getLogger(__name__)

# Temporaries start with this prefix, so readers and cleanup recognise (and skip) them.
TMP_PREFIX = ".tmp-"
FILE_MODE = 0o644
# Less free space than this after a failed write is taken as the disk being full: writers that do not
# pass the OS error on (torch.save: "unexpected pos 191360 vs 191248") are reported as ENOSPC too.
NEARLY_FULL_BYTES = 1 << 20


# How Rust's std::io::Error ends its message: safetensors' SafetensorError (an Exception, not an OSError)
# says "Error while serializing: I/O error: No space left on device (os error 28)".
_RUST_OS_ERROR = re.compile(r"\(os error (\d+)\)\s*$")


def _disk_full(error: BaseException, path: Path) -> OSError | None:
    """``OSError(ENOSPC)`` naming ``path`` when ``error`` (raised while writing it) means the disk is
    full, else None. An OSError from inside a write names the temporary file or nothing; the user needs
    the real path and the plain reason."""
    rust = _RUST_OS_ERROR.search(str(error)) if isinstance(error, Exception) else None
    if isinstance(error, OSError):
        full = error.errno in (errno.ENOSPC, errno.EDQUOT)
    elif rust is not None:  # a Rust writer (safetensors) passes the OS error on in its message
        full = int(rust.group(1)) in (errno.ENOSPC, errno.EDQUOT)
    elif isinstance(error, RuntimeError):  # torch's C++ writer: no errno
        try:
            st = os.statvfs(path.parent)
            full = st.f_bavail * st.f_frsize < NEARLY_FULL_BYTES
        except (OSError, AttributeError):  # no statvfs on Windows
            full = False
    else:  # a bug in the caller, KeyboardInterrupt, ...: not the disk
        full = False
    return OSError(errno.ENOSPC, os.strerror(errno.ENOSPC), str(path)) if full else None


def fsync_dir(path: str | Path) -> None:
    """fsync a directory so that a rename inside it survives power loss (a no-op where unsupported)."""
    with contextlib.suppress(OSError):
        fd = os.open(path, os.O_RDONLY)
        try:
            os.fsync(fd)
        finally:
            os.close(fd)


def fsync_tree(path: str | Path) -> None:
    """fsync every file and directory under ``path`` (before renaming a freshly written directory)."""
    for d, _, files in os.walk(path):
        for name in files:
            with open(os.path.join(d, name), "rb") as f:
                os.fsync(f.fileno())
        fsync_dir(d)


def atomic_write(path: str | Path, write: Callable[[str], Any]) -> None:
    """Write ``path`` atomically: ``write(tmp)`` fills a temporary file in the same directory, which is
    fsync'ed and renamed over ``path``. A crash (or an exception in ``write``) leaves the old file whole
    and no temporary behind. ``write`` receives the temporary's path, so libraries that write by name
    (``safetensors.save_file``, ``torch.save``) fit.

    Raises:
        OSError: ``ENOSPC`` naming ``path`` when the disk is full (whatever ``write`` raised then);
            anything else that ``write`` raises, as it is.
    """
    path = Path(path)
    fd, tmp = tempfile.mkstemp(prefix=TMP_PREFIX + path.name + ".", dir=path.parent)
    os.close(fd)
    try:
        write(tmp)
        # after the write: a library that writes by name may replace the file mkstemp made (mode 0600)
        os.chmod(tmp, FILE_MODE)
        with open(tmp, "rb") as f:
            os.fsync(f.fileno())
        os.replace(tmp, path)
        fsync_dir(path.parent)
    except BaseException as e:
        full = _disk_full(e, path)  # judged before the temporary's space is freed
        with contextlib.suppress(OSError):
            os.unlink(tmp)
        if full is not None:
            raise full from e
        raise


def output_path(path: str | Path) -> Path:
    """Where a write to ``path`` goes: a symbolic link means the directory it points to (replacing the
    link itself by a real directory would leave its target holding the old content, and ``rmtree``
    refuses a link after a whole run); anything else is ``path`` itself."""
    path = Path(path)
    return path.resolve() if path.is_symlink() else path


# `atomic_write_dir`'s siblings of PATH, by what they hold: the new copy while it is written ("part"), the
# new copy complete and fsync'ed ("new"), the old copy moved aside ("old"). The kind comes first, so no
# directory name makes one kind's name another's.
def _aside(path: Path, kind: str, pid: int | None = None) -> Path:
    return path.parent / f"{TMP_PREFIX}{kind}-{path.name}.{os.getpid() if pid is None else pid}"


def _asides(path: Path, kind: str) -> list[tuple[Path, int]]:
    """``(sibling, pid of its writer)`` of one kind, newest first."""
    prefix = f"{TMP_PREFIX}{kind}-{path.name}."
    found = []
    with contextlib.suppress(OSError):  # no parent: nothing aside
        for entry in path.parent.iterdir():
            pid = entry.name[len(prefix) :]
            if entry.name.startswith(prefix) and pid.isdigit():
                with contextlib.suppress(OSError):  # gone meanwhile (its writer finished)
                    found.append((entry.lstat().st_mtime_ns, entry, int(pid)))
    return [(entry, pid) for _, entry, pid in sorted(found, key=lambda e: e[0], reverse=True)]


def _alive(pid: int) -> bool:
    """Whether process ``pid`` (another writer) still runs."""
    if pid == os.getpid():
        return False  # this process is not inside a write of this path while it recovers it
    try:
        os.kill(pid, 0)
    except ProcessLookupError:
        return False
    except OSError:  # exists, owned by someone else
        return True
    return True


def recover_dir(path: str | Path) -> bool:
    """Finish or undo an `atomic_write_dir` of ``path`` that a killed process left, and delete its leftovers.

    The one recovery step for interrupted directory writes, run by every `atomic_write_dir` and by the
    readers of run and model directories. ``path`` absent after a kill between the write's two renames:
    the complete new copy (``.tmp-new-*``) is renamed into place, else the old one (``.tmp-old-*``) is put
    back. Then the leftovers of dead writers go: partial copies, a new copy that never replaced a present
    ``path``, and old copies already replaced. A live writer's siblings are left alone.

    Returns:
        True when ``path`` was restored.
    """
    path = Path(path)
    restored = False
    if not os.path.lexists(path):
        for kind in ("new", "old"):  # the newest complete copy: the write's result, else what it replaced
            done = [(d, pid) for d, pid in _asides(path, kind) if not _alive(pid)]
            if done:
                os.rename(done[0][0], path)
                fsync_dir(path.parent)
                logger.warning(
                    "%s was missing after an interrupted write: restored from %s", path, done[0][0]
                )
                restored = True
                break
    for kind in ("part", "new", "old"):
        for stale, pid in _asides(path, kind):
            if not _alive(pid):
                shutil.rmtree(stale, ignore_errors=True)
    return restored


def recover_dirs_in(folder: str | Path) -> None:
    """`recover_dir` for every directory of ``folder`` that an interrupted write left a sibling of (the
    checkpoints of a run: ``best`` missing after a kill between the renames of its replacement)."""
    folder = Path(folder)
    names = set()
    with contextlib.suppress(OSError):
        for entry in folder.iterdir():
            kind, _, rest = entry.name.removeprefix(TMP_PREFIX).partition("-")
            name, _, pid = rest.rpartition(".")
            if (
                entry.name.startswith(TMP_PREFIX)
                and kind in ("part", "new", "old")
                and name
                and pid.isdigit()
            ):
                names.add(name)
    for name in sorted(names):
        recover_dir(folder / name)


def atomic_write_dir(path: str | Path, write: Callable[[Path], Any]) -> Path:
    """Write the directory ``path`` atomically: ``write(tmp)`` fills a fresh temporary directory next to
    it, whose files are fsync'ed; it is then renamed to a "complete" sibling, the old ``path`` (if any)
    moved aside, the complete copy renamed into place and the old one deleted. A process killed anywhere
    leaves the old directory or the new one complete at ``path``, or, between the renames, both complete
    beside it, from which the next write or reader restores ``path`` (`recover_dir`). An exception in
    ``write`` leaves the old one and no temporary behind (a full disk is reported as in `atomic_write`).
    A symbolic link at ``path`` is written through (`output_path`). Returns ``path``.
    """
    path = output_path(path)
    recover_dir(path)
    tmp, new, old = _aside(path, "part"), _aside(path, "new"), _aside(path, "old")
    shutil.rmtree(tmp, ignore_errors=True)
    tmp.mkdir()
    try:
        write(tmp)
        fsync_tree(tmp)
        os.rename(tmp, new)  # complete: from here on, recovery may put it in place
        if path.exists():
            os.rename(path, old)
            os.rename(new, path)
            shutil.rmtree(old, ignore_errors=True)
        else:
            os.rename(new, path)
        fsync_dir(path.parent)
    except BaseException as e:
        full = _disk_full(e, path)  # judged before the temporary's space is freed
        shutil.rmtree(tmp, ignore_errors=True)
        if not path.exists() and old.exists():  # failed between the renames: the old one goes back
            os.rename(old, path)
        shutil.rmtree(new, ignore_errors=True)
        if full is not None:
            raise full from e
        raise
    return path


def atomic_write_bytes(path: str | Path, data: bytes) -> None:
    """Write ``data`` to ``path`` atomically (see :func:`atomic_write`)."""

    def write(tmp: str) -> None:
        with open(tmp, "wb") as f:
            f.write(data)

    atomic_write(path, write)


def atomic_write_text(path: str | Path, text: str) -> None:
    """Write UTF-8 ``text`` to ``path`` atomically."""
    atomic_write_bytes(path, text.encode("utf-8"))


class NonFiniteJsonError(ValueError):
    """A value to write as JSON holds NaN or infinity (JSON has neither; Python writes ``NaN``, which
    other readers refuse or read as a number); the message names the output and the value's place."""


def first_non_finite_json(obj: Any, at: str = "") -> str | None:
    """The place (``predictions[0].probabilities.neg``) of the first NaN or infinite float in ``obj``
    (dicts, lists and tuples walked), or None."""
    if isinstance(obj, float):
        return None if math.isfinite(obj) else (at or "the value")
    if isinstance(obj, dict):
        for key, value in obj.items():
            found = first_non_finite_json(value, f"{at}.{key}" if at else str(key))
            if found is not None:
                return found
    elif isinstance(obj, (list, tuple)):
        for i, value in enumerate(obj):
            found = first_non_finite_json(value, f"{at}[{i}]")
            if found is not None:
                return found
    return None


def json_text(obj: Any, where: str, **kwargs: Any) -> str:
    """``json.dumps(obj, ensure_ascii=False, allow_nan=False, **kwargs)``: every writer of JSON output
    (report.json, prediction lines, written results) goes through here, so no output holds ``NaN``.

    Raises:
        NonFiniteJsonError: ``where: <place> is nan: not written as JSON (...)``.
    """
    try:
        return json.dumps(obj, ensure_ascii=False, allow_nan=False, **kwargs)
    except ValueError:
        bad = first_non_finite_json(obj)
        if bad is None:  # not a NaN (e.g. a circular reference): as json says
            raise
        raise NonFiniteJsonError(
            f"{where}: {bad} is not a finite number (NaN or infinity): not written as JSON; the model or "
            "the data produced it"
        ) from None


def atomic_write_json(path: str | Path, obj: Any, indent: int | None = 1) -> None:
    """Write ``obj`` as JSON (with a final newline) to ``path`` atomically.

    Raises:
        NonFiniteJsonError: ``obj`` holds NaN or infinity (`json_text`); nothing is written.
    """
    atomic_write_text(path, json_text(obj, str(path), indent=indent) + "\n")


def decode_utf8(data: bytes, where: str, first_line: int = 1) -> str:
    """``data`` as text (a leading BOM dropped).

    Raises:
        NotTextError: ``where:line: not UTF-8 text (byte 0x.. at byte N of the line)``, ``line`` counted
            from ``first_line``: a reader's own message names the file, where Python's names a codec.
    """
    try:
        return data.decode("utf-8-sig")
    except UnicodeDecodeError as e:
        line = first_line + data.count(b"\n", 0, e.start)
        column = e.start - (data.rfind(b"\n", 0, e.start) + 1) + 1
        raise NotTextError(
            f"{where}:{line}: not UTF-8 text (byte 0x{data[e.start]:02x} at byte {column} of the line); is it "
            "a binary file?"
        ) from None


def read_utf8(path: str | Path) -> str:
    """The text of ``path`` (UTF-8, a leading BOM dropped), under the one encoding rule (`albert_lm._text.check_text_head`).

    Raises:
        FileNotFoundError: no such file.
        NotTextError: naming the file, line and byte where it is not UTF-8 (see `decode_utf8`), a NUL byte,
            UTF-16 / UTF-32, or bare-CR line ends.
    """
    data = Path(path).read_bytes()
    check_text_head(data[:HEAD_BYTES], str(path))
    nul = data.find(b"\0")
    if nul >= 0:  # beyond the head
        line = 1 + data.count(b"\n", 0, nul)
        raise NotTextError(f"{path}:{line}: a NUL byte; is it a binary file?")
    return decode_utf8(data, str(path))


class JsonlError(ValueError):
    """A JSON-lines file has a line that is not a JSON object; the message names ``file:line``.

    Attributes:
        reason: what is wrong with the line, without the ``file:line`` (for readers that report it
            their own way).
    """

    def __init__(self, message: str, *, reason: str | None = None) -> None:
        super().__init__(message)
        self.reason = reason or message


def parse_json_line(line: str | bytes, where: str, *, objects_only: bool = True) -> Any:
    """The record on one line of a JSON-lines file.

    Args:
        line: the line.
        where: ``file:line``, the start of the error message.
        objects_only: the record must be a JSON object.

    Raises:
        JsonlError: ``file:line: ...`` when the line is not valid JSON (or not an object).
    """
    try:
        rec = json.loads(line)
    except (json.JSONDecodeError, UnicodeDecodeError) as e:
        reason = f"not valid JSON ({getattr(e, 'msg', e)})"
        raise JsonlError(f"{where}: {reason}", reason=reason) from None
    if objects_only and not isinstance(rec, dict):
        reason = f"expected a JSON object, got {type(rec).__name__}"
        raise JsonlError(f"{where}: {reason}", reason=reason)
    return rec


def iter_jsonl(
    source: str | Path | TextIO | BinaryIO,
    *,
    name: str | None = None,
    skip_invalid: bool = False,
    objects_only: bool = True,
) -> Iterator[tuple[int, Any]]:
    """Yield ``(line_number, record)`` for each non-blank line of a JSON-lines file.

    Args:
        source: a path, or an open text/binary file (then ``name`` names it in errors).
        name: the name used in error messages (default: the path).
        skip_invalid: skip lines that are not valid JSON instead of raising (a metrics file whose last
            line was cut by a kill).
        objects_only: every record must be a JSON object.

    Raises:
        JsonlError: ``file:line: ...`` for a line that is not valid JSON (or not an object).
    """
    if isinstance(source, (str, Path)):
        with open(source, "rb") as f:  # bytes: a line that is not UTF-8 is named by its number
            yield from iter_jsonl(
                f, name=name or str(source), skip_invalid=skip_invalid, objects_only=objects_only
            )
        return
    where = str(name or getattr(source, "name", None) or "<stream>")
    for lineno, raw in enumerate(source, start=1):
        try:
            if lineno == 1 and isinstance(raw, bytes):  # the one encoding rule (UTF-16, bare CRs, ...)
                raw = raw[check_text_head(raw[:HEAD_BYTES], where) :]
            line = decode_utf8(raw, where, lineno) if isinstance(raw, bytes) else str(raw).lstrip("\ufeff")
        except NotTextError as e:
            if skip_invalid:
                continue
            raise JsonlError(str(e), reason=str(e).partition(": ")[2]) from None
        if not line.strip():
            continue
        try:
            rec = parse_json_line(line, f"{where}:{lineno}", objects_only=objects_only)
        except JsonlError:
            if skip_invalid:
                continue
            raise
        yield lineno, rec


def read_varint(buf: bytes | memoryview, pos: int) -> tuple[int, int]:
    """Decode a protobuf base-128 varint at ``buf[pos]``; returns ``(value, next_pos)``.

    Raises:
        ValueError: the buffer ends inside the varint, or it is longer than 10 bytes.
    """
    value = shift = 0
    start = pos
    while True:
        if pos >= len(buf):
            raise ValueError(f"truncated varint at byte {start}")
        b = buf[pos]
        pos += 1
        value |= (b & 0x7F) << shift
        if not b & 0x80:
            return value, pos
        shift += 7
        if shift >= 70:
            raise ValueError(f"varint longer than 10 bytes at byte {start}")


def write_varint(out: bytearray, value: int) -> None:
    """Append ``value`` (>= 0) to ``out`` as a protobuf base-128 varint."""
    if value < 0:
        raise ValueError(f"varint of a negative value {value}")
    while True:
        b = value & 0x7F
        value >>= 7
        if value:
            out.append(b | 0x80)
        else:
            out.append(b)
            return


def proto_fields(buf: bytes | memoryview) -> Iterator[tuple[int, int, Any]]:
    """``(field number, wire type, value)`` of each field of a serialized protobuf message, in order:
    ints for varints and fixed32 / fixed64 (little-endian, unsigned), bytes for length-delimited fields
    (nested messages, strings, packed arrays: parse them with this again).

    Raises:
        ValueError: a truncated field or an unsupported wire type (groups, 3 and 4), with its byte offset.
    """
    pos, n = 0, len(buf)
    while pos < n:
        start = pos
        key, pos = read_varint(buf, pos)
        field, wire = key >> 3, key & 7
        value: Any  # int or bytes, by wire type (Any: callers know which their field has)
        if wire == 0:
            value, pos = read_varint(buf, pos)
        elif wire in (1, 5):
            size = 8 if wire == 1 else 4
            if pos + size > n:
                raise ValueError(f"truncated fixed{size * 8} field {field} at byte {start}")
            (value,) = struct.unpack_from("<Q" if wire == 1 else "<I", buf, pos)
            pos += size
        elif wire == 2:
            size, pos = read_varint(buf, pos)
            if pos + size > n:
                raise ValueError(f"truncated length-delimited field {field} at byte {start}")
            value = bytes(buf[pos : pos + size])
            pos += size
        else:
            raise ValueError(f"unsupported protobuf wire type {wire} (field {field} at byte {start})")
        yield field, wire, value
