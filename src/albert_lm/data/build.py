"""One shard of ``albert prepare``: its documents -> sentences -> token ids -> SOP/NSP instances -> static
masks -> one file, written atomically.

A shard's bytes are a pure function of its documents, the tokenizer and :class:`PrepareConfig`: every random
draw comes from a generator seeded by (seed, global document index, dupe), so it does not matter which
process or machine builds it. :mod:`albert_lm.data.pipeline` cuts the document stream into shard jobs and runs
them; the on-disk format is :mod:`albert_lm.data.shards`.
"""

from __future__ import annotations

import hashlib
import logging
import os
import shutil
import tempfile
import time
from array import array
from collections import Counter
from collections.abc import Sequence
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any, Literal

import numpy as np

from albert_lm.data.documents import (
    DEFAULT_MAX_DOC_CHARS,
    DEFAULT_MAX_LINE_BYTES,
    DataError,
    Document,
    SentenceSplitter,
)
from albert_lm.data.instances import (
    FLAG_LABEL,
    INSTANCE_DTYPE,
    STREAM_PAIRS,
    STREAM_STATIC_MASKS,
    DocumentIndex,
    InstanceConfig,
    create_instances_from_document,
    derive_rng,
    instance_token_ids,
    instance_word_starts,
)
from albert_lm.data.masking import MaskingConfig, MaskRng, create_masked_lm_predictions
from albert_lm.data.shards import (
    TMP_PREFIX,
    SectionSpool,
    sampled_sha256,
    shard_entry,
    shard_name,
    start_table_from_info,
    token_dtype,
    write_shard,
)
from albert_lm.tokenizer.wordpiece import is_cjk_codepoint

logger = logging.getLogger(__name__)

# A section of a shard: a spool being written, or a finished (name, array).
Section = SectionSpool | tuple[str, np.ndarray]

# The language setting that switches on the Chinese defaults: sentences end at 。！？ (SentenceSplitter),
# whole-word masking over jieba words, and a WordPiece vocabulary (check_language_tokenizer).
CHINESE = "chinese"


def check_language_tokenizer(cfg: PrepareConfig, tok: Any) -> None:
    """Chinese data needs a WordPiece vocabulary: the released Chinese ALBERT checkpoints (Google's
    albert_*_zh, brightmart/albert_zh) all use BERT's Chinese ``vocab.txt`` (21128 entries), one piece per
    character, and a SentencePiece model in their place is the most reported Chinese mistake upstream
    (google-research/albert#53, huggingface/transformers#2530).

    Raises:
        DataError: ``cfg.language`` is Chinese and ``tok`` is not a WordPiece tokenizer.
    """
    kind = getattr(tok, "kind", None)
    if cfg.language == CHINESE and kind != "wordpiece":
        raise DataError(
            f"--language chinese needs a WordPiece vocabulary (vocab.txt, as the Chinese ALBERT/BERT checkpoints: "
            f"21128 entries), got a {kind} tokenizer ({getattr(tok, 'source', tok)})"
        )


