"""Batch-encoding throughput: our tokenizers against transformers' on the same sentences, in one run.

    python benchmarks/bench_tokenizer.py [--n 20000] [--repeat 3] [--tokenizer DIR]

SentencePiece: `albert_lm.tokenizer.AlbertTokenizer.batch_encode` against transformers' `AlbertTokenizer`
(slow, SentencePiece-based; the reference our ids match) and `AlbertTokenizerFast` (Rust), all three
producing input_ids / token_type_ids / attention_mask for the same 20,000 real sentences (Wikipedia dump,
Botchan, polarity corpus). Also reported: how many sentences each transformers tokenizer encodes to the
same ids as ours. WordPiece: ours against `BertTokenizer` / `BertTokenizerFast` (all-MiniLM-L6-v2 vocab).

Without --tokenizer, an 8000-piece vocabulary is trained on the Wikipedia dump first (not timed).
Each figure is the best of --repeat runs (sentences per second, higher is better).
"""

from __future__ import annotations

import argparse
import os
import platform
import sys
import tempfile
import time
from collections.abc import Callable
from pathlib import Path

REPO = Path(__file__).resolve().parents[1]
sys.path.insert(0, str(REPO / "tests" / "fixtures" / "tokenizer"))

import tokenizer_support as ts  # noqa: E402

from albert_lm.tokenizer import AlbertTokenizer, WordPieceTokenizer, load_tokenizer  # noqa: E402
from albert_lm.tokenizer.base import default_num_workers  # noqa: E402


def best_rate(fn: Callable[[], object], n: int, repeat: int) -> float:
    best = float("inf")
    for _ in range(repeat):
        t0 = time.perf_counter()
        fn()
        best = min(best, time.perf_counter() - t0)
    return n / best


def row(name: str, rate: float, ref: float, note: str = "") -> None:
    print(f"  {name:<52} {rate:>11,.0f}/s  {rate / ref:>6.2f}x  {note}")


