"""`albert`'s one error handler (cli/main.py): an expected error is one line ``albert <cmd>: error: ...`` and
exit code 1, ``-v`` adds the traceback, a bug keeps its traceback, a usage error stays 2. A full disk
says so and names the path, through the real atomic writes, and leaves the old files whole."""

from __future__ import annotations

import errno
import os
import shutil
from pathlib import Path

import pytest

import albert_lm.convert.tf
from albert_lm._io import TMP_PREFIX, atomic_write_bytes, atomic_write_dir
from albert_lm.cli.main import main as cli
from albert_lm.config import ConfigError

TF_GOOGLE = Path(__file__).resolve().parents[2] / "fixtures" / "tf" / "google"


def _convert_raises(monkeypatch: pytest.MonkeyPatch, error: BaseException) -> None:
    def convert(*args: object, **kwargs: object) -> None:
        raise error

    monkeypatch.setattr(albert_lm.convert.tf, "convert_tf_checkpoint", convert)


@pytest.mark.parametrize(
    ("error", "line"),
    [
        (ConfigError("albert_config.json: field 'hidden_act' has unsupported value 'x'"), None),
        (
            FileNotFoundError(errno.ENOENT, "No such file or directory", "/no/ckpt"),
            "/no/ckpt: No such file or directory",
        ),
        (FileNotFoundError("model directory not found: /m"), None),
        (PermissionError(errno.EACCES, "Permission denied", "/out"), "/out: Permission denied"),
        (ValueError("a plain ValueError with a message"), None),
        (UnicodeDecodeError("utf-8", b"\xff", 0, 1, "invalid start byte"), None),
    ],
    ids=["ConfigError", "ENOENT", "FileNotFoundError", "EACCES", "ValueError", "UnicodeDecodeError"],
)
def test_expected_errors_are_one_line_and_exit_1(
    monkeypatch: pytest.MonkeyPatch, capsys: pytest.CaptureFixture[str], error: Exception, line: str | None
) -> None:
    _convert_raises(monkeypatch, error)
    assert cli(["convert", "tf", "ckpt", "--output", "out"]) == 1
    err = capsys.readouterr().err
    assert err == f"albert convert: error: {line or error}\n"


def test_verbose_adds_the_traceback(
    monkeypatch: pytest.MonkeyPatch, capsys: pytest.CaptureFixture[str]
) -> None:
    _convert_raises(monkeypatch, ConfigError("bad config"))
    assert cli(["-v", "convert", "tf", "ckpt", "--output", "out"]) == 1
    err = capsys.readouterr().err
    assert err.startswith("Traceback (most recent call last):")
    assert "in convert" in err and err.endswith("albert convert: error: bad config\n")


def test_the_packages_own_runtime_errors_are_expected(
    monkeypatch: pytest.MonkeyPatch, capsys: pytest.CaptureFixture[str]
) -> None:
    from albert_lm.train import TrainingDiverged

    _convert_raises(monkeypatch, TrainingDiverged("loss is nan at step 7"))
    assert cli(["convert", "tf", "ckpt", "--output", "out"]) == 1
    assert capsys.readouterr().err == "albert convert: error: loss is nan at step 7\n"


@pytest.mark.parametrize("error", [KeyError("x"), RuntimeError("a bug"), ValueError()], ids=repr)
def test_bugs_keep_their_traceback(monkeypatch: pytest.MonkeyPatch, error: Exception) -> None:
    _convert_raises(monkeypatch, error)
    with pytest.raises(type(error)):
        cli(["convert", "tf", "ckpt", "--output", "out"])


def test_usage_errors_stay_2(capsys: pytest.CaptureFixture[str]) -> None:
    with pytest.raises(SystemExit) as e:
        cli(["convert", "tf"])  # no checkpoint, no --output
    assert e.value.code == 2
    assert "usage:" in capsys.readouterr().err


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


def test_convert_on_a_full_disk(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch, capsys: pytest.CaptureFixture[str]
) -> None:
    """``albert convert --overwrite`` runs out of space writing model.safetensors: one line naming the output
    directory, exit 1, the old model directory whole and no temporary left."""
    src, out = tmp_path / "albert_base", tmp_path / "model"
    shutil.copytree(TF_GOOGLE, src)
    assert cli(["convert", "tf", str(src), "--output", str(out)]) == 0
    before = {p.name: p.read_bytes() for p in out.iterdir()}
    capsys.readouterr()

    import safetensors.torch

    monkeypatch.setattr(safetensors.torch, "save_file", _enospc)
    assert cli(["convert", "tf", str(src), "--output", str(out), "--head", "none", "--overwrite"]) == 1
    assert capsys.readouterr().err == f"albert convert: error: {out}: No space left on device\n"
    assert {p.name: p.read_bytes() for p in out.iterdir()} == before
    assert not [p for p in tmp_path.iterdir() if p.name.startswith(TMP_PREFIX)]


def test_convert_into_a_used_directory_is_one_line(
    tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    out = tmp_path / "model"
    out.mkdir()
    (out / "keep.txt").write_text("mine")
    assert cli(["convert", "tf", str(TF_GOOGLE), "--output", str(out)]) == 1
    err = capsys.readouterr().err
    assert err == (
        f"albert convert: error: {out}: the output exists and is not an empty directory "
        "(pass --overwrite to replace it)\n"
    )
    assert [p.name for p in out.iterdir()] == ["keep.txt"]
