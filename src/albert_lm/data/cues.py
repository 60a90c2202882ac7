"""``albert data cues``: how much of the sentence-order label shallow features give away.

An SOP accuracy means little without knowing what a model could get *without* understanding the text.
The majority class is one floor. This module measures two more, on held-out data, with logistic regression
(a linear model over hashed one-hot features) trained on the training DATA_DIR:

* **boundary tokens**: the first and last three tokens of each segment (by position), each segment's first
  bigram and its length (in buckets of 8 tokens). This catches order cues that need no reading: a
  document's opening words, a segment that starts with "however" or "he";
* **A/B overlap**: how many token types the two segments share, leaving out the 100 most frequent ones
  (Jaccard and both containments, in buckets of 5%). This catches a B segment taken from another document (the original's rule for
  single-unit chunks, and NSP's negatives): a topic shift, not an order.

Both together are a third model. Features use the unmasked tokens, so each is an upper bound on what the
same cue offers the masked model. A pretraining run's held-out SOP accuracy is evidence of sentence-order
learning only above all of these floors.
"""

from __future__ import annotations

from pathlib import Path
from typing import Any

import numpy as np

from albert_lm.data.documents import DataError
from albert_lm.data.instances import FLAG_LABEL, FLAG_RANDOM_B
from albert_lm.data.shards import ShardReader, check_shards, iter_shard_paths, load_manifest

BUCKETS = 1 << 19  # hashed feature space
EDGE = 3  # tokens at each end of a segment
BOUNDARY_SLOTS = 4 * EDGE + 4  # start/end tokens of both segments, two bigrams, two lengths
OVERLAP_SLOTS = 3
COMMON = 100  # the most frequent training tokens, left out of the overlap (function words, punctuation)
_MISSING = -1  # a segment shorter than EDGE tokens


def _hash(slot: int, value: int) -> int:
    # deterministic (Python's hash() of a str is salted per process)
    return ((slot * 1_000_003 + value + 7) * 2_654_435_761) % BUCKETS


