"""``albert prepare``: documents -> tokenized shards with SOP/NSP instances and (static) masks.

The pipeline streams. The main process reads documents in order and cuts the stream into shards of about
``shard_chars`` characters (a cut depends only on the text, so every machine cuts the same way). Each shard
is then built by one worker (:func:`albert_lm.data.build.build_shard`): sentence splitting, tokenization,
instances for every dupe pass, static masks, written atomically. Nothing holds more than a few shards of
text at once, whatever the corpus size. This module is the driver: cutting, scheduling, reuse, manifests.

Reproducibility: every random draw comes from a generator seeded by (seed, global document index, dupe), so
a shard's bytes depend only on the input, the tokenizer and the settings -- not on ``workers``, and not on
``num_shards`` / ``shard_index`` (machine i of n builds the shards whose index is i mod n; the union of the
n runs is byte for byte the single run). Each run writes ``manifest.part-i-of-n.json``; the run that finds
all parts present (or ``albert prepare --merge``) writes ``manifest.json``.

Rerunning into the same DATA_DIR reuses every shard whose footer matches the settings and the text it was
built from (so an interrupted run resumes) and rebuilds the rest, after removing the manifest that listed
them (an interrupted rebuild never leaves old and new shards listed together). It refuses, unless
``overwrite=True``: a different tokenizer, different settings, a finished DATA_DIR made from other input
files, and a non-empty directory that is not a DATA_DIR. ``overwrite`` deletes the manifests and then the
shards before building (and nothing else: files of other programs stay).
"""

from __future__ import annotations

import concurrent.futures as cf
import hashlib
import json
import logging
import multiprocessing as mp
import os
import time
from collections import Counter
from collections.abc import Iterator, Sequence
from contextlib import contextmanager
from dataclasses import asdict, dataclass, field
from pathlib import Path
from typing import Any

from albert_lm._io import TMP_PREFIX, atomic_write_json, fsync_dir
from albert_lm._proc import die_with_parent
from albert_lm.data.build import (
    PrepareConfig,
    ShardContext,
    ShardJob,
    build_shard,
    check_language_tokenizer,
    load_tokenizer_arg,
    source_hash,
)
from albert_lm.data.documents import DataError, Document, ReadReport, read_documents
from albert_lm.data.shards import (
    COUNT_KEYS,
    FORMAT_VERSION,
    MANIFEST,
    PART_GLOB,
    clean_temporaries,
    parse_part_manifest_name,
    parse_shard_name,
    part_manifest_name,
    read_footer,
    sampled_sha256,
    sha256_file,
    shard_entry,
    shard_files,
    shard_name,
    tokenizer_info,
)

__all__ = ["DEFAULT_MAX_SKIP_FRACTION", "PrepareConfig", "config_hash", "merge_parts", "prepare"]

logger = logging.getLogger(__name__)

# More unreadable lines than this (10%) is not a corpus with a few bad lines but the wrong file or encoding.
DEFAULT_MAX_SKIP_FRACTION = 0.1


def config_hash(cfg: PrepareConfig, tok_info: dict[str, Any]) -> str:
    """sha256 of the settings and tokenizer record that decide a DATA_DIR's bytes."""
    blob = json.dumps(
        {"config": asdict(cfg), "tokenizer": tok_info, "version": FORMAT_VERSION}, sort_keys=True
    )
    return hashlib.sha256(blob.encode("utf-8")).hexdigest()


# ---------------------------------------------------------------------------------------- worker processes

_WORKER_CTX: ShardContext | None = None


def _init_worker(
    cfg: PrepareConfig, out_dir: str, tokenizer: Any, tok_info: dict[str, Any], cfg_hash: str, parent: int
) -> None:
    global _WORKER_CTX
    die_with_parent(parent)
    logging.basicConfig(level=logging.WARNING)
    _WORKER_CTX = ShardContext(cfg, Path(out_dir), load_tokenizer_arg(tokenizer), tok_info, cfg_hash)


def _build_in_worker(job: ShardJob) -> dict[str, Any]:
    assert _WORKER_CTX is not None
    return build_shard(job, _WORKER_CTX)


@dataclass
class _Run:
    """One ``prepare`` call's fixed inputs."""

    cfg: PrepareConfig
    out: Path
    tokenizer: Any  # as given (a path is what spawned workers load)
    tok: Any
    tok_info: dict[str, Any]
    cfg_hash: str
    workers: int
    shard_index: int
    num_shards: int
    inputs: list[dict[str, Any]]  # inputs_record of the input files


