"""The request and response bodies of ``POST /predict`` (pydantic models: FastAPI validates requests
with them and documents them at /docs). Imported by `albert_lm.serve.app` when it builds the app."""

from __future__ import annotations

from typing import Any

from pydantic import BaseModel, ConfigDict, Field


class PredictRequest(BaseModel):
    """Exactly one of ``texts``, ``pairs`` or ``items``."""

    model_config = ConfigDict(extra="forbid")

    texts: list[str] | None = Field(
        None,
        description="single texts (classification / regression; named entities: tags of its words)",
        examples=[["a gorgeous, witty film"]],
    )
    pairs: list[tuple[str, str]] | None = Field(
        None, description="text pairs: [text, text_pair] (sentence-pair tasks) or [question, context] (SQuAD)"
    )
    items: list[dict[str, Any]] | None = Field(
        None,
        description="JSON objects as `albert predict` reads them, e.g. multiple choice "
        '{"context": ..., "question": ..., "options": [...]}, named entities {"tokens": [...]}',
    )


class PredictResponse(BaseModel):
    """One row per input, in the request's order (the rows `albert predict` writes)."""

    predictions: list[dict[str, Any]]
