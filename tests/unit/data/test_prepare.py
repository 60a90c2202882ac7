"""`albert prepare`: bitwise reproducibility across workers and machines, resume, bad input, mismatches."""

from __future__ import annotations

import json
from pathlib import Path

import numpy as np
import pytest
from data_support import WIKI_SAMPLE, make_tokenizer, read_all, train_spm

import albert_lm.data.build as build_mod
import albert_lm.data.pipeline as prep_mod
from albert_lm.cli.main import main as cli_main
from albert_lm.data.documents import DataError
from albert_lm.data.instances import instance_token_ids
from albert_lm.data.pipeline import PrepareConfig, merge_parts, prepare
from albert_lm.data.shards import ShardReader, load_manifest, sha256_file, verify_shards

CFG = PrepareConfig(max_seq_length=96, dupe_factor=2, shard_chars=15000)


@pytest.fixture(scope="module")
def spm_model(tmp_path_factory: pytest.TempPathFactory) -> Path:
    return train_spm(tmp_path_factory.mktemp("spm") / "spiece.model", vocab_size=1000)


@pytest.fixture(scope="module")
def tok(spm_model: Path):
    return make_tokenizer(spm_model)


@pytest.fixture(scope="module")
def reference_dir(tmp_path_factory: pytest.TempPathFactory, tok) -> Path:
    out = tmp_path_factory.mktemp("ref")
    prepare([WIKI_SAMPLE], tok, out, CFG)
    return out


def test_workers_and_machines_give_the_same_bits(tmp_path: Path, tok, reference_dir: Path) -> None:
    ref = read_all(reference_dir)
    assert len([n for n in ref if n.startswith("shard-")]) == 4
    prepare([WIKI_SAMPLE], tok, tmp_path / "w2", CFG, workers=2)
    assert read_all(tmp_path / "w2") == ref
    # two machines, each its half; the second run finds both parts and writes manifest.json
    part0 = prepare([WIKI_SAMPLE], tok, tmp_path / "m", CFG, shard_index=0, num_shards=2)
    assert [e["file"] for e in part0["shards"]] == ["shard-00000.bin", "shard-00002.bin"]
    assert not (tmp_path / "m" / "manifest.json").exists()
    prepare([WIKI_SAMPLE], tok, tmp_path / "m", CFG, shard_index=1, num_shards=2)
    assert read_all(tmp_path / "m") == ref


def test_merge_refuses_incomplete_parts(tmp_path: Path, tok) -> None:
    prepare([WIKI_SAMPLE], tok, tmp_path, CFG, shard_index=1, num_shards=3)
    with pytest.raises(DataError, match=r"parts \[0, 2\] of 3 are missing"):
        merge_parts(tmp_path)
    with pytest.raises(DataError, match="no manifest; found 1 partial manifests"):
        load_manifest(tmp_path)


def test_shards_hold_the_tokenized_corpus(reference_dir: Path, tok) -> None:
    manifest = load_manifest(reference_dir)
    first_doc = WIKI_SAMPLE.read_text(encoding="utf-8").split("\n\n")[0].splitlines()
    r = ShardReader(reference_dir / "shard-00000.bin")
    tokens, sent = r["tokens"], r["sent_offsets"]
    for i, sentence in enumerate(first_doc[:5]):
        assert tokens[sent[i] : sent[i + 1]].tolist() == tok.encode_ids(sentence)
    assert manifest["counts"]["documents"] == 13 and manifest["counts"]["input_documents"] == 13
    assert manifest["counts"]["sentences"] == sum(e["sentences"] for e in manifest["shards"])
    for e in manifest["shards"]:
        assert sha256_file(reference_dir / e["file"]) == e["sha256"]
    # every instance is [CLS] A [SEP] B [SEP] within max_seq_length; masks only on non-special positions
    inst = r["instances"]
    off, pos = r["mask_offsets"], r["mask_positions"]
    assert len(off) == len(inst) + 1
    for i in range(len(inst)):
        ids, len_a = instance_token_ids(tokens, inst[i], tok.cls_id, tok.sep_id)
        assert len(ids) <= CFG.max_seq_length
        p = pos[off[i] : off[i + 1]].astype(int)
        assert np.all(np.diff(p) > 0) and not set(p) & {0, len_a - 1, len(ids) - 1}


