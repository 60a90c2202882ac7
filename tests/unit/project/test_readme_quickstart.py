"""The README's quickstarts run verbatim against the built wheel, installed in a fresh virtual environment
outside the repository.

How, and why it is honest and cheap:

1. The wheel is built from a copy of ``pyproject.toml``, ``README.md`` and ``src/`` (so the checkout gets no
   ``build/`` or ``*.egg-info``) with this interpreter's pip and setuptools, ``--no-build-isolation
   --no-index``: nothing is downloaded.
2. A fresh venv (no ``--system-site-packages``, no pip of its own) gets the wheel through this interpreter's
   pip (``pip --python VENV/bin/python install --no-deps --no-index WHEEL``) while the venv is still empty.
3. Its dependencies are this environment's already-installed packages: a ``.pth`` file in the venv lists
   this interpreter's site-packages directories. A ``.pth`` path is appended *after* the venv's own
   site-packages and the ``.pth`` files inside it are not processed, so an editable install of the
   checkout there (``.venv``'s ``__editable__`` path entry) is invisible, and the test asserts that
   ``albert_lm`` and the ``albert`` command come from the venv. Downloading torch again would take minutes.
4. In place of pip's resolver, the test checks that every requirement the wheel's metadata declares
   (extras aside) is installed at a version it accepts: a dependency missing from ``pyproject.toml`` makes
   the quickstarts fail, a wrong pin makes this check fail.
5. The blocks fenced ```` ```bash quickstart ```` and ```` ```python quickstart ```` are extracted from
   README.md and run as they are, in that order, in a temporary directory outside the repository, with the
   venv's ``bin`` first on PATH and no PYTHONPATH.

Run it with:  PYTHONPATH=src .venv/bin/pytest -q -p no:cacheprovider -m slow tests/unit/project/test_readme_quickstart.py
"""

from __future__ import annotations

import json
import os
import re
import shutil
import site
import subprocess
import sys
import sysconfig
import venv
from pathlib import Path

import pytest

REPO = Path(__file__).resolve().parents[3]
README = REPO / "README.md"
PROJECT_VERSION = re.search(r'^version = "([^"]+)"', (REPO / "pyproject.toml").read_text(), re.M)[1]  # type: ignore[index]
BLOCK = re.compile(r"^```(\w+) quickstart\n(.*?)^```$", re.S | re.M)


def quickstarts(text: str) -> dict[str, str]:
    """``{language: code}`` of the README's fenced blocks marked ``quickstart``; one per language."""
    found: dict[str, str] = {}
    for lang, code in BLOCK.findall(text):
        assert lang not in found, f"README.md: two `{lang} quickstart` blocks"
        found[lang] = code
    return found


def test_the_quickstarts_are_found_and_short() -> None:
    blocks = quickstarts(README.read_text(encoding="utf-8"))
    assert set(blocks) == {"bash", "python"}
    for lang, code in blocks.items():
        assert 0 < len(code.splitlines()) <= 15, f"the {lang} quickstart has {len(code.splitlines())} lines"
    doc = "x\n```bash quickstart\necho 1\n```\n```bash\nnot this\n```\n```python quickstart\nprint(2)\n```\n"
    assert quickstarts(doc) == {"bash": "echo 1\n", "python": "print(2)\n"}


def _run(cmd: list[str], **kwargs: object) -> subprocess.CompletedProcess[str]:
    proc = subprocess.run(cmd, capture_output=True, text=True, **kwargs)  # type: ignore[call-overload]
    assert proc.returncode == 0, (
        f"{' '.join(map(str, cmd))} -> {proc.returncode}\n{proc.stdout}\n{proc.stderr}"
    )
    return proc


def _build_wheel(tmp: Path) -> Path:
    source = tmp / "source"
    shutil.copytree(REPO / "src", source / "src", ignore=shutil.ignore_patterns("__pycache__", "*.egg-info"))
    for name in ("pyproject.toml", "README.md"):
        shutil.copy2(REPO / name, source / name)
    dist = tmp / "dist"
    _run([sys.executable, "-m", "pip", "wheel", "-q", "--no-deps", "--no-build-isolation", "--no-index",
          "-w", str(dist), str(source)])  # fmt: skip
    (wheel,) = dist.glob("albert_lm-*.whl")
    return wheel


