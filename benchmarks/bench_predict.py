#!/usr/bin/env python3
"""`albert predict` throughput, old vs new, in one run: lines/s on 2000 sentences with albert-tiny.

*old* is ``src/albert_lm/cli/predict.py`` as it was before streaming (``--old-rev``, read with ``git show``
and imported as a module of its own): it read all input, then tokenized line by line (one encoder call,
which for SentencePiece starts a thread, per line) and ran the model on batches of the whole input sorted
by length. *new* is the current module: it streams chunks of up to 16 batches (cut short when the input
pauses, which a file never does), one tokenizer call per chunk, each chunk sorted by length into batches
and written as soon as it is done. Both run in this process on the same input, model, device (CPU) and
torch threads, after one warm-up each; the time is the whole command (model load included), best of
``--repeat``. The outputs are compared too: same lines, same labels, probabilities within float noise.
Also shown: the tokenizing alone, line by line (old) and in one call (new).

The model is a random albert-tiny sequence classifier with a SentencePiece vocabulary (ALBERT's own kind
of tokenizer) trained on the polarity sentences (data/polarity; a fixed list when it is absent).

    python benchmarks/bench_predict.py                       # 2000 lines, batch 64, 1 thread
    python benchmarks/bench_predict.py --lines 500 --repeat 1    # a quick check of the script
"""

from __future__ import annotations

import argparse
import contextlib
import csv
import importlib.util
import io
import json
import subprocess
import sys
import tempfile
import time
from collections.abc import Iterator
from pathlib import Path
from types import ModuleType
from typing import Any

REPO = Path(__file__).resolve().parent.parent
POLARITY = REPO / "data" / "polarity" / "polarity-en-pang-lee.csv"
OLD_REV = "2ee497f68240e5f2f90ba904710e3ff0adfa68b7"
"""The last commit whose cli/predict.py read all input and tokenized line by line."""
FALLBACK = [
    "a gorgeous , witty , seductive movie .",
    "the story is too long and the plot is a mess , but the cast is charming and often very funny .",
    "dull .",
    "it is not a bad film , it is just an awful one that never finds its rhythm .",
]


def polarity() -> list[str]:
    """The polarity set's sentences (a fixed list when it is absent)."""
    if not POLARITY.exists():
        return FALLBACK
    with open(POLARITY, encoding="utf-8", newline="") as f:
        return [row[1].strip() for row in csv.reader(f) if len(row) == 2 and row[1].strip()]


def make_model_dir(path: Path, texts: list[str], vocab_size: int) -> Path:
    """A random albert-tiny classifier (labels neg / pos) with a SentencePiece model trained on ``texts``."""
    import torch

    from albert_lm.config import AlbertConfig
    from albert_lm.model import AlbertForSequenceClassification
    from albert_lm.tasks.classification import ClassificationTask
    from albert_lm.tasks.rundir import write_task_info
    from albert_lm.tokenizer.train import train_sentencepiece

    corpus = path.parent / "corpus.txt"
    corpus.write_text("\n".join(texts) + "\n", encoding="utf-8")
    tokenizer, _ = train_sentencepiece([corpus], path, vocab_size=vocab_size)
    config = AlbertConfig.from_preset("albert-tiny", vocab_size=tokenizer.vocab_size)
    torch.manual_seed(0)
    model = AlbertForSequenceClassification(config, num_labels=2)
    model.label_names = ["neg", "pos"]  # type: ignore[assignment]
    model.save_pretrained(path)
    task = ClassificationTask("polarity", lambda split: [], ["neg", "pos"], ["accuracy"])
    write_task_info(task, path, {"max_seq_length": 128})
    return path


def old_module(rev: str, where: Path) -> ModuleType:
    """cli/predict.py at ``rev``, imported as a module of its own (``albert_predict_old``)."""
    source = subprocess.run(
        ["git", "show", f"{rev}:src/albert_lm/cli/predict.py"],
        cwd=REPO,
        check=True,
        capture_output=True,
        text=True,
    ).stdout
    path = where / "albert_predict_old.py"
    path.write_text(source, encoding="utf-8")
    spec = importlib.util.spec_from_file_location("albert_predict_old", path)
    assert spec is not None and spec.loader is not None
    module = importlib.util.module_from_spec(spec)
    spec.loader.exec_module(module)
    return module


@contextlib.contextmanager
def piped(data: bytes) -> Iterator[io.StringIO]:
    """stdin holding ``data`` (bytes underneath, as a shell gives it) and stdout captured."""
    out = io.StringIO()
    old_in, old_out = sys.stdin, sys.stdout
    sys.stdin = io.TextIOWrapper(io.BytesIO(data), encoding="utf-8")
    sys.stdout = out
    try:
        yield out
    finally:
        sys.stdin, sys.stdout = old_in, old_out


def timed_run(module: ModuleType, argv: list[str], data: bytes) -> tuple[float, list[dict]]:
    """Wall time of one ``module.run`` (the whole command) on ``data``, and its rows."""
    parser = argparse.ArgumentParser()
    module.add_arguments(parser)
    args = parser.parse_args(argv)
    with piped(data) as out:
        t0 = time.perf_counter()
        assert module.run(args) == 0
        seconds = time.perf_counter() - t0
    return seconds, [json.loads(line) for line in out.getvalue().splitlines()]


