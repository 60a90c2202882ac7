"""Batching for fine-tuning: dynamic padding and length-grouped batches.

The original (``classifier_utils.py``, ``race_utils.py``) and transformers' ``run_glue`` example pad
every sequence to ``max_seq_length``. Here a batch is padded only to its longest member
(`pad_features`), and batches are drawn from groups of similar length (`LengthGroupedBatches`), so most
of the padding (and the compute spent on it) disappears. benchmarks/bench_dynamic_padding.py measures
the effect. For prediction, `cheapest_batches` cuts length-sorted inputs where padding and model calls
cost least (a server's batch of random sentences).

A *feature* is a dict with ``input_ids`` and ``token_type_ids`` (lists of ints, or for multiple choice a
list of such lists, one per option) and optionally ``labels`` (an int or a float). ``attention_mask`` is
made here from the lengths.
"""

from __future__ import annotations

import math
from collections.abc import Callable, Iterator, Sequence
from typing import TYPE_CHECKING, Any

import numpy as np

if TYPE_CHECKING:  # torch is imported where a batch is made: the command line's help does not need it
    import torch

Feature = dict[str, Any]
Batch = dict[str, "torch.Tensor"]

#: keys of a feature that become tensors of the batch; anything else (example_index, offsets, ...) stays
#: with the features and is not passed to the model.
MODEL_KEYS: tuple[str, ...] = ("input_ids", "token_type_ids", "attention_mask")


def feature_length(feature: Feature) -> int:
    """Number of tokens of a feature (for multiple choice: the longest option)."""
    ids = feature["input_ids"]
    if ids and isinstance(ids[0], list):
        return max(len(x) for x in ids)
    return len(ids)


def _round_up(n: int, multiple: int | None) -> int:
    if not multiple or multiple <= 1:
        return n
    return int(math.ceil(n / multiple) * multiple)


def pad_features(
    features: Sequence[Feature],
    pad_id: int = 0,
    *,
    pad_to: int | None = None,
    pad_to_multiple_of: int | None = None,
    label_dtype: torch.dtype | None = None,
) -> Batch:
    """Stack features into a batch, padding to the longest sequence (dynamic padding).

    Args:
        features: single-sequence features (``input_ids``: list[int]) or multiple-choice features
            (``input_ids``: list[list[int]], the same number of options in every feature of the batch).
        pad_id: the tokenizer's pad id (0 for the released ALBERT and BERT vocabularies).
        pad_to: pad to exactly this length instead (the original's fixed ``max_seq_length``); a feature
            longer than it is an error.
        pad_to_multiple_of: round the padded length up (e.g. 8 for tensor cores).
        label_dtype: dtype of ``labels``; default long for ints, float32 for floats.

    Returns:
        ``input_ids``, ``token_type_ids``, ``attention_mask`` as (B, T) or (B, C, T) long tensors, and
        ``labels`` (B,) when every feature has one.
    """
    if not features:
        raise ValueError("cannot collate an empty batch")
    multi = bool(features[0]["input_ids"]) and isinstance(features[0]["input_ids"][0], list)
    if multi:
        num_choices = {len(f["input_ids"]) for f in features}
        if len(num_choices) != 1:
            raise ValueError(
                f"a multiple-choice batch needs the same number of options in every example, got {sorted(num_choices)}"
            )
    longest = max(feature_length(f) for f in features)
    if pad_to is not None:
        if longest > pad_to:
            raise ValueError(f"a feature has {longest} tokens, more than pad_to={pad_to}")
        length = pad_to
    else:
        length = _round_up(longest, pad_to_multiple_of)

    def rows(f: Feature, key: str) -> list[list[int]]:
        value = f.get(key)
        seqs = f["input_ids"] if multi else [f["input_ids"]]
        if value is None:
            return [[0] * len(s) for s in seqs] if key == "token_type_ids" else [[1] * len(s) for s in seqs]
        return value if multi else [value]

    num_rows = len(features[0]["input_ids"]) if multi else 1
    shape = (len(features), num_rows, length)
    ids = np.full(shape, pad_id, dtype=np.int64)
    types = np.zeros(shape, dtype=np.int64)
    mask = np.zeros(shape, dtype=np.int64)
    for i, f in enumerate(features):
        for j, (seq, tt) in enumerate(zip(rows(f, "input_ids"), rows(f, "token_type_ids"))):
            n = len(seq)
            ids[i, j, :n] = seq
            types[i, j, :n] = tt
            mask[i, j, :n] = 1
    if not multi:
        ids, types, mask = ids[:, 0], types[:, 0], mask[:, 0]
    import torch

    batch: Batch = {
        "input_ids": torch.from_numpy(ids),
        "token_type_ids": torch.from_numpy(types),
        "attention_mask": torch.from_numpy(mask),
    }
    if all(f.get("labels") is not None for f in features):
        labels = [f["labels"] for f in features]
        dtype = label_dtype or (torch.float32 if isinstance(labels[0], float) else torch.long)
        batch["labels"] = torch.tensor(labels, dtype=dtype)
    return batch


