"""The one rule every text reader applies: UTF-8 (a byte-order mark allowed), lines ending in ``\\n`` or
``\\r\\n``, none longer than a limit. UTF-16 / UTF-32, NUL bytes and bare-CR line ends are refused naming
the file (`check_text_head`); a line over the limit is refused naming ``file:line`` after reading no more
than the limit (`iter_lines_bounded`). `albert_lm._io.read_utf8` (custom CSV / TSV, GLUE, NER, configs),
`albert prepare`'s and `albert tokenizer train`'s corpus readers and `albert predict`'s input all use it.

The bottom of the import order, below `albert_lm._io` (which re-exports `NotTextError`): imports nothing
from ``albert_lm``.
"""

from __future__ import annotations

import codecs
from collections.abc import Iterator
from typing import IO

__all__ = [
    "HEAD_BYTES",
    "MAX_LINE_BYTES",
    "LineTooLongError",
    "NotTextError",
    "check_text_head",
    "iter_lines_bounded",
    "line_too_long",
]


class NotTextError(ValueError):
    """A file that should be UTF-8 text is not; the message names ``file:line`` and the byte."""


MAX_LINE_BYTES = 1 << 20
"""The longest line (bytes) a line reader takes by default; a longer one is an error naming ``file:line``
(`LineTooLongError`), read without holding more than this (``/dev/zero`` as input ends there)."""
HEAD_BYTES = 1 << 16
"""How much of a text file's start `check_text_head` looks at."""


class LineTooLongError(NotTextError):
    """A line longer than the reader's limit; the message names ``file:line`` and the limit."""


def check_text_head(head: bytes, where: str, *, nul_lines_ok: bool = False) -> int:
    """The one encoding rule of every text reader, applied to the first bytes of the input (its first
    line will do): UTF-8, with or without a byte-order mark, lines ending in ``\n`` or ``\r\n``.

    UTF-16 / UTF-32 (a byte-order mark, or NUL bytes between ASCII letters), other NUL bytes (a binary
    file), and line ends that are a bare ``\r`` (classic Mac OS: the whole file would be one line) are
    refused, naming the file and what to do. ``nul_lines_ok``: NUL bytes that are not UTF-16 pass (a corpus
    reader skips such lines and counts them against its skip fraction).

    Returns:
        The length of a UTF-8 byte-order mark to skip (3), else 0.

    Raises:
        NotTextError: ``where: ...`` naming the encoding or the first NUL byte's line.
    """
    for bom, name in (
        (codecs.BOM_UTF32_LE, "UTF-32"),  # before UTF-16: FF FE 00 00 starts with FF FE
        (codecs.BOM_UTF32_BE, "UTF-32"),
        (codecs.BOM_UTF16_LE, "UTF-16"),
        (codecs.BOM_UTF16_BE, "UTF-16"),
    ):
        if head.startswith(bom):
            raise NotTextError(
                f"{where}: {name} text (byte-order mark {bom.hex(' ').upper()}), not UTF-8; convert it, "
                f"e.g. iconv -f {name} -t UTF-8"
            )
    nul = head.find(b"\0")
    if nul >= 0:
        pairs = head[: len(head) // 2 * 2]
        if pairs and (pairs[1::2].count(0) > len(pairs) // 4 or pairs[0::2].count(0) > len(pairs) // 4):
            raise NotTextError(
                f"{where}: UTF-16 text without a byte-order mark (NUL bytes between the letters), not UTF-8; "
                "convert it, e.g. iconv -f UTF-16LE -t UTF-8"
            )
        line = 1 + head.count(b"\n", 0, nul)
        if not nul_lines_ok:  # a corpus reader skips such lines and counts them (its skip fraction)
            raise NotTextError(f"{where}:{line}: a NUL byte; is it a binary file?")
    cr = head.rstrip(b"\r").find(b"\r")
    if cr >= 0 and b"\n" not in head and head[cr + 1 : cr + 2] != b"\n":
        raise NotTextError(
            f"{where}: its lines end in a bare CR (classic Mac OS), which would make it one line; convert the "
            "line ends to LF, e.g. tr '\\r' '\\n'"
        )
    return 3 if head.startswith(b"\xef\xbb\xbf") else 0


def iter_lines_bounded(f: IO[bytes], where: str, max_line_bytes: int = MAX_LINE_BYTES) -> Iterator[bytes]:
    """The raw lines of ``f`` (line ends kept), the first one checked by `check_text_head` (its UTF-8
    byte-order mark removed), none longer than ``max_line_bytes``. (A NUL byte in a later line is the
    reader's to judge: a corpus skips the line, a data file refuses it.)

    Raises:
        NotTextError: the input is not UTF-8 text (`check_text_head`).
        LineTooLongError: ``where:line: a line longer than N bytes``, raised having read at most
            ``max_line_bytes + 1`` bytes of it.
    """
    lineno = 0
    while True:
        raw = f.readline(max_line_bytes + 1)
        if not raw:
            return
        lineno += 1
        if lineno == 1:
            raw = raw[check_text_head(raw[:HEAD_BYTES], where) :]
        if len(raw) > max_line_bytes and not raw.endswith(b"\n"):
            raise line_too_long(where, lineno, max_line_bytes)
        yield raw


def line_too_long(where: str, lineno: int, max_line_bytes: int) -> LineTooLongError:
    """The error for line ``lineno`` of ``where`` over ``max_line_bytes`` (also for readers that split
    lines themselves, e.g. from a pipe)."""
    return LineTooLongError(
        f"{where}:{lineno}: a line longer than {max_line_bytes:,} bytes (the line limit); is it a text file "
        "with line ends?"
    )
