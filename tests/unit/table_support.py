"""Writing the same rows as every format `albert_lm._tables.iter_rows` reads, for the format tests."""

from __future__ import annotations

import csv
import json
from pathlib import Path
from typing import Any

import pytest

pa = pytest.importorskip("pyarrow")
pq = pytest.importorskip("pyarrow.parquet")
datasets = pytest.importorskip("datasets")


def write_jsonl(path: Path, rows: list[dict[str, Any]]) -> Path:
    path.write_text("".join(json.dumps(r) + "\n" for r in rows), encoding="utf-8")
    return path


def write_csv(path: Path, rows: list[dict[str, Any]]) -> Path:
    with path.open("w", encoding="utf-8", newline="") as f:
        tsv = {"delimiter": "\t", "quoting": csv.QUOTE_NONE, "quotechar": None}  # quotes literal, as GLUE's
        writer = csv.DictWriter(f, fieldnames=list(rows[0]), **(tsv if path.suffix == ".tsv" else {}))
        writer.writeheader()
        writer.writerows(rows)
    return path


def write_parquet(path: Path, rows: list[dict[str, Any]]) -> Path:
    pq.write_table(pa.Table.from_pylist(rows), path)
    return path


def write_arrow(path: Path, rows: list[dict[str, Any]], *, stream: bool = False) -> Path:
    table = pa.Table.from_pylist(rows)
    with pa.OSFile(str(path), "wb") as sink:
        writer = pa.ipc.new_stream if stream else pa.ipc.new_file
        with writer(sink, table.schema) as w:
            w.write_table(table)
    return path


def write_dataset(path: Path, rows: list[dict[str, Any]]) -> Path:
    datasets.Dataset.from_list(rows).save_to_disk(str(path))
    return path


def write_dataset_dict(path: Path, splits: dict[str, list[dict[str, Any]]]) -> Path:
    datasets.DatasetDict({k: datasets.Dataset.from_list(v) for k, v in splits.items()}).save_to_disk(
        str(path)
    )
    return path


def every_format(
    folder: Path, stem: str, rows: list[dict[str, Any]], *, csv_too: bool = True
) -> dict[str, Path]:
    """``{format: path}`` of ``rows`` written as JSONL, Parquet, Arrow (file and stream layouts), a datasets
    directory (and CSV / TSV when the values are flat)."""
    folder.mkdir(parents=True, exist_ok=True)
    out = {
        "jsonl": write_jsonl(folder / f"{stem}.jsonl", rows),
        "parquet": write_parquet(folder / f"{stem}.parquet", rows),
        "arrow": write_arrow(folder / f"{stem}.arrow", rows),
        "arrow-stream": write_arrow(folder / f"{stem}-stream.arrow", rows, stream=True),
        "datasets": write_dataset(folder / f"{stem}-ds", rows),
    }
    if csv_too:
        out["csv"] = write_csv(folder / f"{stem}.csv", rows)
        out["tsv"] = write_csv(folder / f"{stem}.tsv", rows)
    return out
