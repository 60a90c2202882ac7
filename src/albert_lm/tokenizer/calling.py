"""``tokenizer(text, text_pair, padding=..., truncation=..., max_length=..., return_tensors=...)``: the call
that transformers users know, on top of `Tokenizer.batch_encode`.

The arguments mean what they mean in transformers' ``PreTrainedTokenizerBase.__call__``: ``padding``
True / ``"longest"`` (to the longest of the batch), ``"max_length"``, False / ``"do_not_pad"``;
``truncation`` True / ``"longest_first"``, ``"only_first"``, ``"only_second"``, False /
``"do_not_truncate"``; one text (or pair) gives flat lists, a list gives a list per text, and
``return_tensors`` ``"pt"`` / ``"np"`` gives (batch, length) arrays (one text: a batch of one). The result
is a `BatchEncoding`: a dict whose keys are also attributes. Two differences, both loud: truncation with
no ``max_length`` is an error (there is no ``model_max_length`` to fall back on), and where transformers
logs an error and returns an over-long sequence (a segment would lose all its tokens) we raise.
"""

from __future__ import annotations

from collections.abc import Mapping, Sequence
from typing import TYPE_CHECKING, Any, TypeVar

if TYPE_CHECKING:
    from albert_lm.tokenizer.base import Encoding, Tokenizer, Truncation

__all__ = ["BatchEncoding", "call_tokenizer"]

T = TypeVar("T")
KEYS = ("input_ids", "token_type_ids", "attention_mask")
_PADDING: dict[Any, str | None] = {
    True: "longest",
    "longest": "longest",
    "max_length": "max_length",
    False: None,
    "do_not_pad": None,
}
_TRUNCATION: dict[Any, Truncation] = {
    True: "longest_first",
    "longest_first": "longest_first",
    "only_first": "only_first",
    "only_second": "only_second",
    False: None,
    "do_not_truncate": None,
}


class BatchEncoding(dict):  # type: ignore[type-arg]
    """Model inputs (``input_ids``, ``token_type_ids``, ``attention_mask``): a dict whose keys are also
    attributes, as transformers' ``BatchEncoding``."""

    def __getattr__(self, name: str) -> Any:
        try:
            return self[name]
        except KeyError:
            raise AttributeError(name) from None

    def to(self, device: Any) -> BatchEncoding:
        """The tensors moved to ``device`` (``return_tensors="pt"``)."""
        return BatchEncoding({k: v.to(device) if hasattr(v, "to") else v for k, v in self.items()})


def _option(table: Mapping[Any, T], value: Any, name: str) -> T | None:
    if value is None:
        return None
    try:
        return table[value]
    except (KeyError, TypeError):
        choices = ", ".join(repr(k) for k in table)
        raise ValueError(f"{name} must be one of {choices}; got {value!r}") from None


def _as_batch(text: Any, text_pair: Any) -> tuple[list[Any], list[Any] | None, bool]:
    """(first segments, second segments or None, whether the input was a batch)."""
    if isinstance(text, (str, bytes)):
        if text_pair is not None and not isinstance(text_pair, (str, bytes)):
            raise TypeError("text is one text, so text_pair must be one text too")
        return [text], None if text_pair is None else [text_pair], False
    if not isinstance(text, Sequence):
        raise TypeError(f"text must be a str or a list of str, got {type(text).__name__}")
    texts = list(text)
    if text_pair is None and texts and all(isinstance(t, (tuple, list)) and len(t) == 2 for t in texts):
        return [t[0] for t in texts], [t[1] for t in texts], True  # [(a, b), ...]: pairs
    if text_pair is None:
        return texts, None, True
    if isinstance(text_pair, (str, bytes)) or len(text_pair) != len(texts):
        raise ValueError(f"text_pair must be a list as long as text ({len(texts)})")
    return texts, list(text_pair), True


def call_tokenizer(
    tokenizer: Tokenizer,
    text: Any,
    text_pair: Any = None,
    *,
    padding: bool | str = False,
    truncation: bool | str | None = None,
    max_length: int | None = None,
    return_tensors: str | None = None,
    return_attention_mask: bool | None = None,
    return_token_type_ids: bool | None = None,
) -> BatchEncoding:
    """`Tokenizer.__call__` (see the module docstring)."""
    pad = _option(_PADDING, padding, "padding")
    cut = _option(_TRUNCATION, truncation, "truncation")
    if cut is not None and max_length is None:
        raise ValueError(
            f"truncation={truncation!r} needs max_length (this tokenizer has no model_max_length)"
        )
    if pad == "max_length" and max_length is None:
        raise ValueError("padding='max_length' needs max_length")
    if return_tensors not in (None, "pt", "np"):
        raise ValueError(f"return_tensors must be 'pt', 'np' or None; got {return_tensors!r}")
    a, b, batched = _as_batch(text, text_pair)
    encs: list[Encoding] = tokenizer.batch_encode(
        a, b, max_length=max_length if cut else None, truncation=cut or "longest_first", num_workers=None
    )
    length = max_length if pad == "max_length" else max(len(e["input_ids"]) for e in encs) if pad else 0
    for enc in encs:
        tokenizer._pad(enc, length or 0, False)
    keys = [
        k
        for k in KEYS
        if not (k == "attention_mask" and return_attention_mask is False)
        and not (k == "token_type_ids" and return_token_type_ids is False)
    ]
    out = {k: [e[k] for e in encs] if batched else encs[0][k] for k in keys}
    if return_tensors is not None:
        out = {k: _tensor([e[k] for e in encs], k, return_tensors) for k in keys}
    return BatchEncoding(out)


def _tensor(rows: list[list[int]], key: str, kind: str) -> Any:
    if len({len(r) for r in rows}) > 1:
        raise ValueError(
            f"{key}: the texts have different lengths ({min(map(len, rows))} to {max(map(len, rows))} "
            "tokens); pass padding=True (or 'max_length') to return tensors"
        )
    if kind == "pt":
        import torch

        return torch.tensor(rows, dtype=torch.long)
    import numpy as np

    return np.array(rows, dtype=np.int64)
