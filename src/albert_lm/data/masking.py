"""N-gram masked-LM predictions, as google-research/albert ``create_pretraining_data.py`` makes them.

The rule, step by step (``create_masked_lm_predictions`` in the original):

1. Candidates are *whole words*: every token except ``[CLS]`` / ``[SEP]`` either starts a new word or, when
   it is not a start piece, joins the previous word (``do_whole_word_mask``, on by default). Start pieces
   are decided by the vocabulary: for SentencePiece the original's ``_is_start_piece_sp`` (``▁`` prefix,
   ``<`` prefix, a lone punctuation piece, or any character outside ASCII letters and punctuation); for
   WordPiece anything without the ``##`` prefix. ``[CLS]``/``[SEP]`` are skipped, not word breaks, so a
   continuation piece right after ``[SEP]`` joins the last word of segment A, as in the original.
2. The budget is ``min(max_predictions_per_seq, max(1, round(len(tokens) * masked_lm_prob)))`` with the
   whole sequence (specials included) as the length and Python's round-half-to-even, as the original.
3. Every word index starts an n-gram of 1..``ngram`` words (cut short at the end of the sequence); the
   start indexes are shuffled; for each, n is drawn with p(n) ∝ 1/n (``favor_shorter_ngram``); when the
   n-gram would overflow the budget, shorter ones are tried; if even one word overflows, or any word of
   the n-gram is already covered, the candidate is skipped.
4. Each chosen token, independently: 80% ``[MASK]``, else 50/50 keep or a uniformly random vocabulary id.

Deviations, both fixes: the original draws n with the *unseeded global* ``np.random.choice`` while everything
else uses one seeded ``random.Random`` for the whole corpus, so its output cannot be reproduced; all our
draws come from one :class:`MaskRng` seeded per (seed, document, dupe) for static masks and per (seed,
epoch, shard, instance) for dynamic ones. ``do_permutation`` (off by default in the original and unused by
the paper) is not implemented.

Besides the positions, each chosen token carries one ``info`` byte (stored in static shards, read by
``albert data stats``): bits 0-3 the span's n in words, bits 4-5 the replacement (0 ``[MASK]``, 1 kept,
2 random), bit 7 set on the first token of a span.
"""

from __future__ import annotations

from collections.abc import Callable, Sequence
from dataclasses import dataclass

import numpy as np

# original create_pretraining_data.py _is_start_piece_sp: the characters of its `special_pieces` set.
# (It also adds "€" and "£" *encoded as bytes*, which never equal a str piece under Python 3, so they have
# no effect there; leaving them out reproduces the original's actual behaviour.)
_SP_SPECIAL = frozenset('!"#$%&"()*+,-./:;?@[\\]^_`{|}~')
_ENGLISH = frozenset("abcdefghijklmnopqrstuvwxyz")
_SP_ALLOWED = _ENGLISH | _SP_SPECIAL

REPLACE_MASK, REPLACE_KEEP, REPLACE_RANDOM = 0, 1, 2
INFO_SPAN_START = 0x80


def is_start_piece_sp(piece: str) -> bool:
    """The original's ``_is_start_piece_sp``: does this SentencePiece piece start a word?"""
    if piece.startswith("▁") or piece.startswith("<") or piece in _SP_SPECIAL:
        return True
    # "For foreign characters, we always treat them as a whole piece." (original comment)
    return not all(ch.lower() in _SP_ALLOWED for ch in piece)


def is_start_piece_wordpiece(piece: str) -> bool:
    """The original's ``_is_start_piece_bert``: a WordPiece continuation carries the ``##`` prefix."""
    return not piece.startswith("##")


def start_piece_table(pieces: Sequence[str], kind: str) -> np.ndarray:
    """A bool per vocabulary id: is that piece a word start (``kind`` "sentencepiece" | "wordpiece")."""
    if kind == "sentencepiece":
        rule: Callable[[str], bool] = is_start_piece_sp
    elif kind == "wordpiece":
        rule = is_start_piece_wordpiece
    else:
        raise ValueError(f"unknown tokenizer kind {kind!r} (expected 'sentencepiece' or 'wordpiece')")
    return np.fromiter((rule(p) for p in pieces), dtype=bool, count=len(pieces))


