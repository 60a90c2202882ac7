"""The TensorFlow checkpoint reader (albert_lm.convert.tf_checkpoint): CRC32C, the index table, dtypes,
shards, endianness, corrupt files. Fixtures under tests/fixtures/tf/ were written by TensorFlow itself
(scripts/make_tf_fixture.py)."""

from __future__ import annotations

import shutil
import struct
from pathlib import Path

import numpy as np
import pytest

from albert_lm.convert.tf_checkpoint import (
    CheckpointFormatError,
    ChecksumError,
    TFCheckpoint,
    crc32c,
    mask_crc,
    resolve_prefix,
    unmask_crc,
    write_checkpoint,
)

FIXTURES = Path(__file__).resolve().parents[2] / "fixtures" / "tf"


def _crc32c_reference(data: bytes) -> int:
    """Bit-at-a-time CRC-32C, straight from the definition (reflected polynomial 0x82F63B78)."""
    crc = 0xFFFFFFFF
    for byte in data:
        crc ^= byte
        for _ in range(8):
            crc = (crc >> 1) ^ (0x82F63B78 if crc & 1 else 0)
    return crc ^ 0xFFFFFFFF


# ------------------------------------------------------------------------------------------------ CRC32C
def test_crc32c_known_vectors() -> None:
    assert crc32c(b"") == 0
    assert crc32c(b"123456789") == 0xE3069283  # the CRC catalogue's check value for CRC-32C
    # RFC 3720 (iSCSI) appendix B.4
    assert crc32c(bytes(32)) == 0x8A9136AA
    assert crc32c(b"\xff" * 32) == 0x62A8AB43
    assert crc32c(bytes(range(32))) == 0x46DD794E
    assert crc32c(bytes(range(31, -1, -1))) == 0x113FDB5C


@pytest.mark.parametrize("n", [1, 7, 2047, 2048, 2049, 4100, 65_537, 1_000_003])
def test_crc32c_vectorised_path_equals_reference(n: int) -> None:
    """Sizes around the lane / tail boundaries of the vectorised path."""
    data = np.random.default_rng(n).integers(0, 256, n, dtype=np.uint8).tobytes()
    if n <= 70_000:
        assert crc32c(data) == _crc32c_reference(data)
    else:  # the reference is slow: check by extension of a verified prefix instead
        head = data[:65_537]
        assert crc32c(head) == _crc32c_reference(head)
        assert crc32c(data[65_537:], crc32c(head)) == crc32c(data)


def test_crc32c_extend_and_mask() -> None:
    a, b = b"ALBERT: a lite", b" BERT"
    assert crc32c(b, crc32c(a)) == crc32c(a + b)
    for v in (0, 1, 0xE3069283, 0xFFFFFFFF):
        assert unmask_crc(mask_crc(v)) == v
    assert mask_crc(0xE3069283) != 0xE3069283


# --------------------------------------------------------------------------------------- TF-written files
def test_reads_every_dtype_written_by_tensorflow() -> None:
    ckpt = TFCheckpoint(FIXTURES / "dtypes" / "model.ckpt")
    expected = np.load(FIXTURES / "dtypes" / "arrays.npz")
    assert sorted(ckpt) == sorted(expected.files)
    assert ckpt.entries["bf16"].dtype == "bfloat16" and ckpt.entries["str"].dtype == "string"
    for name in ckpt:
        got, want = ckpt.read(name), expected[name]
        if name == "str":
            assert got.tolist() == want.tolist()  # bytes, including the empty string
            continue
        assert got.dtype == want.dtype, name
        assert got.shape == want.shape, name
        np.testing.assert_array_equal(got, want, err_msg=name)
    assert ckpt.read("scalar").shape == () and ckpt.read("empty").shape == (0, 4)


def test_tensorflow_pretraining_checkpoint_matches_its_arrays() -> None:
    arrays = np.load(FIXTURES / "google" / "arrays.npz")
    with TFCheckpoint(FIXTURES / "google") as ckpt:  # the directory of a release tarball
        assert ckpt.prefix.name == "model.ckpt-best"
        assert sorted(ckpt) == sorted(arrays.files)
        for name in ckpt:
            got = ckpt.read(name)
            assert got.dtype == arrays[name].dtype and np.array_equal(got, arrays[name]), name
        assert ckpt.entries["global_step"].dtype == "int64"


def test_two_shard_checkpoint_and_state_file() -> None:
    """The classifier fixture was saved by a sharded Saver over two devices; its `checkpoint` state file
    names another machine's path, so the prefix is found next to it."""
    ckpt = TFCheckpoint(FIXTURES / "classifier")
    assert ckpt.prefix == FIXTURES / "classifier" / "model.ckpt-100"
    assert ckpt.num_shards == 2
    assert {e.shard for e in ckpt.entries.values()} == {0, 1}
    arrays = np.load(FIXTURES / "classifier" / "arrays.npz")
    for name in ckpt:
        assert np.array_equal(ckpt.read(name), arrays[name]), name


