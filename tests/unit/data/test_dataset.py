"""PretrainingDataset: example layout, static/dynamic masks, splitting over ranks and workers, exact resume."""

from __future__ import annotations

from collections import Counter
from pathlib import Path

import numpy as np
import pytest
import torch
from data_support import WIKI_SAMPLE, make_tokenizer, train_spm

from albert_lm.data import DataError, PretrainingDataset
from albert_lm.data.pipeline import PrepareConfig, prepare

T = 64


@pytest.fixture(scope="module")
def tok(tmp_path_factory: pytest.TempPathFactory):
    return make_tokenizer(train_spm(tmp_path_factory.mktemp("spm") / "spiece.model", vocab_size=1000))


@pytest.fixture(scope="module")
def static_dir(tmp_path_factory: pytest.TempPathFactory, tok) -> Path:
    out = tmp_path_factory.mktemp("static")
    prepare([WIKI_SAMPLE], tok, out, PrepareConfig(max_seq_length=T, dupe_factor=1, shard_chars=15000))
    return out


@pytest.fixture(scope="module")
def dynamic_dir(tmp_path_factory: pytest.TempPathFactory, tok) -> Path:
    out = tmp_path_factory.mktemp("dynamic")
    prepare(
        [WIKI_SAMPLE],
        tok,
        out,
        PrepareConfig(max_seq_length=T, dupe_factor=1, masking="dynamic", shard_chars=15000),
    )
    return out


def key(ex: dict[str, torch.Tensor]) -> tuple[int, ...]:
    """An example's identity: its unmasked tokens (masked positions show the label)."""
    ids = torch.where(ex["mlm_labels"] >= 0, ex["mlm_labels"], ex["input_ids"])
    return tuple(ids.tolist()) + (int(ex["sop_labels"]),)


def test_example_layout(static_dir: Path, tok) -> None:
    ds = PretrainingDataset(static_dir, shuffle=False)
    ex = next(iter(ds))
    assert set(ex) == {"input_ids", "token_type_ids", "attention_mask", "mlm_labels", "sop_labels"}
    assert all(v.dtype == torch.long for v in ex.values())
    assert ex["input_ids"].shape == (T,) and ex["sop_labels"].shape == ()
    n = int(ex["attention_mask"].sum())
    ids, types, labels = ex["input_ids"], ex["token_type_ids"], ex["mlm_labels"]
    original = torch.where(labels >= 0, labels, ids)
    assert original[0] == tok.cls_id and original[n - 1] == tok.sep_id
    seps = (original[:n] == tok.sep_id).nonzero().flatten().tolist()
    assert len(seps) == 2
    assert types[: seps[0] + 1].eq(0).all() and types[seps[0] + 1 : n].eq(1).all() and types[n:].eq(0).all()
    assert ids[n:].eq(tok.pad_id).all() and ex["attention_mask"][:n].eq(1).all() and labels[n:].eq(-100).all()
    masked = labels >= 0
    assert masked.any() and not masked[[0, seps[0], n - 1]].any()
    # the static masks are the ones written by prepare, and a second pass gives the same masks
    again = next(iter(PretrainingDataset(static_dir, shuffle=False)))
    assert torch.equal(again["input_ids"], ex["input_ids"])


def test_batches(static_dir: Path) -> None:
    ds = PretrainingDataset(static_dir, batch_size=8, drop_last=False)
    batches = list(ds)
    assert batches[0]["input_ids"].shape == (8, T) and batches[0]["sop_labels"].shape == (8,)
    assert sum(len(b["sop_labels"]) for b in batches) == ds.num_instances
    assert len(batches) == len(ds)


def collect(data_dir: Path, world: int, workers: int, **kw) -> Counter:
    seen: Counter = Counter()
    for rank in range(world):
        ds = PretrainingDataset(data_dir, rank=rank, world_size=world, epoch=3, **kw)
        loader = torch.utils.data.DataLoader(ds, batch_size=None, num_workers=workers)
        for item in loader:
            if item["input_ids"].dim() == 2:
                seen.update(key({k: v[i] for k, v in item.items()}) for i in range(len(item["input_ids"])))
            else:
                seen[key(item)] += 1
    return seen


def test_ranks_and_workers_split_without_duplicates_or_gaps(static_dir: Path) -> None:
    full = collect(static_dir, 1, 0)
    n = PretrainingDataset(static_dir).num_instances
    assert sum(full.values()) == n
    assert collect(static_dir, 2, 2) == full
    assert collect(static_dir, 3, 2, batch_size=5) == full


