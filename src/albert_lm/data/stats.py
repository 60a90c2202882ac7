"""``albert data stats``: what a DATA_DIR actually contains, measured from its bytes, next to the targets.

Reported: counts; the sequence-length histogram; the masked fraction against the masking budget
(``min(max_predictions_per_seq, max(1, round(masked_lm_prob * length)))`` per sequence) and against
``masked_lm_prob``; the replacement split (target 80/10/10); the span-length histogram (in words, target
p(n) ∝ 1/n before the budget trims it; and in tokens); the label balance (target 50/50); the fraction of
instances whose target length was drawn short (target ``short_seq_prob``); the fraction with a B segment
from another document (single-sentence chunks, and NSP negatives).

For statically masked data everything is read from the shards (vectorised; no Python per instance). For
dynamic masking the masks of one epoch are generated for up to ``sample`` instances.
"""

from __future__ import annotations

from collections import Counter
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

import numpy as np

from albert_lm.data.instances import FLAG_LABEL, FLAG_RANDOM_B, FLAG_SHORT
from albert_lm.data.masking import INFO_SPAN_START, REPLACE_KEEP, REPLACE_MASK, REPLACE_RANDOM
from albert_lm.data.shards import ShardReader, check_shards, load_manifest


def _budget(lengths: np.ndarray, prob: float, max_pred: int) -> np.ndarray:
    if prob == 0:
        return np.zeros_like(lengths)
    # np.round rounds half to even, as Python's round() in the original
    return np.minimum(max_pred, np.maximum(1, np.round(lengths * prob).astype(np.int64)))


@dataclass
class _Tally:
    """What the pass over the shards accumulates."""

    lengths: list[np.ndarray] = field(default_factory=list)  # per shard: each instance's sequence length
    flags: list[np.ndarray] = field(default_factory=list)
    n_masked: int = 0
    measured_tokens: int = 0  # tokens of the instances whose masks were measured
    budget_sum: int = 0
    repl: Counter[int] = field(default_factory=Counter)
    span_words: Counter[int] = field(default_factory=Counter)
    span_tokens: Counter[int] = field(default_factory=Counter)
    dyn_done: int = 0  # instances masked so far (dynamic masking)

    def add_masks(self, info: np.ndarray, off: np.ndarray, with_spans: bool) -> None:
        """Count one shard's mask info bytes (``off``: each instance's first mask, then the end)."""
        self.n_masked += len(info)
        kinds = (info >> 4) & 0x3
        self.repl.update(dict(zip(*np.unique(kinds, return_counts=True))))
        if not with_spans:
            return
        starts = np.flatnonzero(info & INFO_SPAN_START)
        self.span_words.update(dict(zip(*np.unique(info[starts] & 0x0F, return_counts=True))))
        # spans never interleave, so a span's tokens run from its start to the next start (or the end of its
        # instance's masks)
        bounds = np.union1d(starts, off)
        nxt = bounds[np.searchsorted(bounds, starts, side="right")]
        self.span_tokens.update(dict(zip(*np.unique(nxt - starts, return_counts=True))))


def _dynamic_masks(
    ds: Any, shard_i: int, lengths: np.ndarray, take: int, epoch: int, tally: _Tally
) -> tuple[np.ndarray, np.ndarray]:
    """Mask the first ``take`` instances of a shard as the dataset would in ``epoch``; their info bytes
    (replacement kind only: spans are not recoverable from a masked example) and offsets."""
    from albert_lm.data.dataset import IGNORE_INDEX

    infos, offs = [], [0]
    for i in range(take):
        ex = ds.example(shard_i, i, epoch)
        pos = np.flatnonzero(ex["mlm_labels"] != IGNORE_INDEX)
        kinds = np.where(
            ex["input_ids"][pos] == ds.mask_id,
            REPLACE_MASK,
            np.where(ex["input_ids"][pos] == ex["mlm_labels"][pos], REPLACE_KEEP, REPLACE_RANDOM),
        )
        infos.append(kinds.astype(np.uint8) << 4)
        offs.append(offs[-1] + len(pos))
    tally.dyn_done += take
    mcfg = ds.masking_config
    tally.budget_sum += int(_budget(lengths[:take], mcfg.masked_lm_prob, mcfg.max_predictions_per_seq).sum())
    tally.measured_tokens += int(lengths[:take].sum())
    return (np.concatenate(infos) if infos else np.zeros(0, np.uint8)), np.asarray(offs)