@contextmanager
def _shard_pool(run: _Run) -> Iterator[tuple[cf.ProcessPoolExecutor | None, ShardContext | None]]:
    """The worker pool (None with one worker) and the context this process builds with, if any."""
    global _WORKER_CTX
    fork = run.workers > 1 and "fork" in mp.get_all_start_methods()
    ctx = None
    if run.workers == 1 or fork:
        ctx = ShardContext(run.cfg, run.out, run.tok, run.tok_info, run.cfg_hash)
    if run.workers == 1:
        yield None, ctx
        return
    if fork:
        # Forked workers inherit the loaded tokenizer, splitter (and jieba) instead of loading them again;
        # the parent has no threads of its own here, so fork is safe.
        _WORKER_CTX = ctx
        pool = cf.ProcessPoolExecutor(
            max_workers=run.workers,
            mp_context=mp.get_context("fork"),
            initializer=die_with_parent,  # no orphans when the command is killed
            initargs=(os.getpid(),),
        )
    else:
        pool = cf.ProcessPoolExecutor(
            max_workers=run.workers,
            mp_context=mp.get_context("spawn"),
            initializer=_init_worker,
            initargs=(run.cfg, str(run.out), run.tokenizer, run.tok_info, run.cfg_hash, os.getpid()),
        )
    try:
        yield pool, ctx
    finally:
        pool.shutdown(wait=True, cancel_futures=True)
        _WORKER_CTX = None


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
            yield ShardJob(index, first, batch, source_hash(batch))
            index += 1
            first += len(batch)
            batch, chars = [], 0
    if batch:
        yield ShardJob(index, first, batch, source_hash(batch))


def inputs_record(inputs: Sequence[str | Path]) -> list[dict[str, Any]]:
    """The manifest's record of the input files (name and size, in order)."""

    def size(p: Path) -> int:  # a datasets directory: its files
        return sum(f.stat().st_size for f in p.rglob("*") if f.is_file()) if p.is_dir() else p.stat().st_size

    return [{"name": Path(p).name, "bytes": size(Path(p))} for p in inputs]


def _foreign_entries(out: Path) -> list[str]:
    """Names in ``out`` that no ``albert prepare`` run writes (shards, manifests, temporaries)."""
    ours = {MANIFEST, *(p.name for _, p in shard_files(out)), *(p.name for p in out.glob(PART_GLOB))}
    return sorted(p.name for p in out.iterdir() if p.name not in ours and not p.name.startswith(TMP_PREFIX))


def _check_existing(out: Path, run: _Run) -> None:
    """Refuse to mix other inputs, a different tokenizer or different settings into an existing DATA_DIR."""
    candidates = [out / MANIFEST, *sorted(out.glob(PART_GLOB))]
    for path in candidates:
        if not path.is_file():
            continue
        try:
            old = json.loads(path.read_text(encoding="utf-8"))
        except (OSError, json.JSONDecodeError) as e:
            raise DataError(f"{path}: unreadable manifest ({e}); pass --overwrite to start over") from e
        _check_manifest(path, old, run)
    for _, shard in shard_files(out):
        try:
            meta = read_footer(shard)["meta"]
        except DataError:
            continue  # incomplete: will be rebuilt
        if meta.get("tokenizer_fingerprint") != run.tok_info["fingerprint"]:
            raise DataError(
                f"{shard}: built with tokenizer fingerprint {meta.get('tokenizer_fingerprint')}, but the given "
                f"tokenizer has fingerprint {run.tok_info['fingerprint']}; use another --output or pass --overwrite"
            )


def _check_manifest(path: Path, old: dict[str, Any], run: _Run) -> None:
    """A finished run's (part) manifest must have this run's tokenizer, settings and input files.

    Same inputs and settings: a rerun resumes (complete shards are reused). Other input files would
    silently replace a finished DATA_DIR: refused. (A file edited in place, same name and size, passes
    here; its changed shards are rebuilt, and :func:`_invalidate_manifests` removes the old manifest
    first, so the old and new shards are never listed together.)
    """
    cfg, tok_info, cfg_hash = run.cfg, run.tok_info, run.cfg_hash
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
    if "inputs" in old and old["inputs"] != run.inputs:

        def show(rec: list[dict[str, Any]]) -> str:
            return ", ".join(f"{i['name']} ({i['bytes']} bytes)" for i in rec)

        raise DataError(
            f"{path}: this DATA_DIR was prepared from other input files ({show(old['inputs'])}; now "
            f"{show(run.inputs)}); use another --output or pass --overwrite"
        )


