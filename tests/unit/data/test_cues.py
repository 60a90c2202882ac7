"""`albert data cues`: the shallow-feature floors find a cue where one was planted, and only there."""

from __future__ import annotations

import json
from pathlib import Path

import pytest
from data_support import make_tokenizer, planted_order_documents, train_spm, wiki_documents, write_documents

from albert_lm.cli.main import main as cli_main
from albert_lm.data.cues import format_cues, sop_cues
from albert_lm.data.documents import DataError
from albert_lm.data.pipeline import PrepareConfig, prepare


@pytest.fixture(scope="module")
def tok(tmp_path_factory: pytest.TempPathFactory):
    return make_tokenizer(train_spm(tmp_path_factory.mktemp("spm") / "spiece.model", vocab_size=1000))


def _prepare(tok, out: Path, docs: list[list[str]], dupe_factor: int = 10, **cfg) -> Path:
    src = write_documents(out.with_suffix(".txt"), docs)
    prepare(
        [src], tok, out, PrepareConfig(max_seq_length=128, dupe_factor=dupe_factor, shard_chars=30000, **cfg)
    )
    return out


def test_a_planted_order_cue_is_found_by_boundary_tokens_only(tok, tmp_path: Path) -> None:
    docs = planted_order_documents()
    train = _prepare(tok, tmp_path / "train", docs[:48], dupe_factor=20)
    held = _prepare(tok, tmp_path / "held", docs[48:], dupe_factor=20, seed=7)
    c = sop_cues(train, held)
    acc = c["accuracy"]
    assert c["eval_instances"] > 300
    assert acc["boundary_tokens"] > 0.9
    assert acc["boundary_tokens+overlap"] > 0.9
    assert acc["overlap"] < acc["majority"] + 0.1  # A/B overlap says nothing about order
    assert "boundary tokens" in format_cues(c)


def test_nsp_negatives_are_a_topic_shift_that_overlap_detects(tok, tmp_path: Path) -> None:
    # the ALBERT paper's case against NSP (section 3.1): a random B is mostly a change of topic
    docs = wiki_documents()
    train = _prepare(tok, tmp_path / "train", docs[:9], task="nsp")
    held = _prepare(tok, tmp_path / "held", docs[9:], task="nsp", seed=7)
    c = sop_cues(train, held)
    assert 0.3 < c["eval_random_b"] < 0.7
    assert c["accuracy"]["overlap"] > c["accuracy"]["majority"] + 0.1


def test_on_real_sop_pairs_no_floor_is_far_above_the_majority(tok, tmp_path: Path) -> None:
    docs = wiki_documents()
    train = _prepare(tok, tmp_path / "train", docs[:9])
    held = _prepare(tok, tmp_path / "held", docs[9:], seed=7)
    c = sop_cues(train, held)
    assert c["eval_random_b"] < 0.1
    for name, value in c["accuracy"].items():
        assert value < c["accuracy"]["majority"] + 0.1, name


def test_cli_and_a_tokenizer_mismatch(tok, tmp_path: Path, capsys: pytest.CaptureFixture[str]) -> None:
    docs = wiki_documents()
    train = _prepare(tok, tmp_path / "train", docs[:9])
    held = _prepare(tok, tmp_path / "held", docs[9:], seed=7)
    assert cli_main(["data", "cues", str(train), str(held), "--json", "--sample", "500"]) == 0
    out = json.loads(capsys.readouterr().out)
    assert out["train_instances"] == 500 and set(out["accuracy"]) >= {"majority", "boundary_tokens"}
    other = make_tokenizer(train_spm(tmp_path / "spm2" / "spiece.model", vocab_size=800))
    mismatched = _prepare(other, tmp_path / "other", docs[9:])
    with pytest.raises(DataError, match="tokenizer fingerprint"):
        sop_cues(train, mismatched)
    assert cli_main(["data", "cues", str(train), str(mismatched)]) == 1
    assert "manifest.json" in capsys.readouterr().err
