"""The allocator setting (albert_lm.runtime.allocator): freed memory reused, measured by page faults; the
user's own choices and other C libraries left alone; a bad ALBERT_MALLOC refused."""

from __future__ import annotations

import ctypes
import json
import os
import platform
import subprocess
import sys
from pathlib import Path

import pytest

from albert_lm.cli.main import main as cli
from albert_lm.config import ConfigError
from albert_lm.runtime import allocator

GLIBC = platform.system() == "Linux" and platform.libc_ver()[0] == "glibc"

# A 64 MiB tensor (over glibc's largest dynamic mmap threshold, 32 MiB) written, freed and written again. Two
# readings of the second write: glibc's own accounting (mallinfo2: the bytes it holds in mmapped blocks while
# the tensor lives, the free bytes it keeps in its heap once the tensor is freed), which depends on malloc
# alone; and the minor page faults of the second write, which also depend on the kernel. Default glibc
# serves the block with mmap and unmaps it on free, so the second write is new memory (16,384 pages of 4 KiB);
# kept, the block comes from the heap, stays there when freed, and the second write reuses its pages.
SECOND_WRITE = """
import ctypes, json, resource, sys, torch
from albert_lm.runtime.allocator import keep_freed_memory

class MallInfo2(ctypes.Structure):  # glibc >= 2.33, malloc.h
    _fields_ = [(n, ctypes.c_size_t) for n in
                ("arena", "ordblks", "smblks", "hblks", "hblkhd", "usmblks", "fsmblks", "uordblks",
                 "fordblks", "keepcost")]

libc = ctypes.CDLL("libc.so.6")
libc.mallinfo2.restype = MallInfo2
outcome = keep_freed_memory()
x = torch.empty(16 << 20); x.fill_(1.0)
mmapped_while_alive = libc.mallinfo2().hblkhd
del x
heap_free_after = libc.mallinfo2().fordblks
before = resource.getrusage(resource.RUSAGE_SELF).ru_minflt
y = torch.empty(16 << 20); y.fill_(2.0)
faults = resource.getrusage(resource.RUSAGE_SELF).ru_minflt - before
print(json.dumps(dict(outcome=outcome, mmapped_while_alive=mmapped_while_alive,
                      heap_free_after=heap_free_after, second_write_faults=faults)))
"""
BLOCK = 64 << 20


def _second_write(choice: str) -> dict[str, object]:
    """The readings above in a fresh interpreter with ``ALBERT_MALLOC=choice`` and no other allocator setting
    in its environment (a preload, ``MALLOC_*_`` or ``GLIBC_TUNABLES`` from the caller would decide instead)."""
    env = {
        k: v
        for k, v in os.environ.items()
        if not k.startswith("MALLOC_") and k not in ("LD_PRELOAD", "GLIBC_TUNABLES")
    }
    env["ALBERT_MALLOC"] = choice
    out = subprocess.run([sys.executable, "-c", SECOND_WRITE], env=env, capture_output=True, text=True)
    assert out.returncode == 0, out.stderr
    return json.loads(out.stdout.splitlines()[-1])


@pytest.mark.skipif(not GLIBC or not hasattr(ctypes.CDLL("libc.so.6"), "mallinfo2"), reason="glibc >= 2.33")
def test_a_freed_block_stays_in_the_heap_for_reuse() -> None:
    kept, system = _second_write("keep"), _second_write("system")
    said = f"kept: {kept}; system: {system}"
    assert str(kept["outcome"]).startswith("allocator: glibc malloc keeps freed blocks"), said
    assert system["outcome"] == "allocator: left as it is (ALBERT_MALLOC=system)", said
    # glibc's defaults: the block is mmapped, and its memory is gone from malloc once freed
    assert system["mmapped_while_alive"] >= BLOCK and system["heap_free_after"] < BLOCK, said
    # kept: served from the heap, and still there (free) for the next allocation
    assert kept["mmapped_while_alive"] < BLOCK and kept["heap_free_after"] >= BLOCK, said
    # The kernel's side (the second write's page faults: 0 kept vs 16,385 here) is not asserted: in CI the
    # kept case once read 16,384 with no reason left in its output; a sandboxed kernel may count or back pages
    # differently. benchmarks/bench_allocator.py prints the faults per step next to the step times.