@pytest.mark.parametrize("suffix", [".index", ".data-00000-of-00001", ""])
def test_prefix_from_any_of_its_files(suffix: str) -> None:
    prefix = FIXTURES / "google" / "model.ckpt-best"
    assert resolve_prefix(f"{prefix}{suffix}") == prefix


def test_tfhub_module_directory(tmp_path: Path) -> None:
    (tmp_path / "variables").mkdir()
    for f in (FIXTURES / "google").glob("model.ckpt-best.*"):
        shutil.copy(f, tmp_path / "variables" / f.name.replace("model.ckpt-best", "variables"))
    assert resolve_prefix(tmp_path) == tmp_path / "variables" / "variables"
    assert len(TFCheckpoint(tmp_path)) == len(TFCheckpoint(FIXTURES / "google"))


def test_ambiguous_or_missing_checkpoints(tmp_path: Path) -> None:
    with pytest.raises(FileNotFoundError, match="no TensorFlow checkpoint"):
        resolve_prefix(tmp_path)
    write_checkpoint(tmp_path / "a.ckpt", {"x": np.zeros(2, np.float32)})
    write_checkpoint(tmp_path / "b.ckpt", {"x": np.zeros(2, np.float32)})
    with pytest.raises(
        CheckpointFormatError, match=r"several checkpoints \(a\.ckpt\.index, b\.ckpt\.index\)"
    ):
        resolve_prefix(tmp_path)
    (tmp_path / "v1.ckpt").write_bytes(b"old")
    with pytest.raises(CheckpointFormatError, match="V1 checkpoint"):
        resolve_prefix(tmp_path / "v1.ckpt")


# ---------------------------------------------------------------------------------------- corrupt files
def _copy_google(tmp_path: Path) -> Path:
    for f in (FIXTURES / "google").glob("model.ckpt-best.*"):
        shutil.copy(f, tmp_path / f.name)
    return tmp_path / "model.ckpt-best"


