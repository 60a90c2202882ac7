"""Issue 15 for the data side: a garbage corpus fails loudly (item 13), and an existing output is never
silently clobbered or mixed (item 6: `albert tokenizer train`, `albert prepare`)."""

from __future__ import annotations

import json
import random
from pathlib import Path

import pytest
from data_support import WIKI_SAMPLE, make_tokenizer, read_all, train_spm

import albert_lm.data.build as build_mod
from albert_lm.cli.main import main as cli_main
from albert_lm.data.documents import DataError
from albert_lm.data.pipeline import PrepareConfig, prepare

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
    assert (
        f"albert prepare: error: {garbage}:{_first_bad_line(garbage)}: " in err
        and "--max-skip-fraction" in err
    )
    # 1.0 disables the check: the old behaviour, skips counted in the manifest
    rc = cli_main([*args, "--output", str(tmp_path / "b"), "--max-skip-fraction", "1.0"])
    assert rc == 0
    m = json.loads((tmp_path / "b" / "manifest.json").read_text())
    assert m["skipped"]["invalid_utf8_lines"] > 0.9 * m["counts"]["input_lines"]


# ------------------------------------------------------------------- item 6: `albert tokenizer train`


def _tree(d: Path) -> dict[str, bytes]:
    return {p.name: p.read_bytes() for p in sorted(d.iterdir())}


def _train_args(out: Path, vocab_size: int) -> list[str]:
    return ["tokenizer", "train", "--input", str(WIKI_SAMPLE), "--vocab-size", str(vocab_size), "--quiet",
            "--output", str(out)]  # fmt: skip


def test_tokenizer_train_refuses_a_non_empty_output(tmp_path: Path, capsys: pytest.CaptureFixture) -> None:
    out = tmp_path / "tok"
    assert cli_main(_train_args(out, 300)) == 0
    before = _tree(out)
    assert cli_main(_train_args(out, 400)) == 1
    err = capsys.readouterr().err
    assert f"albert tokenizer: error: {out}: exists and is not empty" in err and "--overwrite" in err
    assert _tree(out) == before  # untouched
    # --overwrite replaces the whole directory: the new vocabulary, nothing of the old one left
    (out / "notes.txt").write_text("an old file")
    assert cli_main([*_train_args(out, 400), "--overwrite"]) == 0
    after = _tree(out)
    assert sorted(after) == [
        "special_tokens_map.json",
        "spiece.model",
        "spiece.vocab",
        "tokenizer.json",
        "tokenizer_config.json",
    ]
    assert len(after["spiece.vocab"].splitlines()) == 400 and after["spiece.model"] != before["spiece.model"]
    assert sorted(p.name for p in tmp_path.iterdir()) == ["tok"]  # no temporaries left
    # an empty directory (or none) is fine without --overwrite
    (tmp_path / "empty").mkdir()
    assert cli_main(_train_args(tmp_path / "empty", 300)) == 0
    assert (tmp_path / "empty" / "spiece.model").read_bytes() == before["spiece.model"]


