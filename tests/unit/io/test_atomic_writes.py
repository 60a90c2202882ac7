"""albert_lm._io: atomic writes keep the old file on failure and give the new one the usual mode."""

from __future__ import annotations

import os
from pathlib import Path

import pytest

from albert_lm._io import JsonlError, atomic_write, atomic_write_text, iter_jsonl


def test_a_file_written_by_name_gets_mode_0644(tmp_path: Path) -> None:
    """Libraries that write by name (safetensors, torch.save) may replace the 0600 temporary mkstemp made."""
    path = tmp_path / "weights.bin"

    def write(tmp: str) -> None:
        os.unlink(tmp)  # what a library that writes a fresh file does
        fd = os.open(tmp, os.O_WRONLY | os.O_CREAT, 0o600)
        os.write(fd, b"new")
        os.close(fd)

    atomic_write(path, write)
    assert path.read_bytes() == b"new"
    assert os.stat(path).st_mode & 0o777 == 0o644


def test_a_failed_write_keeps_the_old_file_and_leaves_no_temporary(tmp_path: Path) -> None:
    path = tmp_path / "report.json"
    atomic_write_text(path, "old")

    def write(tmp: str) -> None:
        Path(tmp).write_text("half")
        raise RuntimeError("boom")

    with pytest.raises(RuntimeError, match="boom"):
        atomic_write(path, write)
    assert path.read_text() == "old"
    assert sorted(p.name for p in tmp_path.iterdir()) == ["report.json"]


def test_iter_jsonl_names_file_and_line(tmp_path: Path) -> None:
    path = tmp_path / "x.jsonl"
    path.write_text('{"a": 1}\n\n[1]\n', encoding="utf-8")
    with pytest.raises(JsonlError, match=r"x\.jsonl:3: expected a JSON object"):
        list(iter_jsonl(path))
    path.write_text('{"a": 1}\n{"a": \n', encoding="utf-8")
    with pytest.raises(JsonlError, match=r"x\.jsonl:2: not valid JSON"):
        list(iter_jsonl(path))
    assert list(iter_jsonl(path, skip_invalid=True)) == [(1, {"a": 1})]


def test_proto_fields_reads_every_wire_type_and_refuses_truncation() -> None:
    from albert_lm._io import proto_fields, write_varint

    msg = bytearray()
    write_varint(msg, (1 << 3) | 0)  # field 1, varint 300
    write_varint(msg, 300)
    write_varint(msg, (2 << 3) | 2)  # field 2, bytes
    write_varint(msg, 3)
    msg += b"abc"
    write_varint(msg, (3 << 3) | 5)  # field 3, fixed32
    msg += (7).to_bytes(4, "little")
    write_varint(msg, (4 << 3) | 1)  # field 4, fixed64
    msg += (1 << 40).to_bytes(8, "little")
    assert list(proto_fields(bytes(msg))) == [(1, 0, 300), (2, 2, b"abc"), (3, 5, 7), (4, 1, 1 << 40)]
    with pytest.raises(ValueError, match="truncated"):
        list(proto_fields(bytes(msg[:-1])))
    with pytest.raises(ValueError, match="wire type 3"):
        list(proto_fields(bytes([(5 << 3) | 3])))
