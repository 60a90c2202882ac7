"""`albert tokenizer`: train a SentencePiece vocabulary with ALBERT's settings; inspect a tokenizer."""

from __future__ import annotations

import argparse
import json
import sys

HELP = "train a SentencePiece vocabulary (ALBERT's settings) or inspect a tokenizer"
DESCRIPTION = """\
albert tokenizer train --input FILES... --vocab-size 30000 --output DIR
    Trains a SentencePiece unigram model as the released ALBERT vocabulary was trained (pad 0, unk 1,
    [CLS] [SEP] [MASK] at 2-4, no bos/eos, user-defined symbols ( ) " - . – £ €, character coverage
    0.99995, a uniform sample of at most 10M input lines, fixed seed) and writes a tokenizer directory
    (spiece.model, tokenizer_config.json, special_tokens_map.json) that `albert` and
    transformers.AlbertTokenizer.from_pretrained both read. Inputs: UTF-8 text files, one sentence or
    paragraph per line (.gz/.bz2/.xz are decompressed), or MediaWiki XML dumps (*.xml, *.xml.bz2).
    An existing non-empty DIR is an error unless --overwrite, which replaces it atomically.

albert tokenizer encode DIR TEXT [TEXT_PAIR]
    Prints the tokens, ids and character spans of TEXT (and TEXT_PAIR) as JSON lines.
"""


def add_arguments(parser: argparse.ArgumentParser) -> None:
    from albert_lm.cli.options import add_subcommands, runs

    sub = add_subcommands(parser, "SUBCOMMAND")

    t = sub.add_parser("train", help="train a SentencePiece vocabulary with ALBERT's settings")
    t.add_argument(
        "--input",
        nargs="+",
        required=True,
        metavar="FILE",
        help="text files, MediaWiki XML dumps, or JSONL / Parquet / Arrow files and datasets directories "
        "(their --text-field)",
    )
    t.add_argument(
        "--text-field",
        default="text",
        help="the field holding the text in JSONL / Parquet rows (default text)",
    )
    t.add_argument(
        "--vocab-size", type=int, default=30000, help="number of pieces (default: 30000, as ALBERT)"
    )
    t.add_argument("--output", required=True, metavar="DIR", help="tokenizer directory to write")
    t.add_argument(
        "--overwrite",
        action="store_true",
        help="replace an existing non-empty --output (atomically: the old one stays whole until the new is "
        "complete)",
    )
    t.add_argument(
        "--cased", action="store_true", help="do not lower-case (the released ALBERTs are uncased)"
    )
    t.add_argument("--keep-accents", action="store_true", help="keep combining accents (no NFKD stripping)")
    t.add_argument("--model-type", choices=("unigram", "bpe"), default="unigram", help="default: unigram")
    t.add_argument("--character-coverage", type=float, default=0.99995, help="default: 0.99995 (ALBERT)")
    t.add_argument(
        "--input-sentence-size",
        type=int,
        default=10_000_000,
        help="train on a uniform sample of this many input lines (default: 10M, as ALBERT)",
    )
    t.add_argument(
        "--user-defined-symbols",
        default=None,
        metavar="LIST",
        help='comma-separated pieces always kept whole (default: ALBERT\'s ( ) " - . – £ €); "" for none',
    )
    t.add_argument("--seed", type=int, default=12345, help="random seed (default: 12345)")
    t.add_argument("--threads", type=int, default=1, help="training threads (default: 1, reproducible)")
    t.add_argument(
        "--progress",
        action=argparse.BooleanOptionalAction,
        default=True,
        help="progress output (default: on)",
    )
    t.add_argument("--quiet", dest="progress", action="store_false", help=argparse.SUPPRESS)  # old spelling
    t.add_argument("--sentencepiece-log", action="store_true", help="show SentencePiece's own training log")
    runs(t, _run_train)

    e = sub.add_parser("encode", help="print the tokens, ids and spans of a text")
    e.add_argument("tokenizer", metavar="DIR", help="tokenizer directory or vocabulary file")
    e.add_argument("text", help="the text to encode")
    e.add_argument("text_pair", nargs="?", help="a second text: encoded as the pair [CLS] a [SEP] b [SEP]")
    e.add_argument(
        "--max-seq-length", "--max-length", dest="max_length", type=int, help="truncate to this many tokens"
    )
    runs(e, _run_encode)


def _run_train(args: argparse.Namespace) -> int:
    from albert_lm.tokenizer.train import ALBERT_USER_DEFINED_SYMBOLS, train_sentencepiece

    if args.user_defined_symbols is None:
        symbols: tuple[str, ...] = ALBERT_USER_DEFINED_SYMBOLS
    else:
        symbols = tuple(s for s in args.user_defined_symbols.split(",") if s)

    from albert_lm._locks import guard_output

    def progress(msg: str) -> None:
        print(msg, file=sys.stderr, flush=True)

    # errors (unreadable input, a used --output, ...) are raised: `albert_lm.cli.main` prints them as one
    # line and exits 1
    with guard_output(args.output, {"--input": args.input}, args.overwrite):  # one writer; no input deleted
        tok, stats = train_sentencepiece(
            args.input,
            args.output,
            vocab_size=args.vocab_size,
            do_lower_case=not args.cased,
            keep_accents=args.keep_accents,
            model_type=args.model_type,
            character_coverage=args.character_coverage,
            input_sentence_size=args.input_sentence_size,
            user_defined_symbols=symbols,
            seed=args.seed,
            num_threads=args.threads,
            progress=progress if args.progress else None,
            sentencepiece_log=args.sentencepiece_log,
            overwrite=args.overwrite,
            text_field=args.text_field,
        )
    for f in stats.files:
        print(f)
    return 0


def _run_encode(args: argparse.Namespace) -> int:
    from albert_lm.tokenizer import load_tokenizer

    tok = load_tokenizer(args.tokenizer)
    enc = tok.encode(args.text, args.text_pair, max_length=args.max_length, return_offsets=True)
    texts = (args.text, args.text_pair)
    for i, (tid, span, seq) in enumerate(zip(enc["input_ids"], enc["offsets"], enc["sequence_ids"])):
        row = {"i": i, "id": tid, "token": tok.id_to_piece(tid), "type": enc["token_type_ids"][i]}
        if span is not None and seq is not None:
            source = texts[seq] or ""
            row["span"] = list(span)
            row["text"] = source[span[0] : span[1]]
        print(json.dumps(row, ensure_ascii=False))
    return 0
