"""N-gram masking: the original's rules, checked against a literal re-implementation and on corner cases."""

from __future__ import annotations

import random
from collections import Counter

import numpy as np
import pytest

from albert_lm.data.masking import (
    INFO_SPAN_START,
    REPLACE_KEEP,
    REPLACE_MASK,
    REPLACE_RANDOM,
    MaskedPositions,
    MaskingConfig,
    MaskRng,
    create_masked_lm_predictions,
    is_start_piece_sp,
    is_start_piece_wordpiece,
    masking_budget,
    start_piece_table,
    word_candidates,
)

CLS, SEP, MASK, V = 2, 3, 4, 1000


def apply_masks(ids: np.ndarray, masks: MaskedPositions) -> tuple[np.ndarray, np.ndarray]:
    """(input_ids with the replacements applied, labels: the original id at masked positions, else -100)."""
    inputs = np.array(ids, dtype=np.int64, copy=True)
    labels = np.full(len(ids), -100, dtype=np.int64)
    labels[masks.positions] = inputs[masks.positions]
    inputs[masks.positions] = masks.input_ids
    return inputs, labels


def reference_masking(ids, is_start, cfg, rng):
    """create_masked_lm_predictions written the way the original is structured (ngram_indexes of lists of
    lists, sum() of slices, per-candidate coverage check), with the n draw taken from `rng` as in ours."""
    cand_indexes = []
    for i, t in enumerate(ids):
        if t in (CLS, SEP):
            continue
        if cfg.whole_word and len(cand_indexes) >= 1 and not is_start[i]:
            cand_indexes[-1].append(i)
        else:
            cand_indexes.append([i])
    output = list(ids)
    num_to_predict = min(cfg.max_predictions_per_seq, max(1, int(round(len(ids) * cfg.masked_lm_prob))))
    ngrams = list(range(1, cfg.ngram + 1))
    pvals = [1.0 / n for n in ngrams]
    if not cfg.favor_shorter_ngram:
        pvals = pvals[::-1]
    cdf = np.cumsum(np.array(pvals) / sum(pvals))
    ngram_indexes = []
    for idx in range(len(cand_indexes)):
        ngram_indexes.append([cand_indexes[idx : idx + n] for n in ngrams])
    ngram_indexes = [ngram_indexes[i] for i in rng.permutation(len(ngram_indexes))]  # original: rng.shuffle
    masked = []
    covered = set()
    for cand_index_set in ngram_indexes:
        if len(masked) >= num_to_predict:
            break
        u = rng.random()
        n = next(k for k in ngrams if u < cdf[k - 1] or k == ngrams[-1])
        index_set = sum(cand_index_set[n - 1], [])
        n -= 1
        while len(masked) + len(index_set) > num_to_predict:
            if n == 0:
                break
            index_set = sum(cand_index_set[n - 1], [])
            n -= 1
        if len(masked) + len(index_set) > num_to_predict:
            continue
        if any(i in covered for i in index_set):
            continue
        for index in index_set:
            covered.add(index)
            if rng.random() < 0.8:
                new = MASK
            elif rng.random() < 0.5:
                new = ids[index]
            else:
                new = rng.randint(0, V - 1)
            output[index] = new
            masked.append((index, ids[index]))
    masked.sort()
    return output, [p for p, _ in masked], [lab for _, lab in masked]


def random_sequence(
    rng: random.Random, n_a: int, n_b: int, p_cont: float = 0.3
) -> tuple[np.ndarray, np.ndarray]:
    ids = (
        [CLS]
        + [rng.randint(5, V - 1) for _ in range(n_a)]
        + [SEP]
        + [rng.randint(5, V - 1) for _ in range(n_b)]
        + [SEP]
    )
    is_start = np.array([True] + [rng.random() > p_cont for _ in range(len(ids) - 1)])
    return np.array(ids, dtype=np.int64), is_start


@pytest.mark.parametrize(
    "cfg",
    [
        MaskingConfig(),
        MaskingConfig(max_predictions_per_seq=80),
        MaskingConfig(favor_shorter_ngram=False, masked_lm_prob=0.3, max_predictions_per_seq=40),
        MaskingConfig(whole_word=False, ngram=1),
        MaskingConfig(masked_lm_prob=1.0, max_predictions_per_seq=1000),
    ],
)
def test_matches_the_original_structure(cfg: MaskingConfig) -> None:
    gen = random.Random(0)
    for trial in range(150):
        ids, is_start = random_sequence(gen, gen.randint(1, 120), gen.randint(1, 120))
        ours = create_masked_lm_predictions(
            ids,
            is_start,
            cfg=cfg,
            special_ids=(CLS, SEP),
            mask_id=MASK,
            vocab_size=V,
            rng=MaskRng.from_key(trial),
        )
        out, positions, labels = reference_masking(ids.tolist(), is_start, cfg, MaskRng.from_key(trial))
        inputs, mlm_labels = apply_masks(ids, ours)
        assert ours.positions.tolist() == positions
        assert inputs.tolist() == out
        assert mlm_labels[ours.positions].tolist() == labels