def group_key(feature: Feature) -> Any:
    """Features with different keys never share a batch (multiple choice: the number of options)."""
    ids = feature["input_ids"]
    return len(ids) if ids and isinstance(ids[0], list) else None


class LengthGroupedBatches:
    """Shuffled batches of similar-length features, reshuffled every epoch; an iterable of batches.

    Each epoch: permute the features (seeded by ``seed + epoch``), cut the permutation into mega-batches
    of ``batch_size * group_size`` features, sort each mega-batch by length (longest first), cut it into
    batches, and shuffle the order of all batches. Batches stay random but each holds features of
    similar length, so dynamic padding pads little. With ``group_size=1`` (or ``group_by_length=False``)
    this is plain shuffled batching.

    Features whose `group_key` differ (multiple-choice examples with different numbers of options) go
    to different batches.

    Distributed: with ``world_size > 1`` every rank draws the same batch order and takes every
    ``world_size``-th batch (the tail that does not divide evenly is dropped so ranks stay in step).

    Args:
        features: the featurized examples.
        batch_size: examples per batch (per rank).
        collate: features -> batch of tensors (e.g. ``functools.partial(pad_features, pad_id=0)``).
        shuffle: False gives the features in order, in order-preserving batches (evaluation).
        group_by_length: sort mega-batches by length as above.
        group_size: mega-batch size in batches (transformers' LengthGroupedSampler uses 50).
        seed: base seed; epoch e uses ``seed + e``.
        drop_last: drop an incomplete final batch.
        micro_batches: yield each batch as this many micro-batches (consecutive near-equal parts of its
            features, `numpy.array_split`), accumulated by the trainer into one optimizer step; a final
            batch with fewer features than this is dropped (the log says so), so every step has them all.
    """

    def __init__(
        self,
        features: Sequence[Feature],
        batch_size: int,
        collate: Callable[[Sequence[Feature]], Batch],
        *,
        shuffle: bool = True,
        group_by_length: bool = True,
        group_size: int = 50,
        seed: int = 0,
        drop_last: bool = False,
        rank: int = 0,
        world_size: int = 1,
        micro_batches: int = 1,
    ) -> None:
        if batch_size < 1:
            raise ValueError(f"batch_size must be >= 1, got {batch_size}")
        if not 0 <= rank < world_size:
            raise ValueError(f"rank {rank} is not in [0, {world_size})")
        self.features = features
        self.batch_size = batch_size
        self.collate = collate
        self.shuffle = shuffle
        self.group_by_length = group_by_length
        self.group_size = max(1, group_size)
        self.seed = seed
        self.drop_last = drop_last
        self.rank = rank
        self.world_size = world_size
        self.micro_batches = micro_batches
        self.epoch = 0
        self._lengths = np.array([feature_length(f) for f in features], dtype=np.int64)
        self._keys = [group_key(f) for f in features]

    def set_epoch(self, epoch: int) -> None:
        """Select the shuffle of epoch ``epoch`` (call before iterating, as with DistributedSampler)."""
        self.epoch = epoch

    def batch_indices(self, epoch: int | None = None) -> list[list[int]]:
        """The batches of an epoch as lists of feature indices (this rank's share)."""
        epoch = self.epoch if epoch is None else epoch
        n = len(self.features)
        rng = np.random.default_rng(self.seed + epoch)
        order = rng.permutation(n) if self.shuffle else np.arange(n)
        batches: list[list[int]] = []
        for key in dict.fromkeys(self._keys):  # first-seen order, deterministic
            idx = order[[self._keys[i] == key for i in order]] if len(set(self._keys)) > 1 else order
            if self.shuffle and self.group_by_length:
                mega = self.batch_size * self.group_size
                chunks = []
                for start in range(0, len(idx), mega):
                    chunk = idx[start : start + mega]
                    # stable sort, longest first: ties keep their random order
                    chunks.append(chunk[np.argsort(-self._lengths[chunk], kind="stable")])
                idx = np.concatenate(chunks) if chunks else idx
            for start in range(0, len(idx), self.batch_size):
                b = idx[start : start + self.batch_size].tolist()
                if (len(b) < self.batch_size and self.drop_last) or len(b) < self.micro_batches:
                    continue
                batches.append(b)
        if self.shuffle:
            perm = rng.permutation(len(batches))
            batches = [batches[i] for i in perm]
        if self.world_size > 1:
            usable = len(batches) - len(batches) % self.world_size
            batches = batches[self.rank : usable : self.world_size]
        return batches

    def __len__(self) -> int:
        """The batches of an epoch, each counted as its ``micro_batches``."""
        return len(self.batch_indices()) * self.micro_batches

    def __iter__(self) -> Iterator[Batch]:
        for b in self.batch_indices():
            for part in np.array_split(np.asarray(b, dtype=np.int64), self.micro_batches):
                yield self.collate([self.features[i] for i in part.tolist()])


