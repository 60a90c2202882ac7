"""SQuAD in the flat row layout of the Hugging Face ``squad`` / ``squad_v2`` sets (one row per question),
from JSONL, Parquet, Arrow or a ``datasets`` directory, as the official nested JSON that
`albert_lm.tasks.squad_data.parse_squad` reads (so both layouts go through the same checks).

`read_squad_file` reads either layout: the one reader of the SQuAD task.
"""

from __future__ import annotations

from pathlib import Path
from typing import Any

from albert_lm._tables import TableError, iter_rows
from albert_lm.tasks.squad_data import SquadData, SquadFormatError, parse_squad, read_squad

# the files (besides directories) read as flat rows; anything else is the official nested JSON
ROW_SUFFIXES = (".jsonl", ".ndjson", ".parquet", ".pq", ".arrow", ".feather", ".ipc")


def read_squad_file(path: str | Path) -> SquadData:
    """A SQuAD 1.1 / 2.0 set: the official nested JSON (`albert_lm.tasks.squad_data.read_squad`), or flat
    rows (`squad_rows_to_json`) from a JSONL / Parquet / Arrow file or a ``datasets`` directory.

    Raises:
        FileNotFoundError: no such file.
        SquadFormatError: naming the file and the row (flat rows) or the JSON path / line (nested JSON).
    """
    p = Path(path)
    if p.is_dir() or p.suffix.lower() in ROW_SUFFIXES:
        return parse_squad(squad_rows_to_json(p), p)
    return read_squad(p)


def _row_answers(row: dict[str, Any], where: str) -> list[dict[str, Any]]:
    """``answers: {text: [...], answer_start: [...]}`` of a flat row as SQuAD JSON answers."""
    answers = row.get("answers")
    if not isinstance(answers, dict) or not {"text", "answer_start"} <= set(answers):
        raise SquadFormatError(f"{where}: column 'answers' must be {{text: [...], answer_start: [...]}}")
    texts, starts = answers["text"], answers["answer_start"]
    if not isinstance(texts, list) or not isinstance(starts, list) or len(texts) != len(starts):
        raise SquadFormatError(f"{where}: answers.text and answers.answer_start must be lists of one length")
    for value, kind in [*((t, str) for t in texts), *((a, int) for a in starts)]:
        if not isinstance(value, kind) or isinstance(value, bool):
            raise SquadFormatError(f"{where}: answers: {value!r} is not {kind.__name__}")
    return [{"text": t, "answer_start": a} for t, a in zip(texts, starts)]


def squad_rows_to_json(path: str | Path) -> dict[str, Any]:
    """The official nested SQuAD JSON of a file in the flat row layout of the Hugging Face ``squad`` /
    ``squad_v2`` sets: one row per question, columns ``id``, ``title``, ``context``, ``question``,
    ``answers: {text: [...], answer_start: [...]}`` (rows read by `albert_lm._tables.iter_rows`). Rows of
    one title and context become one paragraph; a question with no answer is ``is_impossible`` (2.0).

    Raises:
        SquadFormatError: a row without one of the columns or with a mistyped value, naming file and row.
    """
    articles: dict[str, dict[str, list[dict[str, Any]]]] = {}
    try:
        for n, row in iter_rows(path):
            where = f"{path}:{n}"
            for column in ("id", "context", "question", "answers"):
                if column not in row:
                    raise SquadFormatError(f"{where}: no column {column!r} (columns: {', '.join(row)})")
            for column in ("context", "question"):
                if not isinstance(row[column], str):
                    raise SquadFormatError(f"{where}: column {column!r} is not text")
            answers = _row_answers(row, where)
            qa = {"id": row["id"], "question": row["question"], "answers": answers}
            if not answers:
                qa["is_impossible"] = True
            title = str(row.get("title") or "")
            articles.setdefault(title, {}).setdefault(row["context"], []).append(qa)
    except TableError as e:
        raise SquadFormatError(str(e)) from None
    data = [
        {"title": t, "paragraphs": [{"context": c, "qas": qas} for c, qas in paragraphs.items()]}
        for t, paragraphs in articles.items()
    ]
    return {"data": data}
