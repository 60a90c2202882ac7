"""Hub ids (``owner/name``) wherever a model directory is accepted, resolved through huggingface_hub's real
cache layout (``models--owner--name/{blobs,refs,snapshots}``) that each test builds on disk, offline
(``HF_HUB_OFFLINE=1``, ``HF_HOME`` in tmp). huggingface_hub reads its environment when it is imported,
so every check runs in a fresh interpreter with that environment."""

from __future__ import annotations

import hashlib
import os
import subprocess
import sys
from pathlib import Path

import pytest
import torch

import albert_lm

sys.path.insert(0, str(Path(__file__).resolve().parents[1]))  # tests/unit: its helper modules
from inference_support import TEXTS, make_model_dir  # noqa: E402

REPO_ID = "albert-test/albert-tiny-sst"
SRC = Path(albert_lm.__file__).resolve().parents[1]  # the package under test, in the subprocesses too


def cache_repo(
    hf_home: Path, repo_id: str, files: dict[str, Path], commit: str, refs: tuple[str, ...]
) -> Path:
    """Put ``files`` ({name in the repo: local file}) in the hub cache under ``hf_home`` as huggingface_hub
    lays it out: content-addressed blobs, ``snapshots/<commit>/<name>`` symlinks to them, ``refs/<ref>``
    holding the commit. Returns the snapshot folder."""
    repo = hf_home / "hub" / f"models--{repo_id.replace('/', '--')}"
    snapshot = repo / "snapshots" / commit
    (repo / "blobs").mkdir(parents=True, exist_ok=True)
    snapshot.mkdir(parents=True, exist_ok=True)
    for name, source in files.items():
        data = source.read_bytes()
        blob = repo / "blobs" / hashlib.sha256(data).hexdigest()
        blob.write_bytes(data)
        link = snapshot / name
        link.parent.mkdir(parents=True, exist_ok=True)
        link.symlink_to(os.path.relpath(blob, link.parent))
    for ref in refs:
        (repo / "refs" / ref).parent.mkdir(parents=True, exist_ok=True)
        (repo / "refs" / ref).write_text(commit)
    return snapshot


def run_python(code: str, hf_home: Path, *args: str) -> subprocess.CompletedProcess[str]:
    env = {**os.environ, "HF_HOME": str(hf_home), "HF_HUB_OFFLINE": "1", "PYTHONPATH": str(SRC)}
    env.pop("HF_HUB_CACHE", None)
    return subprocess.run(
        [sys.executable, "-c", code, *args], env=env, capture_output=True, text=True, timeout=300
    )


@pytest.fixture
def cached(tmp_path: Path) -> tuple[Path, Path, str]:
    """(HF_HOME, the model directory put in the cache, its commit)."""
    model_dir = make_model_dir(tmp_path / "model")
    commit = "0123456789abcdef0123456789abcdef01234567"
    files = {p.name: p for p in model_dir.iterdir() if p.is_file()}
    cache_repo(tmp_path / "hf", REPO_ID, files, commit, ("main", "v1"))
    return tmp_path / "hf", model_dir, commit


LOAD = """
import sys, torch
import albert_lm
from albert_lm import AlbertConfig, AlbertForSequenceClassification
repo, revision, out = sys.argv[1], sys.argv[2] or None, sys.argv[3]
model = albert_lm.load_model(repo, revision=revision)
again = AlbertForSequenceClassification.from_pretrained(repo, revision=revision)
tok = albert_lm.load_tokenizer(repo, revision=revision)
config = AlbertConfig.from_pretrained(repo, revision=revision)
assert config == model.config and config == again.config
torch.save({"class": type(model).__name__, "state": model.state_dict(), "ids": tok("a witty film")["input_ids"],
            "vocab": tok.vocab_size}, out)
"""


@pytest.mark.parametrize("revision", ["", "v1", "0123456789abcdef0123456789abcdef01234567"])
def test_hub_id_loads_model_tokenizer_and_config_from_the_cache(
    cached, tmp_path: Path, revision: str
) -> None:
    from albert_lm import load_model, load_tokenizer

    hf_home, model_dir, _ = cached
    out = tmp_path / "out.pt"
    done = run_python(LOAD, hf_home, REPO_ID, revision, str(out))
    assert done.returncode == 0, done.stderr
    got = torch.load(out, weights_only=True)
    local = load_model(model_dir)
    assert got["class"] == type(local).__name__ == "AlbertForSequenceClassification"
    assert got["state"].keys() == local.state_dict().keys()
    for name, tensor in local.state_dict().items():
        assert torch.equal(got["state"][name], tensor), name
    assert got["ids"] == load_tokenizer(model_dir)("a witty film")["input_ids"]


def test_unknown_revision_offline_is_one_line(cached) -> None:
    hf_home, _, _ = cached
    done = run_python(LOAD, hf_home, REPO_ID, "no-such-branch", "/dev/null")
    assert done.returncode != 0
    assert "HubModelNotFound" in done.stderr and "huggingface-cli download" in done.stderr


