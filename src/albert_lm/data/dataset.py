"""``PretrainingDataset``: a PyTorch ``IterableDataset`` over a prepared DATA_DIR.

Items are dicts of tensors, padded to ``max_seq_length``::

    input_ids       (T,) long   [CLS] A [SEP] B [SEP] with the masks applied, then <pad>
    token_type_ids  (T,) long   0 for [CLS] A [SEP], 1 for B [SEP], 0 for padding
    attention_mask  (T,) long   1 for tokens, 0 for padding
    mlm_labels      (T,) long   the original id at masked positions, -100 elsewhere
    sop_labels      ()   long   1 = swapped (SOP) / random next (NSP)

With ``batch_size`` set, items are whole batches (B, T) (use ``DataLoader(dataset, batch_size=None)``).

Order and splitting. An epoch is a permutation of all instances: the shards in an order drawn from
(seed, epoch), each shard's instances in an order drawn from (seed, epoch, shard) -- a shuffle that never
materializes the whole index. Item k of the epoch goes to rank ``k % world_size``; within a rank, chunks of
``batch_size`` items (1 without batching) go round-robin to the DataLoader workers, which is the order in
which the DataLoader hands batches back. So every instance is seen exactly once per epoch across ranks and
workers (no duplicates, no gaps; ranks may differ by one item unless ``drop_last``).

Masking. ``static``: the masks written by ``albert prepare`` (the original's way, ``dupe_factor`` copies).
``dynamic``: fresh masks each epoch from (seed, epoch, shard, instance), with the original's masking rule.

Resuming. ``state_dict()`` is ``{"epoch", "position", ...}`` where position counts the items this rank has
consumed in the epoch; ``load_state_dict`` continues exactly there. The count is kept by whoever iterates in
the main process: the dataset itself with ``num_workers=0``, or :class:`PretrainingLoader`, which wraps a
``DataLoader`` with workers and counts the batches it hands out (worker processes cannot report back).
"""

from __future__ import annotations

import logging
from collections.abc import Iterator
from pathlib import Path
from typing import Any, Literal

import numpy as np
import torch
from torch.utils.data import DataLoader, IterableDataset, get_worker_info

from albert_lm._io import IGNORE_INDEX  # the label of unmasked positions
from albert_lm.data.documents import DataError
from albert_lm.data.instances import (
    FLAG_LABEL,
    STREAM_DYNAMIC_MASKS,
    STREAM_SHUFFLE,
    instance_token_ids,
    instance_word_starts,
)
from albert_lm.data.masking import MaskedPositions, MaskingConfig, MaskRng, create_masked_lm_predictions
from albert_lm.data.shards import (
    ShardReader,
    check_shards,
    load_manifest,
    start_table_from_info,
    verify_shards,
)

logger = logging.getLogger(__name__)


def _generator(*key: int) -> np.random.Generator:
    return np.random.Generator(np.random.PCG64(np.random.SeedSequence([int(k) for k in key])))


def _check_example(
    r: ShardReader, index: int, ids: np.ndarray, pos: np.ndarray, inputs_at: np.ndarray, T: int, vocab: int
) -> None:
    """Refuse an instance that no correct shard holds: token ids beyond the vocabulary, a sequence longer
    than the data's, mask positions outside it (the model would fail with an index error, or worse).

    Raises:
        DataError: naming the shard, the instance and what is out of range.
    """
    problem = None
    if len(ids) > T:
        problem = f"{len(ids)} tokens, longer than the sequence length {T}"
    elif len(ids) and (int(ids.max()) >= vocab or int(ids.min()) < 0):
        problem = f"token id {int(ids.max())} outside the vocabulary of {vocab}"
    elif len(pos) and (int(pos.max()) >= len(ids) or int(pos.min()) < 0):
        problem = f"mask position {int(pos.max())} beyond its {len(ids)} tokens"
    elif len(inputs_at) and int(inputs_at.max()) >= vocab:
        problem = f"masked input id {int(inputs_at.max())} outside the vocabulary of {vocab}"
    if problem:
        raise DataError(
            f"{r.path}: instance {index}: {problem}; the shard is corrupt, prepare the data again"
        )


def _rank_and_world_size(rank: int | None, world_size: int | None) -> tuple[int, int]:
    """The given rank and world size, each defaulting to ``torch.distributed``'s (else 0 of 1)."""
    if rank is None or world_size is None:
        dist_rank, dist_world = 0, 1
        if torch.distributed.is_available() and torch.distributed.is_initialized():
            dist_rank, dist_world = torch.distributed.get_rank(), torch.distributed.get_world_size()
        rank = dist_rank if rank is None else rank
        world_size = dist_world if world_size is None else world_size
    if not 0 <= rank < world_size:
        raise ValueError(f"need 0 <= rank < world_size, got rank={rank}, world_size={world_size}")
    return int(rank), int(world_size)