def test_bit_flip_names_tensor_and_checksum(tmp_path: Path) -> None:
    prefix = _copy_google(tmp_path)
    name = "bert/encoder/transformer/group_1/inner_group_0/attention_1/self/key/kernel"
    entry = TFCheckpoint(prefix).entries[name]
    data = Path(f"{prefix}.data-00000-of-00001")
    raw = bytearray(data.read_bytes())
    raw[entry.offset + entry.size // 2] ^= 0x10  # one bit
    data.write_bytes(bytes(raw))
    ckpt = TFCheckpoint(prefix)
    with pytest.raises(ChecksumError) as e:
        ckpt.read(name)
    msg = str(e.value)
    assert name in msg and f"stored {entry.crc32c:#010x}" in msg and "computed 0x" in msg and data.name in msg
    other = "bert/embeddings/word_embeddings"  # untouched tensors still read
    assert np.array_equal(ckpt.read(other), np.load(FIXTURES / "google" / "arrays.npz")[other])
    assert ckpt.read(name, verify=False).shape == entry.shape


def test_truncated_data_file(tmp_path: Path) -> None:
    prefix = _copy_google(tmp_path)
    ckpt = TFCheckpoint(prefix)
    last = max(ckpt.entries.values(), key=lambda e: e.offset)
    data = Path(f"{prefix}.data-00000-of-00001")
    data.write_bytes(data.read_bytes()[: last.offset + 3])
    with pytest.raises(
        ChecksumError, match=rf"tensor '{last.name}' needs bytes .* truncated .*crc32c {last.crc32c:#010x}"
    ):
        TFCheckpoint(prefix).read(last.name)


def test_corrupt_index(tmp_path: Path) -> None:
    prefix = _copy_google(tmp_path)
    index = Path(f"{prefix}.index")
    raw = bytearray(index.read_bytes())
    raw[100] ^= 0x01  # inside the first data block
    index.write_bytes(bytes(raw))
    with pytest.raises(ChecksumError, match=r"index block at offset 0 .* is corrupt: crc32c stored"):
        TFCheckpoint(prefix)
    index.write_bytes(bytes(raw[:-8]) + struct.pack("<Q", 12345))
    with pytest.raises(CheckpointFormatError, match="bad table magic"):
        TFCheckpoint(prefix)
    index.write_bytes(b"short")
    with pytest.raises(CheckpointFormatError, match="too short"):
        TFCheckpoint(prefix)


def test_truncated_varints_are_format_errors(tmp_path: Path) -> None:
    """A varint cut off by the end of its buffer (or longer than 10 bytes) is a corrupt file, named as such."""
    import dataclasses

    ckpt = TFCheckpoint(FIXTURES / "dtypes" / "model.ckpt")
    # the string tensor's data starts with its 3 length varints; a size of 1 byte cuts the second one
    ckpt.entries["str"] = dataclasses.replace(ckpt.entries["str"], size=1)
    with pytest.raises(ChecksumError, match="string tensor 'str' is truncated"):
        ckpt.read("str")

    prefix = _copy_google(tmp_path)
    index = Path(f"{prefix}.index")
    raw = bytearray(index.read_bytes())
    raw[-48:-8] = b"\xff" * 40  # the footer's block handles: one endless varint
    index.write_bytes(bytes(raw))
    with pytest.raises(CheckpointFormatError, match="corrupt checkpoint index: varint longer than 10 bytes"):
        TFCheckpoint(prefix)


def test_missing_shard(tmp_path: Path) -> None:
    for f in (FIXTURES / "classifier").glob("model.ckpt-100.*"):
        shutil.copy(f, tmp_path / f.name)
    (tmp_path / "model.ckpt-100.data-00001-of-00002").unlink()
    ckpt = TFCheckpoint(tmp_path / "model.ckpt-100")
    name = next(n for n, e in ckpt.entries.items() if e.shard == 1)
    with pytest.raises(FileNotFoundError, match="data-00001-of-00002 is missing"):
        ckpt.read(name)


# ---------------------------------------------------------------------------------------------- writer
def _all_dtypes() -> dict[str, np.ndarray]:
    rng = np.random.default_rng(0)
    return {
        "bert/embeddings/word_embeddings": rng.standard_normal((300, 70)).astype(np.float32),
        "a/f64": rng.standard_normal(5),
        "a/f16": rng.standard_normal((2, 2)).astype(np.float16),
        "a/i8": np.array([-1, 2], np.int8),
        "a/u16": np.array([1, 65535], np.uint16),
        "a/i64": np.array([[-(2**62)]], np.int64),
        "a/bool": np.array([True, False]),
        "global_step": np.array(5, np.int64),
        "z/empty": np.zeros((0,), np.float32),
    }


@pytest.mark.parametrize("shards,big_endian", [(1, False), (3, False), (2, True)])
def test_writer_round_trip(tmp_path: Path, shards: int, big_endian: bool) -> None:
    tensors = _all_dtypes()
    # 64-byte blocks: many data blocks, so the index block has many entries
    write_checkpoint(tmp_path / "m.ckpt", tensors, num_shards=shards, big_endian=big_endian, block_size=64)
    ckpt = TFCheckpoint(tmp_path / "m.ckpt")
    assert ckpt.num_shards == shards and ckpt.big_endian is big_endian
    assert len(list(tmp_path.glob("m.ckpt.data-*"))) == shards
    for name, want in tensors.items():
        got = ckpt.read(name)
        assert got.dtype == want.dtype and got.dtype.isnative and np.array_equal(got, want), name


def test_big_endian_bytes_are_big_endian(tmp_path: Path) -> None:
    write_checkpoint(tmp_path / "be", {"x": np.array([1.0], np.float32)}, big_endian=True)
    assert Path(f"{tmp_path / 'be'}.data-00000-of-00001").read_bytes() == struct.pack(">f", 1.0)
    assert TFCheckpoint(tmp_path / "be").read("x")[0] == 1.0


@pytest.mark.parametrize("big_endian", [False, True])
def test_read_transposed_into_out(tmp_path: Path, big_endian: bool, monkeypatch: pytest.MonkeyPatch) -> None:
    """Streaming reads (transposed, converted, into a caller's buffer, in many chunks) give the same values,
    and a bit flip in the last chunk is still caught."""
    import albert_lm.convert.tf_checkpoint as tfc

    monkeypatch.setattr(tfc, "_CHUNK_BYTES", 1000)  # 3 rows of 70 floats per chunk: 100 chunks
    rng = np.random.default_rng(1)
    kernel = rng.standard_normal((300, 70)).astype(np.float32)
    half = rng.standard_normal((5, 3)).astype(np.float16)
    write_checkpoint(tmp_path / "m", {"k": kernel, "h": half}, big_endian=big_endian)
    ckpt = TFCheckpoint(tmp_path / "m")
    np.testing.assert_array_equal(ckpt.read("k", transpose=True), kernel.T)
    fused = np.zeros((140, 300), np.float32)  # two row blocks, as the fused q/k/v projection is filled
    ckpt.read("k", out=fused[70:], transpose=True)
    np.testing.assert_array_equal(fused[70:], kernel.T)
    assert not fused[:70].any()
    as32 = np.empty((5, 3), np.float32)
    ckpt.read("h", out=as32)
    np.testing.assert_array_equal(as32, half.astype(np.float32))
    with pytest.raises(ValueError, match="out= must be C-contiguous of shape"):
        ckpt.read("k", out=np.empty((300, 70), np.float32), transpose=True)

    data = Path(f"{tmp_path / 'm'}.data-00000-of-00001")
    raw = bytearray(data.read_bytes())
    entry = ckpt.entries["k"]
    raw[entry.offset + entry.size - 1] ^= 1
    data.write_bytes(bytes(raw))
    with pytest.raises(ChecksumError, match=rf"tensor 'k' .* crc32c stored {entry.crc32c:#010x}"):
        TFCheckpoint(tmp_path / "m").read("k", transpose=True)


def test_bfloat16_streamed_into_float32() -> None:
    ckpt = TFCheckpoint(FIXTURES / "dtypes" / "model.ckpt")
    out = np.empty(4, np.float32)
    ckpt.read("bf16", out=out)
    np.testing.assert_array_equal(out, np.load(FIXTURES / "dtypes" / "arrays.npz")["bf16"])
