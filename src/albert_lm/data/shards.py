"""The on-disk format: memory-mappable binary shards and a JSON manifest, both written atomically.

A DATA_DIR holds ``manifest.json`` and ``shard-00000.bin``, ``shard-00001.bin``, ... Each shard is one file:

    [section 0][pad][section 1][pad]...[footer JSON][footer length: u64 LE][magic b"ALBSHRD1"]

Sections start at 64-byte boundaries and are raw little-endian arrays, so :class:`ShardReader` maps them
with ``numpy.memmap`` and reads nothing up front. The sections:

=================  ===========  ===================================================================
``tokens``         u2 or u4     every sentence's token ids, back to back (u2 when vocab <= 65536)
``sent_offsets``   i8 (S+1,)    sentence i = tokens[sent_offsets[i]:sent_offsets[i+1]]
``doc_offsets``    i8 (D+1,)    document d = sentences doc_offsets[d]:doc_offsets[d+1]
``word_start``     u1 (N,)      optional: per-token word-start bit (Chinese whole-word masking)
``instances``      record (I,)  :data:`albert_lm.data.instances.INSTANCE_DTYPE`: two spans + label/flags
``mask_offsets``   i8 (I+1,)    static masking only: instance i's masks = mask_*[mask_offsets[i]:...]
``mask_positions`` u2           position in ``[CLS] A [SEP] B [SEP]``
``mask_inputs``    u2 or u4     the id the model sees there ([MASK], the original, or a random id)
``mask_info``      u1           span n, replacement kind and span start (:mod:`albert_lm.data.masking`)
=================  ===========  ===================================================================

The footer records the sections and the shard's metadata (its documents' global range, a hash of the
text it was built from, the configuration hash, counts). A shard is written to a temporary name, flushed
and fsync'ed, and only then renamed into place (``os.replace``): an interrupted run leaves temporaries,
never a file named ``shard-*.bin`` that is half written. The manifest records each shard's sha256, size and
sampled sha256 (`sampled_sha256`: the size and a few fixed 64 KiB blocks). Opening a DATA_DIR
(`check_shards`) compares each shard's size and sampled sha256, a few milliseconds however large the data;
`verify_shards` (``albert data verify``) hashes every byte. A manifest without sampled hashes (written
before they were recorded) is checked in full on open. `load_manifest` checks the fields readers use, so a
malformed manifest is one error naming the field, not a traceback.
"""

from __future__ import annotations

import base64
import contextlib
import hashlib
import json
import re
import shutil
from collections.abc import Iterator
from pathlib import Path
from typing import IO, Any

import numpy as np

from albert_lm._io import TMP_PREFIX, atomic_write
from albert_lm.data.documents import DataError
from albert_lm.data.masking import start_piece_table

MAGIC = b"ALBSHRD1"
ALIGN = 64
FORMAT_VERSION = 1

# ------------------------------------------------------------------------------------------- file names

MANIFEST = "manifest.json"
SHARD_GLOB = "shard-*.bin"
PART_GLOB = "manifest.part-*-of-*.json"
_SHARD_NAME = re.compile(r"shard-(\d{5,})\.bin")
_PART_NAME = re.compile(r"manifest\.part-(\d+)-of-(\d+)\.json")


def shard_name(index: int) -> str:
    """The file name of shard ``index``: ``shard-00042.bin``."""
    return f"shard-{index:05d}.bin"


def parse_shard_name(name: str) -> int | None:
    """The index in a shard's file name (the inverse of :func:`shard_name`); None for any other name."""
    m = _SHARD_NAME.fullmatch(name)
    return int(m.group(1)) if m else None


def shard_files(data_dir: str | Path) -> list[tuple[int, Path]]:
    """``(index, path)`` of every file in ``data_dir`` named like a shard, by index."""
    found = [(parse_shard_name(p.name), p) for p in Path(data_dir).glob(SHARD_GLOB)]
    return sorted((i, p) for i, p in found if i is not None)


def part_manifest_name(shard_index: int, num_shards: int) -> str:
    """The manifest that machine ``shard_index`` of ``num_shards`` writes for its part."""
    return f"manifest.part-{shard_index}-of-{num_shards}.json"


def parse_part_manifest_name(name: str) -> tuple[int, int] | None:
    """``(i, n)`` of ``manifest.part-i-of-n.json`` (the inverse of :func:`part_manifest_name`); None for any
    other name."""
    m = _PART_NAME.fullmatch(name)
    return (int(m.group(1)), int(m.group(2))) if m else None