@pytest.fixture
def calls(monkeypatch: pytest.MonkeyPatch) -> list[tuple[int, int]]:
    """A first call of keep_freed_memory in this process, with no allocator setting in the environment,
    on glibc; the mallopt calls it makes (recorded, not made)."""
    monkeypatch.setattr(allocator, "_outcome", None)
    for name in (allocator.ENV, "LD_PRELOAD", "GLIBC_TUNABLES", *allocator._GLIBC_ENV):
        monkeypatch.delenv(name, raising=False)
    calls: list[tuple[int, int]] = []

    class FakeLibc:
        def mallopt(self, param: int, value: int) -> int:
            calls.append((param, value))
            return 1

    monkeypatch.setattr(allocator.ctypes, "CDLL", lambda *a, **k: FakeLibc())
    monkeypatch.setattr(allocator.platform, "system", lambda: "Linux")
    monkeypatch.setattr(allocator.platform, "libc_ver", lambda: ("glibc", "2.36"))
    return calls


def test_sets_both_thresholds_once(calls: list[tuple[int, int]], monkeypatch: pytest.MonkeyPatch) -> None:
    line = allocator.keep_freed_memory()
    assert "keeps freed blocks up to 1 GiB" in line and "ALBERT_MALLOC=system" in line
    assert calls == [(-3, 1 << 30), (-1, (1 << 31) - 1)]
    assert allocator.keep_freed_memory() == line and len(calls) == 2


@pytest.mark.parametrize(
    ("name", "value", "why"),
    [
        ("ALBERT_MALLOC", "system", "ALBERT_MALLOC=system"),
        ("LD_PRELOAD", "/usr/lib/x86_64-linux-gnu/libjemalloc.so.2", "jemalloc is preloaded"),
        ("LD_PRELOAD", "libtcmalloc_minimal.so.4", "tcmalloc is preloaded"),
        ("MALLOC_TRIM_THRESHOLD_", "100000", "MALLOC_TRIM_THRESHOLD_"),
        ("GLIBC_TUNABLES", "glibc.malloc.mmap_threshold=65536", "GLIBC_TUNABLES"),
    ],
)
def test_the_users_own_choice_is_left_alone(
    calls: list[tuple[int, int]], monkeypatch: pytest.MonkeyPatch, name: str, value: str, why: str
) -> None:
    monkeypatch.setenv(name, value)
    line = allocator.keep_freed_memory()
    assert line.startswith("allocator: left as it is") and why in line
    assert calls == []


def test_other_c_libraries_are_left_alone(
    calls: list[tuple[int, int]], monkeypatch: pytest.MonkeyPatch
) -> None:
    monkeypatch.setattr(allocator.platform, "libc_ver", lambda: ("", ""))
    assert "not glibc" in allocator.keep_freed_memory()
    monkeypatch.setattr(allocator, "_outcome", None)
    monkeypatch.setattr(allocator.platform, "system", lambda: "Darwin")
    assert "not glibc (Darwin" in allocator.keep_freed_memory()
    assert calls == []


def test_a_refused_threshold_is_said(calls: list[tuple[int, int]], monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setattr(
        allocator.ctypes, "CDLL", lambda *a, **k: type("L", (), {"mallopt": lambda s, p, v: 0})()
    )
    assert allocator.keep_freed_memory() == "allocator: left as it is (mallopt refused the thresholds)"


def test_a_bad_value_names_the_variable(
    calls: list[tuple[int, int]], monkeypatch: pytest.MonkeyPatch
) -> None:
    monkeypatch.setenv("ALBERT_MALLOC", "jemalloc")
    with pytest.raises(ConfigError, match=r"ALBERT_MALLOC='jemalloc': must be 'keep' or 'system'"):
        allocator.keep_freed_memory()
    assert calls == []


def test_the_cli_refuses_a_bad_value_in_one_line_before_writing(
    calls: list[tuple[int, int]],
    monkeypatch: pytest.MonkeyPatch,
    tmp_path: Path,
    capsys: pytest.CaptureFixture[str],
) -> None:
    monkeypatch.setenv("ALBERT_MALLOC", "off")
    run_dir = tmp_path / "run"
    argv = ["pretrain", "--recipe", "smoke", "--data-dir", str(tmp_path), "--output", str(run_dir)]
    assert cli(argv) == 1
    err = capsys.readouterr().err
    assert (
        err
        == "albert pretrain: error: environment variable ALBERT_MALLOC='off': must be 'keep' or 'system'\n"
    )
    assert not run_dir.exists() and calls == []