def compare(old: list[dict], new: list[dict]) -> dict[str, Any]:
    """How far the new rows are from the old: line count, texts, labels, largest probability change."""
    same_text = [o.get("text") for o in old] == [n.get("text") for n in new]
    labels = sum(o.get("label") == n.get("label") for o, n in zip(old, new))
    diff = max(
        (
            abs(o["probabilities"][k] - n["probabilities"][k])
            for o, n in zip(old, new)
            for k in o.get("probabilities", {})
        ),
        default=0.0,
    )
    return {
        "lines": (len(old), len(new)),
        "same_texts": same_text,
        "same_labels": labels,
        "max_prob_diff": diff,
    }


def tokenize_seconds(model: Path, texts: list[str], threads: int) -> tuple[float, float]:
    """Seconds to featurize ``texts`` line by line (the task's own featurize: the old path) and in one
    batch call (`albert_lm.export.runtime.featurize`: the new path), best of three."""
    from albert_lm.export.runtime import featurize
    from albert_lm.tasks.base import Example
    from albert_lm.tasks.rundir import load_finetuned

    ft = load_finetuned(model)
    examples = [Example(str(i), (t,)) for i, t in enumerate(texts)]
    old, new = float("inf"), float("inf")
    for _ in range(3):
        t0 = time.perf_counter()
        ft.task.featurize(examples, ft.tokenizer, ft.max_seq_length)
        t1 = time.perf_counter()
        featurize(ft.task, examples, ft.tokenizer, ft.max_seq_length, num_workers=threads)
        old, new = min(old, t1 - t0), min(new, time.perf_counter() - t1)
    return old, new


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(
        description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter
    )
    parser.add_argument("--lines", type=int, default=2000)
    parser.add_argument("--batch-size", type=int, default=64)
    parser.add_argument("--threads", type=int, default=1, help="torch threads (and the new path's tokenizer)")
    parser.add_argument("--vocab-size", type=int, default=5000)
    parser.add_argument("--repeat", type=int, default=5, help="timed runs per path; the best counts")
    parser.add_argument("--old-rev", default=OLD_REV, help="the commit whose cli/predict.py is 'old'")
    parser.add_argument("--json", type=Path, help="also write the figures here")
    args = parser.parse_args(argv)

    import torch

    import albert_lm.cli.predict as new

    torch.set_num_threads(args.threads)  # the old command has no --threads: both get the same
    corpus = polarity()
    texts = [corpus[i % len(corpus)] for i in range(args.lines)]
    data = "".join(t + "\n" for t in texts).encode("utf-8")
    with tempfile.TemporaryDirectory() as tmp:
        model = make_model_dir(Path(tmp) / "model", corpus, args.vocab_size)
        old = old_module(args.old_rev, Path(tmp))
        common = ["--model", str(model), "--batch-size", str(args.batch_size), "--device", "cpu"]
        paths = {"old": (old, common), "new": (new, [*common, "--threads", str(args.threads)])}
        warm = "".join(t + "\n" for t in texts[: args.batch_size]).encode("utf-8")
        rows: dict[str, list[dict]] = {}
        best = {name: float("inf") for name in paths}
        for module, flags in paths.values():
            timed_run(module, flags, warm)  # imports, first model load, allocator
        # old and new take turns, so that a busy spell of a shared machine slows both alike
        for _ in range(args.repeat):
            for name, (module, flags) in paths.items():
                seconds, rows[name] = timed_run(module, flags, data)
                best[name] = min(best[name], seconds)
        results = {name: {"seconds": t, "lines_per_s": len(texts) / t} for name, t in best.items()}
        tokenize = tokenize_seconds(model, texts, args.threads)
    agree = compare(rows["old"], rows["new"])
    ratio = results["new"]["lines_per_s"] / results["old"]["lines_per_s"]

    print(
        f"albert predict, albert-tiny, {args.lines} lines, batch {args.batch_size}, {args.threads} threads, "
        f"CPU, torch {torch.__version__}"
    )
    print(f"{'path':<6} {'seconds':>9} {'lines/s':>10}")
    for name, r in results.items():
        print(f"{name:<6} {r['seconds']:>9.3f} {r['lines_per_s']:>10.0f}")
    print(f"new / old: {ratio:.2f}x")
    print(f"tokenizing alone: line by line {tokenize[0]:.3f} s, one call {tokenize[1]:.3f} s")
    print(
        f"outputs: {agree['lines'][1]} lines (old {agree['lines'][0]}), texts in order: {agree['same_texts']}, "
        f"same labels: {agree['same_labels']}/{len(texts)}, largest probability change: {agree['max_prob_diff']:.1e}"
    )
    if args.json:
        args.json.write_text(
            json.dumps(
                {
                    "args": vars(args) | {"json": str(args.json)},
                    **results,
                    "ratio": ratio,
                    "agree": agree,
                    "tokenize_s": tokenize,
                },
                indent=1,
            )
        )
    return 0


if __name__ == "__main__":
    sys.exit(main())
