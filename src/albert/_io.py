"""File facts that everything shares: atomic writes (with fsync), JSON-lines reading with file:line errors,
and the protobuf varint (the SentencePiece model and TF checkpoint readers both parse protobuf by hand).

The bottom of the import order: this module imports nothing from ``albert``.
"""

from __future__ import annotations

import contextlib
import errno
import json
import os
import re
import shutil
import struct
import tempfile
from collections.abc import Callable, Iterator
from pathlib import Path
from typing import Any, BinaryIO, TextIO

__all__ = [
    "TMP_PREFIX",
    "JsonlError",
    "NotTextError",
    "atomic_write",
    "atomic_write_bytes",
    "atomic_write_dir",
    "atomic_write_json",
    "atomic_write_text",
    "decode_utf8",
    "fsync_dir",
    "fsync_tree",
    "iter_jsonl",
    "parse_json_line",
    "proto_fields",
    "read_utf8",
    "read_varint",
    "write_varint",
]

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


def atomic_write_dir(path: str | Path, write: Callable[[Path], Any]) -> Path:
    """Write the directory ``path`` atomically: ``write(tmp)`` fills a fresh temporary directory next to
    it, whose files are fsync'ed before it is renamed into place. An existing ``path`` is moved aside
    first and then deleted, so a crash leaves either the old directory or the new one complete (plus a
    ``TMP_PREFIX`` leftover that cleanup may delete); an exception in ``write`` leaves the old one and no
    temporary behind (a full disk is reported as in `atomic_write`). Returns ``path``.
    """
    path = Path(path)
    tmp = path.parent / f"{TMP_PREFIX}{path.name}.{os.getpid()}"
    shutil.rmtree(tmp, ignore_errors=True)
    tmp.mkdir()
    try:
        write(tmp)
        fsync_tree(tmp)
        if path.exists():
            old = path.parent / f"{TMP_PREFIX}old-{path.name}.{os.getpid()}"
            os.rename(path, old)
            os.rename(tmp, path)
            shutil.rmtree(old, ignore_errors=True)
        else:
            os.rename(tmp, path)
        fsync_dir(path.parent)
    except BaseException as e:
        full = _disk_full(e, path)  # judged before the temporary's space is freed
        shutil.rmtree(tmp, ignore_errors=True)
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


def atomic_write_json(path: str | Path, obj: Any, indent: int | None = 1) -> None:
    """Write ``obj`` as JSON (with a final newline) to ``path`` atomically."""
    atomic_write_text(path, json.dumps(obj, indent=indent, ensure_ascii=False) + "\n")


class NotTextError(ValueError):
    """A file that should be UTF-8 text is not; the message names ``file:line`` and the byte."""


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
    """The text of ``path`` (UTF-8, a leading BOM dropped).

    Raises:
        FileNotFoundError: no such file.
        NotTextError: naming the file, line and byte where it is not UTF-8 (see `decode_utf8`).
    """
    return decode_utf8(Path(path).read_bytes(), str(path))


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
