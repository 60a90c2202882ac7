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
``instances``      record (I,)  :data:`albert.data.instances.INSTANCE_DTYPE`: two spans + label/flags
``mask_offsets``   i8 (I+1,)    static masking only: instance i's masks = mask_*[mask_offsets[i]:...]
``mask_positions`` u2           position in ``[CLS] A [SEP] B [SEP]``
``mask_inputs``    u2 or u4     the id the model sees there ([MASK], the original, or a random id)
``mask_info``      u1           span n, replacement kind and span start (:mod:`albert.data.masking`)
=================  ===========  ===================================================================

The footer records the sections and the shard's metadata (its documents' global range, a hash of the
text it was built from, the configuration hash, counts). A shard is written to a temporary name, flushed
and fsync'ed, and only then renamed into place (``os.replace``): an interrupted run leaves temporaries,
never a file named ``shard-*.bin`` that is half written. The manifest records each shard's sha256.
"""

from __future__ import annotations

import contextlib
import hashlib
import json
import os
import shutil
import tempfile
from collections.abc import Iterator
from pathlib import Path
from typing import IO, Any

import numpy as np

from albert.data.documents import DataError

MAGIC = b"ALBSHRD1"
ALIGN = 64
FORMAT_VERSION = 1
MANIFEST = "manifest.json"
TMP_PREFIX = ".tmp-"


def _file_mode() -> int:
    old = os.umask(0)
    os.umask(old)
    return 0o666 & ~old


FILE_MODE = _file_mode()  # mkstemp creates 0600 files; the final files get the usual umask-derived mode


def shard_name(index: int) -> str:
    return f"shard-{index:05d}.bin"


def token_dtype(vocab_size: int) -> np.dtype:
    """The smallest unsigned dtype that holds every id."""
    return np.dtype("<u2") if vocab_size <= 1 << 16 else np.dtype("<u4")


def fsync_dir(path: Path) -> None:
    with contextlib.suppress(OSError):
        fd = os.open(path, os.O_RDONLY)
        try:
            os.fsync(fd)
        finally:
            os.close(fd)


def atomic_write_bytes(path: Path, data: bytes) -> None:
    """Write a small file atomically (temporary file in the same folder, fsync, rename)."""
    path = Path(path)
    fd, tmp = tempfile.mkstemp(prefix=TMP_PREFIX + path.name + ".", dir=path.parent)
    try:
        os.fchmod(fd, FILE_MODE)
        with os.fdopen(fd, "wb") as f:
            f.write(data)
            f.flush()
            os.fsync(f.fileno())
        os.replace(tmp, path)
        fsync_dir(path.parent)
    except BaseException:
        with contextlib.suppress(OSError):
            os.unlink(tmp)
        raise


def atomic_write_json(path: Path, obj: Any) -> None:
    atomic_write_bytes(path, (json.dumps(obj, indent=1, sort_keys=False) + "\n").encode("utf-8"))


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
    """Assemble sections into ``path`` atomically; returns (sha256 of the file, size in bytes)."""
    path = Path(path)
    fd, tmp = tempfile.mkstemp(prefix=TMP_PREFIX + path.name + ".", dir=path.parent)
    h = hashlib.sha256()
    offset = 0
    table: dict[str, dict[str, Any]] = {}
    try:
        os.fchmod(fd, FILE_MODE)
        with os.fdopen(fd, "wb") as f:

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
                    name, dtype, count = sec.name, sec.dtype, sec.count
                    table[name] = {
                        "dtype": dtype.descr if dtype.fields else dtype.str,
                        "count": count,
                        "offset": offset,
                    }
                    with open(sec.path, "rb") as src:
                        while True:
                            b = src.read(1 << 22)
                            if not b:
                                break
                            put(b)
                else:
                    name, arr = sec
                    arr = np.ascontiguousarray(arr)
                    dtype = arr.dtype
                    table[name] = {
                        "dtype": dtype.descr if dtype.fields else dtype.str,
                        "count": int(arr.size),
                        "offset": offset,
                    }
                    put(memoryview(arr.tobytes()))
            footer = json.dumps(
                {"version": FORMAT_VERSION, "sections": table, "meta": meta}, sort_keys=True
            ).encode("utf-8")
            put(footer)
            put(len(footer).to_bytes(8, "little"))
            put(MAGIC)
            f.flush()
            os.fsync(f.fileno())
        os.replace(tmp, path)
        fsync_dir(path.parent)
    except BaseException:
        with contextlib.suppress(OSError):
            os.unlink(tmp)
        raise
    return h.hexdigest(), offset


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


def load_manifest(data_dir: str | Path) -> dict[str, Any]:
    """Read and check ``DATA_DIR/manifest.json``."""
    path = Path(data_dir) / MANIFEST
    if not path.is_file():
        parts = sorted(Path(data_dir).glob("manifest.part-*.json")) if Path(data_dir).is_dir() else []
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
    return manifest


def verify_shards(data_dir: str | Path, manifest: dict[str, Any] | None = None) -> None:
    """Recompute every shard's sha256 and compare with the manifest; raises :class:`DataError`."""
    data_dir = Path(data_dir)
    manifest = manifest or load_manifest(data_dir)
    for entry in manifest["shards"]:
        p = data_dir / entry["file"]
        if not p.is_file():
            raise DataError(f"{p}: listed in {data_dir / MANIFEST} but missing")
        digest = sha256_file(p)
        if digest != entry["sha256"]:
            raise DataError(f"{p}: sha256 {digest} does not match the manifest ({entry['sha256']})")


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
