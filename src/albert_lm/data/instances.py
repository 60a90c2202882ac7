"""Sentence-pair instances (SOP or NSP), as google-research/albert ``create_pretraining_data.py`` makes them.

``create_instances_from_document`` in the original, step by step, and what we keep:

* ``max_num_tokens = max_seq_length - 3`` (room for ``[CLS] A [SEP] B [SEP]``). With probability
  ``short_seq_prob`` (0.1) the target length is ``randint(2, max_num_tokens)`` instead.
* Sentences are appended to a chunk until it reaches the target length or the document ends. Then
  ``a_end = randint(1, len(chunk) - 1)`` sentences form A (1 if the chunk has one sentence), the rest B.
* A chunk of a *single* sentence takes B from a random other document (from a random sentence on, until
  ``target - len(A)`` tokens), labelled 1 -- in SOP mode too; that is the original's handling of it.
* SOP (``random_next_sentence=False``, the ALBERT default): with p = 0.5 A and B swap places, label 1.
  NSP (``random_next_sentence=True``, BERT and the paper's Table 5 baseline): with p = 0.5 B comes from a
  random document, label 1, and the chunk's unused sentences are put back for the next chunk.
* ``truncate_seq_pair`` (our :func:`truncate_pair_randomly`): while too long, drop one token from the longer
  side (B on ties), from the front or the back with p = 0.5 each. (Fine-tuning truncates differently: always
  from the back, see :mod:`albert_lm.tasks`.)

Fixes (each makes the output reproducible or streamable, said here once):

* The original uses one global ``random.Random(12345)`` over the whole corpus held in memory, so an
  instance depends on everything before it. We seed a ``random.Random`` per (seed, document, dupe) pass
  from a ``numpy.random.SeedSequence``: output is bitwise identical for any number of workers or machines.
* The random document is drawn from the same shard (a contiguous window of documents, by default about
  8 M characters) instead of the whole corpus, so memory stays bounded.
* ``short_seq_scope="instance"`` (our default) draws the target length afresh for each instance. The
  original draws it once per document (``short_seq_scope="document"``), although its comment says the
  intent is "10% of the time" for sequences: with one draw per document, a document that draws a short
  target yields several times more (short) instances, so far more than 10% of instances are short
  (see ``albert data stats``).

An instance is stored as two spans into the shard's token array -- it never copies tokens.
"""

from __future__ import annotations

import random
from dataclasses import dataclass
from typing import Literal

import numpy as np

FLAG_LABEL = 1  # SOP: swapped (or single-sentence chunk); NSP: B is random
FLAG_SHORT = 2  # this instance's target length was drawn short (short_seq_prob)
FLAG_RANDOM_B = 4  # B comes from another document

INSTANCE_DTYPE = np.dtype(
    [
        ("a_start", "<i8"),  # token offset of A in the shard's token array
        ("b_start", "<i8"),
        ("a_len", "<i4"),
        ("b_len", "<i4"),
        ("doc", "<i4"),  # shard-local document index
        ("flags", "<i4"),
    ]
)

# SeedSequence stream tags, so the pair and mask draws never share a stream.
STREAM_PAIRS = 0
STREAM_STATIC_MASKS = 1
STREAM_DYNAMIC_MASKS = 2
STREAM_SHUFFLE = 3


def derive_rng(*key: int) -> random.Random:
    """A ``random.Random`` seeded from a tuple of non-negative ints, the same on every machine."""
    state = np.random.SeedSequence([int(k) for k in key]).generate_state(4, dtype=np.uint32)
    return random.Random(int.from_bytes(state.tobytes(), "little"))


@dataclass(frozen=True)
class InstanceConfig:
    """Pairing settings; defaults are the original's flags."""

    max_seq_length: int = 512  # original create_pretraining_data.py: max_seq_length
    short_seq_prob: float = 0.1  # original create_pretraining_data.py: short_seq_prob
    short_seq_scope: Literal["instance", "document"] = "instance"  # see the module docstring
    task: Literal["sop", "nsp"] = "sop"  # original: random_next_sentence=False -> SOP

    def __post_init__(self) -> None:
        if self.max_seq_length < 5:
            raise ValueError(
                f"max_seq_length must be >= 5 ([CLS] a [SEP] b [SEP]), got {self.max_seq_length}"
            )
        if not 0.0 <= self.short_seq_prob <= 1.0:
            raise ValueError(f"short_seq_prob must be in [0, 1], got {self.short_seq_prob}")
        if self.short_seq_scope not in ("instance", "document"):
            raise ValueError(
                f"short_seq_scope must be 'instance' or 'document', got {self.short_seq_scope!r}"
            )
        if self.task not in ("sop", "nsp"):
            raise ValueError(f"task must be 'sop' or 'nsp', got {self.task!r}")

    @property
    def max_num_tokens(self) -> int:
        return self.max_seq_length - 3  # original: account for [CLS], [SEP], [SEP]


@dataclass
class DocumentIndex:
    """Sentence and document boundaries of one shard (all offsets are into the shard's token array).

    Attributes:
        sent_offsets: (S + 1,) int64, sentence i is tokens[sent_offsets[i]:sent_offsets[i + 1]].
        doc_offsets: (D + 1,) int64, document d is sentences doc_offsets[d]:doc_offsets[d + 1].
    """

    sent_offsets: np.ndarray
    doc_offsets: np.ndarray

    @property
    def num_documents(self) -> int:
        return len(self.doc_offsets) - 1


