"""WordPieceTokenizer: BERT's basic tokenizer + greedy longest-match-first, offsets, files, bad input."""

from __future__ import annotations

import pickle
import sys
import unicodedata
from pathlib import Path

import pytest

from conftest import FIXTURES, data_path

sys.path.insert(0, str(FIXTURES / "tokenizer"))
import tokenizer_support as ts  # noqa: E402

from albert_lm.tokenizer import WordPieceTokenizer, load_tokenizer  # noqa: E402

TINY = FIXTURES / "tokenizer" / "tiny_vocab.txt"


@pytest.fixture(scope="module")
def tiny() -> WordPieceTokenizer:
    return WordPieceTokenizer(TINY)


@pytest.fixture(scope="module")
def minilm() -> WordPieceTokenizer:
    return WordPieceTokenizer(data_path("minilm", "vocab.txt"))


def test_greedy_longest_match_first(tiny: WordPieceTokenizer) -> None:
    # the example of the original tokenization_test.py
    assert tiny.tokenize("UNwant\u00e9d,running") == ["un", "##want", "##ed", ",", "runn", "##ing"]
    assert tiny.tokenize("unwantedX running") == ["[UNK]", "runn", "##ing"]  # no segmentation -> [UNK]
    assert tiny.tokenize("") == [] and tiny.tokenize(" \t\n") == []
    assert tiny.tokenize("lowest low.") == ["lowest", "low", "."]
    assert tiny.tokenize("中国cafes") == ["中", "国", "cafe", "##s"]  # CJK split into characters


def test_ids_layout_and_specials(tiny: WordPieceTokenizer) -> None:
    assert (tiny.pad_id, tiny.unk_id, tiny.cls_id, tiny.sep_id, tiny.mask_id) == (0, 1, 2, 3, 4)
    assert tiny.kind == "wordpiece" and tiny.vocab_size == 20
    enc = tiny.encode("want", "running", return_offsets=True)
    assert enc["input_ids"] == [2, 5, 3, 10, 11, 3]
    assert enc["token_type_ids"] == [0, 0, 0, 1, 1, 1]
    assert enc["offsets"] == [None, (0, 4), None, (0, 4), (4, 7), None]
    assert tiny.decode(enc["input_ids"]) == "want running"
    assert tiny.decode(enc["input_ids"], skip_special_tokens=False) == "[CLS] want [SEP] running [SEP]"


def test_basic_tokenizer_rules(minilm: WordPieceTokenizer) -> None:
    assert minilm.basic_tokenize(" Hello,\tWORLD!\n") == ["hello", ",", "world", "!"]
    assert minilm.basic_tokenize("a\x00b\ufffdc\u200bd\x7f") == ["abcd"]  # NUL, U+FFFD, Cc, Cf dropped
    assert minilm.basic_tokenize("Crème Brûlée") == ["creme", "brulee"]
    assert minilm.basic_tokenize("x^y$z`w") == ["x", "^", "y", "$", "z", "`", "w"]  # ASCII symbols split
    assert minilm.basic_tokenize("ab中文cd") == ["ab", "中", "文", "cd"]
    assert minilm.basic_tokenize("ΟΔΥΣΣΕΥΣ") == ["οδυσσευς"]  # the word lower-cases as a whole
    cased = WordPieceTokenizer(data_path("minilm", "vocab.txt"), do_lower_case=False)
    assert cased.basic_tokenize("Crème") == ["Crème"]
    forced = WordPieceTokenizer(data_path("minilm", "vocab.txt"), do_lower_case=False, strip_accents=True)
    assert forced.basic_tokenize("Crème") == ["Creme"]


def test_long_words(minilm: WordPieceTokenizer) -> None:
    word = "ab" * 75  # 150 characters: pieces with the original's limit (200), [UNK] with transformers' 100
    assert minilm.tokenize(word) != ["[UNK]"]
    assert WordPieceTokenizer(data_path("minilm", "vocab.txt"), max_input_chars_per_word=100).tokenize(
        word
    ) == ["[UNK]"]
    assert minilm.tokenize("x" * 201) == ["[UNK]"]


def _check_spans(tok: WordPieceTokenizer, texts: list[str]) -> list[tuple[str, str]]:
    """Every token's original-text span, basic-tokenized, contains the token's text; returns the
    legitimate exceptions (one character expanded into several tokens, e.g. "ﬁ"? no: "½" stays one)."""
    exceptions = []
    for text, (ids, spans) in zip(texts, tok._encode_offsets_batch(texts, 1)):
        assert [a for a, _ in spans] == sorted(a for a, _ in spans)
        for k, (i, (a, b)) in enumerate(zip(ids, spans)):
            assert 0 <= a < b <= len(text), (text, spans)
            piece = tok.id_to_piece(i)
            surface = "".join(tok.basic_tokenize(text[a:b]))
            if i == tok.unk_id or surface == piece.removeprefix("##"):
                continue
            if any(j != k and spans[j][0] < b and a < spans[j][1] for j in range(len(spans))):
                exceptions.append((text[a:b], piece))  # one character -> several tokens
            elif ts.has_final_sigma_context(text) and "Σ" in text[a:b]:
                exceptions.append((text[a:b], piece))
            else:
                raise AssertionError(f"span {text[a:b]!r} does not give {piece!r} in {text!r}")
    return exceptions


