"""Issue 15 for the data side: a garbage corpus fails loudly (item 13), and an existing output is never
silently clobbered or mixed (item 6: `albert tokenizer train`, `albert prepare`)."""

from __future__ import annotations

import json
import random
from pathlib import Path

import pytest
from data_support import WIKI_SAMPLE, make_tokenizer, train_spm

from albert.cli.main import main as cli_main
from albert.data.documents import DataError
from albert.data.pipeline import PrepareConfig, prepare

CFG = PrepareConfig(max_seq_length=64, dupe_factor=1)


@pytest.fixture(scope="module")
def spm_model(tmp_path_factory: pytest.TempPathFactory) -> Path:
    return train_spm(tmp_path_factory.mktemp("spm") / "spiece.model", vocab_size=800)


@pytest.fixture(scope="module")
def tok(spm_model: Path):
    return make_tokenizer(spm_model)


def _garbage(path: Path, n_bytes: int = 60_000, seed: int = 0) -> Path:
    """Random bytes: most 'lines' are not UTF-8, a few decode by chance (as a binary file fed by mistake)."""
    rng = random.Random(seed)
    path.write_bytes(bytes(rng.randrange(256) for _ in range(n_bytes)))
    return path


def _first_bad_line(path: Path) -> int:
    for i, line in enumerate(path.read_bytes().split(b"\n"), 1):
        try:
            line.decode("utf-8")
        except UnicodeDecodeError:
            return i
    raise AssertionError("no bad line")


# ------------------------------------------------------------------------------------ item 13: garbage


def test_binary_input_fails_naming_the_first_bad_line(tmp_path: Path, tok) -> None:
    garbage = _garbage(tmp_path / "model.bin")
    first = _first_bad_line(garbage)
    with pytest.raises(
        DataError, match=rf"^{garbage}:{first}: \d+ of \d+ input lines \(\d+\.\d%\) skipped"
    ) as e:
        prepare([garbage], tok, tmp_path / "out", CFG)
    assert "max_skip_fraction=0.1" in str(e.value) and "invalid utf8 lines" in str(e.value)
    assert not (tmp_path / "out" / "manifest.json").exists()  # nothing a pretraining run would take


def test_skip_threshold_counts_bad_lines_among_good_ones(tmp_path: Path, tok) -> None:
    good = WIKI_SAMPLE.read_bytes()
    n_lines = good.count(b"\n")
    corpus = tmp_path / "mixed.txt"
    # a few bad lines in a real corpus: under 10%, counted and kept going
    few = max(1, n_lines // 20)
    corpus.write_bytes(good + b"\n" + b"bad \xff line\n" * few)
    m = prepare([corpus], tok, tmp_path / "few", CFG)
    assert m["skipped"]["invalid_utf8_lines"] == few
    # as many bad lines as good ones: over 10%, an error (the first bad line named), unless allowed
    corpus.write_bytes(good + b"\n" + b"bad \xff line\n" * n_lines)
    with pytest.raises(
        DataError, match=rf"{corpus}:{n_lines + 2}: {n_lines} of {2 * n_lines + 1} input lines"
    ):
        prepare([corpus], tok, tmp_path / "many", CFG)
    m = prepare([corpus], tok, tmp_path / "many", CFG, max_skip_fraction=0.6)
    assert m["skipped"]["invalid_utf8_lines"] == n_lines
    with pytest.raises(ValueError, match="max_skip_fraction must be in"):
        prepare([corpus], tok, tmp_path / "x", CFG, max_skip_fraction=1.5)


def test_cli_max_skip_fraction(tmp_path: Path, spm_model: Path, capsys: pytest.CaptureFixture) -> None:
    garbage = _garbage(tmp_path / "g.txt")
    args = ["prepare", "--input", str(garbage), "--tokenizer", str(spm_model), "--max-seq-length", "64"]
    assert cli_main([*args, "--output", str(tmp_path / "a")]) == 1
    err = capsys.readouterr().err
    assert f"{garbage}:{_first_bad_line(garbage)}: " in err and "--max-skip-fraction" in err
    # 1.0 disables the check: the old behaviour, skips counted in the manifest
    rc = cli_main([*args, "--output", str(tmp_path / "b"), "--max-skip-fraction", "1.0"])
    assert rc == 0
    m = json.loads((tmp_path / "b" / "manifest.json").read_text())
    assert m["skipped"]["invalid_utf8_lines"] > 0.9 * m["counts"]["input_lines"]
