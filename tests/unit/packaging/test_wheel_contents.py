"""The wheel ships what a user needs beside the code: the Apache-2.0 LICENSE (full text) and ``py.typed``
(PEP 561: type checkers read the package's hints)."""

from __future__ import annotations

import shutil
import subprocess
import sys
import zipfile
from pathlib import Path

import pytest

REPO = Path(__file__).resolve().parents[3]


def test_license_is_the_full_apache_2_text() -> None:
    text = (REPO / "LICENSE").read_text(encoding="utf-8")
    assert text.lstrip().startswith("Apache License\n                           Version 2.0, January 2004")
    assert "TERMS AND CONDITIONS FOR USE, REPRODUCTION, AND DISTRIBUTION" in text
    assert "9. Accepting Warranty or Additional Liability." in text and "END OF TERMS AND CONDITIONS" in text
    assert (REPO / "src" / "albert_lm" / "py.typed").is_file()


@pytest.mark.slow
def test_wheel_has_license_and_py_typed(tmp_path: Path) -> None:
    tree = tmp_path / "tree"  # a copy: setuptools writes build/ and *.egg-info into the tree it builds
    shutil.copytree(REPO / "src", tree / "src", ignore=shutil.ignore_patterns("__pycache__"))
    for name in ("pyproject.toml", "LICENSE", "README.md"):
        shutil.copy2(REPO / name, tree / name)
    done = subprocess.run(
        [
            sys.executable,
            "-m",
            "pip",
            "wheel",
            str(tree),
            "--no-deps",
            "--no-build-isolation",
            "-w",
            str(tmp_path),
        ],
        capture_output=True,
        text=True,
        timeout=600,
    )
    assert done.returncode == 0, done.stderr[-2000:]
    (wheel,) = tmp_path.glob("albert_lm-*.whl")
    names = zipfile.ZipFile(wheel).namelist()
    assert "albert_lm/py.typed" in names
    licenses = [n for n in names if n.endswith(".dist-info/licenses/LICENSE")]
    assert len(licenses) == 1
    shipped = zipfile.ZipFile(wheel).read(licenses[0]).decode()
    assert shipped == (REPO / "LICENSE").read_text(encoding="utf-8")
    metadata = zipfile.ZipFile(wheel).read(next(n for n in names if n.endswith("METADATA"))).decode()
    assert "License-Expression: Apache-2.0" in metadata
