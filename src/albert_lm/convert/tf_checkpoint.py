"""TensorFlow's checkpoint format (the "V2" tensor bundle), read without TensorFlow.

A checkpoint ``PREFIX`` is ``PREFIX.index`` plus ``PREFIX.data-00000-of-0000N`` shards:

* ``.index`` is a LevelDB-style SSTable (tensorflow/core/lib/io/table*, format.h): data blocks of
  prefix-compressed ``key -> value`` entries with a restart array, an index block of ``last key ->
  BlockHandle``, an empty meta-index block and a 48-byte footer ending in the table magic. Every block is
  followed by a 1-byte compression type (TF writes 0 = none) and the masked CRC32C of block + type byte.
* The keys are tensor names (sorted); the value of key ``""`` is a ``BundleHeaderProto`` (number of
  shards, endianness), every other value a ``BundleEntryProto`` (dtype, shape, shard, offset, size and the
  masked CRC32C of the tensor's bytes) (tensorflow/core/protobuf/tensor_bundle.proto). Both protobuf
  messages are decoded by hand here.
* A shard holds the raw bytes of its tensors, back to back, in the endianness of the header; strings are
  ``varint64`` lengths + a masked CRC32C of the lengths + the bytes (tensor_bundle.cc WriteStringTensor).

Every tensor's checksum is verified when it is read (TensorFlow's BundleReader does the same and reports
"Checksum does not match"). CRC32C (Castagnoli) is computed with numpy, see `crc32c`.

`write_checkpoint` writes the same format (used by tests and the benchmark; TensorFlow reads it).
"""

from __future__ import annotations

import contextlib
import functools
import io
import logging
import math
import os
import re
import struct
from collections.abc import Iterator, Mapping
from dataclasses import dataclass
from pathlib import Path
from typing import BinaryIO, Literal

import numpy as np

from albert_lm._io import proto_fields, read_varint, write_varint

logger = logging.getLogger(__name__)


class CheckpointFormatError(ValueError):
    """A file that is not a readable TensorFlow checkpoint; the message names the file and what is wrong."""


class ChecksumError(CheckpointFormatError):
    """Stored and computed CRC32C of a tensor (or an index block) differ: the file is corrupt."""


# ================================================================================================= CRC32C
# CRC-32C (Castagnoli), reflected polynomial 0x82F63B78, as tensorflow/core/lib/hash/crc32c.
_POLY = 0x82F63B78
# Masking as tensorflow/core/lib/hash/crc32c.h: rotate right by 15 bits and add a constant, so that the
# CRC of a string that contains CRCs is not degenerate.
_MASK_DELTA = 0xA282EAD8


def mask_crc(crc: int) -> int:
    """TensorFlow's ``crc32c::Mask``."""
    return (((crc >> 15) | (crc << 17)) + _MASK_DELTA) & 0xFFFFFFFF


def unmask_crc(masked: int) -> int:
    """TensorFlow's ``crc32c::Unmask``."""
    rot = (masked - _MASK_DELTA) & 0xFFFFFFFF
    return ((rot >> 17) | (rot << 15)) & 0xFFFFFFFF


@functools.cache
def _tables() -> tuple[list[int], np.ndarray, np.ndarray, np.ndarray]:
    """Byte table (as a list for the scalar loop) and, for the vectorised loop, two 65536-entry tables
    that advance the register over 4 bytes given as a little-endian uint32 (low and high 16 bits)."""
    t = np.arange(256, dtype=np.uint32)
    for _ in range(8):
        t = np.where(t & 1, (t >> 1) ^ np.uint32(_POLY), t >> 1).astype(np.uint32)
    # shifted[k][b]: the contribution of byte b followed by k zero bytes
    shifted = [t]
    for _ in range(3):
        prev = shifted[-1]
        shifted.append((t[prev & 0xFF] ^ (prev >> 8)).astype(np.uint32))
    v = np.arange(65536, dtype=np.uint32)
    lo = (shifted[3][v & 0xFF] ^ shifted[2][v >> 8]).astype(np.uint32)
    hi = (shifted[1][v & 0xFF] ^ shifted[0][v >> 8]).astype(np.uint32)
    return t.tolist(), t, lo, hi