def token_dtype(vocab_size: int) -> np.dtype:
    """The smallest unsigned dtype that holds every id."""
    return np.dtype("<u2") if vocab_size <= 1 << 16 else np.dtype("<u4")


def sha256_file(path: Path, chunk: int = 1 << 22) -> str:
    h = hashlib.sha256()
    with open(path, "rb") as f:
        while True:
            b = f.read(chunk)
            if not b:
                break
            h.update(b)
    return h.hexdigest()


class SectionSpool:
    """An append-only array being built in a temporary file (so a section never needs to fit in memory)."""

    def __init__(self, directory: Path, name: str, dtype: np.dtype | str) -> None:
        self.name = name
        self.dtype = np.dtype(dtype)
        self.path = Path(directory) / f"{name}.raw"
        self._f: IO[bytes] | None = open(self.path, "wb")  # noqa: SIM115 - closed by close() / memmap()
        self.count = 0

    def append(self, values: Any) -> None:
        arr = np.asarray(values, dtype=self.dtype)
        assert self._f is not None, f"section {self.name} already closed"
        self._f.write(arr.tobytes())
        self.count += int(arr.size)

    def close(self) -> None:
        if self._f is not None:
            self._f.close()
            self._f = None

    def memmap(self) -> np.ndarray:
        """Read-only view of what was written so far (closes the file for writing)."""
        self.close()
        if self.count == 0:
            return np.zeros(0, dtype=self.dtype)
        return np.memmap(self.path, dtype=self.dtype, mode="r", shape=(self.count,))


def write_shard(
    path: Path, sections: list[SectionSpool | tuple[str, np.ndarray]], meta: dict[str, Any]
) -> tuple[str, int]:
    """Assemble sections into ``path`` atomically; returns (sha256 of the file, size in bytes).

    The sections stream from their spools into the temporary file (:func:`albert_lm._io.atomic_write`), so a
    shard never needs to fit in memory.
    """
    h = hashlib.sha256()
    size = 0

    def write(tmp: str) -> None:
        nonlocal size
        with open(tmp, "wb") as f:
            size = _write_sections(f, h, sections, meta)

    atomic_write(path, write)
    return h.hexdigest(), size


def _write_sections(
    f: IO[bytes], h: Any, sections: list[SectionSpool | tuple[str, np.ndarray]], meta: dict[str, Any]
) -> int:
    """Write the sections, each at a 64-byte boundary, then the footer; returns the bytes written."""
    offset = 0
    table: dict[str, dict[str, Any]] = {}

    def put(b: bytes | memoryview) -> None:
        nonlocal offset
        f.write(b)
        h.update(b)
        offset += len(b)

    for sec in sections:
        pad = (-offset) % ALIGN
        if pad:
            put(b"\0" * pad)
        if isinstance(sec, SectionSpool):
            sec.close()
            table[sec.name] = _section_entry(sec.dtype, sec.count, offset)
            with open(sec.path, "rb") as src:
                while b := src.read(1 << 22):
                    put(b)
        else:
            name, arr = sec
            arr = np.ascontiguousarray(arr)
            table[name] = _section_entry(arr.dtype, int(arr.size), offset)
            put(memoryview(arr.tobytes()))
    footer = json.dumps({"version": FORMAT_VERSION, "sections": table, "meta": meta}, sort_keys=True)
    footer_bytes = footer.encode("utf-8")
    put(footer_bytes)
    put(len(footer_bytes).to_bytes(8, "little"))
    put(MAGIC)
    return offset


def _section_entry(dtype: np.dtype, count: int, offset: int) -> dict[str, Any]:
    return {"dtype": dtype.descr if dtype.fields else dtype.str, "count": count, "offset": offset}


def read_footer(path: Path) -> dict[str, Any]:
    """The footer of a shard; raises :class:`DataError` when the file is not a complete shard."""
    path = Path(path)
    try:
        size = path.stat().st_size
        with open(path, "rb") as f:
            if size < 16:
                raise DataError(f"{path}: not a complete shard ({size} bytes)")
            f.seek(size - 16)
            tail = f.read(16)
            if tail[8:] != MAGIC:
                raise DataError(f"{path}: not a complete shard (no end marker; an interrupted write?)")
            n = int.from_bytes(tail[:8], "little")
            if n > size - 16:
                raise DataError(f"{path}: corrupt shard footer")
            f.seek(size - 16 - n)
            footer = json.loads(f.read(n))
    except OSError as e:
        raise DataError(f"{path}: cannot read shard ({e})") from e
    except (json.JSONDecodeError, UnicodeDecodeError) as e:
        raise DataError(f"{path}: corrupt shard footer ({e})") from e
    if footer.get("version") != FORMAT_VERSION:
        raise DataError(f"{path}: shard format version {footer.get('version')}, expected {FORMAT_VERSION}")
    return footer


