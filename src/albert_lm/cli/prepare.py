"""`albert prepare`: corpus files -> DATA_DIR of tokenized shards with SOP/NSP instances and masks."""

from __future__ import annotations

import argparse
from pathlib import Path
from typing import TYPE_CHECKING

if TYPE_CHECKING:  # the library loads in the functions: `albert --help` stays fast
    from albert_lm.data.pipeline import PrepareConfig

HELP = "tokenize a corpus into pretraining shards (SOP/NSP pairs, n-gram masks)"
DESCRIPTION = """Tokenize a corpus into memory-mappable shards with sentence-pair instances and masked-LM
predictions, as google-research/albert create_pretraining_data.py makes them, but streaming, on N cores and
reproducible to the bit.

  albert prepare --input wiki.xml.bz2 --tokenizer vocab/ --output data/pretrain
  albert prepare --input a.txt b.txt --tokenizer spiece.model --output d --max-seq-length 128 --workers 2
  albert prepare ... --shard-index 0 --num-shards 4        # machine 0 of 4; the last one writes the manifest
  albert prepare --merge d                                 # or merge the parts explicitly
  albert prepare --input news.jsonl --tokenizer vocab.txt --language chinese --output d   # jieba whole words

Input formats (--format, default by file name): lines (one sentence per line, blank line between documents:
the original's), text (a file is a document), jsonl (a "text" field per line), wiki (MediaWiki XML dump),
parquet / arrow / datasets (a row per document, its --text-field).
Bad lines / documents are skipped and counted in the manifest (--strict: stop at the first, naming file and
line); more than --max-skip-fraction (10%) unreadable lines is an error naming the first. Rerunning into the
same --output with the same inputs and settings resumes: complete shards are kept, the rest rebuilt. Other
inputs, settings or tokenizer in an existing DATA_DIR, or a non-empty directory that is not one, are errors
unless --overwrite (which deletes the old manifests and shards first).
"""


def add_arguments(p: argparse.ArgumentParser) -> None:
    from albert_lm.data.pipeline import PrepareConfig

    d = PrepareConfig()
    _io_arguments(p, d)
    _instance_arguments(p, d)
    _masking_arguments(p, d)
    _execution_arguments(p, d)
    # "--merge, or all of --input --tokenizer --output" is beyond argparse's groups; `run` checks it and
    # raises a UsageError, which `albert_lm.cli.main` reports as argparse does (usage, `albert prepare:
    # error: ...`, exit 2)


def _io_arguments(p: argparse.ArgumentParser, d: PrepareConfig) -> None:
    from albert_lm.data.pipeline import DEFAULT_MAX_SKIP_FRACTION

    io = p.add_argument_group("input and output")
    io.add_argument("--input", nargs="+", type=Path, metavar="FILE", help="corpus files")
    io.add_argument("--tokenizer", help="tokenizer directory or file (spiece.model / vocab.txt)")
    io.add_argument("--output", type=Path, metavar="DATA_DIR", help="where the shards and manifest go")
    io.add_argument(
        "--format",
        dest="input_format",
        default=d.input_format,
        choices=["auto", "lines", "text", "jsonl", "wiki", "parquet", "arrow", "datasets"],
        help="lines: a sentence per line, a blank line between documents (the original's); text: a file per "
        'document; jsonl: {"text": ...} per line; wiki: a MediaWiki XML dump; parquet, arrow, datasets (a '
        "save_to_disk directory): a row per document; auto (default): by file name",
    )
    io.add_argument(
        "--language",
        default=d.language,
        help="a Punkt language (sentence splitting), auto, or chinese: sentences end at 。！？, whole-word "
        "masking over jieba words, and a WordPiece vocab.txt is required (the Chinese ALBERT checkpoints')",
    )
    io.add_argument(
        "--text-field",
        "--jsonl-key",
        dest="jsonl_key",
        default=d.jsonl_key,
        help="the field with the document text in JSONL / Parquet / Arrow rows (default text)",
    )
    io.add_argument(
        "--max-line-bytes", type=int, default=d.max_line_bytes, help="skip (and count) longer lines"
    )
    io.add_argument(
        "--max-doc-chars", type=int, default=d.max_doc_chars, help="text format: cut longer documents"
    )
    io.add_argument("--strict", action="store_true", help="stop at the first bad line instead of skipping it")
    io.add_argument(
        "--max-skip-fraction",
        type=float,
        default=DEFAULT_MAX_SKIP_FRACTION,
        help="fail, naming the first bad file:line, when more than this fraction of the input lines are "
        f"unreadable (default {DEFAULT_MAX_SKIP_FRACTION}; 1.0: never)",
    )
    io.add_argument(
        "--overwrite",
        action="store_true",
        help="delete an existing DATA_DIR's manifests and shards first (other inputs, settings or tokenizer)",
    )
    io.add_argument(
        "--merge", type=Path, metavar="DATA_DIR", help="only merge the part manifests of DATA_DIR"
    )


