"""Reading raw text for vocabulary training: plain text files and MediaWiki XML dumps.

Text files are read as strict UTF-8, line by line, so that a bad byte is reported with its file and line.
Compressed files (``.gz``, ``.bz2``, ``.xz``) are opened transparently. Files whose name contains
``.xml`` are read as MediaWiki XML dumps: article text with the wiki markup stripped by a few simple rules
(good enough for a vocabulary or a test corpus; not a full MediaWiki parser).
"""

from __future__ import annotations

import bz2
import gzip
import html
import json
import lzma
import re
import xml.etree.ElementTree as ET
from collections.abc import Iterable, Iterator
from pathlib import Path
from typing import IO

from albert_lm._tables import TableError, iter_rows
from albert_lm._text import MAX_LINE_BYTES, NotTextError, iter_lines_bounded

__all__ = [
    "ROW_SUFFIXES",
    "is_row_file",
    "iter_row_texts",
    "refuse_json_lines",
    "open_binary",
    "iter_lines",
    "iter_wiki_articles",
    "strip_wiki_markup",
    "split_sentences",
    "iter_corpus_lines",
]


def open_binary(path: str | Path) -> IO[bytes]:
    """Opens ``path`` for binary reading, decompressing ``.gz`` / ``.bz2`` / ``.xz`` transparently."""
    p = str(path)
    if p.endswith(".gz"):
        return gzip.open(p, "rb")  # type: ignore[return-value]
    if p.endswith(".bz2"):
        return bz2.open(p, "rb")
    if p.endswith(".xz"):
        return lzma.open(p, "rb")
    return open(p, "rb")


def iter_lines(path: str | Path, max_line_bytes: int = MAX_LINE_BYTES) -> Iterator[str]:
    """Yields the lines of a UTF-8 text file without their line ending.

    Raises:
        ValueError: a line is not valid UTF-8; the message names the file, the line and the byte.
        NotTextError: UTF-16 / UTF-32, a NUL byte, bare-CR line ends, or a line over ``max_line_bytes``
            (`albert_lm._text`: the rule of every text reader).
    """
    with open_binary(path) as f:
        for lineno, raw in enumerate(iter_lines_bounded(f, str(path), max_line_bytes), start=1):
            try:
                line = raw.decode("utf-8")
            except UnicodeDecodeError as e:
                raise ValueError(
                    f"{path}:{lineno}: not valid UTF-8 ({e.reason} at byte {e.start} of the line: "
                    f"{raw[max(0, e.start - 10) : e.start + 10]!r})"
                ) from None
            if "\0" in line:
                raise NotTextError(f"{path}:{lineno}: a NUL byte; is it a binary file?")
            yield line.rstrip("\r\n")


# --------------------------------------------------------------------------------------------------------
# MediaWiki dumps
# --------------------------------------------------------------------------------------------------------


def _local(tag: str) -> str:
    return tag.rsplit("}", 1)[-1]


def iter_wiki_articles(path: str | Path) -> Iterator[tuple[str, str]]:
    """Yields ``(title, plain_text)`` for each main-namespace, non-redirect page of a MediaWiki XML dump.

    Raises:
        ValueError: the file is not well-formed XML (naming the file, line and column).
    """
    try:
        yield from _wiki_articles(path)
    except ET.ParseError as e:  # a SyntaxError, whose traceback would be all the user saw
        line, column = e.position
        raise ValueError(f"{path}:{line}:{column}: not a MediaWiki XML dump ({e.msg})") from None


def _wiki_articles(path: str | Path) -> Iterator[tuple[str, str]]:
    with open_binary(path) as f:
        title, ns, text, redirect = "", "", "", False
        for _event, elem in ET.iterparse(f, events=("end",)):
            tag = _local(elem.tag)
            if tag == "title":
                title = elem.text or ""
            elif tag == "ns":
                ns = elem.text or ""
            elif tag == "redirect":
                redirect = True
            elif tag == "text":
                text = elem.text or ""
            elif tag == "page":
                if ns == "0" and not redirect and not text.lstrip().lower().startswith("#redirect"):
                    yield title, strip_wiki_markup(text)
                title, ns, text, redirect = "", "", "", False
                elem.clear()


_COMMENT = re.compile(r"<!--.*?-->", re.S)
_REF = re.compile(r"<ref[^>/]*/>|<ref[^>]*>.*?</ref>", re.S | re.I)
_DROP_BLOCKS = re.compile(
    r"<(math|gallery|timeline|syntaxhighlight|source|score|imagemap|code|pre)[^>]*>.*?</\1>", re.S | re.I
)
_TAG = re.compile(r"</?[a-zA-Z][^>]*>")
_TEMPLATE = re.compile(r"\{\{[^{}]*\}\}")
_TABLE = re.compile(r"\{\|[^{}]*?\|\}", re.S)
_FILE_LINK = re.compile(r"\[\[(?:File|Image|Category|Media|[a-z]{2,3}(?:-[a-z]+)?):[^\[\]]*\]\]", re.I)
_LINK = re.compile(r"\[\[(?:[^\[\]|]*\|)?([^\[\]]*)\]\]")
_EXT_LINK = re.compile(r"\[(?:https?|ftp)://[^\s\]]+(?: ([^\]]*))?\]")
_BOLD_ITALIC = re.compile(r"'{2,}")
_HEADING = re.compile(r"^=+\s*(.*?)\s*=+\s*$", re.M)
_LIST_MARK = re.compile(r"^[*#:;]+\s*", re.M)