@dataclass(frozen=True)
class PrepareConfig:
    """Everything that decides the bytes of a DATA_DIR (besides the input and the tokenizer)."""

    # the pairing and masking settings, with the defaults (the original's flags) of their own configs
    max_seq_length: int = InstanceConfig.max_seq_length
    short_seq_prob: float = InstanceConfig.short_seq_prob
    short_seq_scope: Literal["instance", "document"] = InstanceConfig.short_seq_scope
    task: Literal["sop", "nsp"] = InstanceConfig.task
    masked_lm_prob: float = MaskingConfig.masked_lm_prob
    max_predictions_per_seq: int = MaskingConfig.max_predictions_per_seq
    ngram: int = MaskingConfig.ngram
    favor_shorter_ngram: bool = MaskingConfig.favor_shorter_ngram
    whole_word: bool = MaskingConfig.whole_word
    # Group Chinese characters into jieba words for whole-word masking, as brightmart/albert_zh
    # create_pretraining_data.py (get_new_segment) and the Chinese BERT-wwm models; None: on exactly when
    # language is "chinese".
    zh_whole_word: bool | None = None
    masking: Literal["static", "dynamic"] = "static"
    dupe_factor: int = 40  # original: dupe_factor (use 1 with dynamic masking)
    seed: int = 12345  # original: random_seed
    shard_chars: int = 4_000_000
    input_format: str = "auto"
    language: str = "english"
    jsonl_key: str = "text"
    max_line_bytes: int = DEFAULT_MAX_LINE_BYTES
    max_doc_chars: int = DEFAULT_MAX_DOC_CHARS

    def __post_init__(self) -> None:
        if self.zh_whole_word is None:
            object.__setattr__(self, "zh_whole_word", self.language == CHINESE)
        self.instance_config()
        self.masking_config()
        if self.masking not in ("static", "dynamic"):
            raise ValueError(f"masking must be 'static' or 'dynamic', got {self.masking!r}")
        if self.dupe_factor < 1:
            raise ValueError(f"dupe_factor must be >= 1, got {self.dupe_factor}")
        if self.shard_chars < 1:
            raise ValueError(f"shard_chars must be >= 1, got {self.shard_chars}")
        if self.max_seq_length > 65535:
            raise ValueError("max_seq_length must fit in 16 bits (mask positions are stored as u2)")

    def instance_config(self) -> InstanceConfig:
        return InstanceConfig(self.max_seq_length, self.short_seq_prob, self.short_seq_scope, self.task)

    def masking_config(self) -> MaskingConfig:
        return MaskingConfig(
            self.masked_lm_prob,
            self.max_predictions_per_seq,
            self.ngram,
            self.favor_shorter_ngram,
            self.whole_word,
        )


def load_tokenizer_arg(tokenizer: Any) -> Any:
    """A tokenizer object: ``tokenizer`` itself, or loaded from a tokenizer directory / file path."""
    if isinstance(tokenizer, (str, os.PathLike)):
        from albert_lm.tokenizer import load_tokenizer

        return load_tokenizer(os.fspath(tokenizer))
    return tokenizer


@dataclass
class ShardJob:
    """One shard's worth of documents, cut from the stream."""

    index: int
    first_document: int  # global index (reading order) of docs[0]
    docs: list[Document]
    source_sha256: str


def source_hash(docs: Sequence[Document]) -> str:
    """sha256 of the text a shard is built from (a reused shard must have been built from the same)."""
    h = hashlib.sha256()
    for d in docs:
        h.update(b"\x1d" if d.presplit else b"\x1c")
        for u in d.units:
            h.update(u.encode("utf-8"))
            h.update(b"\x1e")
    return h.hexdigest()


@dataclass
class ShardContext:
    """Per-process state for building shards."""

    cfg: PrepareConfig
    out_dir: Path
    tok: Any
    tok_info: dict[str, Any]
    cfg_hash: str
    splitter: SentenceSplitter = field(init=False)
    start_table: np.ndarray = field(init=False)
    jieba: Any = None

    def __post_init__(self) -> None:
        self.splitter = SentenceSplitter(self.cfg.language)
        self.start_table = start_table_from_info(self.tok_info)
        if self.cfg.zh_whole_word:
            try:
                import jieba
            except ImportError as e:  # pragma: no cover - depends on the environment
                raise DataError("zh_whole_word needs jieba: pip install 'albert-lm[zh]'") from e
            jieba.setLogLevel(logging.WARNING)
            self.jieba = jieba


# ------------------------------------------------------------------------------------------ tokenization


def _encode_sentences(tok: Any, sentences: list[str]) -> list[list[int]]:
    """``tok.encode_ids`` of each sentence, in one batched call per document (``encode_ids`` one sentence at
    a time costs about four times as much: each call pays the batch path's overhead)."""
    return [list(x) for x in tok.encode_ids_batch(sentences)] if sentences else []


