"""tokenizer.json (albert_lm.tokenizer.tokenizer_json): the file our SentencePiece directories carry for
transformers' AutoTokenizer, read here by the `tokenizers` library itself (the parity tests read it through
transformers 4.x and 5.x on the real sentences)."""

from __future__ import annotations

import json
import logging
import sys
import unicodedata
from pathlib import Path

import pytest

from albert_lm._io import write_varint
from albert_lm.tokenizer import AlbertTokenizer, WordPieceTokenizer, load_tokenizer
from albert_lm.tokenizer.tokenizer_json import sentencepiece_tokenizer_json
from conftest import FIXTURES

sys.path.insert(0, str(FIXTURES / "tokenizer"))
import tokenizer_support as ts  # noqa: E402

SAMPLE = FIXTURES / "data_wiki_sample.txt"


@pytest.fixture(scope="module")
def spm_dir(tmp_path_factory: pytest.TempPathFactory) -> Path:
    from albert_lm.tokenizer.train import train_sentencepiece

    out = tmp_path_factory.mktemp("spm") / "tok"
    train_sentencepiece([SAMPLE], out, vocab_size=300)
    return out


def _texts() -> list[str]:
    lines = [line.strip() for line in SAMPLE.read_text(encoding="utf-8").splitlines() if line.strip()]
    return lines[:300] + list(ts.HARD_CASES) + ["1,000 and 12,5, 3,4,5, 1999, 2,000,000,", "[CLS] x [SEP]"]


def _has_digit_comma_piece(tok: AlbertTokenizer, text: str) -> bool:
    pieces = tok.sp.encode(tok.preprocess(text), out_type=str)
    return any(len(p) > 1 and p[-1] == "," and p[-2].isdigit() for p in pieces)


def _differences(tok: AlbertTokenizer, directory: Path, texts: list[str]) -> list[str]:
    """Texts whose ids from the directory's tokenizer.json (special-token strings read as text) differ
    from ours."""
    tokenizers = pytest.importorskip("tokenizers")
    backend = tokenizers.Tokenizer.from_file(str(directory / "tokenizer.json"))
    backend.encode_special_tokens = True
    ref = backend.encode_batch(texts, add_special_tokens=False)
    return [t for t, mine, r in zip(texts, tok.encode_ids_batch(texts), ref) if mine != r.ids]


def test_sentencepiece_directory_files(spm_dir: Path) -> None:
    config = json.loads((spm_dir / "tokenizer_config.json").read_text())
    assert config["tokenizer_class"] == "PreTrainedTokenizerFast"
    assert config["model_input_names"] == ["input_ids", "token_type_ids", "attention_mask"]
    pipeline = json.loads((spm_dir / "tokenizer.json").read_text())
    tok = load_tokenizer(spm_dir)
    assert isinstance(tok, AlbertTokenizer)
    assert pipeline["model"]["type"] == "Unigram" and len(pipeline["model"]["vocab"]) == tok.vocab_size
    assert pipeline["model"]["unk_id"] == tok.unk_id
    assert {t["id"]: t["content"] for t in pipeline["added_tokens"]} == {
        tok.pad_id: "<pad>", tok.unk_id: "<unk>", tok.cls_id: "[CLS]", tok.sep_id: "[SEP]", tok.mask_id: "[MASK]"
    }  # fmt: skip
    # pieces SentencePiece never outputs from text are out of Unigram's reach; the others keep their scores
    scores = [s for _, s in pipeline["model"]["vocab"]]
    lowest = min(tok.sp.get_score(i) for i in range(tok.vocab_size))
    longest = max(len(tok.id_to_piece(i)) for i in range(tok.vocab_size))
    for i in range(tok.vocab_size):
        never = tok.sp.is_control(i) or tok.sp.is_unknown(i) or i in tok._digit_comma_ids
        # below any segmentation of the piece's span into single characters or unknown ones (lowest - 10)
        assert (
            (scores[i] < longest * (lowest - 10))
            if never
            else (scores[i] == pytest.approx(tok.sp.get_score(i)))
        )