def _dtype(spec: Any) -> np.dtype:
    if isinstance(spec, list):
        return np.dtype([tuple(x) for x in spec])
    return np.dtype(spec)


class ShardReader:
    """Memory-mapped read access to one shard's sections."""

    def __init__(self, path: Path) -> None:
        self.path = Path(path)
        self.footer = read_footer(self.path)
        self.meta: dict[str, Any] = self.footer["meta"]
        self._mm: np.memmap | None = None
        self._arrays: dict[str, np.ndarray] = {}

    def _map(self) -> np.memmap:
        if self._mm is None:
            self._mm = np.memmap(self.path, dtype=np.uint8, mode="r")
        return self._mm

    def has(self, name: str) -> bool:
        return name in self.footer["sections"]

    def __getitem__(self, name: str) -> np.ndarray:
        arr = self._arrays.get(name)
        if arr is None:
            spec = self.footer["sections"].get(name)
            if spec is None:
                raise KeyError(f"{self.path}: no section {name!r}")
            dtype = _dtype(spec["dtype"])
            start = spec["offset"]
            nbytes = spec["count"] * dtype.itemsize
            arr = self._map()[start : start + nbytes].view(dtype)
            self._arrays[name] = arr
        return arr

    def close(self) -> None:
        self._arrays.clear()
        self._mm = None

    def __getstate__(self) -> dict[str, Any]:  # picklable for DataLoader workers: re-map lazily
        return {"path": self.path, "footer": self.footer, "meta": self.meta, "_mm": None, "_arrays": {}}


# ------------------------------------------------------------------------------------------------ manifest

# A shard's counts, in the order they appear in its manifest entry (and are summed into the manifest's).
COUNT_KEYS = ("documents", "sentences", "tokens", "instances", "label_1", "masked_tokens")


def shard_entry(name: str, digest: str, size: int, meta: dict[str, Any], sample: str) -> dict[str, Any]:
    """A shard's manifest entry, from its file name, sha256, size, footer metadata and `sampled_sha256`."""
    # a fixed key order: a reused shard's entry (read back from its footer) must serialize identically
    return {
        "file": name,
        "sha256": digest,
        "bytes": size,
        "sample_sha256": sample,
        "first_document": meta["first_document"],
        "input_documents": meta["input_documents"],
        **{k: meta["counts"][k] for k in COUNT_KEYS},
        "skipped": dict(sorted(meta["skipped"].items())),
    }


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
    """The per-id word-start table that :func:`tokenizer_info` recorded (bool, one per vocabulary id)."""
    bits = np.frombuffer(base64.b64decode(info["start_pieces"]), dtype=np.uint8)
    return np.unpackbits(bits)[: info["vocab_size"]].astype(bool)


def load_manifest(data_dir: str | Path) -> dict[str, Any]:
    """Read and check ``DATA_DIR/manifest.json``."""
    path = Path(data_dir) / MANIFEST
    if not path.is_file():
        parts = sorted(Path(data_dir).glob(PART_GLOB)) if Path(data_dir).is_dir() else []
        hint = (
            f"; found {len(parts)} partial manifests: run `albert prepare --merge {data_dir}` once all parts are done"
            if parts
            else "; run `albert prepare` first"
        )
        raise DataError(f"{path}: no manifest{hint}")
    try:
        manifest = json.loads(path.read_text(encoding="utf-8"))
    except (json.JSONDecodeError, UnicodeDecodeError) as e:
        raise DataError(f"{path}: not valid JSON ({e})") from e
    if manifest.get("format") != "albert-pretraining-data":
        raise DataError(f"{path}: not an albert pretraining-data manifest")
    if manifest.get("version") != FORMAT_VERSION:
        raise DataError(f"{path}: manifest version {manifest.get('version')}, expected {FORMAT_VERSION}")
    _check_manifest_fields(manifest, path)
    return manifest


# The manifest fields that readers use, and their types (int fields: not bool).
_SHARD_FIELDS = {"file": str, "sha256": str, "bytes": int, "instances": int}
_CONFIG_FIELDS = {"max_seq_length": int, "masking": str, "seed": int}
_TOKENIZER_FIELDS = {
    "vocab_size": int, "cls_id": int, "sep_id": int, "mask_id": int, "pad_id": int, "fingerprint": str,
    "start_pieces": str,
}  # fmt: skip