def _zh_word_starts(ctx: ShardContext, sentence: str) -> tuple[list[int], list[bool]]:
    """Token ids of a sentence and, per token, whether it starts a jieba word (whole-word masking for Chinese).

    A token starts a word if its piece is a start piece (the vocabulary rule) and, when it is a CJK
    character, it sits at the start of a jieba word -- the same grouping the Chinese BERT-wwm recipe does with
    ``##`` marks.
    """
    ids, offsets = ctx.tok.encode_with_offsets(sentence)
    word_starts = {start for _, start, _ in ctx.jieba.tokenize(sentence)}
    flags = []
    for tid, (s, e) in zip(ids, offsets):
        start = bool(ctx.start_table[tid])
        if start and s < e and is_cjk_codepoint(ord(sentence[s])):
            start = s in word_starts
        flags.append(start)
    return list(ids), flags


@dataclass
class _Tokenized:
    """A shard's documents as token ids: the arrays the instances point into, and their sections."""

    tokens: np.ndarray  # every kept sentence's ids, back to back
    word_start: np.ndarray | None  # per token: starts a jieba word (zh_whole_word only)
    index: DocumentIndex
    doc_keys: list[int]  # global document index of each kept document (its RNG key)
    skipped: Counter[str]
    sections: list[Section]  # tokens, sent_offsets, doc_offsets[, word_start]


def _tokenize(job: ShardJob, ctx: ShardContext, tmp: Path) -> _Tokenized:
    """Split each document into sentences and tokenize them; documents left without tokens are skipped."""
    tokens = SectionSpool(tmp, "tokens", token_dtype(ctx.tok_info["vocab_size"]))
    word_start = SectionSpool(tmp, "word_start", "u1") if ctx.cfg.zh_whole_word else None
    sent_offsets = array("q", [0])
    doc_offsets = array("q", [0])
    doc_keys: list[int] = []
    skipped: Counter[str] = Counter()
    n_tok = 0
    for k, doc in enumerate(job.docs):
        n_sent_before = len(sent_offsets)
        sentences = ctx.splitter.sentences(doc)
        encoded = _encode_sentences(ctx.tok, sentences) if word_start is None else None
        for j, sentence in enumerate(sentences):
            if word_start is not None:
                ids, starts = _zh_word_starts(ctx, sentence)
            else:
                assert encoded is not None
                ids = encoded[j]
            if not ids:
                continue  # original: a line with no tokens is dropped
            tokens.append(ids)
            if word_start is not None:
                word_start.append(starts)
            n_tok += len(ids)
            sent_offsets.append(n_tok)
        if len(sent_offsets) == n_sent_before:
            skipped["empty_documents_after_tokenization"] += 1
            continue
        doc_offsets.append(len(sent_offsets) - 1)
        doc_keys.append(job.first_document + k)
    index = DocumentIndex(
        np.frombuffer(sent_offsets, dtype=np.int64), np.frombuffer(doc_offsets, dtype=np.int64)
    )
    sections: list[Section] = [
        tokens,
        ("sent_offsets", index.sent_offsets),
        ("doc_offsets", index.doc_offsets),
    ]
    if word_start is not None:
        sections.append(word_start)
    ws_arr = word_start.memmap() if word_start is not None else None
    return _Tokenized(tokens.memmap(), ws_arr, index, doc_keys, skipped, sections)


# ----------------------------------------------------------------------------------- instances and masks


