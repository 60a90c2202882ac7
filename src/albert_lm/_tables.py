"""Rows of a data file, whatever its format: the one reader of named-column data.

`iter_rows` yields ``(row number, {column: value})`` from

* CSV (RFC 4180 quoting, a quoted field may hold commas, quotes and newlines) and TSV (tab-separated,
  quotes literal, as GLUE's files): a header row names the columns, or ``columns`` does for a file
  without one; the number is the line the record starts on;
* JSON lines (``.jsonl``, ``.json``, ``.ndjson``): one object per line, keys are columns; the line number;
* Parquet (``.parquet``, ``.pq``) and Arrow IPC files (``.arrow``, ``.feather``, ``.ipc``; the file or the
  stream layout) through pyarrow: the number is the row's, from 1;
* a ``datasets`` directory (``Dataset.save_to_disk``), or one split of a ``DatasetDict`` directory
  (``split``, or the split's folder ``DIR/train``), through ``datasets.load_from_disk``: the row's number.

Values are what the format holds: text for CSV / TSV, JSON values for JSONL, Python values (str, int,
float, list, dict, None) for the Arrow-backed formats. A column named twice, a row with another number of
fields than the header and a line that is not a JSON object are errors naming ``file:N``; every error is a
`TableError` (a ValueError) whose message starts with the file.

pyarrow and datasets (the ``datasets`` extra) are imported only when such a file is read.

The bottom of the import order with ``_io``: imports only ``albert_lm._io``.
"""

from __future__ import annotations

import csv
import io
from collections.abc import Iterator, Sequence
from pathlib import Path
from typing import Any

from albert_lm._io import JsonlError, NotTextError, iter_jsonl, read_utf8

__all__ = [
    "TABLE_FORMATS",
    "TableError",
    "check_unique_columns",
    "iter_rows",
    "read_rows",
    "table_format",
]

TABLE_FORMATS = ("csv", "tsv", "jsonl", "parquet", "arrow", "datasets")
_SUFFIXES = {
    "csv": "csv",
    "tsv": "tsv",
    "tab": "tsv",
    "jsonl": "jsonl",
    "json": "jsonl",
    "ndjson": "jsonl",
    "parquet": "parquet",
    "pq": "parquet",
    "arrow": "arrow",
    "feather": "arrow",
    "ipc": "arrow",
}
# the names a DatasetDict may give the dev split
SPLIT_ALIASES = {"dev": ("dev", "validation", "valid", "val"), "validation": ("validation", "dev", "valid")}
INSTALL_HINT = "pip install 'albert-lm[datasets]'"


class TableError(ValueError):
    """A data file that cannot be read as rows; the message names the file (and line or row)."""


def is_datasets_dir(path: Path) -> bool:
    """A ``save_to_disk`` directory: a Dataset (``state.json``) or a DatasetDict (``dataset_dict.json``)."""
    return path.is_dir() and ((path / "state.json").is_file() or (path / "dataset_dict.json").is_file())


def table_format(path: str | Path, fmt: str | None = None) -> str:
    """The format of ``path``: ``fmt`` when given, else from the extension (a directory: ``datasets``).

    Raises:
        TableError: an unknown ``fmt``, or an extension (or directory) that names no format.
    """
    p = Path(path)
    if fmt is not None:
        if fmt not in TABLE_FORMATS:
            raise TableError(f"{p}: unknown format {fmt!r}; use one of {', '.join(TABLE_FORMATS)}")
        return fmt
    if p.is_dir():
        if is_datasets_dir(p):
            return "datasets"
        raise TableError(
            f"{p}: a directory, but not one written by datasets' save_to_disk (no state.json or "
            "dataset_dict.json)"
        )
    found = _SUFFIXES.get(p.suffix.lower().lstrip("."))
    if found is None:
        raise TableError(
            f"{p}: cannot tell the format from the extension; pass --format {'|'.join(TABLE_FORMATS)}"
        )
    return found


def check_unique_columns(names: Sequence[str], where: str) -> None:
    """Refuse a header naming one column twice: a row as a dict would keep only the last of them, so the
    other column would be silently ignored (and could be the label)."""
    seen: dict[str, int] = {}
    for i, name in enumerate(names, 1):
        if name in seen:
            raise TableError(
                f"{where} names column {name!r} twice (columns {seen[name]} and {i}); rename one (or give "
                "--columns for a file without a header)"
            )
        seen[name] = i


def iter_rows(
    path: str | Path,
    fmt: str | None = None,
    *,
    columns: Sequence[str] | None = None,
    split: str | None = None,
) -> Iterator[tuple[int, dict[str, Any]]]:
    """Yield ``(number, row)`` for each row of a data file (see the module docstring for the formats).

    Args:
        path: the file, or a ``datasets`` directory.
        fmt: one of `TABLE_FORMATS`; None: from the extension.
        columns: the column names of a CSV / TSV file without a header row (ignored by the other formats).
        split: the split to read from a ``DatasetDict`` directory (``dev`` also finds ``validation``).

    Raises:
        FileNotFoundError: no such file.
        TableError: the file is not what its format says, names a column twice, has a row with the wrong
            number of fields, or is a DatasetDict without ``split``; the message names the file (and line).
    """
    p = Path(path)
    if not p.exists():
        raise FileNotFoundError(f"{p}: not found")
    fmt = table_format(p, fmt)
    if fmt in ("csv", "tsv"):
        yield from _delimited_rows(p, fmt, columns)
    elif fmt == "jsonl":
        try:  # as bytes: a line that is not UTF-8 is named by its number (a BOM is dropped)
            yield from iter_jsonl(p)
        except JsonlError as e:
            raise TableError(str(e)) from None
    elif fmt == "datasets":
        yield from _arrow_rows(p, _datasets_table(p, split))
    else:
        yield from _arrow_rows(p, _read_arrow(p, fmt))