def _remove_nested(pattern: re.Pattern[str], text: str) -> str:
    while True:
        new = pattern.sub("", text)
        if new == text:
            return text
        text = new


def strip_wiki_markup(text: str) -> str:
    """Removes the common MediaWiki markup from an article, keeping its prose.

    Simple rules, applied in order: comments, ``<ref>``s and non-prose blocks, templates ``{{...}}`` and
    tables ``{|...|}`` (nested ones from the inside out), file/category/interlanguage links, ``[[target|label]]``
    -> label, external links -> their label, bold/italic quotes, headings, list markers, HTML tags and
    entities. Lines left without letters are dropped.
    """
    text = html.unescape(text)  # the dump double-escapes some entities (&amp;nbsp;)
    text = _COMMENT.sub("", text)
    text = _REF.sub("", text)
    text = _DROP_BLOCKS.sub("", text)
    text = _remove_nested(_TEMPLATE, text)
    text = _remove_nested(_TABLE, text)
    text = _remove_nested(_FILE_LINK, text)
    text = _LINK.sub(r"\1", text)
    text = _EXT_LINK.sub(lambda m: m.group(1) or "", text)
    text = _BOLD_ITALIC.sub("", text)
    text = _HEADING.sub(r"\1", text)
    text = _LIST_MARK.sub("", text)
    text = _TAG.sub("", text)
    text = html.unescape(text).replace("\u00a0", " ")
    lines = [ln.strip() for ln in text.split("\n")]
    return "\n".join(ln for ln in lines if any(c.isalpha() for c in ln) and not ln.startswith(("|", "!")))


# A sentence ends at . ! or ? (optionally followed by closing quotes/brackets) before whitespace and an
# upper-case letter, digit or opening quote. Crude, but the text only has to look like real sentences.
_SENTENCE_END = re.compile(r"(?<=[.!?])[\"')\]]*\s+(?=[\"'(\[]?[A-Z0-9])")


def split_sentences(paragraph: str) -> list[str]:
    """Splits a paragraph into sentences with a simple punctuation rule (English-oriented)."""
    out = []
    start = 0
    for m in _SENTENCE_END.finditer(paragraph):
        piece = paragraph[start : m.start()] + m.group(0).rstrip()
        start = m.end()
        if piece.strip():
            out.append(piece.strip())
    tail = paragraph[start:].strip()
    if tail:
        out.append(tail)
    return out


# the files read as rows with a text field, not as lines of text
ROW_SUFFIXES = (".jsonl", ".json", ".ndjson", ".parquet", ".pq", ".arrow", ".feather", ".ipc")


def is_row_file(path: str | Path) -> bool:
    """Whether ``path`` holds rows (JSON lines, Parquet, Arrow, a ``datasets`` directory), not text lines."""
    p = Path(path)
    return p.is_dir() or p.suffix.lower() in ROW_SUFFIXES


def iter_row_texts(path: str | Path, text_field: str = "text") -> Iterator[tuple[int, str]]:
    """Yield ``(row or line number, text)`` of each row's ``text_field``; rows whose text is blank are
    skipped.

    Raises:
        ValueError: a row without the field or with a value that is not a string, naming ``file:N``, or a
            file that is not what its extension says.
    """
    try:
        for n, row in iter_rows(path, "jsonl" if Path(path).suffix.lower() == ".json" else None):
            if text_field not in row:
                raise ValueError(
                    f"{path}:{n}: no field {text_field!r} (fields: {', '.join(map(str, row))}); name the text "
                    "field with --text-field"
                )
            text = row[text_field]
            if not isinstance(text, str):
                raise ValueError(f"{path}:{n}: field {text_field!r} is {type(text).__name__}, not text")
            if text.strip():
                yield n, text
    except TableError as e:
        raise ValueError(str(e)) from None


def refuse_json_lines(path: str | Path, read_as: str = "plain text") -> None:
    """Refuse a file read as lines of text whose first non-blank line is a JSON object: its braces and
    keys would become text (a vocabulary of ``{"text":``) with exit 0.

    Raises:
        ValueError: naming the file and line, and how to read it as rows instead.
    """
    with open_binary(path) as f:
        for lineno, raw in enumerate(f, start=1):
            line = raw.decode("utf-8", errors="replace").strip().lstrip("\ufeff")
            if not line:
                continue
            if line.startswith("{"):
                try:
                    obj = json.loads(line)
                except json.JSONDecodeError:
                    return
                if isinstance(obj, dict):
                    raise ValueError(
                        f"{path}:{lineno}: the line is a JSON object, but the file is read as {read_as}; name "
                        "it .jsonl (or pass --format jsonl where there is one) to read its text field "
                        "(--text-field, default 'text')"
                    )
            return


def iter_corpus_lines(paths: Iterable[str | Path], text_field: str = "text") -> Iterator[str]:
    """Yields the text lines of several inputs: MediaWiki dumps (``*.xml*``) one sentence per line (the
    original pretraining format), row files (`is_row_file`) the lines of each row's ``text_field``, other
    files line by line. Empty lines are skipped.

    Raises:
        ValueError: an unreadable input, naming the file and line (see `iter_row_texts`,
            `refuse_json_lines`).
    """
    for path in paths:
        if ".xml" in Path(path).name:
            for _title, text in iter_wiki_articles(path):
                for paragraph in text.split("\n"):
                    yield from split_sentences(paragraph)
        elif is_row_file(path):
            for _, text in iter_row_texts(path, text_field):
                yield from (ln for ln in text.splitlines() if ln.strip())
        else:
            refuse_json_lines(path)
            yield from (ln for ln in iter_lines(path) if ln.strip())