def test_pickle_only_repository_loads_through_the_weights_only_loader(tmp_path: Path) -> None:
    from albert_lm import load_model

    model_dir = make_model_dir(tmp_path / "model")
    bin_dir = tmp_path / "bin"
    bin_dir.mkdir()
    for p in model_dir.iterdir():
        if p.name != "model.safetensors":
            (bin_dir / p.name).write_bytes(p.read_bytes())
    from safetensors.torch import load_file

    torch.save(load_file(str(model_dir / "model.safetensors")), bin_dir / "pytorch_model.bin")
    cache_repo(tmp_path / "hf", REPO_ID, {p.name: p for p in bin_dir.iterdir()}, "f" * 40, ("main",))
    out = tmp_path / "out.pt"
    done = run_python(LOAD, tmp_path / "hf", REPO_ID, "", str(out))
    assert done.returncode == 0, done.stderr
    state = torch.load(out, weights_only=True)["state"]
    for name, tensor in load_model(model_dir).state_dict().items():
        assert torch.equal(state[name], tensor), name

    # a crafted pickle in the cache is refused, not run
    class Boom:
        def __reduce__(self):  # type: ignore[no-untyped-def]
            return (os.system, ("echo pwned",))

    evil = tmp_path / "evil"
    evil.mkdir()
    torch.save({"x": Boom()}, evil / "pytorch_model.bin")
    files = {**{p.name: p for p in bin_dir.iterdir()}, "pytorch_model.bin": evil / "pytorch_model.bin"}
    cache_repo(tmp_path / "hf", "albert-test/evil", files, "e" * 40, ("main",))
    done = run_python(LOAD, tmp_path / "hf", "albert-test/evil", "", str(out))
    assert done.returncode != 0
    assert "refused to unpickle (weights_only=True)" in done.stderr and "pwned" not in done.stdout


CLI = "import sys; from albert_lm.cli.main import main; sys.exit(main(sys.argv[1:]))"


def test_cli_model_flag_takes_a_hub_id(cached, tmp_path: Path) -> None:
    hf_home, _, commit = cached
    texts = tmp_path / "texts.txt"
    texts.write_text("\n".join(TEXTS[:3]) + "\n", encoding="utf-8")
    out = tmp_path / "pred.jsonl"
    args = ["predict", "--model", REPO_ID, "--revision", commit, "--input", str(texts), "--output", str(out)]
    done = run_python(CLI, hf_home, *args, "--device", "cpu", "--backend", "torch")
    assert done.returncode == 0, done.stderr
    assert len(out.read_text().splitlines()) == 3


def test_cli_offline_and_not_cached_is_one_line_saying_what_to_run(tmp_path: Path) -> None:
    done = run_python(CLI, tmp_path / "empty-hf", "predict", "--model", "albert/albert-base-v2")
    assert done.returncode == 1
    lines = done.stderr.strip().splitlines()
    assert len(lines) == 1, done.stderr
    line = lines[0]
    assert line.startswith("albert predict: error: albert/albert-base-v2: ")
    assert "HF_HUB_OFFLINE" in line and "huggingface-cli download albert/albert-base-v2" in line


def test_local_paths_are_not_hub_ids(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    from albert_lm._hub import is_hub_id, resolve_model_dir

    assert is_hub_id("albert/albert-base-v2") and is_hub_id("google/albert_base.v2")
    for not_id in ("/abs/model", "./model", "runs/a/b", "../x/y", "model", "a--b/c"):
        assert not is_hub_id(not_id), not_id
    local = tmp_path / "owner" / "name"
    local.mkdir(parents=True)
    monkeypatch.chdir(tmp_path)
    assert resolve_model_dir("owner/name") == Path("owner/name")  # an existing folder wins over the Hub
    with pytest.raises(ValueError, match="local path has no revision"):
        resolve_model_dir(local, "main")


def test_convert_tf_takes_a_hub_id_and_a_local_prefix_stays_local(tmp_path: Path) -> None:
    from albert_lm import load_model

    tf_dir = Path(__file__).resolve().parents[2] / "fixtures" / "tf" / "google"
    files = {p.name: p for p in tf_dir.iterdir() if p.is_file() and p.suffix != ".npz"}
    cache_repo(tmp_path / "hf", "google-test/albert-tiny-tf", files, "c" * 40, ("main",))
    out = tmp_path / "converted"
    done = run_python(
        CLI, tmp_path / "hf", "convert", "tf", "google-test/albert-tiny-tf", "--output", str(out)
    )
    assert done.returncode == 0, done.stderr
    local = tmp_path / "local"
    done = run_python(CLI, tmp_path / "hf", "convert", "tf", str(tf_dir), "--output", str(local))
    assert done.returncode == 0, done.stderr
    a, b = load_model(out).state_dict(), load_model(local).state_dict()
    assert a.keys() == b.keys() and all(torch.equal(a[k], b[k]) for k in a)
