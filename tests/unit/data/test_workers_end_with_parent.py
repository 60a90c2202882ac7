"""`albert prepare --workers 2` killed with SIGKILL or SIGTERM leaves no worker process behind: each worker
ends with its parent (`albert_lm._io.die_with_parent`)."""

from __future__ import annotations

import os
import signal
import subprocess
import sys
import time
from pathlib import Path

import psutil
import pytest
from data_support import WIKI_SAMPLE, train_spm

REPO = Path(__file__).resolve().parents[3]


@pytest.fixture(scope="module")
def corpus(tmp_path_factory) -> tuple[Path, Path]:
    root = tmp_path_factory.mktemp("orphans")
    text = WIKI_SAMPLE.read_text(encoding="utf-8")
    big = root / "corpus.txt"
    big.write_text("\n\n".join([text] * 40), encoding="utf-8")  # seconds of work for two workers
    return big, train_spm(root / "spiece.model", vocab_size=400)


def _workers(parent: psutil.Process, timeout: float = 60.0) -> list[psutil.Process]:
    """The parent's children once it has two (the pool's workers)."""
    deadline = time.monotonic() + timeout
    while time.monotonic() < deadline:
        children = parent.children(recursive=True)
        if len(children) >= 2:
            return children
        time.sleep(0.05)
    pytest.fail("prepare --workers 2 started no workers")


@pytest.mark.slow
@pytest.mark.parametrize("sig", [signal.SIGKILL, signal.SIGTERM])
def test_no_worker_outlives_a_killed_prepare(corpus, tmp_path, sig):
    text, spm = corpus
    cmd = [sys.executable, "-m", "albert_lm.cli.main", "prepare", "--input", str(text), "--tokenizer", str(spm),
           "--output", str(tmp_path / "d"), "--format", "lines", "--max-seq-length", "32", "--dupe-factor", "5",
           "--workers", "2", "--shard-chars", "20000"]  # fmt: skip
    env = {**os.environ, "PYTHONPATH": str(REPO / "src")}
    proc = subprocess.Popen(cmd, env=env, stdout=subprocess.DEVNULL, stderr=subprocess.DEVNULL)
    workers: list[psutil.Process] = []
    try:
        workers = _workers(psutil.Process(proc.pid))
        time.sleep(0.3)  # the workers are building shards
        os.kill(proc.pid, sig)
        proc.wait(timeout=10)
        gone, alive = psutil.wait_procs(workers, timeout=5)
        assert not alive, f"{len(alive)} worker(s) outlived their killed parent: {[p.pid for p in alive]}"
    finally:
        proc.kill()
        for p in workers:  # leave nothing behind either way (an orphan is no child of this process)
            if p.is_running():
                p.kill()