@dataclass(frozen=True)
class MaskingConfig:
    """Masked-LM settings; the defaults are the original's flags and the paper's setup."""

    masked_lm_prob: float = 0.15  # original create_pretraining_data.py: masked_lm_prob
    max_predictions_per_seq: int = 20  # original create_pretraining_data.py: max_predictions_per_seq
    ngram: int = 3  # original create_pretraining_data.py: ngram (paper §4.1: n-gram masking, n <= 3)
    favor_shorter_ngram: bool = True  # original: p(n) ∝ 1/n (paper §4.1)
    whole_word: bool = True  # original create_pretraining_data.py: do_whole_word_mask

    def __post_init__(self) -> None:
        if not 0.0 <= self.masked_lm_prob <= 1.0:
            raise ValueError(f"masked_lm_prob must be in [0, 1], got {self.masked_lm_prob}")
        if self.max_predictions_per_seq < 1:
            raise ValueError(f"max_predictions_per_seq must be >= 1, got {self.max_predictions_per_seq}")
        if not 1 <= self.ngram <= 15:  # the span length is stored in 4 bits of the info byte
            raise ValueError(f"ngram must be in [1, 15], got {self.ngram}")

    def ngram_cdf(self) -> list[float]:
        """Cumulative p(n) for n = 1..ngram."""
        p = [1.0 / n for n in range(1, self.ngram + 1)]
        if not self.favor_shorter_ngram:
            p = p[::-1]  # original: pvals[::-1]
        total = sum(p)
        cdf, acc = [], 0.0
        for v in p:
            acc += v / total
            cdf.append(acc)
        cdf[-1] = 1.0
        return cdf


@dataclass
class MaskedPositions:
    """Result of masking one sequence: sorted positions, the ids placed there, and an info byte each."""

    positions: np.ndarray  # (k,) int64, ascending
    input_ids: np.ndarray  # (k,) int64: what the model sees at each position
    info: np.ndarray  # (k,) uint8, see the module docstring
    budget: int  # num_to_predict


def masking_budget(length: int, cfg: MaskingConfig) -> int:
    """``min(max_predictions_per_seq, max(1, round(length * masked_lm_prob)))`` (original, verbatim)."""
    if cfg.masked_lm_prob == 0:
        return 0
    return min(cfg.max_predictions_per_seq, max(1, int(round(length * cfg.masked_lm_prob))))


class MaskRng:
    """The uniform draws of the masking step, from a seeded ``numpy.random.Generator``.

    Scalar Generator calls cost about a microsecond each, so uniforms are drawn in blocks; the sequence of
    values is still a pure function of the seed. ``randint`` maps a uniform to ``lo + floor(u * (hi - lo + 1))``.
    """

    __slots__ = ("_buf", "_gen", "_i")

    def __init__(self, gen: np.random.Generator) -> None:
        self._gen = gen
        self._buf: list[float] = []
        self._i = 0

    @classmethod
    def from_key(cls, *key: int) -> MaskRng:
        """Seeded from a tuple of non-negative ints (``numpy.random.SeedSequence``), the same everywhere."""
        return cls(np.random.Generator(np.random.PCG64(np.random.SeedSequence([int(k) for k in key]))))

    def random(self) -> float:
        if self._i >= len(self._buf):
            self._buf = self._gen.random(256).tolist()
            self._i = 0
        u = self._buf[self._i]
        self._i += 1
        return u

    def randint(self, lo: int, hi: int) -> int:
        """Uniform integer in [lo, hi] (inclusive, as ``random.randint``)."""
        return lo + int(self.random() * (hi - lo + 1))

    def permutation(self, n: int) -> list[int]:
        return self._gen.permutation(n).tolist()


def _word_bounds(
    ids: np.ndarray, is_start: np.ndarray, special_ids: Sequence[int], whole_word: bool
) -> tuple[list[int], list[int]]:
    """Candidate positions (specials removed) and word boundaries: word w = positions[b[w]:b[w + 1]]."""
    ids = np.asarray(ids)
    special = np.zeros(len(ids), dtype=bool)
    for s in special_ids:
        special |= ids == s
    positions = np.flatnonzero(~special)
    if whole_word and len(positions):
        starts = np.asarray(is_start, dtype=bool)[positions]
        starts[0] = True  # the first candidate always opens a word (original: `len(cand_indexes) >= 1`)
        first = np.flatnonzero(starts)
    else:
        first = np.arange(len(positions))
    return positions.tolist(), [*first.tolist(), len(positions)]


def word_candidates(
    ids: Sequence[int] | np.ndarray,
    is_start: Sequence[bool] | np.ndarray,
    special_ids: Sequence[int],
    whole_word: bool,
) -> list[list[int]]:
    """The original's ``cand_indexes``: candidate words as lists of positions, specials skipped."""
    positions, bounds = _word_bounds(np.asarray(ids), np.asarray(is_start, bool), special_ids, whole_word)
    return [positions[bounds[w] : bounds[w + 1]] for w in range(len(bounds) - 1)]