@pytest.mark.parametrize(
    "options",
    [{}, {"do_lower_case": False}, {"keep_accents": True}, {"remove_space": False}],
    ids=["default", "cased", "accents", "spaces"],
)
def test_tokenizers_reads_our_ids(spm_dir: Path, tmp_path: Path, options: dict[str, bool]) -> None:
    tok = AlbertTokenizer(spm_dir / "spiece.model", **options)
    tok.save_pretrained(tmp_path)
    texts = _texts()
    differ = _differences(tok, tmp_path, texts)
    if not options.get("do_lower_case", True):
        # cased, "[CLS]" read as text (split_special_tokens): the control piece's letters are unknown to
        # this lower-cased vocabulary, so no segmentation of the span beats the piece itself (SentencePiece
        # skips control pieces; Unigram cannot)
        assert "[CLS] x [SEP]" in differ
        differ.remove("[CLS] x [SEP]")
    # the one difference left: the original's re-encoding of digit-comma pieces (tokenizer_json.py)
    for text in differ:
        assert _has_digit_comma_piece(tok, text), text
    assert len(differ) < len(texts) // 50


def test_unsupported_model_option_writes_no_tokenizer_json(
    spm_dir: Path, tmp_path: Path, caplog: pytest.LogCaptureFixture
) -> None:
    # the ModelProto with trainer_spec.treat_whitespace_as_suffix (field 24) set: protobuf merges a
    # repeated sub-message field into the first
    spec = bytearray()
    write_varint(spec, 24 << 3)
    write_varint(spec, 1)
    extra = bytearray()
    write_varint(extra, (2 << 3) | 2)
    write_varint(extra, len(spec))
    model = (spm_dir / "spiece.model").read_bytes() + bytes(extra + spec)
    tok = AlbertTokenizer.from_bytes(model, source="suffix.model")
    (tmp_path / "tokenizer.json").write_text("{}")  # a stale one goes: transformers would read it
    with caplog.at_level(logging.WARNING, logger="albert_lm.tokenizer"):
        assert sentencepiece_tokenizer_json(tok) is None
        files = tok.save_pretrained(tmp_path)
    assert "treat_whitespace_as_suffix" in caplog.text
    assert "tokenizer.json" not in {f.name for f in files} and not (tmp_path / "tokenizer.json").exists()
    config = json.loads((tmp_path / "tokenizer_config.json").read_text())
    assert config["tokenizer_class"] == "AlbertTokenizer"  # transformers converts spiece.model itself
    assert isinstance(load_tokenizer(tmp_path), AlbertTokenizer)


def test_wordpiece_directory_drops_a_stale_tokenizer_json(spm_dir: Path, tmp_path: Path) -> None:
    load_tokenizer(spm_dir).save_pretrained(tmp_path)
    assert (tmp_path / "tokenizer.json").is_file()
    (tmp_path / "spiece.model").unlink()
    WordPieceTokenizer(FIXTURES / "tokenizer" / "tiny_vocab.txt").save_pretrained(tmp_path)
    assert not (tmp_path / "tokenizer.json").exists()  # transformers' BertTokenizer would take its vocabulary
    assert isinstance(load_tokenizer(tmp_path), WordPieceTokenizer)


@pytest.mark.slow
def test_every_code_point(spm_dir: Path, tmp_path: Path) -> None:
    tokenizers = pytest.importorskip("tokenizers")
    tok = load_tokenizer(spm_dir)
    assert isinstance(tok, AlbertTokenizer)
    tok.save_pretrained(tmp_path)
    texts = [f"a{chr(cp)}b {chr(cp)}" for cp in range(0x110000) if not 0xD800 <= cp <= 0xDFFF]
    differ = _differences(tok, tmp_path, texts)
    # measured (8000-piece vocabulary): 4 of 1,112,064, U+A7F2-U+A7F4 and U+1F16C, whose compatibility
    # decompositions (Unicode 13-14) the Unicode tables of tokenizers' NFKD lack
    nfkd = tokenizers.normalizers.NFKD()
    for text in differ:
        c = text[1]
        assert nfkd.normalize_str(c) == c != unicodedata.normalize("NFKD", c), hex(ord(c))
