"""``albert prepare``: documents -> tokenized shards with SOP/NSP instances and (static) masks.

The pipeline streams. The main process reads documents in order and cuts the stream into shards of about
``shard_chars`` characters (a cut depends only on the text, so every machine cuts the same way). Each shard
is then built by one worker: sentence splitting, tokenization, instances for every dupe pass, static masks,
written atomically. Nothing holds more than a few shards of text at once, whatever the corpus size.

Reproducibility: every random draw comes from a generator seeded by (seed, global document index, dupe), so
a shard's bytes depend only on the input, the tokenizer and the settings -- not on ``workers``, and not on
``num_shards`` / ``shard_index`` (machine i of n builds the shards whose index is i mod n; the union of the
n runs is byte for byte the single run). Each run writes ``manifest.part-i-of-n.json``; the run that finds
all parts present (or ``albert prepare --merge``) writes ``manifest.json``.

Rerunning into the same DATA_DIR reuses every shard whose footer matches the settings and the text it was
built from (so an interrupted run resumes), rebuilds the rest, and refuses a different tokenizer or
different settings unless ``overwrite=True``.
"""

from __future__ import annotations

import base64
import concurrent.futures as cf
import hashlib
import json
import logging
import multiprocessing as mp
import os
import shutil
import tempfile
import time
from array import array
from collections import Counter
from collections.abc import Iterator, Sequence
from dataclasses import asdict, dataclass, field
from pathlib import Path
from typing import Any, Literal

import numpy as np