def _instance_arguments(p: argparse.ArgumentParser, d: PrepareConfig) -> None:
    inst = p.add_argument_group("instances (defaults: the original's flags)")
    inst.add_argument(
        "--max-seq-length", type=int, default=d.max_seq_length,
        help=f"tokens per instance; pretraining runs at this length (default {d.max_seq_length})",
    )  # fmt: skip
    inst.add_argument(
        "--short-seq-prob", type=float, default=d.short_seq_prob,
        help=f"share of instances built shorter than --max-seq-length (default {d.short_seq_prob})",
    )  # fmt: skip
    inst.add_argument(
        "--short-seq-scope", choices=["instance", "document"], default=d.short_seq_scope,
        help="draw the short target per instance (default) or once per document as the original",
    )  # fmt: skip
    inst.add_argument(
        "--sentence-task",
        "--task",
        dest="task",
        choices=["sop", "nsp"],
        default=d.task,
        help="sentence-order (ALBERT) or next-sentence (BERT)",
    )
    inst.add_argument(
        "--dupe-factor",
        type=int,
        default=None,
        help=f"passes over the data (default {d.dupe_factor} static, 1 dynamic)",
    )


def _masking_arguments(p: argparse.ArgumentParser, d: PrepareConfig) -> None:
    m = p.add_argument_group("masking")
    m.add_argument(
        "--masking",
        choices=["static", "dynamic"],
        default=d.masking,
        help="pre-generate masks, or mask per epoch at training time",
    )
    m.add_argument(
        "--masked-lm-prob", type=float, default=d.masked_lm_prob,
        help=f"share of tokens masked (default {d.masked_lm_prob})",
    )  # fmt: skip
    m.add_argument(
        "--max-predictions-per-seq", type=int, default=d.max_predictions_per_seq,
        help=f"most masked positions per instance (default {d.max_predictions_per_seq})",
    )  # fmt: skip
    m.add_argument("--ngram", type=int, default=d.ngram, help="longest masked n-gram, in words")
    m.add_argument(
        "--no-favor-shorter-ngram",
        dest="favor_shorter_ngram",
        action="store_false",
        help="p(n) ∝ 1/(ngram+1-n) instead of 1/n",
    )
    m.add_argument(
        "--no-whole-word", dest="whole_word", action="store_false", help="mask pieces, not whole words"
    )
    m.add_argument(
        "--zh-whole-word",
        action=argparse.BooleanOptionalAction,
        default=None,
        help="whole-word masking of Chinese words (jieba); default: on with --language chinese",
    )


def _execution_arguments(p: argparse.ArgumentParser, d: PrepareConfig) -> None:
    run_g = p.add_argument_group("execution")
    run_g.add_argument(
        "--seed", type=int, default=d.seed, help=f"random seed of pairing and masking (default {d.seed})"
    )
    run_g.add_argument("--workers", type=int, default=1, help="processes")
    run_g.add_argument("--shard-chars", type=int, default=d.shard_chars, help="characters of text per shard")
    run_g.add_argument("--shard-index", type=int, default=0, help="this machine's index (with --num-shards)")
    run_g.add_argument("--num-shards", type=int, default=1, help="machines sharing the work")


def run(args: argparse.Namespace) -> int:
    from albert_lm._locks import guard_output
    from albert_lm.cli.options import UsageError
    from albert_lm.data.pipeline import PrepareConfig, merge_parts, prepare

    # errors of the data or the settings are raised: `albert_lm.cli.main` prints them as one line, exit 1
    if args.merge:
        manifest = merge_parts(args.merge)
        print(
            f"{args.merge}/manifest.json: {len(manifest['shards'])} shards, {manifest['counts']['instances']} instances"
        )
        return 0
    missing = [f"--{n}" for n in ("input", "tokenizer", "output") if not getattr(args, n)]
    if missing:
        raise UsageError(f"missing {', '.join(missing)} (or --merge DATA_DIR)")
    dupe = args.dupe_factor
    if dupe is None:
        dupe = PrepareConfig.dupe_factor if args.masking == "static" else 1
    cfg = PrepareConfig(
        max_seq_length=args.max_seq_length,
        short_seq_prob=args.short_seq_prob,
        short_seq_scope=args.short_seq_scope,
        task=args.task,
        masked_lm_prob=args.masked_lm_prob,
        max_predictions_per_seq=args.max_predictions_per_seq,
        ngram=args.ngram,
        favor_shorter_ngram=args.favor_shorter_ngram,
        whole_word=args.whole_word,
        zh_whole_word=args.zh_whole_word,
        masking=args.masking,
        dupe_factor=dupe,
        seed=args.seed,
        shard_chars=args.shard_chars,
        input_format=args.input_format,
        language=args.language,
        jsonl_key=args.jsonl_key,
        max_line_bytes=args.max_line_bytes,
        max_doc_chars=args.max_doc_chars,
    )
    part = (
        f"part-{args.shard_index}-of-{args.num_shards}" if args.num_shards > 1 else ""
    )  # parts: one lock each
    with guard_output(
        args.output, {"--input": args.input, "--tokenizer": args.tokenizer}, args.overwrite, part=part
    ):
        result = prepare(
            args.input, args.tokenizer, args.output, cfg,
            workers=args.workers, shard_index=args.shard_index, num_shards=args.num_shards,
            overwrite=args.overwrite, strict=args.strict, max_skip_fraction=args.max_skip_fraction,
        )  # fmt: skip
    counts = result.get("counts")
    if counts:
        skipped = result.get("skipped") or {}
        print(
            f"{args.output}: {len(result['shards'])} shards, {counts['documents']} documents, {counts['tokens']} tokens, "
            f"{counts['instances']} instances" + (f"; skipped: {skipped}" if skipped else "")
        )
    else:
        print(
            f"{args.output}: part {args.shard_index} of {args.num_shards}: {len(result['shards'])} shards written"
        )
    return 0