class PretrainingDataset(IterableDataset):
    """SOP/NSP + masked-LM examples from a DATA_DIR made by ``albert prepare``.

    Args:
        data_dir: the DATA_DIR.
        masking: "static" (the prepared masks; the default when the DATA_DIR has them) or "dynamic".
        seed: seeds the epoch order and the dynamic masks (default: the DATA_DIR's seed).
        shuffle: shuffle each epoch (else shard and instance order as stored).
        epoch: the first epoch (see :meth:`set_epoch`).
        rank, world_size: this process's share (default: from ``torch.distributed`` when initialized).
        batch_size: yield collated batches of this size instead of single examples.
        drop_last: give every rank the same number of items (drops up to world_size - 1 per epoch) and, with
            ``batch_size``, drop the last incomplete batch.
        max_seq_length: pad to this length (default: the DATA_DIR's; must not be shorter).
        tokenizer: optional tokenizer (object with ``fingerprint``) that must match the DATA_DIR's.
        verify: check every shard's sha256 against the manifest first.
        masking_overrides: dynamic masking only: change ``masked_lm_prob``, ``max_predictions_per_seq``,
            ``ngram``, ``favor_shorter_ngram`` or ``whole_word``.
    """

    def __init__(
        self,
        data_dir: str | Path,
        *,
        masking: Literal["static", "dynamic"] | None = None,
        seed: int | None = None,
        shuffle: bool = True,
        epoch: int = 0,
        rank: int | None = None,
        world_size: int | None = None,
        batch_size: int | None = None,
        drop_last: bool = False,
        max_seq_length: int | None = None,
        tokenizer: Any = None,
        verify: bool = False,
        **masking_overrides: Any,
    ) -> None:
        super().__init__()
        self.data_dir = Path(data_dir)
        self.manifest = load_manifest(self.data_dir)
        cfg = self.manifest["config"]
        tok = self.manifest["tokenizer"]
        if tokenizer is not None and getattr(tokenizer, "fingerprint", None) != tok["fingerprint"]:
            raise DataError(
                f"{self.data_dir / 'manifest.json'}: prepared with tokenizer fingerprint {tok['fingerprint']}, "
                f"but the given tokenizer has {getattr(tokenizer, 'fingerprint', None)}"
            )
        # every byte with verify; else each shard's size and sampled sha256 (a shard changed in place)
        (verify_shards if verify else check_shards)(self.data_dir, self.manifest)
        self.masking, self.masking_config = self._masking(masking, masking_overrides)
        self.seed = int(cfg["seed"] if seed is None else seed)
        self.shuffle = shuffle
        self.epoch = int(epoch)
        self.position = 0
        self.rank, self.world_size = _rank_and_world_size(rank, world_size)
        if batch_size is not None and batch_size < 1:
            raise ValueError(f"batch_size must be >= 1, got {batch_size}")
        self.batch_size = batch_size
        self.drop_last = drop_last
        self.max_seq_length = int(max_seq_length or cfg["max_seq_length"])
        if self.max_seq_length < cfg["max_seq_length"]:
            raise ValueError(
                f"max_seq_length {self.max_seq_length} is shorter than the data's {cfg['max_seq_length']}"
            )
        self.cls_id, self.sep_id, self.mask_id = tok["cls_id"], tok["sep_id"], tok["mask_id"]
        self.pad_id, self.vocab_size = tok["pad_id"], tok["vocab_size"]
        self.start_table = start_table_from_info(tok)
        self._cdf = self.masking_config.ngram_cdf()
        self.shards, self.counts = self._open_shards()
        self.num_instances = int(self.counts.sum())
        self._perm_cache: dict[int, np.ndarray] = {}

    def _masking(self, masking: str | None, overrides: dict[str, Any]) -> tuple[str, MaskingConfig]:
        """The masking mode (default: static when the data has static masks) and its settings."""
        cfg = self.manifest["config"]
        has_static = cfg["masking"] == "static"
        mode = masking or ("static" if has_static else "dynamic")
        if mode not in ("static", "dynamic"):
            raise ValueError(f"masking must be 'static' or 'dynamic', got {mode!r}")
        if mode == "static" and not has_static:
            raise DataError(f"{self.data_dir}: prepared with dynamic masking, so it has no static masks")
        if overrides and mode != "dynamic":
            raise ValueError("masking overrides apply to dynamic masking only")
        fields = ("masked_lm_prob", "max_predictions_per_seq", "ngram", "favor_shorter_ngram", "whole_word")
        return mode, MaskingConfig(**{**{k: cfg[k] for k in fields}, **overrides})

    def _open_shards(self) -> tuple[list[ShardReader], np.ndarray]:
        """A reader per shard and its instance count, checked against the manifest."""
        shards = [ShardReader(self.data_dir / e["file"]) for e in self.manifest["shards"]]
        counts = np.array([e["instances"] for e in self.manifest["shards"]], dtype=np.int64)
        for reader, n in zip(shards, counts):
            if reader.footer["sections"]["instances"]["count"] != n:
                raise DataError(
                    f"{reader.path}: {reader.footer['sections']['instances']['count']} instances, manifest says {n}"
                )
        return shards, counts

    # ------------------------------------------------------------------------------------------- sizes

    def rank_size(self) -> int:
        """Items this rank gets per epoch."""
        n, w = self.num_instances, self.world_size
        if self.drop_last:
            return n // w
        return (n - self.rank + w - 1) // w if n > self.rank else 0

    def __len__(self) -> int:
        n = self.rank_size()
        if self.batch_size is None:
            return n
        return n // self.batch_size if self.drop_last else -(-n // self.batch_size)

    # ------------------------------------------------------------------------------------------- state

    def set_epoch(self, epoch: int) -> None:
        """Start ``epoch`` from its beginning (a new order and, with dynamic masking, new masks)."""
        self.epoch = int(epoch)
        self.position = 0

    def state_dict(self) -> dict[str, Any]:
        return {
            "epoch": self.epoch,
            "position": self.position,
            "seed": self.seed,
            "world_size": self.world_size,
            "num_instances": self.num_instances,
            "masking": self.masking,
        }

    def load_state_dict(self, state: dict[str, Any]) -> None:
        for key in ("seed", "world_size", "num_instances", "masking"):
            if key in state and state[key] != getattr(self, key):
                raise ValueError(
                    f"cannot resume: the saved state has {key}={state[key]!r}, this dataset has {getattr(self, key)!r}"
                )
        if not 0 <= int(state["position"]) <= self.rank_size():
            raise ValueError(f"position {state['position']} out of range [0, {self.rank_size()}]")
        self.epoch = int(state["epoch"])
        self.position = int(state["position"])

    # ------------------------------------------------------------------------------------------- order

    def _shard_order(self, epoch: int) -> np.ndarray:
        if not self.shuffle:
            return np.arange(len(self.shards))
        return _generator(self.seed, STREAM_SHUFFLE, epoch, 0).permutation(len(self.shards))

    def _within(self, epoch: int, shard: int) -> np.ndarray:
        perm = self._perm_cache.get(shard)
        if perm is None:
            n = int(self.counts[shard])
            perm = (
                _generator(self.seed, STREAM_SHUFFLE, epoch, shard + 1).permutation(n)
                if self.shuffle
                else np.arange(n)
            )
            self._perm_cache = {shard: perm}  # items arrive shard by shard: one cached order suffices
        return perm

    def _rank_items(self, epoch: int, start: int, worker: int, num_workers: int) -> Iterator[tuple[int, int]]:
        """(shard, instance) for this rank's items from ``start`` on that belong to ``worker``."""
        order = self._shard_order(epoch)
        ends = np.cumsum(self.counts[order])
        chunk = self.batch_size or 1
        self._perm_cache = {}
        for j in range(start, self.rank_size()):
            if ((j - start) // chunk) % num_workers != worker:
                continue
            k = j * self.world_size + self.rank  # position in the epoch's global order
            slot = int(np.searchsorted(ends, k, side="right"))
            shard = int(order[slot])
            local = k - (int(ends[slot - 1]) if slot else 0)
            yield shard, int(self._within(epoch, shard)[local])

    # ------------------------------------------------------------------------------------------- items

    def example(self, shard: int, index: int, epoch: int | None = None) -> dict[str, np.ndarray]:
        """One example as numpy arrays (unpadded lengths are padded to ``max_seq_length``)."""
        r = self.shards[shard]
        rec = r["instances"][index]
        ids, len_a = instance_token_ids(r["tokens"], rec, self.cls_id, self.sep_id)
        if self.masking == "static":
            off = r["mask_offsets"]
            lo, hi = int(off[index]), int(off[index + 1])
            pos = r["mask_positions"][lo:hi].astype(np.int64)
            inputs_at = r["mask_inputs"][lo:hi].astype(np.int64)
        else:
            key_epoch = self.epoch if epoch is None else epoch
            is_start = (
                instance_word_starts(r["word_start"], rec) if r.has("word_start") else self.start_table[ids]
            )
            m: MaskedPositions = create_masked_lm_predictions(
                ids, is_start, cfg=self.masking_config, special_ids=(self.cls_id, self.sep_id),
                mask_id=self.mask_id, vocab_size=self.vocab_size,
                rng=MaskRng.from_key(self.seed, STREAM_DYNAMIC_MASKS, key_epoch, shard, index), cdf=self._cdf,
            )  # fmt: skip
            pos, inputs_at = m.positions, m.input_ids
        n, T = len(ids), self.max_seq_length
        _check_example(r, index, ids, pos, inputs_at, T, self.vocab_size)
        input_ids = np.full(T, self.pad_id, dtype=np.int64)
        input_ids[:n] = ids
        labels = np.full(T, IGNORE_INDEX, dtype=np.int64)
        labels[pos] = ids[pos]
        input_ids[pos] = inputs_at
        token_type = np.zeros(T, dtype=np.int64)
        token_type[len_a:n] = 1
        attention = np.zeros(T, dtype=np.int64)
        attention[:n] = 1
        return {
            "input_ids": input_ids,
            "token_type_ids": token_type,
            "attention_mask": attention,
            "mlm_labels": labels,
            "sop_labels": np.array(int(rec["flags"]) & FLAG_LABEL, dtype=np.int64),
        }

    def _iter_examples(self, worker: int, num_workers: int) -> Iterator[dict[str, np.ndarray]]:
        epoch = self.epoch
        for shard, index in self._rank_items(epoch, self.position, worker, num_workers):
            yield self.example(shard, index, epoch)

    def __iter__(self) -> Iterator[dict[str, torch.Tensor]]:
        info = get_worker_info()
        worker, num_workers = (info.id, info.num_workers) if info is not None else (0, 1)
        examples = self._iter_examples(worker, num_workers)
        if self.batch_size is None:
            for ex in examples:
                if info is None:
                    self.position += 1
                yield {k: torch.from_numpy(np.asarray(v)) for k, v in ex.items()}
        else:
            batch: list[dict[str, np.ndarray]] = []
            for ex in examples:
                batch.append(ex)
                if len(batch) == self.batch_size:
                    if info is None:
                        self.position += len(batch)
                    yield collate(batch)
                    batch = []
            if batch and not self.drop_last:
                if info is None:
                    self.position += len(batch)
                yield collate(batch)
        if info is None:  # a finished pass in the main process: the next iteration is the next epoch
            self.set_epoch(self.epoch + 1)

    def loader(self, batch_size: int, num_workers: int = 0, **kwargs: Any) -> PretrainingLoader:
        """A resumable batch loader over this dataset (see :class:`PretrainingLoader`)."""
        return PretrainingLoader(self, batch_size, num_workers, **kwargs)


def collate(examples: list[dict[str, np.ndarray]]) -> dict[str, torch.Tensor]:
    """Stack examples into a batch of tensors."""
    return {k: torch.from_numpy(np.stack([ex[k] for ex in examples])) for k in examples[0]}


class PretrainingLoader:
    """Batches from a :class:`PretrainingDataset` through a ``DataLoader`` with workers, resumable exactly.

    Iterating runs the rest of the current epoch; ``state_dict()`` at any point, saved with a checkpoint and
    given to ``load_state_dict`` of a fresh loader, continues with the next unseen batch.
    """

    def __init__(
        self, dataset: PretrainingDataset, batch_size: int, num_workers: int = 0, **kwargs: Any
    ) -> None:
        if kwargs.get("persistent_workers"):
            raise ValueError("persistent_workers would keep workers on a stale position; leave it off")
        self.dataset = dataset
        dataset.batch_size = batch_size
        self.num_workers = num_workers
        self.kwargs = kwargs

    def __len__(self) -> int:
        return len(self.dataset)

    def __iter__(self) -> Iterator[dict[str, torch.Tensor]]:
        ds = self.dataset
        if self.num_workers == 0:
            yield from ds  # the dataset counts and advances itself
            return
        loader = DataLoader(ds, batch_size=None, num_workers=self.num_workers, **self.kwargs)
        for batch in loader:
            ds.position += int(batch["input_ids"].shape[0])
            yield batch
        ds.set_epoch(ds.epoch + 1)

    def set_epoch(self, epoch: int) -> None:
        self.dataset.set_epoch(epoch)

    def state_dict(self) -> dict[str, Any]:
        return self.dataset.state_dict()

    def load_state_dict(self, state: dict[str, Any]) -> None:
        self.dataset.load_state_dict(state)
