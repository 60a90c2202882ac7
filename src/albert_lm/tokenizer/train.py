"""Training a SentencePiece vocabulary with ALBERT's settings (`albert tokenizer train`).

The released ALBERT vocabulary (``30k-clean.model``) was built with (google-research/albert README,
"SentencePiece"):

    spm_train --input all.txt --model_prefix=30k-clean --vocab_size=30000 --logtostderr
      --pad_id=0 --unk_id=1 --eos_id=-1 --bos_id=-1
      --control_symbols=[CLS],[SEP],[MASK]
      --user_defined_symbols="(,),\\",-,.,–,£,€"
      --shuffle_input_sentence=true --input_sentence_size=10000000
      --character_coverage=0.99995 --model_type=unigram

We use the same settings, and in addition:

- every input line goes through the tokenizer's own `preprocess_text` (whitespace, quotes, NFKD,
  lower-casing) first, so the vocabulary is learnt on exactly the text it will later segment;
- the input is streamed through a uniform reservoir sample of ``input_sentence_size`` lines (Vitter's
  algorithm R), so memory is bounded by the sample, not by the corpus. We sample ourselves, with a
  seeded generator, because SentencePiece's own sampler (``shuffle_input_sentence``) is not seeded by
  ``set_random_generator_seed``: with sentencepiece 0.2.3 two processes with the same seed drew two
  different samples, hence two different vocabularies. SentencePiece then gets at most
  ``input_sentence_size`` lines and has nothing left to sample;
- so the same input and settings give the same model bytes.
"""

from __future__ import annotations

import io
import logging
import random
import re
import time
from collections.abc import Callable, Iterable, Iterator, Sequence
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

import sentencepiece as spm

from albert_lm._io import atomic_write_dir, atomic_write_text, recover_dir
from albert_lm.tokenizer.corpus import iter_corpus_lines
from albert_lm.tokenizer.spiece import AlbertTokenizer, preprocess_text

__all__ = ["TrainStats", "train_sentencepiece", "ALBERT_USER_DEFINED_SYMBOLS", "ALBERT_CONTROL_SYMBOLS"]

logger = logging.getLogger(__name__)

# google-research/albert README, spm_train flags of 30k-clean.model
ALBERT_CONTROL_SYMBOLS = ("[CLS]", "[SEP]", "[MASK]")  # ids 2, 3, 4 after <pad>=0, <unk>=1
ALBERT_USER_DEFINED_SYMBOLS = ("(", ")", '"', "-", ".", "\u2013", "\u00a3", "\u20ac")  # ( ) " - . – £ €
ALBERT_CHARACTER_COVERAGE = 0.99995
ALBERT_INPUT_SENTENCE_SIZE = 10_000_000

ProgressFn = Callable[[str], None]


@dataclass
class TrainStats:
    """What `train_sentencepiece` read and wrote."""

    lines_read: int = 0
    lines_used: int = 0
    chars_used: int = 0
    seconds: float = 0.0
    files: list[Path] = field(default_factory=list)


def _preprocessed_lines(
    inputs: Sequence[str | Path],
    do_lower_case: bool,
    keep_accents: bool,
    stats: TrainStats,
    progress: ProgressFn | None,
    every: int,
    text_field: str = "text",
) -> Iterator[str]:
    start = time.monotonic()
    last = start
    for line in iter_corpus_lines(inputs, text_field):
        stats.lines_read += 1
        text = preprocess_text(line, keep_accents=keep_accents, do_lower_case=do_lower_case)
        if text:
            stats.lines_used += 1
            stats.chars_used += len(text)
            yield text
        now = time.monotonic()
        if progress is not None and (stats.lines_read % every == 0 or now - last > 10):
            last = now
            progress(
                f"read {stats.lines_read:,} lines, {stats.chars_used / 1e6:,.1f}M characters "
                f"({stats.lines_read / max(now - start, 1e-9):,.0f} lines/s)"
            )


def reservoir_sample(lines: Iterable[str], k: int, seed: int) -> list[str]:
    """A uniform sample of at most ``k`` lines, in one pass and O(k) memory (Vitter's algorithm R)."""
    rng = random.Random(seed)
    sample: list[str] = []
    for i, line in enumerate(lines):
        if i < k:
            sample.append(line)
        else:
            j = rng.randrange(i + 1)
            if j < k:
                sample[j] = line
    return sample


