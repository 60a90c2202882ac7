"""`albert`'s one error handler (cli/main.py): an expected error is one line ``albert <cmd>: error: ...`` and
exit code 1, ``-v`` adds the traceback, a bug keeps its traceback, a usage error stays 2. A full disk
says so and names the path, through the real atomic writes, and leaves the old files whole."""

from __future__ import annotations

import errno
import os
from pathlib import Path

import pytest

from albert._io import atomic_write_bytes, atomic_write_dir


# --------------------------------------------------------------------------------------- a full disk
def _enospc(*args: object, **kwargs: object) -> None:
    raise OSError(errno.ENOSPC, "No space left on device")  # as a write(2) on a full disk: no file name


def test_atomic_write_on_a_full_disk_names_the_path_and_keeps_the_old_file(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    target = tmp_path / "result.json"
    target.write_text("old")
    monkeypatch.setattr(os, "fsync", _enospc)  # the data reaches the disk at fsync: ENOSPC can come there
    with pytest.raises(OSError) as e:
        atomic_write_bytes(target, b"new")
    assert e.value.errno == errno.ENOSPC and e.value.filename == str(target)
    assert str(e.value) == f"[Errno {errno.ENOSPC}] No space left on device: '{target}'"
    assert target.read_text() == "old"
    assert [p.name for p in tmp_path.iterdir()] == ["result.json"]


def test_torch_style_write_error_on_a_nearly_full_disk_is_enospc(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    """torch.save's C++ writer reports a full disk as ``unexpected pos 191360 vs 191248``, no errno."""

    def torch_save(tmp: Path) -> None:
        (tmp / "trainer.pt").write_bytes(b"partial")
        raise RuntimeError("[enforce fail at inline_container.cc:603] . unexpected pos 191360 vs 191248")

    class Full:
        f_bavail, f_frsize = 3, 4096

    monkeypatch.setattr(os, "statvfs", lambda path: Full())
    with pytest.raises(OSError, match=rf"No space left on device: '{tmp_path / 'ckpt'}'") as e:
        atomic_write_dir(tmp_path / "ckpt", torch_save)
    assert isinstance(e.value.__cause__, RuntimeError)  # the original, for -v
    assert list(tmp_path.iterdir()) == []
    # with space left, the same error is not the disk: it stays as it is
    monkeypatch.setattr(
        os, "statvfs", lambda path: type("Roomy", (), {"f_bavail": 1 << 30, "f_frsize": 4096})()
    )
    with pytest.raises(RuntimeError, match="unexpected pos"):
        atomic_write_dir(tmp_path / "ckpt", torch_save)