def truncate_pair_randomly(
    a_start: int, a_len: int, b_start: int, b_len: int, max_num_tokens: int, rng: random.Random
) -> tuple[int, int, int, int]:
    """The original's ``truncate_seq_pair`` on spans: trim the longer side, front or back at random."""
    while a_len + b_len > max_num_tokens:
        if a_len > b_len:  # original: tokens_a if len(tokens_a) > len(tokens_b) else tokens_b
            if rng.random() < 0.5:
                a_start += 1
            a_len -= 1
        else:
            if rng.random() < 0.5:
                b_start += 1
            b_len -= 1
    return a_start, a_len, b_start, b_len


def create_instances_from_document(
    index: DocumentIndex, doc: int, cfg: InstanceConfig, rng: random.Random
) -> list[tuple[int, int, int, int, int, int]]:
    """All instances of one document in one pass: tuples in :data:`INSTANCE_DTYPE` field order."""
    sent_off = index.sent_offsets
    doc_off = index.doc_offsets
    n_docs = index.num_documents
    s_first, s_end = int(doc_off[doc]), int(doc_off[doc + 1])
    max_num_tokens = cfg.max_num_tokens
    nsp = cfg.task == "nsp"

    def draw_target() -> tuple[int, bool]:
        # original: target_seq_length = max_num_tokens, or randint(2, max_num_tokens) with short_seq_prob
        if rng.random() < cfg.short_seq_prob:
            return rng.randint(2, max_num_tokens), True
        return max_num_tokens, False

    target, short = draw_target()
    out: list[tuple[int, int, int, int, int, int]] = []
    chunk_first = s_first  # the chunk is sentences chunk_first..i
    current_length = 0
    i = s_first
    while i < s_end:
        current_length += int(sent_off[i + 1] - sent_off[i])
        if i == s_end - 1 or current_length >= target:
            n_chunk = i - chunk_first + 1
            a_end = 1
            if n_chunk >= 2:
                a_end = rng.randint(1, n_chunk - 1)
            a_start = int(sent_off[chunk_first])
            a_len = int(sent_off[chunk_first + a_end]) - a_start
            random_b = False
            if n_chunk == 1 or (nsp and rng.random() < 0.5):
                is_random_next = True
                random_b = True
                target_b_length = target - a_len
                # original: up to 10 tries for a document other than this one
                random_doc = doc
                for _ in range(10):
                    random_doc = rng.randint(0, n_docs - 1)
                    if random_doc != doc:
                        break
                r_first, r_end = int(doc_off[random_doc]), int(doc_off[random_doc + 1])
                random_start = r_first + rng.randint(0, r_end - r_first - 1)
                b_start = int(sent_off[random_start])
                b_len = 0
                for j in range(random_start, r_end):
                    b_len += int(sent_off[j + 1] - sent_off[j])
                    if b_len >= target_b_length:
                        break
                # original: the unused sentences are "put back" for the next chunk
                i -= n_chunk - a_end
            elif not nsp and rng.random() < 0.5:
                is_random_next = True  # SOP: swap the two segments
                b_start = int(sent_off[chunk_first + a_end])
                b_len = int(sent_off[i + 1]) - b_start
                a_start, a_len, b_start, b_len = b_start, b_len, a_start, a_len
            else:
                is_random_next = False
                b_start = int(sent_off[chunk_first + a_end])
                b_len = int(sent_off[i + 1]) - b_start
            a_start, a_len, b_start, b_len = truncate_pair_randomly(
                a_start, a_len, b_start, b_len, max_num_tokens, rng
            )
            assert a_len >= 1 and b_len >= 1
            flags = (
                (FLAG_LABEL if is_random_next else 0)
                | (FLAG_SHORT if short else 0)
                | (FLAG_RANDOM_B if random_b else 0)
            )
            out.append((a_start, b_start, a_len, b_len, doc, flags))
            chunk_first = i + 1
            current_length = 0
            if cfg.short_seq_scope == "instance":
                target, short = draw_target()
        i += 1
    return out


def instance_token_ids(
    tokens: np.ndarray, inst: np.void | tuple, cls_id: int, sep_id: int
) -> tuple[np.ndarray, int]:
    """``[CLS] A [SEP] B [SEP]`` ids (int64) of one instance record, and the length of ``[CLS] A [SEP]``."""
    a_start, b_start, a_len, b_len = int(inst[0]), int(inst[1]), int(inst[2]), int(inst[3])
    n = a_len + b_len + 3
    ids = np.empty(n, dtype=np.int64)
    ids[0] = cls_id
    ids[1 : 1 + a_len] = tokens[a_start : a_start + a_len]
    ids[1 + a_len] = sep_id
    ids[2 + a_len : 2 + a_len + b_len] = tokens[b_start : b_start + b_len]
    ids[n - 1] = sep_id
    return ids, a_len + 2


def instance_word_starts(word_start: np.ndarray, inst: np.void | tuple) -> np.ndarray:
    """Per-position word-start bits of ``[CLS] A [SEP] B [SEP]`` from a per-token bit array."""
    a_start, b_start, a_len, b_len = int(inst[0]), int(inst[1]), int(inst[2]), int(inst[3])
    out = np.ones(a_len + b_len + 3, dtype=bool)
    out[1 : 1 + a_len] = word_start[a_start : a_start + a_len]
    out[2 + a_len : 2 + a_len + b_len] = word_start[b_start : b_start + b_len]
    return out
