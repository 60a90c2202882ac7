"""`albert tokenizer train`: ALBERT's SentencePiece settings, reproducibility, sampling, progress, errors."""

from __future__ import annotations

import bz2
from pathlib import Path

import pytest

from albert_lm.cli.main import main
from albert_lm.tokenizer import AlbertTokenizer, load_tokenizer
from albert_lm.tokenizer.train import ALBERT_USER_DEFINED_SYMBOLS, train_sentencepiece
from conftest import data_path


@pytest.fixture(scope="module")
def botchan() -> Path:
    return data_path("botchan", "botchan.txt")


@pytest.fixture(scope="module")
def trained(botchan: Path, tmp_path_factory: pytest.TempPathFactory) -> Path:
    out = tmp_path_factory.mktemp("botchan-spm")
    assert (
        main(["tokenizer", "train", "--input", str(botchan), "--vocab-size", "1000", "--output", str(out)])
        == 0
    )
    return out


def test_cli_writes_a_tokenizer_directory_with_albert_settings(
    trained: Path, capsys: pytest.CaptureFixture
) -> None:
    names = sorted(p.name for p in trained.iterdir())
    assert names == [
        "special_tokens_map.json",
        "spiece.model",
        "spiece.vocab",
        "tokenizer.json",  # transformers' AutoTokenizer reads it (tokenizer_json.py)
        "tokenizer_config.json",
    ]
    tok = load_tokenizer(trained)
    assert isinstance(tok, AlbertTokenizer) and tok.vocab_size == 1000
    sp = tok.sp
    assert [sp.id_to_piece(i) for i in range(5)] == ["<pad>", "<unk>", "[CLS]", "[SEP]", "[MASK]"]
    assert (sp.pad_id(), sp.unk_id(), sp.bos_id(), sp.eos_id()) == (0, 1, -1, -1)
    assert all(sp.is_control(i) for i in (2, 3, 4))
    # the original's user-defined symbols follow, always kept whole
    assert [sp.id_to_piece(i) for i in range(5, 5 + len(ALBERT_USER_DEFINED_SYMBOLS))] == list(
        ALBERT_USER_DEFINED_SYMBOLS
    )
    assert tok.tokenize("£5 (ok)")[:2] == ["▁", "£"]
    # trained on lower-cased, accent-stripped text: no upper-case pieces
    assert not any(any(c.isupper() for c in sp.id_to_piece(i)) for i in range(5, tok.vocab_size))
    # spiece.vocab: piece <TAB> score, one line per id
    lines = (trained / "spiece.vocab").read_text(encoding="utf-8").splitlines()
    assert len(lines) == 1000 and lines[4].split("\t")[0] == "[MASK]"


def test_trainer_spec_is_albert_s(trained: Path) -> None:
    pb2 = pytest.importorskip("sentencepiece.sentencepiece_model_pb2")
    m = pb2.ModelProto()
    m.ParseFromString((trained / "spiece.model").read_bytes())
    spec = m.trainer_spec
    assert spec.model_type == pb2.TrainerSpec.UNIGRAM
    assert spec.character_coverage == pytest.approx(0.99995)
    assert list(spec.control_symbols) == ["[CLS]", "[SEP]", "[MASK]"]
    assert list(spec.user_defined_symbols) == list(ALBERT_USER_DEFINED_SYMBOLS)
    assert spec.shuffle_input_sentence and spec.input_sentence_size == 10_000_000
    assert m.normalizer_spec.name == "nmt_nfkc"


def test_progress_output(botchan: Path, tmp_path: Path, capsys: pytest.CaptureFixture) -> None:
    rc = main(
        ["tokenizer", "train", "--input", str(botchan), "--vocab-size", "600", "--output", str(tmp_path)]
    )
    assert rc == 0
    err = capsys.readouterr().err
    assert "read " in err and " lines" in err
    assert "trained a unigram vocabulary of 600 pieces" in err