def test_interrupted_run_leaves_nothing_trusted_and_resumes(
    tmp_path: Path, tok, reference_dir: Path, monkeypatch
) -> None:
    out = tmp_path / "d"
    real = build_mod.write_shard

    def crash_on_third(path, sections, meta):
        if meta["index"] == 2:
            # die in the middle of writing: a temporary exists, the final name never does
            (path.parent / f".tmp-{path.name}.crashed").write_bytes(b"half a shard")
            raise KeyboardInterrupt
        return real(path, sections, meta)

    monkeypatch.setattr(build_mod, "write_shard", crash_on_third)
    with pytest.raises(KeyboardInterrupt):
        prepare([WIKI_SAMPLE], tok, out, CFG)
    names = sorted(p.name for p in out.iterdir())
    assert "shard-00002.bin" not in names and "manifest.json" not in names
    assert "shard-00000.bin" in names
    monkeypatch.setattr(build_mod, "write_shard", real)
    # A truncated shard (e.g. copied by hand) is detected by its missing end marker and rebuilt.
    (out / "shard-00001.bin").write_bytes((out / "shard-00001.bin").read_bytes()[:-100])
    built = []
    monkeypatch.setattr(
        prep_mod, "build_shard", lambda job, ctx: built.append(job.index) or real_build(job, ctx)
    )
    prepare([WIKI_SAMPLE], tok, out, CFG)
    assert built == [1, 2, 3]  # shard 0 was complete and is reused
    assert read_all(out) == read_all(reference_dir)  # no temporaries left, same bits


real_build = prep_mod.build_shard


def test_tokenizer_or_settings_mismatch(tmp_path: Path, tok, spm_model: Path, reference_dir: Path) -> None:
    other = make_tokenizer(train_spm(tmp_path / "other.model", vocab_size=800))
    with pytest.raises(
        DataError,
        match=rf"{reference_dir}/manifest.json: this DATA_DIR was prepared with tokenizer fingerprint {tok.fingerprint}",
    ):
        prepare([WIKI_SAMPLE], other, reference_dir, CFG)
    with pytest.raises(DataError, match=r"other settings \(max_seq_length: 96 -> 64\)"):
        prepare(
            [WIKI_SAMPLE],
            tok,
            reference_dir,
            PrepareConfig(max_seq_length=64, dupe_factor=2, shard_chars=15000),
        )
    # shards without a manifest (a part run) are checked too
    prepare([WIKI_SAMPLE], tok, tmp_path / "p", CFG, shard_index=0, num_shards=2)
    (tmp_path / "p" / "manifest.part-0-of-2.json").unlink()
    with pytest.raises(DataError, match=r"shard-00000.bin: built with tokenizer fingerprint"):
        prepare([WIKI_SAMPLE], other, tmp_path / "p", CFG)
    m = prepare([WIKI_SAMPLE], other, tmp_path / "p", CFG, overwrite=True)
    assert m["tokenizer"]["fingerprint"] == other.fingerprint


def test_bad_input_is_counted_in_the_manifest(tmp_path: Path, tok) -> None:
    bad = tmp_path / "bad.txt"
    bad.write_bytes(
        b"A good first sentence.\nAnother good one.\n\n"
        b"Broken \xc3\x28 utf8.\n" + b"word " * 3000 + b"\n\n\n\n"
        b"Last document here.\nIt has two sentences.\n"
    )
    empty = tmp_path / "empty.txt"
    empty.write_bytes(b"")
    cfg = PrepareConfig(max_seq_length=64, dupe_factor=1, max_line_bytes=1000)
    # 2 unreadable lines of 10 is more than the default 10% (test_reliability_data): allowed here
    with pytest.raises(DataError, match=rf"{bad}:4: 2 of 10 input lines \(20.0%\) skipped"):
        prepare([bad, empty], tok, tmp_path / "out", cfg)
    m = prepare([bad, empty], tok, tmp_path / "out", cfg, max_skip_fraction=0.2)
    assert m["skipped"] == {"empty_files": 1, "invalid_utf8_lines": 1, "long_lines": 1}
    assert m["counts"]["documents"] == 2 and m["counts"]["input_lines"] == 10
    with pytest.raises(DataError, match=rf"{bad}:4: invalid utf8 lines"):
        prepare([bad, empty], tok, tmp_path / "strict", cfg, strict=True)


def test_corruption_is_detected(tmp_path: Path, tok) -> None:
    out = tmp_path / "d"
    prepare([WIKI_SAMPLE], tok, out, PrepareConfig(max_seq_length=64, dupe_factor=1))
    verify_shards(out)
    p = out / "shard-00000.bin"
    data = bytearray(p.read_bytes())
    data[100] ^= 0xFF
    p.write_bytes(bytes(data))
    with pytest.raises(DataError, match=r"shard-00000.bin: sha256 \w+ does not match the manifest"):
        verify_shards(out)