def compute_stats(
    data_dir: str | Path, *, sample: int = 20000, epoch: int = 0, bins: int = 16
) -> dict[str, Any]:
    """Measure a DATA_DIR; returns a JSON-able dict (see the module docstring)."""
    data_dir = Path(data_dir)
    manifest = load_manifest(data_dir)
    check_shards(data_dir, manifest)  # what is measured is what the manifest lists
    cfg = manifest["config"]
    static = cfg["masking"] == "static"
    tally = _Tally()
    ds = None
    if not static:
        from albert_lm.data.dataset import PretrainingDataset

        ds = PretrainingDataset(data_dir, masking="dynamic", shuffle=False, epoch=epoch)
    for shard_i, entry in enumerate(manifest["shards"]):
        r = ShardReader(data_dir / entry["file"])
        inst = r["instances"]
        if len(inst) == 0:
            continue
        lengths = inst["a_len"].astype(np.int64) + inst["b_len"] + 3
        tally.lengths.append(lengths)
        tally.flags.append(np.asarray(inst["flags"]))
        if static:
            info, off = np.asarray(r["mask_info"]), np.asarray(r["mask_offsets"])
            budget = _budget(lengths, cfg["masked_lm_prob"], cfg["max_predictions_per_seq"])
            tally.budget_sum += int(budget.sum())
            tally.measured_tokens += int(lengths.sum())
        else:
            take = min(len(inst), max(0, sample - tally.dyn_done))
            if take == 0:
                continue
            info, off = _dynamic_masks(ds, shard_i, lengths, take, epoch, tally)
        tally.add_masks(info, off, with_spans=static)
        r.close()
    measured = "all instances" if static else f"{tally.dyn_done} instances, epoch {epoch} (dynamic)"
    return _report(data_dir, manifest, tally, measured, bins)


def _frac(x: float, total: float) -> float:
    return float(x) / total if total else 0.0


def _check(name: str, value: float, target: float) -> dict[str, Any]:
    diff = 100.0 * (value - target)
    return {
        "metric": name,
        "value": value,
        "target": target,
        "diff_points": diff,
        "within_1_point": abs(diff) <= 1.0,
    }


def _report(
    data_dir: Path, manifest: dict[str, Any], tally: _Tally, measured: str, bins: int
) -> dict[str, Any]:
    """The measured figures next to their targets (see the module docstring)."""
    cfg = manifest["config"]
    T = int(cfg["max_seq_length"])
    lengths = np.concatenate(tally.lengths) if tally.lengths else np.zeros(0, np.int64)
    flags = np.concatenate(tally.flags) if tally.flags else np.zeros(0, np.int32)
    n = len(lengths)
    edges = np.linspace(0, T, bins + 1).astype(int)
    hist, _ = np.histogram(lengths, bins=edges)
    n_masked = tally.n_masked
    masked_fraction = _frac(n_masked, tally.measured_tokens)
    budget_fraction = _frac(tally.budget_sum, tally.measured_tokens)
    r_mask, r_keep, r_rand = (
        _frac(tally.repl[k], n_masked) for k in (REPLACE_MASK, REPLACE_KEEP, REPLACE_RANDOM)
    )
    label_1 = _frac(int(np.count_nonzero(flags & FLAG_LABEL)), n)
    short = _frac(int(np.count_nonzero(flags & FLAG_SHORT)), n)
    random_b = _frac(int(np.count_nonzero(flags & FLAG_RANDOM_B)), n)
    checks = [
        _check("masked fraction (vs budget)", masked_fraction, budget_fraction),
        _check("replaced by [MASK]", r_mask, 0.8),
        _check("kept", r_keep, 0.1),
        _check("random token", r_rand, 0.1),
        _check("label 1 (swapped / random next)", label_1, 0.5),
        _check("short target length", short, float(cfg["short_seq_prob"])),
    ]
    return {
        "data_dir": str(data_dir),
        "config": cfg,
        "counts": {**manifest["counts"], "shards": len(manifest["shards"])},
        "skipped": manifest.get("skipped", {}),
        "instances": n,
        "masks_measured_on": measured,
        "sequence_length": {
            "mean": float(lengths.mean()) if n else 0.0,
            "full_fraction": _frac(int(np.count_nonzero(lengths == T)), n),
            "histogram": {f"{int(lo)}-{int(hi)}": int(c) for lo, hi, c in zip(edges[:-1], edges[1:], hist)},
        },
        "masking": {
            "masked_tokens": n_masked,
            "masked_fraction": masked_fraction,
            "budget_fraction": budget_fraction,
            "masked_lm_prob": float(cfg["masked_lm_prob"]),
            "replacement": {"mask": r_mask, "keep": r_keep, "random": r_rand},
            "span_words_histogram": {str(int(k)): int(v) for k, v in sorted(tally.span_words.items())},
            "span_tokens_histogram": {str(int(k)): int(v) for k, v in sorted(tally.span_tokens.items())},
        },
        "labels": {"label_1": label_1, "label_0": 1.0 - label_1 if n else 0.0, "random_b": random_b},
        "short_target_fraction": short,
        "short_seq_scope": cfg["short_seq_scope"],
        "checks": checks,
    }