def main(argv: list[str] | None = None) -> int:
    ap = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    ap.add_argument("--n", type=int, default=20000, help="number of sentences (default 20000)")
    ap.add_argument("--repeat", type=int, default=3, help="runs per measurement, best kept (default 3)")
    ap.add_argument(
        "--tokenizer", type=Path, default=None, help="SentencePiece tokenizer dir (default: train)"
    )
    ap.add_argument("--skip-wordpiece", action="store_true")
    args = ap.parse_args(argv)

    import transformers

    transformers.logging.set_verbosity_error()
    texts = ts.real_sentences(args.n, seed=0)
    n = len(texts)
    print(
        f"{n:,} sentences ({sum(map(len, texts)) / n:.0f} characters on average), {default_num_workers()} cores, "
        f"python {platform.python_version()}, transformers {transformers.__version__}, "
        f"TOKENIZERS_PARALLELISM={os.environ.get('TOKENIZERS_PARALLELISM', '(unset: on)')}"
    )

    with tempfile.TemporaryDirectory() as tmp:
        vocab_dir = args.tokenizer or ts.train_test_vocab(Path(tmp))
        ours = load_tokenizer(vocab_dir)
        assert isinstance(ours, AlbertTokenizer)
        slow = transformers.AlbertTokenizer.from_pretrained(str(vocab_dir))
        fast = transformers.AlbertTokenizerFast.from_pretrained(str(vocab_dir), from_slow=True)

        reference = [e["input_ids"] for e in ours.batch_encode(texts)]
        same_slow = sum(r == s for r, s in zip(reference, slow(texts)["input_ids"]))
        same_fast = sum(r == s for r, s in zip(reference, fast(texts)["input_ids"]))

        print(f"\nSentencePiece ({ours.vocab_size} pieces), input_ids + token_type_ids + attention_mask:")
        r_slow = best_rate(lambda: slow(texts), n, 1)
        r_fast = best_rate(lambda: fast(texts), n, args.repeat)
        print(f"  {'':<52} {'sentences':>13}  {'vs fast':>7}")
        row("transformers AlbertTokenizer (slow)", r_slow, r_fast, f"same ids as ours: {same_slow:,}/{n:,}")
        row("transformers AlbertTokenizerFast", r_fast, r_fast, f"same ids as ours: {same_fast:,}/{n:,}")
        row(
            "albert batch_encode (all cores)",
            best_rate(lambda: ours.batch_encode(texts), n, args.repeat),
            r_fast,
        )
        row(
            "albert batch_encode (num_workers=1)",
            best_rate(lambda: ours.batch_encode(texts, num_workers=1), n, args.repeat),
            r_fast,
        )
        old = ours.process_pool_min_batch
        ours.process_pool_min_batch = 0
        row(
            "albert batch_encode (forced: forked processes)",
            best_rate(lambda: ours.batch_encode(texts), n, args.repeat),
            r_fast,
        )
        ours.process_pool_min_batch = 1 << 60
        row(
            "albert batch_encode (forced: SentencePiece threads)",
            best_rate(lambda: ours.batch_encode(texts), n, args.repeat),
            r_fast,
        )
        ours.process_pool_min_batch = old
        row(
            "albert encode_ids, one text at a time",
            best_rate(lambda: [ours.encode_ids(t) for t in texts], n, args.repeat),
            r_fast,
        )
        r_fast_off = best_rate(lambda: fast(texts, return_offsets_mapping=True), n, args.repeat)
        print("  with character offsets:")
        row("transformers AlbertTokenizerFast (offsets)", r_fast_off, r_fast)
        row(
            "albert batch_encode (return_offsets=True)",
            best_rate(lambda: ours.batch_encode(texts, return_offsets=True), n, args.repeat),
            r_fast,
        )
        pairs = texts[1:] + texts[:1]
        print("  pairs, max_length=64, longest_first, padding to max_length:")
        kw = dict(max_length=64, truncation="longest_first", padding="max_length")
        r_fast_pairs = best_rate(lambda: fast(texts, pairs, **kw), n, args.repeat)  # type: ignore[arg-type]
        row("transformers AlbertTokenizerFast (pairs)", r_fast_pairs, r_fast_pairs)
        row(
            "albert batch_encode (pairs)",
            best_rate(lambda: ours.batch_encode(texts, pairs, **kw), n, args.repeat),  # type: ignore[arg-type]
            r_fast_pairs,
        )

    if not args.skip_wordpiece and ts.MINILM_VOCAB.is_file():
        wp = WordPieceTokenizer(ts.MINILM_VOCAB, max_input_chars_per_word=100)
        bert_slow = transformers.BertTokenizer(str(ts.MINILM_VOCAB))
        bert_fast = transformers.BertTokenizerFast(
            tokenizer_file=str(ts.MINILM_VOCAB.parent / "tokenizer.json")
        )
        ref = [e["input_ids"] for e in wp.batch_encode(texts)]
        same_fast = sum(r == s for r, s in zip(ref, bert_fast(texts)["input_ids"]))
        print(f"\nWordPiece (all-MiniLM-L6-v2 vocab, {wp.vocab_size} entries):")
        r_fast = best_rate(lambda: bert_fast(texts), n, args.repeat)
        row("transformers BertTokenizer (slow)", best_rate(lambda: bert_slow(texts), n, 1), r_fast)
        row("transformers BertTokenizerFast", r_fast, r_fast, f"same ids as ours: {same_fast:,}/{n:,}")
        wp._word_cache.clear()
        row(
            "albert batch_encode (all cores)",
            best_rate(lambda: wp.batch_encode(texts), n, 1),
            r_fast,
            "cold cache",
        )
        row(
            "albert batch_encode (all cores)",
            best_rate(lambda: wp.batch_encode(texts), n, args.repeat),
            r_fast,
        )
        row(
            "albert batch_encode (num_workers=1)",
            best_rate(lambda: wp.batch_encode(texts, num_workers=1), n, args.repeat),
            r_fast,
        )
    return 0


if __name__ == "__main__":
    sys.exit(main())