def _check_fields(value: Any, fields: dict[str, type], where: str, path: Path) -> None:
    if not isinstance(value, dict):
        raise DataError(f"{path}: {where}: expected an object, got {type(value).__name__}")
    for name, kind in fields.items():
        v = value.get(name)
        if not isinstance(v, kind) or isinstance(v, bool) or (isinstance(v, int) and v < 0):
            raise DataError(
                f"{path}: {where}.{name}: expected {'a count' if kind is int else 'a string'}, got {v!r}"
            )


def _check_manifest_fields(manifest: dict[str, Any], path: Path) -> None:
    """Raise a `DataError` naming the first field of ``manifest`` that readers cannot use."""
    _check_fields(manifest.get("config"), _CONFIG_FIELDS, "config", path)
    _check_fields(manifest.get("tokenizer"), _TOKENIZER_FIELDS, "tokenizer", path)
    shards = manifest.get("shards")
    if not isinstance(shards, list) or not shards:
        raise DataError(f"{path}: shards: expected a non-empty list, got {shards!r:.80}")
    for i, entry in enumerate(shards):
        _check_fields(entry, _SHARD_FIELDS, f"shards[{i}]", path)
        if parse_shard_name(entry["file"]) is None:
            raise DataError(
                f"{path}: shards[{i}].file: {entry['file']!r} is not a shard name (shard-NNNNN.bin)"
            )


def verify_shards(data_dir: str | Path, manifest: dict[str, Any] | None = None) -> None:
    """Recompute every shard's sha256 and compare with the manifest; raises :class:`DataError`."""
    _check_shards(Path(data_dir), manifest or load_manifest(data_dir), full=True)


def check_shards(data_dir: str | Path, manifest: dict[str, Any] | None = None) -> None:
    """The cheap check of opening a DATA_DIR: each shard's size and `sampled_sha256` against the manifest
    (its full sha256 when the manifest records no sampled one).

    Raises:
        DataError: naming the shard and what differs (``albert data verify`` checks every byte).
    """
    _check_shards(Path(data_dir), manifest or load_manifest(data_dir), full=False)


def _check_shards(data_dir: Path, manifest: dict[str, Any], full: bool) -> None:
    advice = f"the shard was changed after `albert prepare` wrote it; prepare {data_dir} again"
    for entry in manifest["shards"]:
        p = data_dir / entry["file"]
        if not p.is_file():
            raise DataError(f"{p}: listed in {data_dir / MANIFEST} but missing")
        size = p.stat().st_size
        if "bytes" in entry and size != entry["bytes"]:
            raise DataError(f"{p}: {size} bytes, the manifest says {entry['bytes']}; {advice}")
        if full or "sample_sha256" not in entry:
            digest, want, what = sha256_file(p), entry["sha256"], "sha256"
        else:
            digest, want, what = sampled_sha256(p), entry["sample_sha256"], "sampled sha256"
        if digest != want:
            raise DataError(f"{p}: {what} {digest} does not match the manifest's ({want}); {advice}")


SAMPLE_BLOCK = 1 << 16
SAMPLE_BLOCKS = 8


def sampled_sha256(path: Path) -> str:
    """The sha256 of a file's size and `SAMPLE_BLOCKS` blocks of `SAMPLE_BLOCK` bytes at fixed, evenly
    spaced offsets, the first and last included (the whole file when it is no longer than those blocks).
    Reads 512 KiB of a shard of any size; a change outside the sampled blocks is for `verify_shards`."""
    size = path.stat().st_size
    h = hashlib.sha256(b"%d:" % size)
    with open(path, "rb") as f:
        if size <= SAMPLE_BLOCK * SAMPLE_BLOCKS:
            h.update(f.read())
        else:
            span = size - SAMPLE_BLOCK
            for i in range(SAMPLE_BLOCKS):
                f.seek(i * span // (SAMPLE_BLOCKS - 1))
                h.update(f.read(SAMPLE_BLOCK))
    return h.hexdigest()


def clean_temporaries(data_dir: Path) -> int:
    """Remove what interrupted runs left behind (never trusted); returns how many were removed."""
    n = 0
    for p in Path(data_dir).glob(TMP_PREFIX + "*"):
        n += 1
        if p.is_dir():
            shutil.rmtree(p, ignore_errors=True)
        else:
            with contextlib.suppress(OSError):
                p.unlink()
    return n


def iter_shard_paths(data_dir: Path, manifest: dict[str, Any]) -> Iterator[Path]:
    for entry in manifest["shards"]:
        yield Path(data_dir) / entry["file"]