def _open_data_dir(run: _Run, overwrite: bool) -> None:
    """Create the DATA_DIR, or check that it is ours to continue; remove what an interrupted run left."""
    run.out.mkdir(parents=True, exist_ok=True)
    foreign = _foreign_entries(run.out)
    if foreign and not overwrite:
        shown = ", ".join(foreign[:4]) + (", ..." if len(foreign) > 4 else "")
        raise DataError(
            f"{run.out}: not empty and not a DATA_DIR ({shown}); use a new or empty --output, or pass "
            "--overwrite to write the shards next to those files"
        )
    if overwrite:
        # manifests first: never one that lists deleted shards
        for p in [run.out / MANIFEST, *run.out.glob(PART_GLOB), *(p for _, p in shard_files(run.out))]:
            p.unlink(missing_ok=True)
    _check_existing(run.out, run)
    if clean_temporaries(run.out):
        logger.info("removed temporaries left by an interrupted run in %s", run.out)


def _reusable(path: Path, job: ShardJob, cfg_hash: str) -> dict[str, Any] | None:
    """The manifest entry of a complete shard built from the same text and settings, else None."""
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
    return shard_entry(path.name, sha256_file(path), path.stat().st_size, meta, sampled_sha256(path))


@dataclass
class _Built:
    """What the shard loop produced: manifest entries by shard index, and counts."""

    entries: dict[int, dict[str, Any]] = field(default_factory=dict)
    total_shards: int = 0  # in the whole input, this machine's or not
    reused: int = 0

    def collect(self, done: set[cf.Future[dict[str, Any]]]) -> None:
        for fut in done:
            entry = fut.result()
            index = parse_shard_name(entry["file"])
            assert index is not None
            self.entries[index] = entry


def _build_shards(run: _Run, jobs: Iterator[ShardJob]) -> _Built:
    """Build (or reuse) this machine's shards, at most ``2 * workers`` in flight."""
    built = _Built()
    pending: set[cf.Future[dict[str, Any]]] = set()
    with _shard_pool(run) as (pool, ctx):
        for job in jobs:
            built.total_shards = job.index + 1
            if job.index % run.num_shards != run.shard_index:
                continue
            old = _reusable(run.out / shard_name(job.index), job, run.cfg_hash)
            if old is not None:
                built.entries[job.index] = old
                built.reused += 1
                continue
            _invalidate_manifests(run)
            if pool is None:
                assert ctx is not None
                built.entries[job.index] = build_shard(job, ctx)
            else:
                pending.add(pool.submit(_build_in_worker, job))
                if len(pending) >= 2 * run.workers:  # bound the text held in flight
                    done, pending = cf.wait(pending, return_when=cf.FIRST_COMPLETED)
                    built.collect(done)
        if pending:
            built.collect(cf.wait(pending)[0])
    return built


def _invalidate_manifests(run: _Run) -> None:
    """Remove the manifests that list this machine's shards before one of them changes, so that an
    interrupted rebuild leaves an incomplete DATA_DIR (resumed by the next run), never a manifest that
    lists old and new shards together."""
    for path in (run.out / MANIFEST, run.out / part_manifest_name(run.shard_index, run.num_shards)):
        if path.is_file():
            path.unlink()
            fsync_dir(run.out)
            logger.info("%s removed: shards of this DATA_DIR are being rebuilt", path)