def test_start_piece_rules_of_the_original() -> None:
    # _is_start_piece_sp: "▁" or "<" prefix, a lone punctuation piece, or any char outside letters+punctuation
    assert is_start_piece_sp("▁the")
    assert is_start_piece_sp("<unk>")
    assert is_start_piece_sp(".")
    assert is_start_piece_sp("2")  # digits are not in the original's allowed set: a "foreign" piece
    assert is_start_piece_sp("'s")  # the original's set has no apostrophe
    assert is_start_piece_sp("é")
    assert not is_start_piece_sp("ing")
    assert not is_start_piece_sp("Ing")  # letters are compared lower-cased
    assert not is_start_piece_sp("...")  # punctuation only, but not a single special piece
    assert not is_start_piece_sp("[MASK]")
    assert is_start_piece_wordpiece("the") and not is_start_piece_wordpiece("##ing")
    table = start_piece_table(["▁a", "b", "##c", "<pad>"], "sentencepiece")
    assert table.tolist() == [True, False, False, True]
    assert start_piece_table(["a", "##b"], "wordpiece").tolist() == [True, False]
    with pytest.raises(ValueError, match="unknown tokenizer kind"):
        start_piece_table(["a"], "bpe")


def test_budget_is_the_originals() -> None:
    cfg = MaskingConfig()
    assert masking_budget(128, cfg) == 19  # round(19.2)
    assert masking_budget(512, cfg) == 20  # capped by max_predictions_per_seq
    assert masking_budget(5, cfg) == 1  # max(1, round(0.75))
    assert masking_budget(3, cfg) == 1  # at least one even when round() gives 0
    assert masking_budget(10, MaskingConfig(masked_lm_prob=0.25)) == 2  # round half to even: round(2.5) == 2
    assert masking_budget(10, MaskingConfig(masked_lm_prob=0.0)) == 0


def test_whole_words_and_specials() -> None:
    # [CLS] un ##believ ##able story [SEP] ##s x [SEP]: a continuation after [SEP] joins the last word of A,
    # as in the original (specials are skipped, not word breaks)
    ids = [CLS, 10, 11, 12, 13, SEP, 14, 15, SEP]
    starts = [True, True, False, False, True, True, False, True, True]
    assert word_candidates(ids, starts, (CLS, SEP), True) == [[1, 2, 3], [4, 6], [7]]
    assert word_candidates(ids, starts, (CLS, SEP), False) == [[1], [2], [3], [4], [6], [7]]
    cfg = MaskingConfig(masked_lm_prob=1.0, max_predictions_per_seq=100)
    for seed in range(50):
        m = create_masked_lm_predictions(
            np.array(ids), np.array(starts), cfg=cfg, special_ids=(CLS, SEP), mask_id=MASK, vocab_size=V,
            rng=MaskRng.from_key(seed),
        )  # fmt: skip
        pos = set(m.positions.tolist())
        assert not pos & {0, 5, 8}  # specials never masked
        for word in ([1, 2, 3], [4, 6], [7]):
            assert set(word) <= pos or not set(word) & pos  # all of a word or none


def test_sequence_shorter_than_the_budget() -> None:
    # budget max(1, round(5 * 1.0)) = 5 but only two candidate tokens exist
    ids = np.array([CLS, 20, SEP, 21, SEP])
    cfg = MaskingConfig(masked_lm_prob=1.0, max_predictions_per_seq=20)
    m = create_masked_lm_predictions(
        ids,
        np.ones(5, bool),
        cfg=cfg,
        special_ids=(CLS, SEP),
        mask_id=MASK,
        vocab_size=V,
        rng=MaskRng.from_key(1),
    )
    assert m.budget == 5
    assert m.positions.tolist() == [1, 3]


