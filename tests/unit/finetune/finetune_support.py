"""A tiny `albert finetune custom` run on generated data: what the tests of this folder train."""

from __future__ import annotations

import json
import random
import sys
from pathlib import Path
from typing import Any

sys.path.insert(0, str(Path(__file__).resolve().parents[1]))  # tests/unit: standin_tokenizer

from standin_tokenizer import make_tiny_model_dir  # noqa: E402

GOOD = ["great", "fine", "lovely", "superb", "nice", "bright"]
BAD = ["awful", "poor", "dull", "grim", "sad", "broken"]
FILLER = ["the", "film", "was", "really", "a", "story", "plot", "and", "very"]


def write_data(path: Path, n: int, seed: int = 0) -> Path:
    """``n`` CSV rows ``text,label`` (pos / neg by their words), of varied lengths."""
    rng = random.Random(seed)
    rows = ["text,label"]
    for i in range(n):
        pos = i % 2 == 0
        words = rng.choices(FILLER, k=rng.randint(2, 9)) + [rng.choice(GOOD if pos else BAD)]
        rng.shuffle(words)
        rows.append(f"{' '.join(words)},{'pos' if pos else 'neg'}")
    path.write_text("\n".join(rows) + "\n", encoding="utf-8")
    return path


def tiny_init(path: Path) -> Path:
    """A random albert-tiny model directory whose vocab holds every word of `write_data`."""
    return make_tiny_model_dir(path, [" ".join(GOOD + BAD + FILLER)])


def finetune_argv(init: Path, train: Path, dev: Path, out: Path, *extra: str) -> list[str]:
    """`albert finetune custom` in fp32 with the torch linear library (bit-reproducible), no dropout."""
    argv = ["finetune", "custom", "--train", str(train), "--dev", str(dev), "--model", str(init)]
    argv += ["--output", str(out), "--max-seq-length", "16", "--no-progress", "--precision", "fp32"]
    argv += ["--fp32-linear", "torch", "--classifier-dropout", "0", "--encoder-dropout", "0"]
    return argv + list(extra)


def report(out: Path) -> dict[str, Any]:
    return json.loads((out / "report.json").read_text(encoding="utf-8"))