def format_stats(s: dict[str, Any]) -> str:
    """A human-readable report."""
    c = s["counts"]
    cfg = s["config"]
    lines = [
        f"DATA_DIR {s['data_dir']}",
        f"  {c['shards']} shards, {c['documents']} documents, {c['sentences']} sentences, {c['tokens']} tokens, "
        f"{s['instances']} instances ({cfg['task'].upper()}, max_seq_length {cfg['max_seq_length']}, "
        f"dupe_factor {cfg['dupe_factor']}, {cfg['masking']} masking)",
    ]
    if s["skipped"]:
        lines.append("  skipped: " + ", ".join(f"{k} {v}" for k, v in s["skipped"].items()))
    sl = s["sequence_length"]
    lines.append(f"sequence length: mean {sl['mean']:.1f}, full-length {100 * sl['full_fraction']:.1f}%")
    total = max(1, s["instances"])
    for k, v in sl["histogram"].items():
        lines.append(f"  {k:>11} {v:8d} {100 * v / total:5.1f}% " + "#" * int(round(40 * v / total)))
    m = s["masking"]
    lines.append(
        f"masking (measured on {s['masks_measured_on']}): {m['masked_tokens']} masked tokens, "
        f"{100 * m['masked_fraction']:.2f}% of tokens (budget {100 * m['budget_fraction']:.2f}%, "
        f"masked_lm_prob {100 * m['masked_lm_prob']:.0f}%)"
    )
    rp = m["replacement"]
    lines.append(
        f"  replacement: [MASK] {100 * rp['mask']:.2f}%  kept {100 * rp['keep']:.2f}%  random {100 * rp['random']:.2f}%"
    )
    if m["span_words_histogram"]:
        tot = sum(m["span_words_histogram"].values())
        lines.append(
            "  span length (words): "
            + "  ".join(f"{k}: {100 * v / tot:.1f}%" for k, v in m["span_words_histogram"].items())
        )
        tot = sum(m["span_tokens_histogram"].values())
        lines.append(
            "  span length (tokens): "
            + "  ".join(
                f"{k}: {100 * v / tot:.1f}%" for k, v in list(m["span_tokens_histogram"].items())[:10]
            )
        )
    lb = s["labels"]
    lines.append(
        f"labels: 1 {100 * lb['label_1']:.2f}%  0 {100 * lb['label_0']:.2f}%  (B from another document: "
        f"{100 * lb['random_b']:.2f}%)"
    )
    lines.append(
        f"short target length: {100 * s['short_target_fraction']:.2f}% of instances (scope: {s['short_seq_scope']})"
    )
    lines.append("checks:")
    for ch in s["checks"]:
        ok = "ok  " if ch["within_1_point"] else "OFF "
        lines.append(
            f"  {ok}{ch['metric']:<34} {100 * ch['value']:7.2f}%  target {100 * ch['target']:6.2f}%  "
            f"({ch['diff_points']:+.2f} points)"
        )
    return "\n".join(lines)