def train_sentencepiece(
    inputs: Sequence[str | Path],
    output_dir: str | Path,
    *,
    vocab_size: int = 30000,
    do_lower_case: bool = True,
    keep_accents: bool = False,
    model_type: str = "unigram",
    character_coverage: float = ALBERT_CHARACTER_COVERAGE,
    input_sentence_size: int = ALBERT_INPUT_SENTENCE_SIZE,
    user_defined_symbols: Iterable[str] = ALBERT_USER_DEFINED_SYMBOLS,
    seed: int = 12345,
    num_threads: int = 1,
    max_sentence_length: int = 8192,
    progress: ProgressFn | None = None,
    progress_every: int = 100_000,
    sentencepiece_log: bool = False,
    overwrite: bool = False,
    text_field: str = "text",
) -> tuple[AlbertTokenizer, TrainStats]:
    """Trains a SentencePiece model with ALBERT's settings and writes a tokenizer directory; returns the
    trained tokenizer (loaded from ``output_dir``) and what was read.

    Args:
        inputs: text files (one sentence or paragraph per line; ``.gz``/``.bz2``/``.xz`` are read
            transparently), MediaWiki XML dumps (``*.xml``, ``*.xml.bz2``), JSONL / Parquet / Arrow files
            and ``datasets`` directories (the text of each row's ``text_field``; `iter_corpus_lines`).
        output_dir: receives ``spiece.model``, ``spiece.vocab`` and the two tokenizer JSON files.
        vocab_size: number of pieces, special tokens included (30000 for ALBERT).
        do_lower_case: lower-case the text (the released ALBERT models are uncased).
        keep_accents: keep combining accents (skip NFKD and their removal).
        model_type: ``unigram`` (ALBERT) or ``bpe``.
        character_coverage: fraction of characters covered by the vocabulary; rarer ones map to <unk>.
        input_sentence_size: size of the uniform sample of input lines used for training (0: all).
        user_defined_symbols: pieces always kept whole.
        seed: SentencePiece's random seed (the sample, the seed-piece shuffle).
        num_threads: training threads. 1 keeps the result independent of the machine.
        max_sentence_length: longer lines (in bytes) are skipped by SentencePiece.
        progress: called with one-line progress messages, every ``progress_every`` input lines.
        sentencepiece_log: let SentencePiece print its own (verbose) training log to stderr.
        overwrite: replace a non-empty ``output_dir``, atomically (a failure leaves the old one whole).

    Raises:
        ValueError: no usable text, a vocabulary larger than the corpus supports, bad input files.
        FileExistsError, NotADirectoryError: ``output_dir`` is not empty (without ``overwrite``), or a file.
    """
    symbols = list(user_defined_symbols)
    if vocab_size < 6 + len(symbols):
        raise ValueError(f"vocab_size={vocab_size} is too small for the special and user-defined symbols")
    out = Path(output_dir)
    check_output_dir(out, overwrite)  # before the (long) training, not after
    stats = TrainStats()
    t0 = time.monotonic()
    lines = _preprocessed_lines(
        inputs, do_lower_case, keep_accents, stats, progress, progress_every, text_field
    )
    sample = reservoir_sample(lines, input_sentence_size, seed) if input_sentence_size > 0 else list(lines)
    if progress is not None:
        progress(
            f"read {stats.lines_read:,} lines ({stats.chars_used:,} characters); training a {model_type} "
            f"model of {vocab_size:,} pieces on {len(sample):,} of them"
        )
    flags = {
        "model_type": model_type, "vocab_size": vocab_size, "character_coverage": character_coverage,
        "user_defined_symbols": symbols, "input_sentence_size": input_sentence_size,
        "max_sentence_length": max_sentence_length, "num_threads": num_threads,
        "minloglevel": 0 if sentencepiece_log else 2,
    }  # fmt: skip
    model = _train_model(sample, flags, seed, inputs, stats)
    stats.seconds = time.monotonic() - t0
    tok = AlbertTokenizer.from_bytes(
        model, source=str(out / "spiece.model"), do_lower_case=do_lower_case, keep_accents=keep_accents
    )
    stats.files = _write_directory(tok, out)
    if progress is not None:
        progress(
            f"trained a {model_type} vocabulary of {tok.vocab_size:,} pieces on {stats.lines_used:,} lines "
            f"in {stats.seconds:.1f}s -> {out}"
        )
    return tok, stats