def test_a_word_larger_than_the_remaining_budget_is_skipped() -> None:
    # one 4-piece word, budget 2: nothing fits (the original skips rather than masking part of a word)
    ids = np.array([CLS, 10, 11, 12, 13, SEP, 14, SEP])
    starts = np.array([1, 1, 0, 0, 0, 1, 1, 1], bool)
    cfg = MaskingConfig(masked_lm_prob=0.25, max_predictions_per_seq=2)
    for seed in range(20):
        m = create_masked_lm_predictions(
            ids,
            starts,
            cfg=cfg,
            special_ids=(CLS, SEP),
            mask_id=MASK,
            vocab_size=V,
            rng=MaskRng.from_key(seed),
        )
        assert m.positions.tolist() == [6]


def test_budget_filled_and_replacement_split() -> None:
    gen = random.Random(5)
    cfg = MaskingConfig(max_predictions_per_seq=80)
    kinds: Counter[int] = Counter()
    for seed in range(400):
        ids, _ = random_sequence(gen, 60, 60)
        starts = np.ones(len(ids), bool)
        m = create_masked_lm_predictions(
            ids,
            starts,
            cfg=cfg,
            special_ids=(CLS, SEP),
            mask_id=MASK,
            vocab_size=V,
            rng=MaskRng.from_key(seed),
        )
        assert len(m.positions) == m.budget == 18  # round(0.15 * 123); single-piece words always fill it
        assert len(set(m.positions.tolist())) == len(m.positions)
        k = (m.info >> 4) & 3
        assert np.all(m.input_ids[k == REPLACE_MASK] == MASK)
        assert np.all(m.input_ids[k == REPLACE_KEEP] == ids[m.positions[k == REPLACE_KEEP]])
        assert np.all((m.input_ids >= 0) & (m.input_ids < V))
        kinds.update(k.tolist())
    total = sum(kinds.values())
    assert abs(kinds[REPLACE_MASK] / total - 0.8) < 0.015
    assert abs(kinds[REPLACE_KEEP] / total - 0.1) < 0.01
    assert abs(kinds[REPLACE_RANDOM] / total - 0.1) < 0.01


def test_ngram_probabilities() -> None:
    cdf = MaskingConfig().ngram_cdf()
    assert np.allclose(cdf, [6 / 11, 9 / 11, 1.0])  # p(n) ∝ 1/n: 6/11, 3/11, 2/11
    assert np.allclose(MaskingConfig(favor_shorter_ngram=False).ngram_cdf(), [2 / 11, 5 / 11, 1.0])
    # With a budget of exactly 3 tokens, the first span drawn is never trimmed nor blocked: its n follows p(n).
    # Spans are marked in the info byte (bit 7 = first token, bits 0-3 = n); the longest span is the first.
    cfg = MaskingConfig(masked_lm_prob=3 / 202, max_predictions_per_seq=3)
    first_n: Counter[int] = Counter()
    ids = np.array([CLS] + list(range(10, 110)) + [SEP] + list(range(110, 210)) + [SEP])
    for seed in range(3000):
        m = create_masked_lm_predictions(
            ids, np.ones(len(ids), bool), cfg=cfg, special_ids=(CLS, SEP), mask_id=MASK, vocab_size=V,
            rng=MaskRng.from_key(seed),
        )  # fmt: skip
        ns = (m.info[(m.info & INFO_SPAN_START) != 0] & 0x0F).tolist()
        assert sum(ns) == 3
        first_n[max(ns)] += 1
    # n=3 can only be first; n=2 is first unless a 1 came first (then the second span is trimmed to <= 2)
    assert abs(first_n[3] / 3000 - 2 / 11) < 0.025


def test_reproducible_and_seed_dependent() -> None:
    ids, starts = random_sequence(random.Random(3), 100, 100)
    kw = dict(cfg=MaskingConfig(), special_ids=(CLS, SEP), mask_id=MASK, vocab_size=V)
    a = create_masked_lm_predictions(ids, starts, rng=MaskRng.from_key(7), **kw)
    b = create_masked_lm_predictions(ids, starts, rng=MaskRng.from_key(7), **kw)
    c = create_masked_lm_predictions(ids, starts, rng=MaskRng.from_key(8), **kw)
    assert a.positions.tolist() == b.positions.tolist() and a.input_ids.tolist() == b.input_ids.tolist()
    assert a.positions.tolist() != c.positions.tolist()


def test_config_validation() -> None:
    with pytest.raises(ValueError, match="masked_lm_prob"):
        MaskingConfig(masked_lm_prob=1.5)
    with pytest.raises(ValueError, match="ngram"):
        MaskingConfig(ngram=0)
