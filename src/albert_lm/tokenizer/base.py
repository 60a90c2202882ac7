"""What every tokenizer shares: special tokens, single/pair encoding, truncation, padding, batching.

A subclass supplies the vocabulary and three hooks (`_encode_ids_batch`, `_encode_offsets_batch`,
`tokenize`); this class turns their output into model inputs laid out as BERT/ALBERT expect (callers
use the public `encode_ids` / `encode_ids_batch` / `encode` / `batch_encode`, never the hooks):

    single:  [CLS] A [SEP]            token_type_ids 0 ... 0
    pair:    [CLS] A [SEP] B [SEP]    token_type_ids 0 for [CLS] A [SEP], 1 for B [SEP]

Truncation follows transformers' `truncate_sequences` (and the original `_truncate_seq_pair`, which
pops from the longer side, from B on ties), except that where transformers logs an error and returns an
over-long sequence we raise `ValueError`.
"""

from __future__ import annotations

import abc
import gc
import json
import multiprocessing
import os
from collections.abc import Iterable, Iterator, Mapping, Sequence
from contextlib import contextmanager
from pathlib import Path
from typing import Any, Literal, TypeAlias

from albert_lm._io import atomic_write_json
from albert_lm._proc import die_with_parent

__all__ = ["Tokenizer", "Encoding", "Offsets", "as_text", "default_num_workers"]

Offsets: TypeAlias = list[tuple[int, int]]
Encoding: TypeAlias = dict[str, Any]
Truncation = Literal["longest_first", "only_first", "only_second"] | None
Padding = Literal["longest", "max_length"] | bool

TRUNCATIONS = ("longest_first", "only_first", "only_second", None)
PADDINGS = (False, "longest", "max_length")


def as_text(text: object, what: str = "text") -> str:
    """Returns ``text`` as ``str``; ``bytes`` must be valid UTF-8.

    Raises:
        ValueError: bytes that are not valid UTF-8 (the message gives the byte offset).
        TypeError: anything else than ``str`` / ``bytes``.
    """
    if isinstance(text, str):
        return text
    if isinstance(text, (bytes, bytearray)):
        try:
            return bytes(text).decode("utf-8")
        except UnicodeDecodeError as e:
            raise ValueError(
                f"{what} is not valid UTF-8: {e.reason} at byte {e.start} "
                f"({bytes(text)[max(0, e.start - 8) : e.start + 8]!r})"
            ) from None
    raise TypeError(f"{what} must be str or UTF-8 bytes, got {type(text).__name__}")


def default_num_workers() -> int:
    """The number of CPU cores this process may run on."""
    try:
        return max(1, len(os.sched_getaffinity(0)))
    except AttributeError:  # not on Linux
        return max(1, os.cpu_count() or 1)


@contextmanager
def _gc_paused() -> Iterator[None]:
    """Pauses the cyclic garbage collector while building many small lists.

    Building ~100k lists triggers dozens of full collections that find nothing (token lists hold no
    cycles); pausing them roughly halves the time to build a batch of encodings.
    """
    was_enabled = gc.isenabled()
    gc.disable()
    try:
        yield
    finally:
        if was_enabled:
            gc.enable()


# A tokenizer handed to fork()ed workers through a global: fork copies it, nothing is pickled.
_WORKER_TOKENIZER: Tokenizer | None = None


def _worker_call(args: tuple[str, tuple[Any, ...]]) -> Any:
    name, call_args = args
    assert _WORKER_TOKENIZER is not None
    return getattr(_WORKER_TOKENIZER, name)(*call_args)