from albert.data.documents import (
    DEFAULT_MAX_DOC_CHARS,
    DEFAULT_MAX_LINE_BYTES,
    DataError,
    Document,
    ReadReport,
    SentenceSplitter,
    read_documents,
)
from albert.data.instances import (
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
from albert.data.masking import MaskingConfig, MaskRng, create_masked_lm_predictions, start_piece_table
from albert.data.shards import (
    FORMAT_VERSION,
    MANIFEST,
    TMP_PREFIX,
    SectionSpool,
    atomic_write_json,
    clean_temporaries,
    read_footer,
    sha256_file,
    shard_name,
    token_dtype,
    write_shard,
)
from albert.tokenizer.wordpiece import is_cjk_codepoint

logger = logging.getLogger(__name__)


@dataclass(frozen=True)
class PrepareConfig:
    """Everything that decides the bytes of a DATA_DIR (besides the input and the tokenizer)."""

    max_seq_length: int = 512  # original create_pretraining_data.py: max_seq_length
    short_seq_prob: float = 0.1  # original: short_seq_prob
    short_seq_scope: Literal["instance", "document"] = "instance"  # see albert.data.instances
    task: Literal["sop", "nsp"] = "sop"  # original: random_next_sentence=False (SOP)
    masked_lm_prob: float = 0.15  # original: masked_lm_prob
    max_predictions_per_seq: int = 20  # original: max_predictions_per_seq
    ngram: int = 3  # original: ngram
    favor_shorter_ngram: bool = True  # original: favor_shorter_ngram
    whole_word: bool = True  # original: do_whole_word_mask
    zh_whole_word: bool = False  # group Chinese characters into jieba words for whole-word masking
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


# ---------------------------------------------------------------------------------------------- tokenizer


def _load_tokenizer(tokenizer: Any) -> Any:
    if isinstance(tokenizer, (str, os.PathLike)):
        from albert.tokenizer import load_tokenizer

        return load_tokenizer(os.fspath(tokenizer))
    return tokenizer


def tokenizer_info(tok: Any) -> dict[str, Any]:
    """What a DATA_DIR records about its tokenizer (and checks against later)."""
    vocab_size = int(tok.vocab_size)
    pieces = [tok.id_to_piece(i) for i in range(vocab_size)]
    table = start_piece_table(pieces, tok.kind)
    return {
        "fingerprint": str(tok.fingerprint),
        "kind": str(tok.kind),
        "vocab_size": vocab_size,
        "do_lower_case": bool(getattr(tok, "do_lower_case", False)),
        "pad_id": int(tok.pad_id),
        "unk_id": int(tok.unk_id),
        "cls_id": int(tok.cls_id),
        "sep_id": int(tok.sep_id),
        "mask_id": int(tok.mask_id),
        # one bit per id: does the piece start a word (masking.start_piece_table); the dataset needs it for
        # dynamic masking without loading the tokenizer
        "start_pieces": base64.b64encode(np.packbits(table).tobytes()).decode("ascii"),
    }


def start_table_from_info(info: dict[str, Any]) -> np.ndarray:
    bits = np.frombuffer(base64.b64decode(info["start_pieces"]), dtype=np.uint8)
    return np.unpackbits(bits)[: info["vocab_size"]].astype(bool)


def config_hash(cfg: PrepareConfig, tok_info: dict[str, Any]) -> str:
    blob = json.dumps(
        {"config": asdict(cfg), "tokenizer": tok_info, "version": FORMAT_VERSION}, sort_keys=True
    )
    return hashlib.sha256(blob.encode("utf-8")).hexdigest()


# -------------------------------------------------------------------------------------------- shard build


@dataclass
class ShardJob:
    index: int
    first_document: int  # global index (reading order) of docs[0]
    docs: list[Document]
    source_sha256: str


def _source_hash(docs: Sequence[Document]) -> str:
    h = hashlib.sha256()
    for d in docs:
        h.update(b"\x1d" if d.presplit else b"\x1c")
        for u in d.units:
            h.update(u.encode("utf-8"))
            h.update(b"\x1e")
    return h.hexdigest()


@dataclass
class _Context:
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


_WORKER_CTX: _Context | None = None


def _init_worker(
    cfg: PrepareConfig, out_dir: str, tokenizer: Any, tok_info: dict[str, Any], cfg_hash: str
) -> None:
    global _WORKER_CTX
    logging.basicConfig(level=logging.WARNING)
    _WORKER_CTX = _Context(cfg, Path(out_dir), _load_tokenizer(tokenizer), tok_info, cfg_hash)


def _build_in_worker(job: ShardJob) -> dict[str, Any]:
    assert _WORKER_CTX is not None
    return build_shard(job, _WORKER_CTX)


def _encode_sentences(tok: Any, sentences: list[str]) -> list[list[int]]:
    """``tok.encode_ids`` of each sentence, in one batched call per document (``encode_ids`` one sentence at
    a time costs about four times as much: each call pays the batch path's overhead)."""
    return [list(x) for x in tok.encode_ids_batch(sentences)] if sentences else []


def _zh_word_starts(ctx: _Context, sentence: str) -> tuple[list[int], list[bool]]:
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


def build_shard(job: ShardJob, ctx: _Context) -> dict[str, Any]:
    """Tokenize one shard's documents, make its instances (and static masks), write it atomically."""
    cfg = ctx.cfg
    info = ctx.tok_info
    t0 = time.perf_counter()
    tmp = Path(tempfile.mkdtemp(prefix=f"{TMP_PREFIX}{shard_name(job.index)}.", dir=ctx.out_dir))
    try:
        tok_dtype = token_dtype(info["vocab_size"])
        tokens = SectionSpool(tmp, "tokens", tok_dtype)
        word_start = SectionSpool(tmp, "word_start", "u1") if cfg.zh_whole_word else None
        sent_offsets = array("q", [0])
        doc_offsets = array("q", [0])
        doc_keys: list[int] = []  # global document index of each kept document (its RNG key)
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
        tok_arr = tokens.memmap()
        ws_arr = word_start.memmap() if word_start is not None else None
        index = DocumentIndex(
            np.frombuffer(sent_offsets, dtype=np.int64), np.frombuffer(doc_offsets, dtype=np.int64)
        )

        icfg = cfg.instance_config()
        mcfg = cfg.masking_config()
        cdf = mcfg.ngram_cdf()
        static = cfg.masking == "static"
        instances = SectionSpool(tmp, "instances", INSTANCE_DTYPE)
        mask_offsets = array("q", [0])
        mask_pos = SectionSpool(tmp, "mask_positions", "<u2")
        mask_inp = SectionSpool(tmp, "mask_inputs", tok_dtype)
        mask_info = SectionSpool(tmp, "mask_info", "u1")
        specials = (info["cls_id"], info["sep_id"])
        n_inst = n_label = n_masked = 0
        for dupe in range(cfg.dupe_factor if index.num_documents else 0):
            for d in range(index.num_documents):
                key = doc_keys[d]
                recs = create_instances_from_document(
                    index, d, icfg, derive_rng(cfg.seed, STREAM_PAIRS, key, dupe)
                )
                if not recs:
                    continue
                instances.append(np.array(recs, dtype=INSTANCE_DTYPE))
                n_inst += len(recs)
                n_label += sum(1 for r in recs if r[5] & FLAG_LABEL)
                if not static:
                    continue
                mrng = MaskRng.from_key(cfg.seed, STREAM_STATIC_MASKS, key, dupe)
                for r in recs:
                    seq, _ = instance_token_ids(tok_arr, r, info["cls_id"], info["sep_id"])
                    is_start = ctx.start_table[seq] if ws_arr is None else instance_word_starts(ws_arr, r)
                    m = create_masked_lm_predictions(
                        seq, is_start, cfg=mcfg, special_ids=specials, mask_id=info["mask_id"],
                        vocab_size=info["vocab_size"], rng=mrng, cdf=cdf,
                    )  # fmt: skip
                    mask_pos.append(m.positions)
                    mask_inp.append(m.input_ids)
                    mask_info.append(m.info)
                    n_masked += len(m.positions)
                    mask_offsets.append(n_masked)

        sections: list[Any] = [
            tokens,
            ("sent_offsets", index.sent_offsets),
            ("doc_offsets", index.doc_offsets),
        ]
        if word_start is not None:
            sections.append(word_start)
        sections.append(instances)
        if static:
            sections += [
                ("mask_offsets", np.frombuffer(mask_offsets, dtype=np.int64)),
                mask_pos,
                mask_inp,
                mask_info,
            ]
        counts = {
            "documents": index.num_documents,
            "sentences": len(sent_offsets) - 1,
            "tokens": n_tok,
            "instances": n_inst,
            "label_1": n_label,
            "masked_tokens": n_masked,
        }
        meta = {
            "index": job.index,
            "first_document": job.first_document,
            "input_documents": len(job.docs),
            "source_sha256": job.source_sha256,
            "config_hash": ctx.cfg_hash,
            "tokenizer_fingerprint": info["fingerprint"],
            "counts": counts,
            "skipped": dict(sorted(skipped.items())),
        }
        path = ctx.out_dir / shard_name(job.index)
        digest, size = write_shard(path, sections, meta)
    finally:
        shutil.rmtree(tmp, ignore_errors=True)
    logger.info(
        "%s: %d documents, %d tokens, %d instances in %.1fs",
        path.name, counts["documents"], n_tok, n_inst, time.perf_counter() - t0,
    )  # fmt: skip
    return _shard_entry(path.name, digest, size, meta)


COUNT_KEYS = ("documents", "sentences", "tokens", "instances", "label_1", "masked_tokens")


def _shard_entry(name: str, digest: str, size: int, meta: dict[str, Any]) -> dict[str, Any]:
    # a fixed key order: a reused shard's entry (read back from its footer) must serialize identically
    return {
        "file": name,
        "sha256": digest,
        "bytes": size,
        "first_document": meta["first_document"],
        "input_documents": meta["input_documents"],
        **{k: meta["counts"][k] for k in COUNT_KEYS},
        "skipped": dict(sorted(meta["skipped"].items())),
    }


# ------------------------------------------------------------------------------------------------ driver


def _iter_jobs(docs: Iterator[Document], shard_chars: int) -> Iterator[ShardJob]:
    """Cut the document stream into shards of about ``shard_chars`` characters (a pure function of the text)."""
    batch: list[Document] = []
    chars = 0
    first = 0
    index = 0
    for doc in docs:
        batch.append(doc)
        chars += doc.num_chars
        if chars >= shard_chars:
            yield ShardJob(index, first, batch, _source_hash(batch))
            index += 1
            first += len(batch)
            batch, chars = [], 0
    if batch:
        yield ShardJob(index, first, batch, _source_hash(batch))


def _part_name(shard_index: int, num_shards: int) -> str:
    return f"manifest.part-{shard_index}-of-{num_shards}.json"


def _check_existing(out: Path, cfg: PrepareConfig, tok_info: dict[str, Any], cfg_hash: str) -> None:
    """Refuse to mix a different tokenizer or different settings into an existing DATA_DIR."""
    candidates = [out / MANIFEST, *sorted(out.glob("manifest.part-*.json"))]
    for path in candidates:
        if not path.is_file():
            continue
        try:
            old = json.loads(path.read_text(encoding="utf-8"))
        except (OSError, json.JSONDecodeError) as e:
            raise DataError(f"{path}: unreadable manifest ({e}); pass --overwrite to start over") from e
        old_fp = old.get("tokenizer", {}).get("fingerprint")
        if old_fp != tok_info["fingerprint"]:
            raise DataError(
                f"{path}: this DATA_DIR was prepared with tokenizer fingerprint {old_fp}, but the given tokenizer "
                f"has fingerprint {tok_info['fingerprint']}; use another --output or pass --overwrite"
            )
        if old.get("config_hash") != cfg_hash:
            diffs = [
                f"{k}: {old.get('config', {}).get(k)!r} -> {v!r}"
                for k, v in asdict(cfg).items()
                if old.get("config", {}).get(k) != v
            ]
            raise DataError(
                f"{path}: this DATA_DIR was prepared with other settings ({'; '.join(diffs) or 'tokenizer details'}); "
                "use another --output or pass --overwrite"
            )
    for shard in sorted(out.glob("shard-*.bin")):
        try:
            meta = read_footer(shard)["meta"]
        except DataError:
            continue  # incomplete: will be rebuilt
        if meta.get("tokenizer_fingerprint") != tok_info["fingerprint"]:
            raise DataError(
                f"{shard}: built with tokenizer fingerprint {meta.get('tokenizer_fingerprint')}, but the given "
                f"tokenizer has fingerprint {tok_info['fingerprint']}; use another --output or pass --overwrite"
            )


def _reusable(path: Path, job: ShardJob, cfg_hash: str) -> dict[str, Any] | None:
    if not path.is_file():
        return None
    try:
        meta = read_footer(path)["meta"]
    except DataError as e:
        logger.warning("%s; rebuilding it", e)
        return None
    if meta.get("config_hash") != cfg_hash or meta.get("source_sha256") != job.source_sha256:
        return None
    if meta.get("first_document") != job.first_document or meta.get("index") != job.index:
        return None
    return _shard_entry(path.name, sha256_file(path), path.stat().st_size, meta)


def prepare(
    inputs: Sequence[str | Path],
    tokenizer: Any,
    output: str | Path,
    cfg: PrepareConfig | None = None,
    *,
    workers: int = 1,
    shard_index: int = 0,
    num_shards: int = 1,
    overwrite: bool = False,
    strict: bool = False,
) -> dict[str, Any]:
    """Prepare a DATA_DIR; returns the manifest (or this part's manifest when ``num_shards > 1``).

    Args:
        inputs: corpus files (see :mod:`albert.data.documents` for the formats).
        tokenizer: a tokenizer directory / file for ``albert.tokenizer.load_tokenizer``, or a tokenizer
            object with that interface (it must pickle when ``workers > 1``).
        output: the DATA_DIR.
        cfg: settings; defaults are the original's.
        workers: processes building shards.
        shard_index, num_shards: build only the shards ``s`` with ``s % num_shards == shard_index`` (one
            machine's part of a multi-machine run).
        overwrite: delete an existing DATA_DIR's shards and manifests first.
        strict: raise on the first bad line / document instead of counting it as skipped.
    """
    global _WORKER_CTX
    cfg = cfg or PrepareConfig()
    if not 0 <= shard_index < num_shards:
        raise ValueError(f"need 0 <= shard_index < num_shards, got {shard_index} and {num_shards}")
    if workers < 1:
        raise ValueError(f"workers must be >= 1, got {workers}")
    if not inputs:
        raise DataError("no input files")
    tok = _load_tokenizer(tokenizer)
    tok_info = tokenizer_info(tok)
    cfg_hash = config_hash(cfg, tok_info)
    out = Path(output)
    out.mkdir(parents=True, exist_ok=True)
    if overwrite:
        for p in [*out.glob("shard-*.bin"), *out.glob("manifest*.json")]:
            p.unlink()
    _check_existing(out, cfg, tok_info, cfg_hash)
    if clean_temporaries(out):
        logger.info("removed temporaries left by an interrupted run in %s", out)

    report = ReadReport(strict=strict)
    docs = read_documents(
        list(inputs), report, cfg.input_format,
        jsonl_key=cfg.jsonl_key, max_line_bytes=cfg.max_line_bytes, max_doc_chars=cfg.max_doc_chars,
    )  # fmt: skip
    entries: dict[int, dict[str, Any]] = {}
    total_shards = 0
    reused = 0
    t0 = time.perf_counter()
    fork = workers > 1 and "fork" in mp.get_all_start_methods()
    ctx = _Context(cfg, out, tok, tok_info, cfg_hash) if workers == 1 or fork else None
    pool: cf.ProcessPoolExecutor | None = None
    pending: set[cf.Future[dict[str, Any]]] = set()
    if fork:
        # Forked workers inherit the loaded tokenizer, splitter (and jieba) instead of loading them again;
        # the parent has no threads of its own here, so fork is safe.
        _WORKER_CTX = ctx
        pool = cf.ProcessPoolExecutor(max_workers=workers, mp_context=mp.get_context("fork"))
    elif workers > 1:
        pool = cf.ProcessPoolExecutor(
            max_workers=workers,
            mp_context=mp.get_context("spawn"),
            initializer=_init_worker,
            initargs=(cfg, str(out), tokenizer, tok_info, cfg_hash),
        )

    def collect(done: set[cf.Future[dict[str, Any]]]) -> None:
        for fut in done:
            e = fut.result()
            entries[int(e["file"][6:11])] = e

    try:
        for job in _iter_jobs(docs, cfg.shard_chars):
            total_shards = job.index + 1
            if job.index % num_shards != shard_index:
                continue
            old = _reusable(out / shard_name(job.index), job, cfg_hash)
            if old is not None:
                entries[job.index] = old
                reused += 1
                continue
            if pool is None:
                assert ctx is not None
                entries[job.index] = build_shard(job, ctx)
            else:
                pending.add(pool.submit(_build_in_worker, job))
                if len(pending) >= 2 * workers:  # bound the text held in flight
                    done, pending = cf.wait(pending, return_when=cf.FIRST_COMPLETED)
                    collect(done)
        if pending:
            done, pending = cf.wait(pending)
            collect(done)
    finally:
        if pool is not None:
            for fut in pending:
                fut.cancel()
            pool.shutdown(wait=True, cancel_futures=True)
            _WORKER_CTX = None
    if total_shards == 0:
        raise DataError(
            f"no documents in {', '.join(str(p) for p in inputs)} (read: {report.to_dict()}); nothing to prepare"
        )
    if reused:
        logger.info("reused %d complete shards", reused)
    # Shards past the end of the (possibly shorter) input are stale.
    for p in out.glob("shard-*.bin"):
        if int(p.name[6:11]) >= total_shards and int(p.name[6:11]) % num_shards == shard_index:
            p.unlink()

    part = {
        "format": "albert-pretraining-data",
        "version": FORMAT_VERSION,
        "config": asdict(cfg),
        "config_hash": cfg_hash,
        "tokenizer": tok_info,
        "inputs": [{"name": Path(p).name, "bytes": Path(p).stat().st_size} for p in inputs],
        "read": report.to_dict(),
        "num_shards": total_shards,
        "shards": [entries[i] for i in sorted(entries)],
    }
    logger.info(
        "prepared %d of %d shards (%d instances) in %.1fs",
        len(entries), total_shards, sum(e["instances"] for e in entries.values()), time.perf_counter() - t0,
    )  # fmt: skip
    if num_shards == 1:
        manifest = _finish_manifest([part])
        atomic_write_json(out / MANIFEST, manifest)
        return manifest
    atomic_write_json(out / _part_name(shard_index, num_shards), part)
    if all((out / _part_name(i, num_shards)).is_file() for i in range(num_shards)):
        merge_parts(out)
    return part


def _finish_manifest(parts: list[dict[str, Any]]) -> dict[str, Any]:
    first = parts[0]
    shards = sorted((e for p in parts for e in p["shards"]), key=lambda e: e["file"])
    totals: Counter[str] = Counter()
    skipped: Counter[str] = Counter(first["read"]["skipped"])
    for e in shards:
        for k in COUNT_KEYS:
            totals[k] += e[k]
        skipped.update(e["skipped"])
    return {
        "format": first["format"],
        "version": first["version"],
        "config": first["config"],
        "config_hash": first["config_hash"],
        "tokenizer": first["tokenizer"],
        "inputs": first["inputs"],
        "counts": {
            "input_files": first["read"]["files"],
            "input_lines": first["read"]["lines"],
            "input_documents": first["read"]["documents"],
            **{k: totals[k] for k in COUNT_KEYS},
        },
        "skipped": dict(sorted(skipped.items())),
        "shards": shards,
    }


def merge_parts(data_dir: str | Path) -> dict[str, Any]:
    """Write ``manifest.json`` from the ``manifest.part-i-of-n.json`` of a multi-machine run."""
    out = Path(data_dir)
    parts_paths = sorted(out.glob("manifest.part-*-of-*.json"))
    if not parts_paths:
        raise DataError(f"{out}: no manifest.part-*.json to merge")
    parts = [json.loads(p.read_text(encoding="utf-8")) for p in parts_paths]
    n = int(parts_paths[0].name.rsplit("-of-", 1)[1].split(".")[0])
    names = {p.name for p in parts_paths}
    missing = [i for i in range(n) if _part_name(i, n) not in names]
    if missing:
        raise DataError(f"{out}: parts {missing} of {n} are missing; run them first")
    ref = parts[0]
    for path, p in zip(parts_paths, parts):
        for key in ("config_hash", "num_shards", "read", "inputs"):
            if p[key] != ref[key]:
                raise DataError(
                    f"{path}: {key} differs from {parts_paths[0].name}; the parts were not run on the same input and settings"
                )
    manifest = _finish_manifest(parts)
    got = [e["file"] for e in manifest["shards"]]
    want = [shard_name(i) for i in range(ref["num_shards"])]
    if got != want:
        raise DataError(f"{out}: the parts cover shards {got}, expected {want}")
    atomic_write_json(out / MANIFEST, manifest)
    for p in parts_paths:
        p.unlink()
    return manifest