def _fresh_venv(tmp: Path, wheel: Path) -> Path:
    env_dir = tmp / "venv"
    venv.EnvBuilder(with_pip=False, system_site_packages=False).create(env_dir)
    python = env_dir / "bin" / "python"
    _run([sys.executable, "-m", "pip", "--python", str(python), "install", "-q", "--no-deps", "--no-index",
          str(wheel)])  # fmt: skip
    purelib = _run([str(python), "-c", "import sysconfig; print(sysconfig.get_paths()['purelib'])"]).stdout
    ours = {sysconfig.get_paths()["purelib"], *site.getsitepackages()}
    (Path(purelib.strip()) / "_host_deps.pth").write_text("\n".join(sorted(ours)) + "\n")
    return env_dir


CHECK_INSTALL = """
import importlib.metadata as md, json, shutil, sys
from packaging.requirements import Requirement
import albert_lm
dist = md.distribution("albert-lm")
bad = []
for line in dist.requires or []:
    req = Requirement(line)
    if req.marker is not None and not req.marker.evaluate({"extra": ""}):
        continue  # an extra's requirement
    try:
        version = md.version(req.name)
    except md.PackageNotFoundError:
        bad.append(f"{req}: not installed")
        continue
    if not req.specifier.contains(version, prereleases=True):
        bad.append(f"{req}: {version} installed")
print(json.dumps({"module": albert_lm.__file__, "version": albert_lm.__version__,
                  "metadata": str(dist.locate_file("")), "albert": shutil.which("albert"), "bad": bad}))
"""


@pytest.mark.slow
def test_readme_quickstarts_run_verbatim_from_the_wheel(tmp_path: Path) -> None:
    assert REPO not in tmp_path.parents, "the temporary directory must be outside the repository"
    blocks = quickstarts(README.read_text(encoding="utf-8"))
    env_dir = _fresh_venv(tmp_path, _build_wheel(tmp_path))
    env = {k: v for k, v in os.environ.items() if k not in ("PYTHONPATH", "PYTHONHOME", "VIRTUAL_ENV")}
    env.update(
        PATH=f"{env_dir / 'bin'}{os.pathsep}{os.environ['PATH']}", ALBERT_CACHE_DIR=str(tmp_path / "cache")
    )
    work = tmp_path / "work"
    work.mkdir()

    found = json.loads(_run([str(env_dir / "bin" / "python"), "-c", CHECK_INSTALL], cwd=work, env=env).stdout)
    assert Path(found["module"]).is_relative_to(env_dir), found  # the wheel's albert_lm, not the checkout's
    assert Path(found["metadata"]).is_relative_to(env_dir), found
    assert found["albert"] == str(env_dir / "bin" / "albert"), found
    assert found["version"] == PROJECT_VERSION, found
    assert found["bad"] == [], found["bad"]

    (work / "quickstart.sh").write_text(blocks["bash"])
    cli = _run(["bash", "-e", "-o", "pipefail", "quickstart.sh"], cwd=work, env=env, timeout=600)
    prediction = json.loads(cli.stdout.strip().splitlines()[-1])
    assert prediction["text"] == "the river is fine" and prediction["label"] in ("pos", "neg"), cli.stdout
    assert (work / "runs/smoke/model/config.json").is_file() and (
        work / "runs/smoke/model/spiece.model"
    ).is_file()

    (work / "quickstart.py").write_text(blocks["python"])
    py = _run([str(env_dir / "bin" / "python"), "quickstart.py"], cwd=work, env=env, timeout=600)
    assert py.stdout.startswith("AlbertForPreTraining "), py.stdout
    assert "'label': " in py.stdout.splitlines()[-1], py.stdout
    assert json.loads((work / "my-model/config.json").read_text())["architectures"] == [
        "AlbertForPreTraining"
    ]