def test_tokenizer_overwrite_is_atomic(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    """A failure while the new directory is written leaves the old one whole (never half old, half new)."""
    import albert_lm.tokenizer.train as train_mod

    out = tmp_path / "tok"
    train_mod.train_sentencepiece([WIKI_SAMPLE], out, vocab_size=300)
    before = _tree(out)

    def crash(tok, path):  # spiece.model, tokenizer_config.json, special_tokens_map.json are written by now
        raise OSError(28, "No space left on device")

    monkeypatch.setattr(train_mod, "_write_vocab_file", crash)
    with pytest.raises(OSError, match="No space left"):
        train_mod.train_sentencepiece([WIKI_SAMPLE], out, vocab_size=400, overwrite=True)
    assert _tree(out) == before
    assert sorted(p.name for p in tmp_path.iterdir()) == ["tok"]
    with pytest.raises(FileExistsError, match="not empty"):
        train_mod.train_sentencepiece([WIKI_SAMPLE], out, vocab_size=400)
    (tmp_path / "file").write_text("x")
    with pytest.raises(NotADirectoryError, match="not a directory"):
        train_mod.train_sentencepiece([WIKI_SAMPLE], tmp_path / "file", vocab_size=400, overwrite=True)


# --------------------------------------------------------------------- item 6: `albert prepare` DATA_DIR
# What happens to an existing DATA_DIR (pipeline.py docstring): other settings or another tokenizer are
# refused (test_data_prepare.test_tokenizer_or_settings_mismatch); the same input and settings resume,
# reusing every complete shard; the cases below are what was missing.

SMALL = PrepareConfig(max_seq_length=64, dupe_factor=1, shard_chars=15000)  # 4 shards of the sample


def test_prepare_refuses_other_inputs_in_a_complete_data_dir(tmp_path: Path, tok) -> None:
    out = tmp_path / "d"
    prepare([WIKI_SAMPLE], tok, out, SMALL)
    before = read_all(out)
    other = tmp_path / "other.txt"
    other.write_text(WIKI_SAMPLE.read_text(encoding="utf-8").split("\n\n", 3)[-1], encoding="utf-8")
    with pytest.raises(DataError, match=rf"{out}/manifest.json: this DATA_DIR was prepared from other input"):
        prepare([other], tok, out, SMALL)
    with pytest.raises(DataError, match="other input"):  # the same files in another order: other data
        prepare([other, WIKI_SAMPLE], tok, out, SMALL)
    assert read_all(out) == before
    m = prepare([other], tok, out, SMALL, overwrite=True)
    assert [i["name"] for i in m["inputs"]] == ["other.txt"]
    assert read_all(out) == read_all(_fresh(tmp_path / "fresh", [other], tok))


def _fresh(out: Path, inputs: list[Path], tok) -> Path:
    prepare(inputs, tok, out, SMALL)
    return out


def test_a_rebuild_invalidates_the_old_manifest_first(tmp_path: Path, tok, monkeypatch) -> None:
    """An input edited in place (same name and size) rebuilds the shards whose text changed; if that
    rebuild dies, no manifest may still promise the old shards next to the new ones."""
    corpus = tmp_path / "corpus.txt"
    text = WIKI_SAMPLE.read_text(encoding="utf-8")
    corpus.write_text(text, encoding="utf-8")
    out = tmp_path / "d"
    prepare([corpus], tok, out, SMALL)
    cut = text.rindex(" the ")
    corpus.write_text(text[:cut] + " THE " + text[cut + 5 :], encoding="utf-8")  # last shard's text
    real = build_mod.write_shard

    def crash(path, sections, meta):
        raise KeyboardInterrupt

    monkeypatch.setattr(build_mod, "write_shard", crash)
    with pytest.raises(KeyboardInterrupt):
        prepare([corpus], tok, out, SMALL)
    assert not (out / "manifest.json").exists()
    monkeypatch.setattr(build_mod, "write_shard", real)
    prepare([corpus], tok, out, SMALL)  # resumes: shards 0-2 reused, 3 rebuilt
    assert read_all(out) == read_all(_fresh(tmp_path / "fresh", [corpus], tok))


def test_prepare_refuses_a_directory_that_is_not_a_data_dir(tmp_path: Path, tok) -> None:
    out = tmp_path / "home"
    out.mkdir()
    (out / "notes.txt").write_text("someone's file")
    with pytest.raises(DataError, match=rf"{out}: not empty and not a DATA_DIR \(notes.txt\)"):
        prepare([WIKI_SAMPLE], tok, out, SMALL)
    assert sorted(p.name for p in out.iterdir()) == ["notes.txt"]
    prepare([WIKI_SAMPLE], tok, out, SMALL, overwrite=True)  # writes next to them, deletes only its own
    assert (out / "notes.txt").read_text() == "someone's file" and (out / "manifest.json").is_file()