def test_cli(tmp_path: Path, spm_model: Path, capsys) -> None:
    out = tmp_path / "cli"
    rc = cli_main(
        ["prepare", "--input", str(WIKI_SAMPLE), "--tokenizer", str(spm_model), "--output", str(out),
         "--max-seq-length", "64", "--masking", "dynamic"]
    )  # fmt: skip
    assert rc == 0
    m = json.loads((out / "manifest.json").read_text())
    assert m["config"]["dupe_factor"] == 1 and m["config"]["masking"] == "dynamic"
    assert "mask_positions" not in ShardReader(out / "shard-00000.bin").footer["sections"]
    assert f"{out}: 1 shards, 13 documents" in capsys.readouterr().out
    rc = cli_main(
        ["prepare", "--input", str(WIKI_SAMPLE), "--tokenizer", str(spm_model), "--output", str(out)]
    )
    assert rc == 1
    err = capsys.readouterr().err
    assert (
        "albert prepare: error: " in err and "other settings" in err.partition("albert prepare: error: ")[2]
    )
    assert cli_main(["data", "verify", str(out)]) == 0
    # neither --merge nor all of --input --tokenizer --output: a usage error, as argparse reports them
    with pytest.raises(SystemExit) as usage:
        cli_main(["prepare", "--input", str(WIKI_SAMPLE), "--output", str(tmp_path / "o")])
    assert usage.value.code == 2
    assert "albert prepare: error: missing --tokenizer (or --merge DATA_DIR)" in capsys.readouterr().err


def test_chinese_whole_word_masking(tmp_path: Path) -> None:
    from data_support import make_wordpiece_tokenizer

    from conftest import data_path

    pytest.importorskip("jieba")
    wp = make_wordpiece_tokenizer(data_path("zh_vocab", "vocab.txt"))
    corpus = tmp_path / "zh.jsonl"
    docs = ["我们去公园散步。今天天气很好。", "北京是中国的首都。上海是一个大城市。"]
    corpus.write_text(
        "".join(json.dumps({"text": d}, ensure_ascii=False) + "\n" for d in docs), encoding="utf-8"
    )
    cfg = PrepareConfig(
        max_seq_length=32, dupe_factor=30, zh_whole_word=True, language="chinese", masked_lm_prob=0.3
    )
    prepare([corpus], wp, tmp_path / "zh", cfg)
    r = ShardReader(tmp_path / "zh" / "shard-00000.bin")
    tokens, ws, sent = r["tokens"], r["word_start"], r["sent_offsets"]
    first = "".join(wp.id_to_piece(int(t)) for t in tokens[sent[0] : sent[1]])
    assert first == "我们去公园散步。"
    # jieba: 我们 / 去 / 公园 / 散步 / 。
    assert ws[sent[0] : sent[1]].tolist() == [1, 0, 1, 1, 0, 1, 0, 1]
    # whole words: 公 and 园 are masked together or not at all
    inst, off, pos = r["instances"], r["mask_offsets"], r["mask_positions"]
    seen_pair = 0
    for i in range(len(inst)):
        ids, _ = instance_token_ids(tokens, inst[i], wp.cls_id, wp.sep_id)
        pieces = [wp.id_to_piece(int(t)) for t in ids]
        masked = set(pos[off[i] : off[i + 1]].tolist())
        for j in range(len(pieces) - 1):
            if pieces[j] == "公" and pieces[j + 1] == "园":
                assert (j in masked) == (j + 1 in masked)
                seen_pair += j in masked
    assert seen_pair > 0


def test_empty_input_is_an_error(tmp_path: Path, tok) -> None:
    empty = tmp_path / "empty.txt"
    empty.write_text("\n\n")
    with pytest.raises(DataError, match=r"no documents in .*empty.txt"):
        prepare([empty], tok, tmp_path / "out", CFG)


def test_shard_and_part_names_round_trip(tmp_path: Path) -> None:
    from albert_lm.data.shards import (
        parse_part_manifest_name,
        parse_shard_name,
        part_manifest_name,
        shard_files,
        shard_name,
    )

    for i in (0, 7, 99999, 123456):
        assert parse_shard_name(shard_name(i)) == i
    assert [parse_shard_name(n) for n in ("shard-1.bin", "shard-00001.bin.tmp", ".tmp-shard-00001.bin")] == [
        None,
        None,
        None,
    ]
    assert parse_part_manifest_name(part_manifest_name(3, 12)) == (3, 12)
    assert parse_part_manifest_name("manifest.json") is None
    for name in ("shard-00002.bin", "shard-00010.bin", "shard-x.bin", "notes.bin"):
        (tmp_path / name).write_bytes(b"")
    assert [(i, p.name) for i, p in shard_files(tmp_path)] == [
        (2, "shard-00002.bin"),
        (10, "shard-00010.bin"),
    ]


def test_preparing_data_never_imports_torch() -> None:
    """``albert prepare`` and its worker processes stay light: the torch-dependent names load lazily."""
    import subprocess
    import sys

    code = (
        "import sys, albert_lm.data, albert_lm.data.pipeline, albert_lm.data.stats, albert_lm.data.cues; "
        "assert 'torch' not in sys.modules, 'torch was imported'"
    )
    subprocess.run([sys.executable, "-c", code], check=True)