MAX_RECORD_LINES = 20
"""The most lines one CSV record may span (quoted newlines): more is a stray opening quote swallowing the rows
after it into one example. CSV is read strictly (``csv.reader(strict=True)``): a quote that runs to the end
of the file, or a closing quote not followed by a comma or line end, is an error naming the record's line."""


def read_rows(
    path: str | Path,
    fmt: str | None = None,
    *,
    columns: Sequence[str] | None = None,
    split: str | None = None,
) -> list[tuple[int, dict[str, Any]]]:
    """`iter_rows` as a list."""
    return list(iter_rows(path, fmt, columns=columns, split=split))


def _delimited_rows(p: Path, fmt: str, columns: Sequence[str] | None) -> Iterator[tuple[int, dict[str, Any]]]:
    try:
        text = read_utf8(p)  # NotTextError names the line, where the codec's error names nothing
    except NotTextError as e:
        raise TableError(str(e)) from None
    f = io.StringIO(text, newline="")  # newline="": the csv module sees quoted newlines as they are
    if fmt == "csv":
        reader = csv.reader(f, strict=True)
    else:
        reader = csv.reader(f, delimiter="\t", quoting=csv.QUOTE_NONE)
    fields = "fields" if fmt == "csv" else "tab-separated fields"
    header: list[str] | None = None
    if columns:
        header = list(columns)
        check_unique_columns(header, "--columns")
    start = 1  # first line of the current record (a CSV record may span lines)
    while True:
        try:
            row = next(reader, None)
        except csv.Error as e:  # e.g. a field over csv.field_size_limit(): not a ValueError, a traceback
            raise TableError(f"{p}:{start}: not {fmt.upper()} ({e})") from None
        if row is None:
            break
        line = start
        start = reader.line_num + 1
        if reader.line_num - line >= MAX_RECORD_LINES:
            raise TableError(
                f"{p}:{line}: a quoted field runs over {reader.line_num - line + 1} lines, to line "
                f"{reader.line_num} (more than {MAX_RECORD_LINES}): an unbalanced quote? A quote inside a "
                'field is written ""'
            )
        if not row or (len(row) == 1 and not row[0].strip()):
            continue
        if header is None:
            header = [h.strip() for h in row]
            check_unique_columns(header, f"{p}:{line}: the header")
            continue
        if len(row) != len(header):
            raise TableError(f"{p}:{line}: {len(row)} {fields}, expected {len(header)} ({', '.join(header)})")
        yield line, dict(zip(header, row))


def _import(name: str, p: Path) -> Any:
    import importlib

    try:
        return importlib.import_module(name)
    except ImportError:
        raise TableError(f"{p}: reading it needs {name.split('.')[0]} ({INSTALL_HINT})") from None


def _read_arrow(p: Path, fmt: str) -> Any:
    """The pyarrow Table of a Parquet or Arrow IPC (file or stream layout) file."""
    pa = _import("pyarrow", p)
    try:
        if fmt == "parquet":
            return _import("pyarrow.parquet", p).read_table(p)
        with pa.memory_map(str(p)) as source:
            try:
                return pa.ipc.open_file(source).read_all()
            except pa.ArrowInvalid:
                source.seek(0)
                return pa.ipc.open_stream(source).read_all()
    except (pa.ArrowException, OSError) as e:
        raise TableError(
            f"{p}: not a {fmt} file ({str(e).splitlines()[0] if str(e) else type(e).__name__})"
        ) from None


def _datasets_table(p: Path, split: str | None) -> Any:
    """The Arrow table of a ``datasets`` directory (one split of a DatasetDict)."""
    datasets = _import("datasets", p)
    try:
        loaded = datasets.load_from_disk(str(p))
    except Exception as e:  # datasets raises FileNotFoundError / ValueError / json errors for a bad directory
        raise TableError(f"{p}: not a datasets directory ({e})") from None
    if isinstance(loaded, datasets.DatasetDict):
        names = list(loaded)
        wanted = SPLIT_ALIASES.get(split or "", (split,)) if split else ()
        found = next((n for n in wanted if n in loaded), None)
        if found is None:
            raise TableError(
                f"{p}: a DatasetDict with splits {', '.join(names)}; "
                + (f"none is {split!r}" if split else f"name one as {p}/SPLIT")
            )
        loaded = loaded[found]
    # the rows as an Arrow table, a select()ed or shuffled dataset's indices mapping applied (in memory:
    # flatten_indices would write a cache file into the user's directory)
    return loaded.with_format("arrow")[:]


def _arrow_rows(p: Path, table: Any) -> Iterator[tuple[int, dict[str, Any]]]:
    names = [str(n) for n in table.column_names]
    check_unique_columns(names, f"{p}: the schema")
    n = 0
    for batch in table.to_batches(max_chunksize=4096):
        for row in batch.to_pylist():
            n += 1
            yield n, row
