"""`load_tokenizer` on a model directory: the tokenizer type it records (tokenizer_config.json's
``tokenizer_class``) decides, so a Chinese ALBERT directory is read with its WordPiece vocabulary even
when a SentencePiece model lies next to it (the most reported Chinese ALBERT problem upstream)."""

from __future__ import annotations

import json
import logging
import shutil
from pathlib import Path

import pytest

from albert_lm.tokenizer import AlbertTokenizer, WordPieceTokenizer, load_tokenizer
from conftest import FIXTURES

TINY_VOCAB = FIXTURES / "tokenizer" / "tiny_vocab.txt"


@pytest.fixture(scope="module")
def spm_file(tmp_path_factory: pytest.TempPathFactory) -> Path:
    from albert_lm.tokenizer.train import train_sentencepiece

    corpus = FIXTURES / "data_wiki_sample.txt"
    out = tmp_path_factory.mktemp("spm") / "tok"
    train_sentencepiece([corpus], out, vocab_size=300)
    return out / "spiece.model"


def _config(d: Path, cls: str) -> None:
    (d / "tokenizer_config.json").write_text(json.dumps({"tokenizer_class": cls, "do_lower_case": True}))


def test_saved_directories_record_their_type_and_load_back(tmp_path: Path, spm_file: Path) -> None:
    wp = load_tokenizer(TINY_VOCAB)
    wp.save_pretrained(tmp_path / "wp")
    assert (
        json.loads((tmp_path / "wp" / "tokenizer_config.json").read_text())["tokenizer_class"]
        == "BertTokenizer"
    )
    assert isinstance(load_tokenizer(tmp_path / "wp"), WordPieceTokenizer)
    assert (
        json.loads((tmp_path / "wp" / "tokenizer_config.json").read_text())["albert_tokenizer_class"]
        == "WordPieceTokenizer"
    )
    sp = load_tokenizer(spm_file)
    sp.save_pretrained(tmp_path / "sp")
    config = json.loads((tmp_path / "sp" / "tokenizer_config.json").read_text())
    # transformers reads tokenizer.json through its generic class (tokenizer_json.py); ours is recorded apart
    assert config["tokenizer_class"] == "PreTrainedTokenizerFast"
    assert config["albert_tokenizer_class"] == "AlbertTokenizer"
    assert isinstance(load_tokenizer(tmp_path / "sp"), AlbertTokenizer)


def test_our_recorded_class_wins_and_a_generic_one_leaves_it_to_the_files(
    tmp_path: Path, spm_file: Path, caplog: pytest.LogCaptureFixture
) -> None:
    d = tmp_path / "both"
    d.mkdir()
    shutil.copy(TINY_VOCAB, d / "vocab.txt")
    shutil.copy(spm_file, d / "spiece.model")
    (d / "tokenizer_config.json").write_text(
        json.dumps(
            {"tokenizer_class": "PreTrainedTokenizerFast", "albert_tokenizer_class": "WordPieceTokenizer"}
        )
    )
    assert isinstance(load_tokenizer(d), WordPieceTokenizer)
    with caplog.at_level(logging.WARNING, logger="albert_lm.tokenizer"):
        _config(d, "PreTrainedTokenizerFast")  # no class of ours: the files decide, SentencePiece first
        assert isinstance(load_tokenizer(d), AlbertTokenizer)
        _config(d, "TokenizersBackend")
        assert isinstance(load_tokenizer(d), AlbertTokenizer)
    assert not caplog.text
    (d / "tokenizer_config.json").write_text(json.dumps({"albert_tokenizer_class": "SomethingElse"}))
    with caplog.at_level(logging.WARNING, logger="albert_lm.tokenizer"):
        assert isinstance(load_tokenizer(d), AlbertTokenizer)
    assert (
        "albert_tokenizer_class 'SomethingElse' is not one of AlbertTokenizer, WordPieceTokenizer"
        in caplog.text
    )


def test_the_recorded_class_wins_over_the_files_present(tmp_path: Path, spm_file: Path) -> None:
    d = tmp_path / "both"
    d.mkdir()
    shutil.copy(TINY_VOCAB, d / "vocab.txt")
    shutil.copy(spm_file, d / "spiece.model")
    _config(d, "BertTokenizer")
    tok = load_tokenizer(d)
    assert isinstance(tok, WordPieceTokenizer) and tok.vocab_size == 20
    _config(d, "AlbertTokenizerFast")
    assert isinstance(load_tokenizer(d), AlbertTokenizer)
    _config(d, "BertTokenizerFast")
    assert isinstance(load_tokenizer(d), WordPieceTokenizer)


def test_a_recorded_class_without_its_file_falls_back_with_a_warning(
    tmp_path: Path, caplog: pytest.LogCaptureFixture
) -> None:
    """brightmart/albert_zh and its Hugging Face ports ship vocab.txt and say AlbertTokenizer."""
    d = tmp_path / "albert_zh"
    d.mkdir()
    shutil.copy(TINY_VOCAB, d / "vocab.txt")
    _config(d, "AlbertTokenizer")
    with caplog.at_level(logging.WARNING, logger="albert_lm.tokenizer"):
        tok = load_tokenizer(d)
    assert isinstance(tok, WordPieceTokenizer)
    assert "tokenizer_config.json names AlbertTokenizer but there is no SentencePiece model" in caplog.text


def test_unknown_class_or_no_file(tmp_path: Path, caplog: pytest.LogCaptureFixture) -> None:
    d = tmp_path / "x"
    d.mkdir()
    shutil.copy(TINY_VOCAB, d / "vocab.txt")
    _config(d, "ElectraTokenizer")  # another WordPiece class: read by the file that is there
    with caplog.at_level(logging.WARNING, logger="albert_lm.tokenizer"):
        assert isinstance(load_tokenizer(d), WordPieceTokenizer)
    assert "tokenizer_class 'ElectraTokenizer' is not one of" in caplog.text
    (d / "vocab.txt").unlink()
    (d / "tokenizer_config.json").unlink()
    with pytest.raises(ValueError, match="no tokenizer here"):
        load_tokenizer(d)