class Tokenizer(abc.ABC):
    """The interface shared by `AlbertTokenizer` (SentencePiece) and `WordPieceTokenizer`.

    Attributes:
        kind: ``"sentencepiece"`` or ``"wordpiece"``.
        vocab_size: number of ids.
        pad_id, unk_id, cls_id, sep_id, mask_id: the special token ids, read from the vocabulary.
        do_lower_case: whether text is lower-cased before tokenization.
        fingerprint: sha256 (hex) of the vocabulary / model file bytes.
    """

    kind: str
    vocab_size: int
    pad_id: int
    unk_id: int
    cls_id: int
    sep_id: int
    mask_id: int
    do_lower_case: bool
    fingerprint: str

    #: Batches at least this long are spread over processes (subclasses that parallelise otherwise
    #: override `_parallel_batches`).
    process_pool_min_batch: int = 2048

    # ---------------------------------------------------------------------------------------------
    # hooks
    # ---------------------------------------------------------------------------------------------

    @abc.abstractmethod
    def tokenize(self, text: str | bytes) -> list[str]:
        """Splits ``text`` into vocabulary pieces (no special tokens)."""

    @abc.abstractmethod
    def _encode_ids_batch(self, texts: list[str], num_workers: int) -> list[list[int]]:
        """Ids of each text (no special tokens)."""

    @abc.abstractmethod
    def _encode_offsets_batch(self, texts: list[str], num_workers: int) -> list[tuple[list[int], Offsets]]:
        """Ids and character spans in the original text of each text."""

    @abc.abstractmethod
    def id_to_piece(self, i: int) -> str:
        """The vocabulary entry of id ``i``."""

    @abc.abstractmethod
    def get_vocab(self) -> dict[str, int]:
        """Piece -> id."""

    @abc.abstractmethod
    def decode(self, ids: Sequence[int], skip_special_tokens: bool = True) -> str:
        """Text of ``ids``."""

    @abc.abstractmethod
    def save_pretrained(self, directory: str | Path) -> list[Path]:
        """Writes the tokenizer files (those transformers reads too) into ``directory``."""

    # ---------------------------------------------------------------------------------------------
    # vocabulary helpers
    # ---------------------------------------------------------------------------------------------

    @property
    def special_ids(self) -> frozenset[int]:
        """Ids that never come from text: pad, [CLS], [SEP], [MASK]."""
        return frozenset((self.pad_id, self.cls_id, self.sep_id, self.mask_id))

    def convert_ids_to_tokens(self, ids: Sequence[int]) -> list[str]:
        """Pieces of ``ids``."""
        return [self.id_to_piece(int(i)) for i in ids]

    def convert_tokens_to_ids(self, tokens: Sequence[str]) -> list[int]:
        """Ids of ``tokens``; a piece not in the vocabulary maps to ``unk_id``."""
        vocab = self.get_vocab()
        return [vocab.get(t, self.unk_id) for t in tokens]

    def _check_id(self, i: int) -> int:
        if not 0 <= i < self.vocab_size:
            raise IndexError(f"token id {i} is out of range for a vocabulary of {self.vocab_size}")
        return i

    # ---------------------------------------------------------------------------------------------
    # encoding
    # ---------------------------------------------------------------------------------------------

    def encode_ids(self, text: str | bytes) -> list[int]:
        """Ids of ``text`` without special tokens."""
        return self._encode_ids_batch([as_text(text)], 1)[0]

    def encode_ids_batch(self, texts: Sequence[str | bytes], num_workers: int = 1) -> list[list[int]]:
        """`encode_ids` of each text, in one call.

        One call per batch amortizes the per-call cost (for SentencePiece about four times the encoding of
        a short sentence), so a caller with many short texts (``albert prepare``: a document's sentences)
        should use this rather than `encode_ids` in a loop.

        Args:
            texts: the texts.
            num_workers: threads the encoder may use (SentencePiece spreads a batch over threads); 1 keeps
                the work on the calling thread, as a worker process that is one of many wants.
        """
        if isinstance(texts, (str, bytes)):
            raise TypeError("encode_ids_batch takes a list of texts; use encode_ids for one text")
        return self._encode_ids_batch(
            [as_text(t, f"texts[{i}]") for i, t in enumerate(texts)], max(1, int(num_workers))
        )

    def encode_with_offsets(self, text: str | bytes) -> tuple[list[int], Offsets]:
        """Ids of ``text`` and the ``(start, end)`` character span of each token in ``text`` as given.

        Spans index the original, unprocessed string (before whitespace collapsing, Unicode
        normalization and lower-casing), so ``text[start:end]`` is what the token was made from.
        A token made only of the word-boundary marker (SentencePiece's lone "▁") has an empty span.
        """
        return self._encode_offsets_batch([as_text(text)], 1)[0]

    def __call__(
        self,
        text: Any,
        text_pair: Any = None,
        *,
        padding: bool | str = False,
        truncation: bool | str | None = None,
        max_length: int | None = None,
        return_tensors: str | None = None,
        return_attention_mask: bool | None = None,
        return_token_type_ids: bool | None = None,
    ) -> Any:
        """Model inputs as transformers' tokenizers give them: one text or pair, or a list (of texts, or
        ``text`` + ``text_pair`` lists), with ``padding``, ``truncation``, ``max_length`` and
        ``return_tensors`` ("pt", "np", None) as there; returns a `BatchEncoding` (``input_ids``,
        ``token_type_ids``, ``attention_mask``; keys are attributes too). See `albert_lm.tokenizer.calling`."""
        from albert_lm.tokenizer.calling import call_tokenizer

        return call_tokenizer(
            self, text, text_pair, padding=padding, truncation=truncation, max_length=max_length,
            return_tensors=return_tensors, return_attention_mask=return_attention_mask,
            return_token_type_ids=return_token_type_ids,
        )  # fmt: skip

    def encode(
        self,
        text: str | bytes,
        text_pair: str | bytes | None = None,
        *,
        max_length: int | None = None,
        truncation: Truncation = "longest_first",
        padding: Padding = False,
        return_offsets: bool = False,
    ) -> Encoding:
        """Model inputs for one text or one pair.

        Args:
            text: the first (or only) segment.
            text_pair: optional second segment.
            max_length: length limit including special tokens; None for no limit.
            truncation: how to cut a sequence longer than ``max_length``: ``"longest_first"`` removes
                tokens from the end of the longer segment one at a time (from B on ties),
                ``"only_first"`` / ``"only_second"`` only from A / B; None raises if it does not fit.
            padding: False, ``"longest"`` (no-op for one sequence) or ``"max_length"``.
            return_offsets: also return ``offsets`` (spans into ``text`` for A tokens and into
                ``text_pair`` for B tokens, None for special and pad tokens) and ``sequence_ids``
                (0 for A, 1 for B, None for special and pad tokens).

        Returns:
            A dict with ``input_ids``, ``token_type_ids``, ``attention_mask`` (lists of int) and, with
            ``return_offsets``, ``offsets`` and ``sequence_ids``.

        Raises:
            ValueError: the sequence cannot be made to fit ``max_length`` with this ``truncation``
                (a segment would lose all its tokens), or an invalid argument.
        """
        pairs = None if text_pair is None else [as_text(text_pair, "text_pair")]
        return self.batch_encode(
            [as_text(text, "text")],
            pairs,
            max_length=max_length,
            truncation=truncation,
            padding=padding,
            return_offsets=return_offsets,
            num_workers=1,
        )[0]

    def batch_encode(
        self,
        texts: Sequence[str | bytes],
        text_pairs: Sequence[str | bytes] | None = None,
        *,
        max_length: int | None = None,
        truncation: Truncation = "longest_first",
        padding: Padding = False,
        return_offsets: bool = False,
        num_workers: int | None = None,
    ) -> list[Encoding]:
        """`encode` for many texts (or pairs) at once, using several cores for big batches.

        Args:
            texts: first segments.
            text_pairs: second segments, as many as ``texts``, or None.
            max_length, truncation, return_offsets: as in `encode`.
            padding: as in `encode`; ``"longest"`` pads to the longest encoding of the batch.
            num_workers: cores to use; None uses every core this process may run on for big batches.

        Returns:
            One dict per text, as `encode` returns.
        """
        if truncation not in TRUNCATIONS:
            raise ValueError(f"truncation must be one of {TRUNCATIONS}, got {truncation!r}")
        if padding is True:
            padding = "longest"
        if padding not in PADDINGS:
            raise ValueError(f"padding must be one of {PADDINGS}, got {padding!r}")
        if padding == "max_length" and max_length is None:
            raise ValueError("padding='max_length' needs max_length")
        if max_length is not None and max_length < 2:
            raise ValueError(f"max_length={max_length} leaves no room for [CLS] and [SEP]")
        if isinstance(texts, (str, bytes)):
            raise TypeError("batch_encode takes a list of texts; use encode for one text")
        a_texts = [as_text(t, f"texts[{i}]") for i, t in enumerate(texts)]
        b_texts: list[str] | None = None
        if text_pairs is not None:
            if isinstance(text_pairs, (str, bytes)) or len(text_pairs) != len(a_texts):
                raise ValueError("text_pairs must be a list as long as texts")
            b_texts = [as_text(t, f"text_pairs[{i}]") for i, t in enumerate(text_pairs)]
        workers = default_num_workers() if num_workers is None else max(1, int(num_workers))

        with _gc_paused():
            encoded = self._parallel_batches(a_texts, b_texts, return_offsets, workers)
            out = [
                self._build(enc_a, enc_b, max_length, truncation, padding, return_offsets, i)
                for i, (enc_a, enc_b) in enumerate(encoded)
            ]
            if padding == "longest" and len(out) > 1:
                longest = max(len(e["input_ids"]) for e in out)
                for e in out:
                    self._pad(e, longest, return_offsets)
        return out

    def _encode_texts(self, texts: list[str], return_offsets: bool, num_workers: int) -> list[Any]:
        if return_offsets:
            return self._encode_offsets_batch(texts, num_workers)
        return self._encode_ids_batch(texts, num_workers)

    def _parallel_batches(
        self, a_texts: list[str], b_texts: list[str] | None, return_offsets: bool, workers: int
    ) -> list[tuple[Any, Any]]:
        """Encodes A and B texts; splits big batches over ``workers`` forked processes."""
        n = len(a_texts)
        all_texts = a_texts + (b_texts or [])
        if workers > 1 and len(all_texts) >= self.process_pool_min_batch:
            enc = self._map_processes(all_texts, return_offsets, workers)
        else:
            enc = self._encode_texts(all_texts, return_offsets, workers)
        if b_texts is None:
            return [(e, None) for e in enc]
        return list(zip(enc[:n], enc[n:]))

    def _map_processes(self, texts: list[str], return_offsets: bool, workers: int) -> list[Any]:
        """Encodes ``texts`` in ``workers`` fork()ed processes, in order."""
        global _WORKER_TOKENIZER
        if "fork" not in multiprocessing.get_all_start_methods():
            return self._encode_texts(texts, return_offsets, workers)
        chunk = max(256, -(-len(texts) // (workers * 4)))
        method = "_encode_offsets_batch" if return_offsets else "_encode_ids_batch"
        jobs = [(method, (texts[i : i + chunk], 1)) for i in range(0, len(texts), chunk)]
        _WORKER_TOKENIZER = self
        try:
            fork = multiprocessing.get_context("fork")
            with fork.Pool(workers, initializer=die_with_parent, initargs=(os.getpid(),)) as pool:
                parts = pool.map(_worker_call, jobs, chunksize=1)
        finally:
            _WORKER_TOKENIZER = None
        return [e for part in parts for e in part]

    # ---------------------------------------------------------------------------------------------
    # truncation, special tokens, padding
    # ---------------------------------------------------------------------------------------------

    def _build(
        self,
        enc_a: Any,
        enc_b: Any,
        max_length: int | None,
        truncation: Truncation,
        padding: Padding,
        return_offsets: bool,
        index: int,
    ) -> Encoding:
        off_a: Any = None
        off_b: Any = None
        ids_b: Any
        if return_offsets:
            ids_a, off_a = enc_a
            ids_b, off_b = enc_b if enc_b is not None else (None, None)
        else:
            ids_a, ids_b = enc_a, enc_b
        la, lb = len(ids_a), (len(ids_b) if ids_b is not None else 0)
        if max_length is not None:
            na, nb = _truncated_lengths(la, lb, ids_b is not None, max_length, truncation, index)
            if na != la:
                ids_a = ids_a[:na]
                if return_offsets:
                    off_a = off_a[:na]
                la = na
            if nb != lb:
                ids_b = ids_b[:nb]
                if return_offsets:
                    off_b = off_b[:nb]
                lb = nb
        cls, sep = self.cls_id, self.sep_id
        if ids_b is None:
            n = la + 2
            enc: Encoding = {
                "input_ids": [cls, *ids_a, sep],
                "token_type_ids": [0] * n,
                "attention_mask": [1] * n,
            }
            if return_offsets:
                enc["offsets"] = [None, *off_a, None]
                enc["sequence_ids"] = [None, *([0] * la), None]
        else:
            n = la + lb + 3
            enc = {
                "input_ids": [cls, *ids_a, sep, *ids_b, sep],
                "token_type_ids": [0] * (la + 2) + [1] * (lb + 1),
                "attention_mask": [1] * n,
            }
            if return_offsets:
                enc["offsets"] = [None, *off_a, None, *off_b, None]
                enc["sequence_ids"] = [None, *([0] * la), None, *([1] * lb), None]
        if padding == "max_length" and max_length is not None:
            self._pad(enc, max_length, return_offsets)
        return enc

    def _pad(self, enc: Encoding, length: int, return_offsets: bool) -> None:
        missing = length - len(enc["input_ids"])
        if missing <= 0:
            return
        enc["input_ids"].extend([self.pad_id] * missing)
        enc["token_type_ids"].extend([0] * missing)
        enc["attention_mask"].extend([0] * missing)
        if return_offsets:
            enc["offsets"].extend([None] * missing)
            enc["sequence_ids"].extend([None] * missing)

    # ---------------------------------------------------------------------------------------------
    # files
    # ---------------------------------------------------------------------------------------------

    @staticmethod
    def _write_json(path: Path, obj: dict[str, Any], indent: int | None = 2) -> Path:
        atomic_write_json(path, obj, indent=indent)
        return path

    @staticmethod
    def _read_config(directory: Path) -> dict[str, Any]:
        cfg: dict[str, Any] = {}
        for name in ("special_tokens_map.json", "tokenizer_config.json"):
            p = directory / name
            if p.is_file():
                try:
                    data = json.loads(p.read_text(encoding="utf-8"))
                except (ValueError, UnicodeDecodeError) as e:
                    raise ValueError(f"{p}: not valid JSON ({e})") from None
                if not isinstance(data, dict):
                    raise ValueError(f"{p}: expected a JSON object")
                cfg.update(data)
        return cfg

    def __repr__(self) -> str:
        return (
            f"{type(self).__name__}(vocab_size={self.vocab_size}, do_lower_case={self.do_lower_case}, "
            f"fingerprint={self.fingerprint[:12]}...)"
        )


def _special_tokens(cfg: Mapping[str, Any], keys: Iterable[str]) -> dict[str, str]:
    """The special tokens ``keys`` (``unk_token``, ...) that a tokenizer_config.json names, each stored as a
    string or an AddedToken dict (``{"content": ...}``); the others are left out."""
    out = {}
    for key in keys:
        value = cfg.get(key)
        if isinstance(value, dict):
            value = value.get("content")
        if isinstance(value, str):
            out[key] = value
    return out


def _truncated_lengths(
    la: int, lb: int, is_pair: bool, max_length: int, truncation: Truncation, index: int
) -> tuple[int, int]:
    """Segment lengths after truncation to ``max_length`` (special tokens included)."""
    available = max_length - (3 if is_pair else 2)
    excess = la + lb - available
    if excess <= 0:
        return la, lb
    where = f"text {index}: {la}{' + ' + str(lb) if is_pair else ''} tokens"
    if truncation is None:
        raise ValueError(f"{where} do not fit max_length={max_length} and truncation=None")
    if not is_pair and truncation == "only_second":
        raise ValueError(f"{where} do not fit max_length={max_length}; 'only_second' needs a text pair")
    if truncation == "only_first" or not is_pair:
        if la <= excess:
            raise ValueError(
                f"{where} do not fit max_length={max_length}: the first text would lose all its {la} "
                f"tokens (needs {excess} removed); use a larger max_length or another truncation"
            )
        return la - excess, lb
    if truncation == "only_second":
        if lb <= excess:
            raise ValueError(
                f"{where} do not fit max_length={max_length}: the second text would lose all its {lb} "
                f"tokens (needs {excess} removed); use a larger max_length or another truncation"
            )
        return la, lb - excess
    # longest_first: tokens come off the longer segment one at a time, off B on ties (transformers'
    # truncate_sequences; original run_classifier.py _truncate_seq_pair pops the same way).
    first = min(abs(la - lb), excess)
    rest = excess - first
    if la > lb:
        na, nb = la - first - rest // 2, lb - (rest - rest // 2)
    else:
        na, nb = la - rest // 2, lb - first - (rest - rest // 2)
    if (la > 0 and na <= 0) or (lb > 0 and nb <= 0):
        raise ValueError(
            f"{where} do not fit max_length={max_length}: a text would lose all its tokens; "
            "use a larger max_length"
        )
    return na, nb
