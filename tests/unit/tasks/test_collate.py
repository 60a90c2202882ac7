"""Dynamic padding and length-grouped batching."""

from __future__ import annotations

import functools

import numpy as np
import pytest
import torch

from albert_lm.tasks.collate import LengthGroupedBatches, pad_features, padding_stats


def _feat(n: int, label: int | float | None = 0, start: int = 10) -> dict:
    f = {"input_ids": list(range(start, start + n)), "token_type_ids": [0] * (n // 2) + [1] * (n - n // 2)}
    if label is not None:
        f["labels"] = label
    return f


def test_pad_to_longest_with_mask_and_types() -> None:
    batch = pad_features([_feat(3, 1), _feat(5, 0)], pad_id=7)
    assert batch["input_ids"].tolist() == [[10, 11, 12, 7, 7], [10, 11, 12, 13, 14]]
    assert batch["attention_mask"].tolist() == [[1, 1, 1, 0, 0], [1, 1, 1, 1, 1]]
    assert batch["token_type_ids"].tolist() == [[0, 1, 1, 0, 0], [0, 0, 1, 1, 1]]
    assert batch["labels"].dtype == torch.long and batch["labels"].tolist() == [1, 0]


def test_pad_to_fixed_length_multiple_and_float_labels() -> None:
    b = pad_features([_feat(3, 2.5)], pad_to=8)
    assert b["input_ids"].shape == (1, 8) and b["labels"].dtype == torch.float32
    assert pad_features([_feat(9)], pad_to_multiple_of=8)["input_ids"].shape == (1, 16)
    with pytest.raises(ValueError, match="more than pad_to"):
        pad_features([_feat(9)], pad_to=8)
    assert "labels" not in pad_features([_feat(3, None), _feat(2, 1)])


def test_multiple_choice_features_pad_to_b_c_t() -> None:
    mc = {
        "input_ids": [[1, 2, 3], [1, 2], [1, 2, 3, 4], [1]],
        "token_type_ids": [[0, 0, 1], [0, 1], [0, 0, 1, 1], [0]],
        "labels": 2,
    }
    b = pad_features([mc, mc])
    assert b["input_ids"].shape == (2, 4, 4)
    assert b["attention_mask"][0].tolist() == [[1, 1, 1, 0], [1, 1, 0, 0], [1, 1, 1, 1], [1, 0, 0, 0]]
    other = dict(mc, input_ids=mc["input_ids"][:3], token_type_ids=mc["token_type_ids"][:3])
    with pytest.raises(ValueError, match="same number of options"):
        pad_features([mc, other])


def _lengths_feats(seed: int = 0, n: int = 1000) -> list[dict]:
    rng = np.random.default_rng(seed)
    return [_feat(int(x), i % 2) for i, x in enumerate(rng.integers(3, 120, size=n))]


def test_each_epoch_covers_every_feature_once_and_reshuffles() -> None:
    feats = _lengths_feats()
    it = LengthGroupedBatches(feats, 32, functools.partial(pad_features), seed=3)
    e0 = it.batch_indices(0)
    e1 = it.batch_indices(1)
    assert sorted(i for b in e0 for i in b) == list(range(len(feats)))
    assert sorted(i for b in e1 for i in b) == list(range(len(feats)))
    assert e0 != e1
    assert e0 == LengthGroupedBatches(feats, 32, pad_features, seed=3).batch_indices(0)  # deterministic
    assert sum(len(b) != 32 for b in e0) == 1  # 1000 = 31 * 32 + 8: one short batch


def test_length_grouping_cuts_padding() -> None:
    feats = _lengths_feats()
    grouped = LengthGroupedBatches(feats, 32, pad_features, group_by_length=True)
    plain = LengthGroupedBatches(feats, 32, pad_features, group_by_length=False)
    g = padding_stats(grouped, fixed_length=128)
    p = padding_stats(plain, fixed_length=128)
    assert g["real_tokens"] == p["real_tokens"]
    # grouped batches pad little: within 10% of the real token count; random batches pad much more
    assert g["dynamic_tokens"] < 1.1 * g["real_tokens"]
    assert p["dynamic_tokens"] > 1.5 * g["dynamic_tokens"]
    assert g["fixed_tokens"] == 128 * len(feats)


def test_unshuffled_batches_keep_order() -> None:
    feats = _lengths_feats(n=10)
    it = LengthGroupedBatches(feats, 4, pad_features, shuffle=False)
    assert it.batch_indices() == [[0, 1, 2, 3], [4, 5, 6, 7], [8, 9]]
    batches = list(it)
    assert [b["input_ids"].shape[0] for b in batches] == [4, 4, 2]


def test_ranks_split_batches_without_overlap() -> None:
    feats = _lengths_feats(n=330)
    r0 = LengthGroupedBatches(feats, 16, pad_features, rank=0, world_size=2).batch_indices(0)
    r1 = LengthGroupedBatches(feats, 16, pad_features, rank=1, world_size=2).batch_indices(0)
    assert len(r0) == len(r1)
    assert not {i for b in r0 for i in b} & {i for b in r1 for i in b}


def test_option_counts_never_share_a_batch() -> None:
    def mc(c: int, n: int) -> dict:
        return {"input_ids": [[1] * n] * c, "token_type_ids": [[0] * n] * c, "labels": 0}

    feats = [mc(4, 5 + i % 7) for i in range(40)] + [mc(3, 5 + i % 5) for i in range(25)]
    it = LengthGroupedBatches(feats, 8, pad_features, seed=1)
    for b in it.batch_indices():
        assert len({len(feats[i]["input_ids"]) for i in b}) == 1
    assert sum(1 for _ in it) == len(it.batch_indices())
