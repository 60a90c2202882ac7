"""One encoding and line rule for every text reader (`albert_lm._text`): UTF-16 / UTF-32 (a byte-order mark,
or NUL bytes between the letters), NUL bytes, bare-CR line ends (classic Mac OS) and lines over the limit
are refused naming the file (and line), the same way in `albert prepare` (data/documents.py), `albert
tokenizer train` (tokenizer/corpus.py), the custom / GLUE / NER readers, JSON lines and `albert predict`'s
input; and a custom CSV is read strictly: a stray quote no longer swallows the rows after it."""

from __future__ import annotations

import codecs
import contextlib
import io
import os
import threading
from collections.abc import Callable
from pathlib import Path

import pytest

from albert_lm._io import iter_jsonl, read_utf8
from albert_lm._tables import read_rows
from albert_lm._text import LineTooLongError, NotTextError, iter_lines_bounded
from albert_lm.cli.predict import InputLines, decode_lines
from albert_lm.data.documents import DataError, ReadReport, read_lines_format
from albert_lm.tasks.base import TaskDataError
from albert_lm.tasks.custom import read_records
from albert_lm.tasks.ner import read_conll
from albert_lm.tokenizer.corpus import iter_corpus_lines

SENTENCES = [f"Sentence number {i} of the corpus." for i in range(300)]
TEXT = "\n".join(SENTENCES) + "\n"


def _prepare(p: Path) -> list:
    return list(read_lines_format(p, ReadReport()))


def _tokenizer_train(p: Path) -> list:
    return list(iter_corpus_lines([p]))


def _custom(p: Path) -> list:
    return read_records(p.rename(p.with_suffix(".tsv")), columns=["text"])


def _glue(p: Path) -> list:  # GLUE's files go through the one row reader
    return read_rows(p, "tsv", columns=["text"])


def _ner(p: Path) -> list:
    return read_conll(p)


def _predict(p: Path) -> list:
    with open(p, "rb") as f:
        return list(decode_lines(InputLines(f, str(p)), str(p)))


def _jsonl(p: Path) -> list:
    return list(iter_jsonl(p))


READERS: dict[str, Callable[[Path], list]] = {
    "prepare": _prepare,
    "tokenizer train": _tokenizer_train,
    "custom": _custom,
    "glue": _glue,
    "ner": _ner,
    "predict": _predict,
    "jsonl": _jsonl,
}
ERRORS = (NotTextError, DataError, TaskDataError, ValueError)


@pytest.mark.parametrize(
    ("kind", "data", "says"),
    [
        ("utf16-bom", codecs.BOM_UTF16_LE + TEXT.encode("utf-16-le"), "UTF-16 text (byte-order mark FF FE)"),
        ("utf16-be-bom", codecs.BOM_UTF16_BE + TEXT.encode("utf-16-be"), "UTF-16 text"),
        ("utf32-bom", codecs.BOM_UTF32_LE + TEXT.encode("utf-32-le"), "UTF-32 text"),
        ("utf16-no-bom", TEXT.encode("utf-16-le"), "UTF-16 text without a byte-order mark"),
        ("cr-only", TEXT.replace("\n", "\r").encode(), "bare CR (classic Mac OS)"),
    ],
)
@pytest.mark.parametrize("reader", sorted(READERS))
def test_every_reader_refuses_what_is_not_utf8_lines_naming_the_file(
    tmp_path: Path, reader: str, kind: str, data: bytes, says: str
) -> None:
    p = tmp_path / "input.txt"
    p.write_bytes(data)
    with pytest.raises(ERRORS, match="input") as e:
        READERS[reader](p)
    assert says in str(e.value) and "input." in str(e.value)


@pytest.mark.parametrize("reader", ["tokenizer train", "custom", "glue", "predict"])
def test_a_nul_byte_is_refused_naming_the_line(tmp_path: Path, reader: str) -> None:
    p = tmp_path / "input.txt"
    p.write_bytes(b"fine\nfine\nfi\x00ne\n")
    with pytest.raises(ERRORS, match=r"input\.(txt|tsv):3: a NUL byte"):
        READERS[reader](p)


def test_prepare_skips_and_counts_nul_lines(tmp_path: Path) -> None:
    p = tmp_path / "corpus.txt"
    p.write_bytes(b"one sentence.\nbi\x00nary\nanother sentence.\n")
    report = ReadReport()
    (doc,) = read_lines_format(p, report)
    assert doc.units == ["one sentence.", "another sentence."] and report.bad_lines == {"nul_lines": 1}