def _apply_op(cols: np.ndarray, x: np.ndarray) -> np.ndarray:
    """Apply the GF(2)-linear map with basis images ``cols`` (32,) to the uint32 values ``x``."""
    bits = ((x[..., None] >> np.arange(32, dtype=np.uint32)) & 1).astype(bool)
    return np.bitwise_xor.reduce(np.where(bits, cols, np.uint32(0)), axis=-1).astype(np.uint32)


@functools.lru_cache(maxsize=256)
def _zeros_op(n: int) -> np.ndarray:
    """Basis images of "feed n zero bytes into the CRC register" (by repeated squaring)."""
    if n == 1:
        _, t, _, _ = _tables()
        e = np.uint32(1) << np.arange(32, dtype=np.uint32)
        return (t[e & 0xFF] ^ (e >> 8)).astype(np.uint32)
    half = _zeros_op(n // 2)
    cols = _apply_op(half, half)
    return _apply_op(_zeros_op(1), cols) if n % 2 else cols


@functools.lru_cache(maxsize=256)
def _zeros_tables(n: int) -> np.ndarray:
    """`_zeros_op(n)` as four 256-entry byte tables, for applying it to many registers at once."""
    cols = _zeros_op(n)
    b = np.arange(256, dtype=np.uint32)
    tabs = np.zeros((4, 256), dtype=np.uint32)
    for k in range(4):
        for i in range(8):
            tabs[k] ^= np.where((b >> i) & 1, cols[8 * k + i], np.uint32(0)).astype(np.uint32)
    return tabs


def _crc_lanes(state: int, block: np.ndarray) -> int:
    """Advance the raw CRC register ``state`` over ``block`` (N lanes x L bytes, N a power of two, L a
    multiple of 4), all lanes at once.

    The register update is linear over GF(2), so the register after a || b is Z_|b|(reg after a) xor
    (reg after b from 0), with Z_n "feed n zero bytes". Each lane (a contiguous run of L bytes) runs from
    0 (lane 0 from ``state``), four bytes per step; then neighbouring lanes are combined pairwise.
    """
    _, _, lo_t, hi_t = _tables()
    n_lanes, length = block.shape
    reg = np.zeros(n_lanes, dtype=np.uint32)
    reg[0] = state
    x = np.empty(n_lanes, dtype=np.uint32)
    lo = np.empty(n_lanes, dtype=np.uint32)
    step = max(4, ((4 << 20) // n_lanes) & ~3)  # bytes per lane transposed at a time: a 4 MiB temporary
    for j in range(0, length, step):
        words = np.ascontiguousarray(block[:, j : j + step].view("<u4").T)  # (step/4, N)
        for row in words:
            np.bitwise_xor(reg, row, out=x)
            np.bitwise_and(x, 0xFFFF, out=lo)
            np.right_shift(x, 16, out=x)
            reg = lo_t[lo]
            reg ^= hi_t[x]
    span = length
    while reg.size > 1:
        pairs = reg.reshape(-1, 2)
        tabs = _zeros_tables(span)
        a = pairs[:, 0]
        reg = tabs[0][a & 0xFF] ^ tabs[1][(a >> 8) & 0xFF] ^ tabs[2][(a >> 16) & 0xFF] ^ tabs[3][a >> 24]
        reg ^= pairs[:, 1]
        span *= 2
    return int(reg[0])


def crc32c(data: bytes | bytearray | memoryview | np.ndarray, crc: int = 0) -> int:
    """CRC-32C of ``data``, extending ``crc`` (the CRC of preceding bytes), like TF's ``crc32c::Extend``.

    Large inputs run through `_crc_lanes` (about 300 MB/s with numpy), the tail byte by byte.
    """
    buf = np.frombuffer(data, dtype=np.uint8) if not isinstance(data, np.ndarray) else data.reshape(-1)
    if buf.dtype != np.uint8:
        buf = buf.view(np.uint8)
    state = crc ^ 0xFFFFFFFF
    pos, n = 0, buf.size
    while n - pos >= 2048:
        rem = n - pos
        lanes = 1 << min(15, (rem // 512).bit_length() - 1)  # >= 4 lanes of >= 512 bytes each
        length = (rem // lanes) & ~3
        state = _crc_lanes(state, buf[pos : pos + lanes * length].reshape(lanes, length))
        pos += lanes * length
    table = _tables()[0]
    for byte in buf[pos:].tobytes():
        state = table[(state ^ byte) & 0xFF] ^ (state >> 8)
    return state ^ 0xFFFFFFFF


# ================================================================================================ protobuf
# Protobuf fields and varints are albert_lm._io's (the SentencePiece readers parse protobuf by hand too); a
# truncated field raises ValueError, which every caller below turns into a CheckpointFormatError.
def _put_field(out: bytearray, field: int, wire: int, value: int | bytes) -> None:
    write_varint(out, (field << 3) | wire)
    if wire == 0:
        assert isinstance(value, int)
        write_varint(out, value)
    elif wire == 2:
        assert isinstance(value, bytes)
        write_varint(out, len(value))
        out += value
    elif wire == 5:
        assert isinstance(value, int)
        out += struct.pack("<I", value)


# ================================================================================================= dtypes
# tensorflow/core/framework/types.proto DataType -> (name, little-endian numpy dtype). bfloat16 has no numpy
# type: it is read as its 16 raw bits and widened exactly to float32.
_DTYPES: dict[int, tuple[str, str | None]] = {
    1: ("float32", "<f4"),
    2: ("float64", "<f8"),
    3: ("int32", "<i4"),
    4: ("uint8", "|u1"),
    5: ("int16", "<i2"),
    6: ("int8", "|i1"),
    7: ("string", None),
    8: ("complex64", "<c8"),
    9: ("int64", "<i8"),
    10: ("bool", "|b1"),
    14: ("bfloat16", "<u2"),
    17: ("uint16", "<u2"),
    18: ("complex128", "<c16"),
    19: ("float16", "<f2"),
    22: ("uint32", "<u4"),
    23: ("uint64", "<u8"),
}
_UNSUPPORTED_DTYPES = {
    11: "qint8",
    12: "quint8",
    13: "qint32",
    15: "qint16",
    16: "quint16",
    20: "resource",
    21: "variant",
}
_NP_TO_TF = {np.dtype(v[1]): k for k, v in _DTYPES.items() if v[1] is not None and k != 14}


@dataclass(frozen=True)
class TensorEntry:
    """Where and what one tensor of a checkpoint is (a decoded ``BundleEntryProto``)."""

    name: str
    dtype: str
    """TensorFlow's dtype name (``float32``, ``bfloat16``, ``string``, ...)."""
    shape: tuple[int, ...]
    shard: int
    offset: int
    size: int
    """Bytes in the shard."""
    crc32c: int
    """Stored checksum, unmasked."""
    num_slices: int = 0
    """Slices of a partitioned variable (not supported for reading)."""

    @property
    def numel(self) -> int:
        return math.prod(self.shape)


def _parse_shape(buf: bytes, where: str) -> tuple[int, ...]:
    dims: list[int] = []
    for field, _, value in proto_fields(buf):
        if field == 2:  # repeated Dim dim
            size = 0
            for f2, _, v2 in proto_fields(value):
                if f2 == 1:
                    size = v2 - (1 << 64) if v2 >= 1 << 63 else v2
            dims.append(size)
        elif field == 3 and value:
            raise CheckpointFormatError(f"{where}: unknown rank")
    if any(d < 0 for d in dims):
        raise CheckpointFormatError(f"{where}: partially unknown shape {dims}")
    return tuple(dims)


def _parse_entry(name: str, value: bytes, where: str) -> TensorEntry:
    dtype_enum, shard, offset, size, crc, slices = 0, 0, 0, 0, 0, 0
    shape: tuple[int, ...] = ()
    try:
        for field, _, v in proto_fields(value):
            if field == 1:
                dtype_enum = v
            elif field == 2:
                shape = _parse_shape(v, f"{where}: tensor {name!r}")
            elif field == 3:
                shard = v
            elif field == 4:
                offset = v
            elif field == 5:
                size = v
            elif field == 6:
                crc = v
            elif field == 7:
                slices += 1
    except (IndexError, ValueError, struct.error) as e:
        raise CheckpointFormatError(
            f"{where}: entry of tensor {name!r} is not a valid BundleEntryProto: {e}"
        ) from None
    if dtype_enum in _DTYPES:
        dtype = _DTYPES[dtype_enum][0]
    elif dtype_enum in _UNSUPPORTED_DTYPES:
        dtype = _UNSUPPORTED_DTYPES[dtype_enum]
    else:
        dtype = f"dtype#{dtype_enum}"
    return TensorEntry(name, dtype, tuple(shape), shard, offset, size, unmask_crc(crc), slices)


# ================================================================================================= SSTable
_TABLE_MAGIC = 0xDB4775248B80FB57  # tensorflow/core/lib/io/format.h kTableMagicNumber
_FOOTER_SIZE = 48  # two BlockHandles padded to 40 bytes + 8-byte magic
_BLOCK_TRAILER = 5  # 1-byte compression type + 4-byte masked crc32c


def _read_block(data: bytes, offset: int, size: int, path: Path) -> bytes:
    end = offset + size + _BLOCK_TRAILER
    if end > len(data):
        raise CheckpointFormatError(
            f"{path}: block at offset {offset} runs past the end of the file (truncated?)"
        )
    block = data[offset : offset + size]
    ctype = data[offset + size]
    (stored,) = struct.unpack_from("<I", data, offset + size + 1)
    actual = crc32c(data[offset : offset + size + 1])
    if unmask_crc(stored) != actual:
        raise ChecksumError(
            f"{path}: index block at offset {offset} ({size} bytes) is corrupt: crc32c stored "
            f"{unmask_crc(stored):#010x}, computed {actual:#010x}"
        )
    if ctype != 0:
        # TensorFlow writes bundle indexes uncompressed (tensor_bundle.cc TableBuilderOptions).
        raise CheckpointFormatError(
            f"{path}: block at offset {offset} is compressed (type {ctype}); not supported"
        )
    return block


def _block_entries(block: bytes, path: Path) -> Iterator[tuple[bytes, bytes]]:
    if len(block) < 4:
        raise CheckpointFormatError(f"{path}: block of {len(block)} bytes is too short")
    (num_restarts,) = struct.unpack_from("<I", block, len(block) - 4)
    limit = len(block) - 4 - 4 * num_restarts
    if limit < 0:
        raise CheckpointFormatError(f"{path}: block restart array larger than the block")
    pos, key = 0, b""
    while pos < limit:
        shared, pos = read_varint(block, pos)
        non_shared, pos = read_varint(block, pos)
        value_len, pos = read_varint(block, pos)
        if shared > len(key) or pos + non_shared + value_len > limit:
            raise CheckpointFormatError(f"{path}: corrupt block entry at byte {pos}")
        key = key[:shared] + block[pos : pos + non_shared]
        pos += non_shared
        yield key, block[pos : pos + value_len]
        pos += value_len


def _read_table(path: Path) -> Iterator[tuple[bytes, bytes]]:
    data = path.read_bytes()
    if len(data) < _FOOTER_SIZE:
        raise CheckpointFormatError(
            f"{path}: {len(data)} bytes is too short for a checkpoint index (truncated?)"
        )
    footer = data[-_FOOTER_SIZE:]
    (magic,) = struct.unpack_from("<Q", footer, 40)
    if magic != _TABLE_MAGIC:
        raise CheckpointFormatError(f"{path}: not a TensorFlow checkpoint index (bad table magic {magic:#x})")
    _, pos = read_varint(footer, 0)  # meta-index handle: offset
    _, pos = read_varint(footer, pos)  # meta-index handle: size (the meta-index block is empty in bundles)
    index_offset, pos = read_varint(footer, pos)
    index_size, pos = read_varint(footer, pos)
    index_block = _read_block(data, index_offset, index_size, path)
    for _, handle in _block_entries(index_block, path):
        offset, p = read_varint(handle, 0)
        size, _ = read_varint(handle, p)
        yield from _block_entries(_read_block(data, offset, size, path), path)


# ============================================================================================== reading
_CHUNK_BYTES = 4 << 20  # streaming reads (transposed / converted) go through a buffer of about this size


def _data_path(prefix: Path, shard: int, num_shards: int) -> Path:
    return Path(f"{prefix}.data-{shard:05d}-of-{num_shards:05d}")


def resolve_prefix(path: str | Path) -> Path:
    """The checkpoint prefix for a prefix, one of its files, or a directory that holds one checkpoint.

    A directory may be a release tarball (``model.ckpt-best.index`` ...), a training directory with a
    ``checkpoint`` state file (its ``model_checkpoint_path`` is used), or a TF-Hub module
    (``variables/variables.index``).
    """
    p = Path(path)
    if p.is_dir():
        state = p / "checkpoint"
        if state.is_file():
            m = re.search(r'^model_checkpoint_path:\s*"(.*)"\s*$', state.read_text(errors="replace"), re.M)
            if m:
                cand = Path(m.group(1))
                cand = cand if cand.is_absolute() else p / cand
                if Path(f"{cand}.index").is_file():
                    return cand
                # the state file often holds the absolute path of the training machine
                local = p / cand.name
                if Path(f"{local}.index").is_file():
                    return local
        if (p / "variables" / "variables.index").is_file():
            return p / "variables" / "variables"
        indexes = sorted(p.glob("*.index"))
        if len(indexes) == 1:
            return indexes[0].with_suffix("")
        if not indexes:
            raise FileNotFoundError(f"{p}: no TensorFlow checkpoint (*.index) in this directory")
        names = ", ".join(i.name for i in indexes)
        raise CheckpointFormatError(
            f"{p}: several checkpoints ({names}); pass the prefix of one, e.g. {indexes[0].with_suffix('')}"
        )
    m = re.match(r"^(.*)\.(index|meta|data-\d{5}-of-\d{5})$", p.name)
    if m:
        p = p.with_name(m.group(1))
    if not Path(f"{p}.index").is_file():
        if p.is_file():
            raise CheckpointFormatError(
                f"{p}: no {p.name}.index next to it; this looks like a V1 checkpoint (a single file), which "
                "is not supported (re-save it with TensorFlow >= 1.1)"
            )
        raise FileNotFoundError(f"no TensorFlow checkpoint at {p} (expected {p}.index)")
    return p


class TFCheckpoint:
    """A TensorFlow V2 checkpoint opened for reading, without TensorFlow.

    >>> ckpt = TFCheckpoint("albert_base/model.ckpt-best")     # or the directory, or any of its files
    >>> ckpt.entries["bert/embeddings/word_embeddings"].shape
    (30000, 128)
    >>> arr = ckpt.read("bert/embeddings/word_embeddings")       # numpy, checksum verified

    Each `read` returns a fresh array that owns its memory (one copy of the tensor's bytes, read straight
    from the shard file into it); nothing else is cached, so converting a checkpoint holds at most the
    tensors the caller keeps.
    """

    def __init__(self, path: str | Path) -> None:
        self.prefix = resolve_prefix(path)
        self.index_path = Path(f"{self.prefix}.index")
        self.num_shards = 1
        self.big_endian = False
        self.entries: dict[str, TensorEntry] = {}
        saw_header = False
        try:
            for key, value in _read_table(self.index_path):
                if key == b"":
                    saw_header = True
                    self._parse_header(value)
                    continue
                name = key.decode("utf-8", errors="replace")
                self.entries[name] = _parse_entry(name, value, str(self.index_path))
        except (IndexError, ValueError, struct.error) as e:
            if isinstance(e, CheckpointFormatError):
                raise
            raise CheckpointFormatError(f"{self.index_path}: corrupt checkpoint index: {e}") from None
        if not saw_header:
            raise CheckpointFormatError(
                f"{self.index_path}: no bundle header (not a TensorFlow V2 checkpoint)"
            )
        self._files: dict[int, BinaryIO] = {}

    def _parse_header(self, value: bytes) -> None:
        for field, _, v in proto_fields(value):
            if field == 1:
                self.num_shards = v
            elif field == 2:
                self.big_endian = v == 1

    # ----------------------------------------------------------------------------------- mapping-like
    def __contains__(self, name: object) -> bool:
        return name in self.entries

    def __iter__(self) -> Iterator[str]:
        return iter(self.entries)

    def __len__(self) -> int:
        return len(self.entries)

    def keys(self) -> list[str]:
        return list(self.entries)

    def __repr__(self) -> str:
        return f"TFCheckpoint({str(self.prefix)!r}, {len(self.entries)} tensors, {self.num_shards} shard(s))"

    def shard_path(self, shard: int) -> Path:
        return _data_path(self.prefix, shard, self.num_shards)

    # ----------------------------------------------------------------------------------------- reading
    def _file(self, shard: int) -> BinaryIO:
        f = self._files.get(shard)
        if f is None:
            path = self.shard_path(shard)
            try:
                f = open(path, "rb", buffering=0)  # noqa: SIM115 - kept open until close()
            except FileNotFoundError:
                raise FileNotFoundError(f"checkpoint shard {path} is missing") from None
            self._files[shard] = f
        return f

    def _check_location(self, entry: TensorEntry) -> None:
        if entry.num_slices:
            raise CheckpointFormatError(
                f"{self.index_path}: tensor {entry.name!r} is a partitioned variable ({entry.num_slices} slices); "
                "not supported"
            )
        if not 0 <= entry.shard < self.num_shards:
            raise CheckpointFormatError(
                f"{self.index_path}: tensor {entry.name!r} is in shard {entry.shard}, but the checkpoint has "
                f"{self.num_shards}"
            )

    def _readinto(self, entry: TensorEntry, start: int, buf: np.ndarray) -> None:
        """Fill the uint8 array ``buf`` with the tensor's bytes from ``start`` on (relative to the tensor)."""
        f = self._file(entry.shard)
        f.seek(entry.offset + start)
        view, got = memoryview(buf.data).cast("B"), 0
        while got < buf.size:  # one read() returns at most ~2 GiB
            n = f.readinto(view[got:])  # type: ignore[attr-defined]
            if not n:
                break
            got += n
        if got != buf.size:
            file_size = os.fstat(f.fileno()).st_size
            raise ChecksumError(
                f"{self.shard_path(entry.shard)}: tensor {entry.name!r} needs bytes [{entry.offset}, "
                f"{entry.offset + entry.size}) but the file has {file_size} bytes: truncated (stored crc32c "
                f"{entry.crc32c:#010x} cannot be verified)"
            )

    def _verify(self, entry: TensorEntry, actual: int) -> None:
        if actual != entry.crc32c:
            raise ChecksumError(
                f"{self.shard_path(entry.shard)}: tensor {entry.name!r} ({entry.size} bytes at offset "
                f"{entry.offset}) is corrupt: crc32c stored {entry.crc32c:#010x}, computed {actual:#010x}"
            )

    def stored_dtype(self, name: str) -> np.dtype:
        """The numpy dtype of the tensor's bytes in the file (byte order included; bfloat16 as ``<u2``)."""
        entry = self.entries[name]
        tf_enum = next((k for k, v in _DTYPES.items() if v[0] == entry.dtype), None)
        if tf_enum is None or _DTYPES[tf_enum][1] is None:
            raise CheckpointFormatError(
                f"{self.index_path}: tensor {name!r} has unsupported dtype {entry.dtype}"
            )
        dtype = np.dtype(_DTYPES[tf_enum][1])  # type: ignore[arg-type]
        return dtype.newbyteorder(">") if self.big_endian and dtype.itemsize > 1 else dtype

    def read(
        self, name: str, *, verify: bool = True, out: np.ndarray | None = None, transpose: bool = False
    ) -> np.ndarray:
        """The tensor ``name`` as a numpy array in native byte order (bfloat16 widened exactly to float32,
        strings as an object array of ``bytes``).

        Args:
            verify: check the stored CRC32C (raises `ChecksumError`, as for a truncated shard).
            out: a C-contiguous array to fill (its dtype may differ: values are converted) instead of a new
                one; with ``transpose`` its shape is the transposed one.
            transpose: return a 2-D tensor transposed (contiguous), e.g. a TF kernel (in, out) as
                nn.Linear's (out, in). The bytes are streamed through a 4 MiB buffer into the result, so
                reading holds one copy of the tensor, whatever its layout and byte order.
        """
        try:
            entry = self.entries[name]
        except KeyError:
            raise KeyError(f"{self.index_path}: no tensor {name!r}") from None
        if entry.dtype == "string":
            if out is not None or transpose:
                raise ValueError(f"tensor {name!r}: out= and transpose= do not apply to strings")
            return self._read_strings(entry, verify)
        stored = self.stored_dtype(name)
        if entry.size != entry.numel * stored.itemsize:
            raise CheckpointFormatError(
                f"{self.index_path}: tensor {name!r}: {entry.size} bytes do not hold {entry.dtype} {entry.shape}"
            )
        self._check_location(entry)
        if transpose and len(entry.shape) != 2:
            raise ValueError(f"tensor {name!r} of shape {entry.shape}: transpose needs a 2-D tensor")
        shape = entry.shape[::-1] if transpose else entry.shape
        native = np.dtype(np.float32) if entry.dtype == "bfloat16" else stored.newbyteorder("=")
        if out is None:
            out = np.empty(shape, dtype=native)
        elif out.shape != shape or not out.flags.c_contiguous:
            raise ValueError(f"tensor {name!r}: out= must be C-contiguous of shape {shape}, got {out.shape}")

        if not transpose and out.dtype == stored and stored.isnative:
            raw = out.reshape(-1).view(np.uint8)  # straight from the file into the result
            self._readinto(entry, 0, raw)
            if verify:
                self._verify(entry, crc32c(raw))
            return out

        # Stream: 4 MiB of whole rows (or elements) at a time, converted into place.
        rows, cols = (entry.shape[0], entry.shape[1]) if transpose else (entry.numel, 1)
        row_bytes = cols * stored.itemsize
        per_chunk = max(1, _CHUNK_BYTES // max(row_bytes, 1))
        buf = np.empty(min(rows, per_chunk) * row_bytes, dtype=np.uint8)
        flat = out.reshape(-1)
        crc = 0
        for r0 in range(0, rows, per_chunk):
            n = min(per_chunk, rows - r0)
            chunk = buf[: n * row_bytes]
            self._readinto(entry, r0 * row_bytes, chunk)
            if verify:
                crc = crc32c(chunk, crc)
            values = chunk.view(stored)
            if entry.dtype == "bfloat16":
                values = (values.astype(np.uint32) << 16).view(np.float32)
            if transpose:
                out[:, r0 : r0 + n] = values.reshape(n, cols).T
            else:
                flat[r0 : r0 + n] = values
        if verify:
            self._verify(entry, crc)
        return out

    def _read_strings(self, entry: TensorEntry, verify: bool) -> np.ndarray:
        self._check_location(entry)
        buf = np.empty(entry.size, dtype=np.uint8)
        self._readinto(entry, 0, buf)
        raw = buf.tobytes()
        n = entry.numel
        out = np.empty(n, dtype=object)
        if entry.size == 0:
            if n:
                out[:] = b""
            return out.reshape(entry.shape)
        pos, lengths = 0, []
        try:
            for _ in range(n):
                length, pos = read_varint(raw, pos)
                lengths.append(length)
            order = ">" if self.big_endian else "<"
            packed = b"".join(
                struct.pack(f"{order}I" if ln <= 0xFFFFFFFF else f"{order}Q", ln) for ln in lengths
            )
            crc = crc32c(packed)
            (stored_len_crc,) = struct.unpack_from(f"{order}I", raw, pos)
            if verify and unmask_crc(stored_len_crc) != crc:
                raise ChecksumError(
                    f"{self.shard_path(entry.shard)}: string tensor {entry.name!r}: crc32c of its lengths stored "
                    f"{unmask_crc(stored_len_crc):#010x}, computed {crc:#010x}"
                )
            crc = crc32c(raw[pos : pos + 4], crc)
            pos += 4
            for i, ln in enumerate(lengths):
                out[i] = raw[pos : pos + ln]
                pos += ln
            crc = crc32c(raw[pos - sum(lengths) : pos], crc)
        except ChecksumError:
            raise
        except (ValueError, IndexError, struct.error):  # ValueError: a length varint cut off by the end
            raise ChecksumError(
                f"{self.shard_path(entry.shard)}: string tensor {entry.name!r} is truncated"
            ) from None
        if verify:
            self._verify(entry, crc)
        return out.reshape(entry.shape)

    def items(self, *, verify: bool = True) -> Iterator[tuple[str, np.ndarray]]:
        for name in self.entries:
            yield name, self.read(name, verify=verify)

    def close(self) -> None:
        for f in self._files.values():
            f.close()
        self._files.clear()

    def __enter__(self) -> TFCheckpoint:
        return self

    def __exit__(self, *exc: object) -> None:
        self.close()

    def __del__(self) -> None:
        with contextlib.suppress(Exception):  # interpreter shutdown
            self.close()


# ============================================================================================== writing
def _block(entries: list[tuple[bytes, bytes]], restart_interval: int) -> bytes:
    out = bytearray()
    restarts: list[int] = []
    prev = b""
    for i, (key, value) in enumerate(entries):
        if i % restart_interval == 0:
            restarts.append(len(out))
            shared = 0
        else:
            shared = 0
            while shared < min(len(prev), len(key)) and prev[shared] == key[shared]:
                shared += 1
        write_varint(out, shared)
        write_varint(out, len(key) - shared)
        write_varint(out, len(value))
        out += key[shared:]
        out += value
        prev = key
    if not restarts:
        restarts.append(0)
    for r in restarts:
        out += struct.pack("<I", r)
    out += struct.pack("<I", len(restarts))
    return bytes(out)


def _write_table(f: io.BufferedWriter, items: list[tuple[bytes, bytes]], block_size: int) -> None:
    def emit(block: bytes) -> bytes:
        offset = f.tell()
        f.write(block)
        f.write(bytes([0]) + struct.pack("<I", mask_crc(crc32c(block + b"\x00"))))
        handle = bytearray()
        write_varint(handle, offset)
        write_varint(handle, len(block))
        return bytes(handle)

    index: list[tuple[bytes, bytes]] = []
    pending: list[tuple[bytes, bytes]] = []
    size = 0
    for key, value in items:
        pending.append((key, value))
        size += len(key) + len(value) + 8
        if size >= block_size:
            index.append((key, emit(_block(pending, 16))))
            pending, size = [], 0
    if pending:
        index.append((pending[-1][0], emit(_block(pending, 16))))
    meta_handle = emit(_block([], 16))
    index_handle = emit(_block(index, 1))
    footer = (meta_handle + index_handle).ljust(40, b"\x00") + struct.pack("<Q", _TABLE_MAGIC)
    f.write(footer)


def write_checkpoint(
    prefix: str | Path,
    tensors: Mapping[str, np.ndarray],
    *,
    num_shards: int = 1,
    big_endian: bool = False,
    block_size: int = 4096,
) -> Path:
    """Write ``tensors`` as a TensorFlow V2 checkpoint at ``prefix`` (TensorFlow's
    ``tf.train.load_checkpoint`` reads it). Numeric dtypes only. Tensors are spread over ``num_shards``
    data files in name order; ``big_endian`` writes a big-endian bundle (as a big-endian machine would).
    Each tensor is written from its own buffer: writing holds no second copy of the checkpoint."""
    prefix = Path(prefix)
    prefix.parent.mkdir(parents=True, exist_ok=True)
    names = sorted(tensors, key=lambda s: s.encode("utf-8"))
    per_shard = max(1, math.ceil(len(names) / num_shards))
    order: Literal["<", ">"] = ">" if big_endian else "<"
    items: list[tuple[bytes, bytes]] = []
    header = bytearray()
    _put_field(header, 1, 0, num_shards)
    if big_endian:
        _put_field(header, 2, 0, 1)
    version = bytearray()
    _put_field(version, 1, 0, 1)  # VersionDef.producer = kTensorBundleVersion (tensor_bundle.cc)
    _put_field(header, 3, 2, bytes(version))
    items.append((b"", bytes(header)))
    entries: list[tuple[bytes, bytes]] = []
    for shard in range(num_shards):
        with open(_data_path(prefix, shard, num_shards), "wb") as f:
            for name in names[shard * per_shard : (shard + 1) * per_shard]:
                arr = np.asarray(tensors[name])
                key = arr.dtype.newbyteorder("<")
                if key not in _NP_TO_TF:
                    raise TypeError(f"write_checkpoint: tensor {name!r} has unsupported dtype {arr.dtype}")
                data = np.ascontiguousarray(arr, dtype=arr.dtype.newbyteorder(order))
                raw = data.reshape(-1).view(np.uint8)
                entry = bytearray()
                _put_field(entry, 1, 0, _NP_TO_TF[key])
                shape = bytearray()
                for d in arr.shape:
                    dim = bytearray()
                    _put_field(dim, 1, 0, int(d))
                    _put_field(shape, 2, 2, bytes(dim))
                _put_field(entry, 2, 2, bytes(shape))
                if shard:
                    _put_field(entry, 3, 0, shard)
                if f.tell():
                    _put_field(entry, 4, 0, f.tell())
                if raw.size:
                    _put_field(entry, 5, 0, int(raw.size))
                _put_field(entry, 6, 5, mask_crc(crc32c(raw)))
                f.write(raw.data)
                entries.append((name.encode("utf-8"), bytes(entry)))
    items += sorted(entries)
    with open(f"{prefix}.index", "wb") as f:
        _write_table(f, items, block_size)  # type: ignore[arg-type]
    return prefix