def test_training_is_reproducible_and_samples(botchan: Path, tmp_path: Path) -> None:
    kw = dict(vocab_size=600, input_sentence_size=1500)
    a, _ = train_sentencepiece([botchan], tmp_path / "a", seed=1, **kw)
    b, _ = train_sentencepiece([botchan], tmp_path / "b", seed=1, **kw)
    c, _ = train_sentencepiece([botchan], tmp_path / "c", seed=2, **kw)
    full, stats = train_sentencepiece([botchan], tmp_path / "full", seed=1, vocab_size=600)
    assert a.fingerprint == b.fingerprint  # same seed, same bytes
    assert c.fingerprint != a.fingerprint  # another seed draws another sample
    assert full.fingerprint != a.fingerprint  # the 1500-line sample is not the whole corpus
    assert stats.lines_used > 1500


def test_cased_and_keep_accents(tmp_path: Path) -> None:
    corpus = tmp_path / "c.txt"
    corpus.write_text(
        "Édith Piaf sang in Paris. " * 3 + "\n" + "Zoë and Chloé met Émile.\n" * 50, encoding="utf-8"
    )
    tok, _ = train_sentencepiece(
        [corpus], tmp_path / "o", vocab_size=36, do_lower_case=False, keep_accents=True
    )
    assert (tok.do_lower_case, tok.keep_accents) == (False, True)
    pieces = "".join(tok.sp.id_to_piece(i) for i in range(tok.vocab_size))
    assert "É" in pieces and "ë" in pieces
    assert load_tokenizer(tmp_path / "o").tokenize("Zoë") == tok.tokenize("Zoë")


def test_wiki_dump_and_compressed_inputs(tmp_path: Path) -> None:
    xml = """<mediawiki><page><title>T</title><ns>0</ns><revision><text>
'''Albert''' is a [[model|language model]]. It was ''trained'' on text.{{cite web|url=x}}
== History ==
Albert came after [[BERT]]. It shares parameters across layers.
</text></revision></page></mediawiki>"""
    dump = tmp_path / "wiki.xml.bz2"
    dump.write_bytes(bz2.compress(xml.encode()))
    plain = tmp_path / "plain.txt.bz2"
    plain.write_bytes(bz2.compress(b"Another line of plain text.\nAnd one more.\n"))
    tok, stats = train_sentencepiece([dump, plain], tmp_path / "o", vocab_size=40, user_defined_symbols=())
    assert stats.lines_read == 5 + 2  # the article's 4 sentences and its heading, the 2 plain lines
    pieces = "".join(tok.sp.id_to_piece(i) for i in range(5, tok.vocab_size))  # after the specials
    assert not set("{}[]|'=") & set(pieces)  # the markup is gone


def test_errors(botchan: Path, tmp_path: Path, capsys: pytest.CaptureFixture) -> None:
    bad = tmp_path / "bad.txt"
    bad.write_bytes(b"fine line\nbroken \xff line\n")
    rc = main(
        ["tokenizer", "train", "--input", str(bad), "--vocab-size", "100", "--output", str(tmp_path / "o")]
    )
    assert rc == 1
    assert f"albert tokenizer: error: {bad}:2: not valid UTF-8" in capsys.readouterr().err
    empty = tmp_path / "empty.txt"
    empty.write_text("\n\n", encoding="utf-8")
    with pytest.raises(ValueError, match="no text in"):
        train_sentencepiece([empty], tmp_path / "o2", vocab_size=100)
    with pytest.raises(ValueError, match="vocab_size=50000 is too large for this corpus"):
        train_sentencepiece([botchan], tmp_path / "o3", vocab_size=50000)
    rc = main(["tokenizer", "train", "--input", str(tmp_path / "nope.txt"), "--output", str(tmp_path / "o4")])
    assert rc == 1
    assert f"albert tokenizer: error: {tmp_path / 'nope.txt'}" in capsys.readouterr().err


def test_encode_command(trained: Path, capsys: pytest.CaptureFixture) -> None:
    assert main(["tokenizer", "encode", str(trained), "Hello,  WORLD", "pair"]) == 0
    rows = [__import__("json").loads(line) for line in capsys.readouterr().out.splitlines()]
    assert rows[0]["token"] == "[CLS]" and rows[-1]["token"] == "[SEP]"
    assert "".join(r.get("text", "") for r in rows if r["type"] == 1) == "pair"
    assert "".join(r.get("text", "") for r in rows if r["type"] == 0) == "Hello,WORLD"
    assert main(["tokenizer", "encode", str(trained.parent / "missing"), "x"]) == 1
    assert "albert tokenizer: error: " in capsys.readouterr().err