@pytest.mark.parametrize("reader", sorted(READERS))
def test_utf8_with_a_bom_and_crlf_is_read_right(tmp_path: Path, reader: str) -> None:
    p = tmp_path / "input.txt"
    if reader == "jsonl":
        p.write_bytes(codecs.BOM_UTF8 + b'{"text": "a"}\r\n{"text": "b"}\r\n')
    elif reader == "ner":
        p.write_bytes(codecs.BOM_UTF8 + b"John B-PER\r\nruns O\r\n")
    else:
        p.write_bytes(codecs.BOM_UTF8 + TEXT.replace("\n", "\r\n").encode())
    out = READERS[reader](p)
    assert out


def test_a_line_over_the_limit_is_refused_without_reading_it_whole() -> None:
    class Endless(io.RawIOBase):  # /dev/zero: never a line end
        read_bytes = 0

        def readable(self) -> bool:
            return True

        def readinto(self, b: bytearray) -> int:  # type: ignore[override]
            n = len(b)
            b[:n] = b"a" * n
            self.read_bytes += n
            return n

    raw = Endless()
    with pytest.raises(LineTooLongError, match=r"^<zero>:1: a line longer than 1,024 bytes"):
        list(iter_lines_bounded(io.BufferedReader(raw, 256), "<zero>", 1024))
    assert raw.read_bytes < 4096


def test_predict_from_a_pipe_stops_at_the_line_limit() -> None:
    """A pipe that never sends a line end (``albert predict < /dev/zero``): an error naming the line once
    the limit is passed, instead of memory without bound."""
    r, w = os.pipe()

    def write() -> None:  # a pipe holds 64 KiB: the writer waits for the reader
        with contextlib.suppress(BrokenPipeError):
            os.write(w, b"ok\n")
            for _ in range(40):  # 2.5 MiB without a line end, more than the limit
                os.write(w, b"x" * (1 << 16))
        os.close(w)

    writer = threading.Thread(target=write, daemon=True)
    writer.start()
    lines = InputLines(r, "<stdin>")
    with pytest.raises(LineTooLongError, match=r"^<stdin>:2: a line longer than 1,048,576 bytes"):
        list(lines)
    os.close(r)
    writer.join(5)


def test_predict_input_file_stops_at_the_line_limit(tmp_path: Path) -> None:
    p = tmp_path / "in.txt"
    p.write_bytes(b"ok\n" + b"x" * ((1 << 20) + 10))
    with pytest.raises(LineTooLongError, match=rf"^{p}:2: a line longer than"):
        _predict(p)


def test_read_utf8_refuses_a_nul_byte_beyond_the_head(tmp_path: Path) -> None:
    p = tmp_path / "big.tsv"
    p.write_bytes(b"text\n" + b"a line\n" * 20000 + b"b\x00c\n")
    with pytest.raises(NotTextError, match=rf"^{p}:20002: a NUL byte"):
        read_utf8(p)


# ------------------------------------------------------------------------------------- strict CSV
def test_a_stray_quote_in_a_csv_is_an_error_naming_its_line(tmp_path: Path) -> None:
    rows = ["text,label"] + [f"row {i} is fine,{'pos' if i % 2 else 'neg'}" for i in range(1, 901)]
    rows[301] = '"row 301 has a stray quote,pos'
    rows[801] = 'row 801 closes it",neg'  # a record of 2 fields again: file lines 302-802 were one example
    p = tmp_path / "train.csv"
    p.write_text("\n".join(rows) + "\n", encoding="utf-8")
    with pytest.raises(TaskDataError, match=rf"^{p}:302: a quoted field runs over 501 lines, to line 802"):
        read_records(p)


def test_a_quote_that_runs_to_the_end_of_a_csv_is_an_error(tmp_path: Path) -> None:
    p = tmp_path / "train.csv"
    p.write_text('text,label\nfine,pos\n"never closed,neg\n', encoding="utf-8")
    with pytest.raises(TaskDataError, match=rf"^{p}:3: "):
        read_records(p)


def test_a_stray_quote_closed_by_another_is_an_error(tmp_path: Path) -> None:
    p = tmp_path / "train.csv"
    p.write_text('text,label\n"stray,pos\nfine,neg\nsays "hi",pos\nok,neg\n', encoding="utf-8")
    with pytest.raises(TaskDataError, match=rf"^{p}:2: not CSV"):
        read_records(p)


def test_quoted_commas_quotes_and_a_few_newlines_still_read(tmp_path: Path) -> None:
    p = tmp_path / "train.csv"
    p.write_text('text,label\n"a, b and ""c""\non two lines",pos\nd,neg\n', encoding="utf-8")
    assert read_records(p) == [
        (2, {"text": 'a, b and "c"\non two lines', "label": "pos"}),
        (4, {"text": "d", "label": "neg"}),
    ]