def test_offsets_into_the_original_text(minilm: WordPieceTokenizer) -> None:
    data_path("wiki", "enwiki-shortened.xml.bz2")
    texts = [*ts.HARD_CASES, *ts.real_sentences(150, seed=2)]
    exceptions = _check_spans(minilm, texts)
    assert all("Σ" in s or any(len(unicodedata.normalize("NFD", c)) > 1 for c in s) for s, _ in exceptions)
    text = "  Héllo, WORLD\u0301!"
    ids, spans = minilm.encode_with_offsets(text)
    assert [text[a:b] for a, b in spans] == ["Héllo", ",", "WORLD\u0301", "!"]


def test_offsets_chinese() -> None:
    zh = WordPieceTokenizer(data_path("zh_vocab", "vocab.txt"))
    texts = list(ts.zh_news_sentences()[:200])
    assert not _check_spans(zh, texts)
    ids, spans = zh.encode_with_offsets("１２月３１日，中共中央")
    assert ["１２月３１日，中共中央"[a:b] for a, b in spans][-4:] == ["中", "共", "中", "央"]


def test_ids_and_offsets_paths_agree_and_batches(minilm: WordPieceTokenizer) -> None:
    texts = [*ts.HARD_CASES, *ts.real_sentences(100, seed=3)]
    assert [ids for ids, _ in minilm._encode_offsets_batch(texts, 1)] == minilm._encode_ids_batch(texts, 1)
    assert minilm.encode_ids_batch(texts) == [minilm.encode_ids(t) for t in texts]
    expected = [minilm.encode(t, max_length=32, return_offsets=True) for t in texts]
    old = minilm.process_pool_min_batch
    minilm.process_pool_min_batch = 10  # force the worker processes
    try:
        assert minilm.batch_encode(texts, max_length=32, return_offsets=True, num_workers=2) == expected
    finally:
        minilm.process_pool_min_batch = old


def test_basic_tokenizer_matches_transformers_except_unassigned_and_private_use() -> None:
    transformers = pytest.importorskip("transformers")
    if int(transformers.__version__.split(".")[0]) >= 5:
        pytest.skip(
            f"transformers {transformers.__version__} has no BasicTokenizer (BERT is tokenizers-backed)"
        )
    transformers_bert = pytest.importorskip("transformers.models.bert.tokenization_bert")
    ours = WordPieceTokenizer(TINY)
    ref = transformers_bert.BasicTokenizer(do_lower_case=True)
    differ = []
    for cp in range(0, 0x10000, 7):  # every 7th BMP code point (all of them: the slow parity test)
        if 0xD800 <= cp <= 0xDFFF:
            continue
        text = f"a{chr(cp)}b {chr(cp)}"
        if ours.basic_tokenize(text) != ref.tokenize(text):
            differ.append(cp)
    # transformers drops every category C* character; the original (and we) only Cc and Cf, so
    # unassigned (Cn) and private-use (Co) characters stay and become [UNK] or part of a word.
    assert differ and {unicodedata.category(chr(cp)) for cp in differ} <= {"Cn", "Co"}


def test_files_and_pickle(minilm: WordPieceTokenizer, tmp_path: Path) -> None:
    minilm.save_pretrained(tmp_path)
    assert sorted(p.name for p in tmp_path.iterdir()) == [
        "special_tokens_map.json",
        "tokenizer_config.json",
        "vocab.txt",
    ]
    again = load_tokenizer(tmp_path)
    assert isinstance(again, WordPieceTokenizer) and again.fingerprint == minilm.fingerprint
    assert again.encode("Round trip, ok?") == minilm.encode("Round trip, ok?")
    back = pickle.loads(pickle.dumps(minilm))
    assert back.encode("pickled", return_offsets=True) == minilm.encode("pickled", return_offsets=True)


@pytest.mark.parametrize(
    ("content", "message"),
    [
        (b"", "empty file"),
        (b"[PAD]\n[UNK]\n\xff\xfe\n", r"vocab\.txt:3: not a WordPiece vocabulary \(not UTF-8"),
        (
            b"hello\nworld\n",
            r"not a BERT WordPiece vocabulary: no \[PAD\], \[UNK\], \[CLS\], \[SEP\], \[MASK\]",
        ),
        (b"[PAD]\x00\n", "NUL byte"),
    ],
    ids=["empty", "binary", "no-specials", "nul"],
)
def test_not_a_vocab(tmp_path: Path, content: bytes, message: str) -> None:
    p = tmp_path / "vocab.txt"
    p.write_bytes(content)
    with pytest.raises(ValueError, match=message):
        load_tokenizer(tmp_path)


def test_a_sentencepiece_model_is_not_a_vocab(tmp_path: Path) -> None:
    p = tmp_path / "vocab.txt"
    p.write_bytes(b"\n\x05<pad>\x15\x00\x00\x00\x00\x18\x03\n\x05<unk>\xff")  # the start of a .model file
    with pytest.raises(ValueError, match="not a WordPiece vocabulary"):
        WordPieceTokenizer(p)


def test_crlf_vocab_and_bad_text(tmp_path: Path, tiny: WordPieceTokenizer) -> None:
    p = tmp_path / "vocab.txt"
    p.write_bytes(TINY.read_bytes().replace(b"\n", b"\r\n"))
    assert WordPieceTokenizer(p).tokenize("unwanted") == tiny.tokenize("unwanted")
    with pytest.raises(ValueError, match="not valid UTF-8"):
        tiny.encode(b"\xe2\x82")
    with pytest.raises(ValueError, match="would lose all its"):
        tiny.encode("want want want", "runn runn", max_length=4)
