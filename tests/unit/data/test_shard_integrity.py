"""A DATA_DIR is checked when it is opened: a shard changed in place (same size, in-range ids) is refused
by its sampled sha256, or by the full sha256 where the manifest records none; `albert data verify` hashes
every byte. A corrupt shard (ids beyond the vocabulary, mask positions beyond the sequence) or a malformed
manifest is one error naming the shard / field, never a traceback."""

from __future__ import annotations

import json
from pathlib import Path

import numpy as np
import pytest
from data_support import WIKI_SAMPLE, make_tokenizer, train_spm

from albert_lm.data.documents import DataError


@pytest.fixture(scope="module")
def prepared(tmp_path_factory) -> Path:
    from albert_lm.data import PrepareConfig, prepare

    root = tmp_path_factory.mktemp("integrity")
    tok = make_tokenizer(train_spm(root / "spiece.model", vocab_size=400))
    prepare(
        [WIKI_SAMPLE],
        tok,
        root / "data",
        PrepareConfig(max_seq_length=32, dupe_factor=1, input_format="lines"),
    )
    return root / "data"


@pytest.fixture
def data(prepared: Path, tmp_path: Path) -> Path:
    import shutil

    return Path(shutil.copytree(prepared, tmp_path / "data"))


def _section(shard: Path, name: str) -> np.memmap:
    from albert_lm.data.shards import _dtype, read_footer

    spec = read_footer(shard)["sections"][name]
    return np.memmap(
        shard, dtype=_dtype(spec["dtype"]), mode="r+", offset=spec["offset"], shape=(spec["count"],)
    )


def _shard(data: Path) -> Path:
    return data / json.loads((data / "manifest.json").read_text())["shards"][0]["file"]


def _permute_tokens(data: Path) -> None:
    tokens = _section(_shard(data), "tokens")
    tokens[:] = np.random.default_rng(0).permutation(np.asarray(tokens))  # same bytes, other order
    tokens.flush()


def _rehash(data: Path) -> None:
    """Record the shard's current hashes, as a prepare that wrote the corrupt bytes itself would."""
    from albert_lm.data.shards import sampled_sha256, sha256_file

    manifest = json.loads((data / "manifest.json").read_text())
    for e in manifest["shards"]:
        e["sha256"], e["sample_sha256"] = sha256_file(data / e["file"]), sampled_sha256(data / e["file"])
    (data / "manifest.json").write_text(json.dumps(manifest))


def _err(capsys) -> str:
    err = capsys.readouterr().err
    assert err.count("\n") == 1, err  # one line, no traceback
    return err


def test_a_shard_permuted_in_place_is_refused_on_open_and_by_verify(data, capsys):
    from albert_lm.cli.main import main
    from albert_lm.data import PretrainingDataset

    PretrainingDataset(data)  # intact: opens
    assert main(["data", "verify", str(data)]) == 0
    size = _shard(data).stat().st_size
    _permute_tokens(data)
    assert _shard(data).stat().st_size == size
    with pytest.raises(DataError, match=r"shard-00000\.bin: sampled sha256 .* does not match"):
        PretrainingDataset(data)
    capsys.readouterr()
    assert main(["data", "verify", str(data)]) == 1
    assert "shard-00000.bin: sha256" in _err(capsys)
    assert main(["data", "stats", str(data)]) == 1
    assert "shard-00000.bin" in _err(capsys)


def test_a_manifest_without_sampled_hashes_falls_back_to_the_full_sha256(data):
    from albert_lm.data import PretrainingDataset

    manifest = json.loads((data / "manifest.json").read_text())
    for e in manifest["shards"]:
        del e["sample_sha256"]
    (data / "manifest.json").write_text(json.dumps(manifest))
    PretrainingDataset(data)  # intact: opens
    _permute_tokens(data)
    with pytest.raises(DataError, match=r"shard-00000\.bin: sha256 .* does not match"):
        PretrainingDataset(data)


@pytest.mark.parametrize(
    ("section", "value", "message"),
    [
        ("tokens", 400 + 7, "token id 407 outside the vocabulary of 400"),
        ("mask_positions", 60, "mask position 60"),
    ],
)
def test_a_corrupt_shard_is_one_error_naming_it(data, section, value, message):
    from albert_lm.data import PretrainingDataset

    arr = _section(_shard(data), section)
    arr[:] = value
    arr.flush()
    _rehash(data)
    ds = PretrainingDataset(data, shuffle=False, batch_size=4)
    with pytest.raises(DataError, match=rf"shard-00000\.bin: instance \d+: {message}"):
        next(iter(ds))


@pytest.mark.parametrize(
    ("edit", "field"),
    [
        (lambda m: m["shards"][0].pop("file"), "shards[0].file"),
        (lambda m: m["shards"][0].update(file="../../etc/passwd"), "shards[0].file"),
        (lambda m: m["shards"][0].update(instances="many"), "shards[0].instances"),
        (lambda m: m.update(shards={}), "shards"),
        (lambda m: m["tokenizer"].update(vocab_size=None), "tokenizer.vocab_size"),
        (lambda m: m.pop("config"), "config"),
        (lambda m: m["config"].pop("max_seq_length"), "config.max_seq_length"),
    ],
)
def test_a_malformed_manifest_is_one_error_naming_the_field(data, capsys, edit, field):
    from albert_lm.cli.main import main

    manifest = json.loads((data / "manifest.json").read_text())
    edit(manifest)
    (data / "manifest.json").write_text(json.dumps(manifest))
    for argv in (["data", "stats", str(data)], ["data", "verify", str(data)]):
        assert main(argv) == 1
        err = _err(capsys)
        assert "manifest.json" in err and field in err, err