def _remove_stale(run: _Run, total_shards: int) -> None:
    """Delete this machine's shards past the end of the (possibly shorter) input."""
    for index, path in shard_files(run.out):
        if index >= total_shards and index % run.num_shards == run.shard_index:
            _invalidate_manifests(run)
            path.unlink()


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
    max_skip_fraction: float = DEFAULT_MAX_SKIP_FRACTION,
) -> dict[str, Any]:
    """Prepare a DATA_DIR; returns the manifest (or this part's manifest when ``num_shards > 1``).

    Args:
        inputs: corpus files (see :mod:`albert_lm.data.documents` for the formats).
        tokenizer: a tokenizer directory / file for ``albert_lm.tokenizer.load_tokenizer``, or a tokenizer
            object with that interface (it must pickle when ``workers > 1``).
        output: the DATA_DIR.
        cfg: settings; defaults are the original's.
        workers: processes building shards.
        shard_index, num_shards: build only the shards ``s`` with ``s % num_shards == shard_index`` (one
            machine's part of a multi-machine run).
        overwrite: delete an existing DATA_DIR's manifests and shards first (instead of refusing other
            inputs / tokenizer / settings, or a directory holding other files).
        strict: raise on the first bad line / document instead of counting it as skipped.
        max_skip_fraction: fail (naming the first bad line) when more than this fraction of the input
            lines are unreadable; 1.0 never fails. No manifest is written then.
    """
    cfg = cfg or PrepareConfig()
    _check_arguments(inputs, workers, shard_index, num_shards, max_skip_fraction)
    tok = load_tokenizer_arg(tokenizer)
    check_language_tokenizer(cfg, tok)
    tok_info = tokenizer_info(tok)
    run = _Run(
        cfg, Path(output), tokenizer, tok, tok_info, config_hash(cfg, tok_info),
        workers, shard_index, num_shards, inputs_record(inputs),
    )  # fmt: skip
    _open_data_dir(run, overwrite)
    report = ReadReport(strict=strict)
    docs = read_documents(
        list(inputs), report, cfg.input_format,
        jsonl_key=cfg.jsonl_key, max_line_bytes=cfg.max_line_bytes, max_doc_chars=cfg.max_doc_chars,
    )  # fmt: skip
    t0 = time.perf_counter()
    built = _build_shards(run, _iter_jobs(docs, cfg.shard_chars))
    report.check_skip_fraction(max_skip_fraction)  # before a manifest makes the DATA_DIR usable
    if built.total_shards == 0:
        raise DataError(
            f"no documents in {', '.join(str(p) for p in inputs)} (read: {report.to_dict()}); nothing to prepare"
        )
    if built.reused:
        logger.info("reused %d complete shards", built.reused)
    _remove_stale(run, built.total_shards)
    part = {
        "format": "albert-pretraining-data",
        "version": FORMAT_VERSION,
        "config": asdict(cfg),
        "config_hash": run.cfg_hash,
        "tokenizer": tok_info,
        "inputs": run.inputs,
        "read": report.to_dict(),
        "num_shards": built.total_shards,
        "shards": [built.entries[i] for i in sorted(built.entries)],
    }
    logger.info(
        "prepared %d of %d shards (%d instances) in %.1fs", len(built.entries), built.total_shards,
        sum(e["instances"] for e in built.entries.values()), time.perf_counter() - t0,
    )  # fmt: skip
    return _write_manifest(run, part)


def _check_arguments(
    inputs: Sequence[str | Path], workers: int, shard_index: int, num_shards: int, max_skip_fraction: float
) -> None:
    if not 0 <= shard_index < num_shards:
        raise ValueError(f"need 0 <= shard_index < num_shards, got {shard_index} and {num_shards}")
    if workers < 1:
        raise ValueError(f"workers must be >= 1, got {workers}")
    if not 0.0 <= max_skip_fraction <= 1.0:
        raise ValueError(f"max_skip_fraction must be in [0, 1], got {max_skip_fraction}")
    if not inputs:
        raise DataError("no input files")


def _write_manifest(run: _Run, part: dict[str, Any]) -> dict[str, Any]:
    """``manifest.json`` for a single-machine run; else this machine's part, merged once all are there."""
    if run.num_shards == 1:
        manifest = _finish_manifest([part])
        atomic_write_json(run.out / MANIFEST, manifest)
        return manifest
    atomic_write_json(run.out / part_manifest_name(run.shard_index, run.num_shards), part)
    if all((run.out / part_manifest_name(i, run.num_shards)).is_file() for i in range(run.num_shards)):
        merge_parts(run.out)
    return part


# ---------------------------------------------------------------------------------------------- manifest


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
    parts_paths = sorted(p for p in out.glob(PART_GLOB) if parse_part_manifest_name(p.name) is not None)
    if not parts_paths:
        raise DataError(f"{out}: no manifest.part-*.json to merge")
    parts = [json.loads(p.read_text(encoding="utf-8")) for p in parts_paths]
    parsed = parse_part_manifest_name(parts_paths[0].name)
    assert parsed is not None  # the glob matched it
    n = parsed[1]
    names = {p.name for p in parts_paths}
    missing = [i for i in range(n) if part_manifest_name(i, n) not in names]
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