def create_masked_lm_predictions(
    ids: np.ndarray,
    is_start: np.ndarray,
    *,
    cfg: MaskingConfig,
    special_ids: Sequence[int],
    mask_id: int,
    vocab_size: int,
    rng: MaskRng,
    cdf: list[float] | None = None,
) -> MaskedPositions:
    """Choose the masked-LM positions for one sequence (``[CLS] A [SEP] B [SEP]``) as the original does.

    Args:
        ids: (T,) token ids of the whole sequence, specials included.
        is_start: (T,) bool, whether each token starts a word (see :func:`start_piece_table`).
        cfg: the masking settings.
        special_ids: ids never masked nor counted as candidates (``[CLS]``, ``[SEP]``).
        mask_id: the ``[MASK]`` id.
        vocab_size: random replacements are drawn uniformly from ``range(vocab_size)`` (the original draws
            from all vocabulary entries).
        rng: the seeded draws, consumed in the original's order.
        cdf: precomputed ``cfg.ngram_cdf()``.

    Returns:
        The positions, the ids the model sees there and the info bytes, sorted by position.
    """
    budget = masking_budget(len(ids), cfg)
    empty = MaskedPositions(np.zeros(0, np.int64), np.zeros(0, np.int64), np.zeros(0, np.uint8), budget)
    if budget == 0:
        return empty
    positions, bounds = _word_bounds(ids, is_start, special_ids, cfg.whole_word)
    n_words = len(bounds) - 1
    if n_words == 0:
        return empty
    cdf = cdf if cdf is not None else cfg.ngram_cdf()
    ngram = cfg.ngram

    # original: ngram_indexes[idx][n-1] = cand_indexes[idx:idx+n], then rng.shuffle(ngram_indexes). We permute
    # the start indexes and slice lazily: the same choice, without building every slice up front.
    covered = bytearray(n_words)  # per word: already part of a chosen span
    chosen: list[tuple[int, int, int]] = []  # (position, input id, info)
    n_chosen = 0
    rand = rng.random
    for idx in rng.permutation(n_words):
        if n_chosen >= budget:
            break
        # original: n = np.random.choice(ngrams[:len(cand_index_set)], p=...), where len(cand_index_set) is
        # always `ngram` (the slices near the end are shorter, not missing).
        n = _draw_n(rand(), cdf, ngram)
        # Try shorter n-grams while this one overflows the budget (original's while loop).
        while True:
            end = min(idx + n, n_words)
            size = bounds[end] - bounds[idx]
            if n_chosen + size <= budget or n == 1:
                break
            n -= 1
        if n_chosen + size > budget:
            continue
        if any(covered[idx:end]):
            continue
        covered[idx:end] = b"\x01" * (end - idx)
        span = positions[bounds[idx] : bounds[end]]
        chosen.extend(_replace_span(span, end - idx, ids, mask_id, vocab_size, rng))
        n_chosen += size
    assert n_chosen <= budget
    if not chosen:
        return empty
    chosen.sort()
    arr = np.asarray(chosen, dtype=np.int64)
    return MaskedPositions(arr[:, 0].copy(), arr[:, 1].copy(), arr[:, 2].astype(np.uint8), budget)


def _draw_n(u: float, cdf: list[float], ngram: int) -> int:
    """The span length n in words for a uniform draw ``u`` (the inverse of ``cdf``)."""
    n = 1
    while n < ngram and u >= cdf[n - 1]:
        n += 1
    return n


def _replace_span(
    span: list[int], span_n: int, ids: np.ndarray, mask_id: int, vocab_size: int, rng: MaskRng
) -> list[tuple[int, int, int]]:
    """``(position, input id, info)`` of each token of a chosen span of ``span_n`` words: each token
    independently [MASK], kept or a random id (the original's 80/10/10)."""
    out = []
    info_start = INFO_SPAN_START | span_n
    for pos in span:
        if rng.random() < 0.8:  # original: 80% of the time, replace with [MASK]
            new_id, kind = mask_id, REPLACE_MASK
        elif rng.random() < 0.5:  # original: 10% of the time, keep original
            new_id, kind = int(ids[pos]), REPLACE_KEEP
        else:  # original: 10% of the time, replace with random word
            new_id, kind = rng.randint(0, vocab_size - 1), REPLACE_RANDOM
        out.append((pos, new_id, (kind << 4) | info_start))
        info_start = span_n
    return out