class _InstanceWriter:
    """Spools a shard's instances and, with static masking, their masks; counts what it wrote."""

    def __init__(self, ctx: ShardContext, tokd: _Tokenized, tmp: Path) -> None:
        self.ctx, self.tokd = ctx, tokd
        self.static = ctx.cfg.masking == "static"
        self.icfg = ctx.cfg.instance_config()
        self.mcfg = ctx.cfg.masking_config()
        self.cdf = self.mcfg.ngram_cdf()
        self.instances = SectionSpool(tmp, "instances", INSTANCE_DTYPE)
        self.mask_offsets = array("q", [0])
        self.mask_pos = SectionSpool(tmp, "mask_positions", "<u2")
        self.mask_inp = SectionSpool(tmp, "mask_inputs", token_dtype(ctx.tok_info["vocab_size"]))
        self.mask_info = SectionSpool(tmp, "mask_info", "u1")
        self.n_inst = self.n_label = self.n_masked = 0

    def add_document(self, d: int, dupe: int) -> None:
        """The instances of document ``d`` in pass ``dupe`` (and their masks)."""
        cfg = self.ctx.cfg
        key = self.tokd.doc_keys[d]
        recs = create_instances_from_document(
            self.tokd.index, d, self.icfg, derive_rng(cfg.seed, STREAM_PAIRS, key, dupe)
        )
        if not recs:
            return
        self.instances.append(np.array(recs, dtype=INSTANCE_DTYPE))
        self.n_inst += len(recs)
        self.n_label += sum(1 for r in recs if r[5] & FLAG_LABEL)
        if self.static:
            mrng = MaskRng.from_key(cfg.seed, STREAM_STATIC_MASKS, key, dupe)
            for r in recs:
                self._mask(r, mrng)

    def _mask(self, rec: tuple[int, ...], rng: MaskRng) -> None:
        info, tokd = self.ctx.tok_info, self.tokd
        seq, _ = instance_token_ids(tokd.tokens, rec, info["cls_id"], info["sep_id"])
        ws = tokd.word_start
        is_start = self.ctx.start_table[seq] if ws is None else instance_word_starts(ws, rec)
        m = create_masked_lm_predictions(
            seq, is_start, cfg=self.mcfg, special_ids=(info["cls_id"], info["sep_id"]),
            mask_id=info["mask_id"], vocab_size=info["vocab_size"], rng=rng, cdf=self.cdf,
        )  # fmt: skip
        self.mask_pos.append(m.positions)
        self.mask_inp.append(m.input_ids)
        self.mask_info.append(m.info)
        self.n_masked += len(m.positions)
        self.mask_offsets.append(self.n_masked)

    def sections(self) -> list[Section]:
        """instances[, mask_offsets, mask_positions, mask_inputs, mask_info]."""
        if not self.static:
            return [self.instances]
        offsets = ("mask_offsets", np.frombuffer(self.mask_offsets, dtype=np.int64))
        return [self.instances, offsets, self.mask_pos, self.mask_inp, self.mask_info]


def _make_instances(ctx: ShardContext, tokd: _Tokenized, tmp: Path) -> _InstanceWriter:
    """Every dupe pass over every document, in that order (the order the bytes depend on)."""
    writer = _InstanceWriter(ctx, tokd, tmp)
    n_docs = tokd.index.num_documents
    for dupe in range(ctx.cfg.dupe_factor if n_docs else 0):
        for d in range(n_docs):
            writer.add_document(d, dupe)
    return writer


# ------------------------------------------------------------------------------------------------- shard


def build_shard(job: ShardJob, ctx: ShardContext) -> dict[str, Any]:
    """Tokenize one shard's documents, make its instances (and static masks), write it atomically.

    Returns:
        The shard's manifest entry (:func:`albert_lm.data.shards.shard_entry`).
    """
    t0 = time.perf_counter()
    path = ctx.out_dir / shard_name(job.index)
    tmp = Path(tempfile.mkdtemp(prefix=f"{TMP_PREFIX}{path.name}.", dir=ctx.out_dir))
    try:
        tokd = _tokenize(job, ctx, tmp)
        made = _make_instances(ctx, tokd, tmp)
        counts = {
            "documents": tokd.index.num_documents,
            "sentences": len(tokd.index.sent_offsets) - 1,
            "tokens": len(tokd.tokens),
            "instances": made.n_inst,
            "label_1": made.n_label,
            "masked_tokens": made.n_masked,
        }
        meta = {
            "index": job.index,
            "first_document": job.first_document,
            "input_documents": len(job.docs),
            "source_sha256": job.source_sha256,
            "config_hash": ctx.cfg_hash,
            "tokenizer_fingerprint": ctx.tok_info["fingerprint"],
            "counts": counts,
            "skipped": dict(sorted(tokd.skipped.items())),
        }
        digest, size = write_shard(path, tokd.sections + made.sections(), meta)
    finally:
        shutil.rmtree(tmp, ignore_errors=True)
    logger.info(
        "%s: %d documents, %d tokens, %d instances in %.1fs",
        path.name, counts["documents"], counts["tokens"], made.n_inst, time.perf_counter() - t0,
    )  # fmt: skip
    return shard_entry(path.name, digest, size, meta, sampled_sha256(path))