def padding_stats(batches: LengthGroupedBatches, fixed_length: int | None = None) -> dict[str, float]:
    """Token counts of an epoch: real tokens, padded tokens with dynamic padding, and with padding to
    ``fixed_length`` -- what the benchmark reports next to the times."""
    real = int(batches._lengths.sum())
    dynamic = 0
    for b in batches.batch_indices():
        dynamic += len(b) * int(batches._lengths[b].max())
    out = {"real_tokens": float(real), "dynamic_tokens": float(dynamic)}
    if fixed_length is not None:
        out["fixed_tokens"] = float(len(batches.features) * fixed_length)
    return out


def cheapest_batches(lengths: Sequence[int], batch_size: int, call_cost_tokens: float) -> list[int]:
    """Where to cut ``lengths`` (sorted ascending) into consecutive batches of at most ``batch_size`` so that
    their total cost is least, a batch costing its padded tokens (its rows x its longest) plus
    ``call_cost_tokens`` (what one model call costs beyond its tokens); the end index of each batch, in
    order. Dynamic programming over the cut points: exact, O(len x batch_size)."""
    n = len(lengths)
    best = [0.0] + [math.inf] * n  # best[e]: the least cost of the first e
    start = [0] * (n + 1)
    for e in range(1, n + 1):
        longest = lengths[e - 1]  # sorted: the last is the longest of any batch ending here
        for s in range(max(0, e - batch_size), e):
            cost = best[s] + call_cost_tokens + (e - s) * longest
            if cost < best[e]:
                best[e], start[e] = cost, s
    ends = []
    e = n
    while e > 0:
        ends.append(e)
        e = start[e]
    return ends[::-1]