def _write_directory(tok: AlbertTokenizer, out: Path) -> list[Path]:
    """The tokenizer directory, written next to ``out`` and renamed over it (an old one stays whole until
    the new one is complete); returns the paths of its files."""
    written: list[Path] = []

    def write(d: Path) -> None:
        written.extend([*tok.save_pretrained(d), _write_vocab_file(tok, d / "spiece.vocab")])

    out.parent.mkdir(parents=True, exist_ok=True)
    atomic_write_dir(out, write)
    return [out / p.name for p in written]


def check_output_dir(out: Path, overwrite: bool) -> None:
    """Refuse to write into an existing non-empty directory (a previous vocabulary, someone's files)
    unless ``overwrite``; a file in its place is refused either way. An earlier write killed between its
    renames is finished first (`albert_lm._io.recover_dir`), so that the check sees what is there."""
    recover_dir(out)
    if out.exists() and not out.is_dir():
        raise NotADirectoryError(f"{out}: exists and is not a directory")
    if overwrite or not out.is_dir():
        return
    entries = sorted(p.name for p in out.iterdir())
    if entries:
        shown = ", ".join(entries[:4]) + (", ..." if len(entries) > 4 else "")
        raise FileExistsError(
            f"{out}: exists and is not empty ({shown}); pass --overwrite to replace it, or choose another --output"
        )


def _train_model(
    sample: list[str], flags: dict[str, Any], seed: int, inputs: Sequence[str | Path], stats: TrainStats
) -> bytes:
    """The serialized model SentencePiece trains on ``sample`` with ALBERT's fixed flags (module docstring)
    plus ``flags``; its errors become ``ValueError``s that say what to change."""
    model = io.BytesIO()
    spm.set_random_generator_seed(seed)
    try:
        spm.SentencePieceTrainer.train(
            sentence_iterator=iter(sample),
            model_writer=model,
            pad_id=0,
            unk_id=1,
            bos_id=-1,
            eos_id=-1,
            pad_piece="<pad>",
            unk_piece="<unk>",
            control_symbols=list(ALBERT_CONTROL_SYMBOLS),
            shuffle_input_sentence=True,
            **flags,
        )
    except RuntimeError as e:
        msg = str(e).strip()
        if stats.lines_used == 0:
            raise ValueError(f"no text in {', '.join(map(str, inputs))}") from None
        if "Vocabulary size" in msg or "vocab_size" in msg:
            raise ValueError(_vocab_size_advice(msg, flags["vocab_size"], stats)) from None
        raise ValueError(f"SentencePiece training failed: {msg}") from None
    return model.getvalue()


def _vocab_size_advice(msg: str, vocab_size: int, stats: TrainStats) -> str:
    """SentencePiece's vocabulary-size refusal, said the right way round: too small for the characters it
    must keep (``required_chars``), or too large for the pieces the corpus has."""
    corpus = f"this corpus ({stats.lines_used:,} lines, {stats.chars_used:,} characters)"
    small = re.search(r"smaller than required_chars\. (\d+) vs (\d+)", msg)
    if small:
        return (
            f"vocab_size={vocab_size} is too small for {corpus}: its characters alone need "
            f"{small.group(2)} ids (with the special tokens); raise vocab_size or lower character_coverage"
        )
    large = re.search(r"too high \((\d+)\)\. Please set it to a value <= (\d+)", msg)
    if large:
        return f"vocab_size={vocab_size} is too large for {corpus}: at most {large.group(2)} pieces fit"
    return f"vocab_size={vocab_size} does not fit {corpus}: {msg}"


def _write_vocab_file(tok: AlbertTokenizer, path: Path) -> Path:
    """``piece <TAB> score`` per line, as spm_train writes its ``.vocab``."""
    lines = (f"{tok.sp.id_to_piece(i)}\t{tok.sp.get_score(i):g}\n" for i in range(tok.vocab_size))
    atomic_write_text(path, "".join(lines))
    return path