def test_epochs_reshuffle(static_dir: Path) -> None:
    ds = PretrainingDataset(static_dir)
    e0 = [key(x) for x in ds]
    assert ds.epoch == 1  # a finished pass moves to the next epoch
    e1 = [key(x) for x in ds]
    assert e0 != e1 and sorted(e0) == sorted(e1)
    ds.set_epoch(0)
    assert [key(x) for x in ds] == e0


def test_dynamic_masks_change_per_epoch(dynamic_dir: Path, static_dir: Path) -> None:
    ds = PretrainingDataset(dynamic_dir, shuffle=False)
    a = [x["input_ids"] for x in ds]
    b = [x["input_ids"] for x in ds]  # epoch 1
    ds.set_epoch(0)
    c = [x["input_ids"] for x in ds]
    assert all(torch.equal(x, y) for x, y in zip(a, c))
    assert sum(not torch.equal(x, y) for x, y in zip(a, b)) > 0.9 * len(a)
    with pytest.raises(DataError, match="no static masks"):
        PretrainingDataset(dynamic_dir, masking="static")
    # static data can be masked dynamically too, with other settings
    ds2 = PretrainingDataset(static_dir, masking="dynamic", masked_lm_prob=0.3, max_predictions_per_seq=40)
    fractions = [float((x["mlm_labels"] >= 0).sum() / x["attention_mask"].sum()) for x in ds2]
    assert abs(np.mean(fractions) - 0.3) < 0.02


def test_exact_resume_in_process(static_dir: Path) -> None:
    ds = PretrainingDataset(static_dir, batch_size=4)
    it = iter(ds)
    first = [next(it) for _ in range(3)]
    state = ds.state_dict()
    assert state["position"] == 12 and state["epoch"] == 0
    rest = list(it)
    fresh = PretrainingDataset(static_dir, batch_size=4)
    fresh.load_state_dict(state)
    resumed = list(fresh)
    assert len(resumed) == len(rest) and all(
        torch.equal(a["input_ids"], b["input_ids"]) for a, b in zip(rest, resumed)
    )
    assert not torch.equal(first[0]["input_ids"], resumed[0]["input_ids"])


def test_exact_resume_with_workers(static_dir: Path) -> None:
    ds = PretrainingDataset(static_dir, rank=1, world_size=2, epoch=2)
    loader = ds.loader(batch_size=3, num_workers=2)
    uninterrupted = [b["input_ids"] for b in loader]
    assert ds.epoch == 3
    ds2 = PretrainingDataset(static_dir, rank=1, world_size=2, epoch=2)
    loader2 = ds2.loader(batch_size=3, num_workers=2)
    got = []
    for b in loader2:
        got.append(b["input_ids"])
        if len(got) == 5:
            break
    state = loader2.state_dict()
    assert state["position"] == 15
    ds3 = PretrainingDataset(static_dir, rank=1, world_size=2)
    loader3 = ds3.loader(batch_size=3, num_workers=2)
    loader3.load_state_dict(state)
    got += [b["input_ids"] for b in loader3]
    assert len(got) == len(uninterrupted) and all(torch.equal(a, b) for a, b in zip(got, uninterrupted))
    with pytest.raises(ValueError, match="world_size=2"):
        PretrainingDataset(static_dir).load_state_dict(state)


def test_tokenizer_mismatch(static_dir: Path, tmp_path: Path) -> None:
    other = make_tokenizer(train_spm(tmp_path / "o.model", vocab_size=700))
    with pytest.raises(DataError, match="prepared with tokenizer fingerprint"):
        PretrainingDataset(static_dir, tokenizer=other)
    with pytest.raises(DataError, match="no manifest"):
        PretrainingDataset(tmp_path)


def test_drop_last_equalizes_ranks(static_dir: Path) -> None:
    n = PretrainingDataset(static_dir).num_instances
    sizes = [
        PretrainingDataset(static_dir, rank=r, world_size=4, drop_last=True).rank_size() for r in range(4)
    ]
    assert sizes == [n // 4] * 4
    sizes = [PretrainingDataset(static_dir, rank=r, world_size=4).rank_size() for r in range(4)]
    assert sum(sizes) == n and max(sizes) - min(sizes) <= 1