def _features(a: np.ndarray, b: np.ndarray, common: frozenset[int]) -> list[int]:
    f: list[int] = []
    slot = 0
    for seg in (a, b):
        for j in range(EDGE):
            f.append(_hash(slot, int(seg[j]) if j < len(seg) else _MISSING))
            slot += 1
        for j in range(1, EDGE + 1):
            f.append(_hash(slot, int(seg[-j]) if j <= len(seg) else _MISSING))
            slot += 1
    for seg in (a, b):
        second = int(seg[1]) if len(seg) > 1 else _MISSING
        f.append(_hash(slot, int(seg[0]) * 1_000_033 + second))
        slot += 1
    for seg in (a, b):
        f.append(_hash(slot, len(seg) // 8))
        slot += 1
    sa, sb = set(a.tolist()) - common, set(b.tolist()) - common
    inter = len(sa & sb)
    for value in (inter / max(1, len(sa | sb)), inter / max(1, len(sa)), inter / max(1, len(sb))):
        f.append(_hash(slot, int(value * 20)))
        slot += 1
    return f


Pairs = list[tuple[np.ndarray, np.ndarray]]


def _instances(data_dir: Path, limit: int, rng: np.random.Generator) -> tuple[Pairs, np.ndarray, np.ndarray]:
    """(A, B) token arrays, labels and random-B flags of up to ``limit`` instances drawn without replacement."""
    manifest = load_manifest(data_dir)
    check_shards(data_dir, manifest)
    readers = [ShardReader(p) for p in iter_shard_paths(data_dir, manifest)]
    sizes = np.array([len(r["instances"]) for r in readers])
    if sizes.sum() == 0:
        raise DataError(f"{data_dir}: no instances")
    pick = rng.choice(int(sizes.sum()), size=min(limit, int(sizes.sum())), replace=False)
    pick.sort()
    starts = np.concatenate([[0], np.cumsum(sizes)])
    pairs, labels, random_b = [], [], []
    for g in pick:
        s = int(np.searchsorted(starts, g, side="right") - 1)
        r = readers[s]
        rec = r["instances"][g - starts[s]]
        tokens = r["tokens"]
        a = np.array(tokens[int(rec["a_start"]) : int(rec["a_start"]) + int(rec["a_len"])])
        b = np.array(tokens[int(rec["b_start"]) : int(rec["b_start"]) + int(rec["b_len"])])
        pairs.append((a, b))
        labels.append(int(rec["flags"]) & FLAG_LABEL)
        random_b.append(bool(int(rec["flags"]) & FLAG_RANDOM_B))
    for r in readers:
        r.close()
    return pairs, np.array(labels, dtype=np.int64), np.array(random_b)


def _logistic_regression(
    x: np.ndarray, y: np.ndarray, x_eval: np.ndarray, *, epochs: int, seed: int
) -> np.ndarray:
    """Held-out predictions (0/1) of a logistic regression over hashed one-hot features (Adagrad)."""
    import torch

    g = torch.Generator().manual_seed(seed)
    weights = torch.nn.EmbeddingBag(BUCKETS, 1, mode="sum")
    torch.nn.init.zeros_(weights.weight)
    bias = torch.zeros(1, requires_grad=True)
    opt = torch.optim.Adagrad([weights.weight, bias], lr=0.1)
    xt, yt = torch.from_numpy(x), torch.from_numpy(y).float()
    for _ in range(epochs):
        order = torch.randperm(len(yt), generator=g)
        for i in range(0, len(yt), 256):
            idx = order[i : i + 256]
            loss = torch.nn.functional.binary_cross_entropy_with_logits(
                weights(xt[idx]).squeeze(-1) + bias, yt[idx]
            )
            opt.zero_grad()
            loss.backward()
            opt.step()
    with torch.no_grad():
        return ((weights(torch.from_numpy(x_eval)).squeeze(-1) + bias) > 0).long().numpy()


def sop_cues(
    train_dir: str | Path, eval_dir: str | Path, *, sample: int = 50000, epochs: int = 3, seed: int = 0
) -> dict[str, Any]:
    """Held-out SOP accuracy of the majority class and of logistic regressions over shallow features,
    trained on up to ``sample`` training instances (see the module docstring)."""
    prints = [load_manifest(d)["tokenizer"]["fingerprint"] for d in (train_dir, eval_dir)]
    if prints[0] != prints[1]:
        raise DataError(
            f"{Path(eval_dir) / 'manifest.json'}: tokenizer fingerprint {prints[1]} differs from "
            f"{Path(train_dir) / 'manifest.json'} ({prints[0]}): token features would not mean the same"
        )
    rng = np.random.default_rng(seed)
    train, y, _ = _instances(Path(train_dir), sample, rng)
    held, ye, rb = _instances(Path(eval_dir), sample, rng)
    counts = np.bincount(np.concatenate([t for pair in train for t in pair]))
    common = frozenset(np.argsort(-counts, kind="stable")[:COMMON].tolist())
    x = np.array([_features(a, b, common) for a, b in train], dtype=np.int64)
    xe = np.array([_features(a, b, common) for a, b in held], dtype=np.int64)
    majority = int(y.mean() > 0.5)
    columns = {
        "boundary_tokens": slice(0, BOUNDARY_SLOTS),
        "overlap": slice(BOUNDARY_SLOTS, BOUNDARY_SLOTS + OVERLAP_SLOTS),
        "boundary_tokens+overlap": slice(0, BOUNDARY_SLOTS + OVERLAP_SLOTS),
    }
    acc = {"majority": float((ye == majority).mean())}
    for name, cols in columns.items():
        pred = _logistic_regression(x[:, cols], y, xe[:, cols], epochs=epochs, seed=seed)
        acc[name] = float((pred == ye).mean())
    return {
        "train_instances": len(y),
        "eval_instances": len(ye),
        "eval_label_1": float(ye.mean()),
        "eval_random_b": float(rb.mean()),
        "accuracy": acc,
    }


def format_cues(c: dict[str, Any]) -> str:
    lines = [
        f"held-out SOP accuracy without reading ({c['eval_instances']:,} held-out instances; "
        f"logistic regression fitted on {c['train_instances']:,} training instances)",
        f"  held-out labels: {c['eval_label_1']:.1%} label 1; {c['eval_random_b']:.1%} of pairs take B "
        "from another document",
    ]
    names = {
        "majority": "majority class",
        "boundary_tokens": "boundary tokens (first/last 3 of each segment, lengths)",
        "overlap": "A/B token overlap (topic shift)",
        "boundary_tokens+overlap": "both",
    }
    lines += [f"  {names[k]:<58}{v:>8.1%}" for k, v in c["accuracy"].items()]
    return "\n".join(lines)
