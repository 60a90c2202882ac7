"""AlbertTokenizer (SentencePiece): preprocessing, digit-comma re-split, encoding layout, truncation,
padding, offsets into the original text, files, bad input. Uses an 8000-piece vocabulary trained on the
Wikipedia dump with our own trainer (once per session)."""

from __future__ import annotations

import hashlib
import pickle
import sys
import unicodedata
from pathlib import Path

import pytest

from conftest import FIXTURES, data_path

sys.path.insert(0, str(FIXTURES / "tokenizer"))
import tokenizer_support as ts  # noqa: E402

from albert_lm.tokenizer import AlbertTokenizer, WordPieceTokenizer, load_tokenizer, preprocess_text  # noqa: E402
from albert_lm.tokenizer.preprocess import aligned_preprocess  # noqa: E402
from albert_lm.tokenizer.spiece import SPIECE_UNDERLINE, _is_digit_comma, _offsets_from_proto  # noqa: E402


@pytest.fixture(scope="session")
def vocab_dir(tmp_path_factory: pytest.TempPathFactory) -> Path:
    data_path("wiki", "enwiki-shortened.xml.bz2")
    return ts.train_test_vocab(tmp_path_factory.getbasetemp())


@pytest.fixture(scope="session")
def tok(vocab_dir: Path) -> AlbertTokenizer:
    t = load_tokenizer(vocab_dir)
    assert isinstance(t, AlbertTokenizer)
    return t


@pytest.fixture(scope="session")
def sentences() -> list[str]:
    data_path("wiki", "enwiki-shortened.xml.bz2")
    return ts.real_sentences(400, seed=1)


def _words(tok: AlbertTokenizer, n: int) -> str:
    """A text of exactly n tokens ("▁the" each)."""
    text = " ".join(["the"] * n)
    assert len(tok.encode_ids(text)) == n
    return text


# ----------------------------------------------------------------------------------------------------
# vocabulary and special tokens
# ----------------------------------------------------------------------------------------------------


def test_special_tokens_are_read_from_the_model(tok: AlbertTokenizer, vocab_dir: Path) -> None:
    assert tok.kind == "sentencepiece"
    assert tok.vocab_size == 8000
    assert (tok.pad_id, tok.unk_id, tok.cls_id, tok.sep_id, tok.mask_id) == (0, 1, 2, 3, 4)
    assert [tok.id_to_piece(i) for i in range(5)] == ["<pad>", "<unk>", "[CLS]", "[SEP]", "[MASK]"]
    assert tok.fingerprint == hashlib.sha256((vocab_dir / "spiece.model").read_bytes()).hexdigest()
    assert tok.do_lower_case is True


def test_special_token_names_come_from_the_config(vocab_dir: Path) -> None:
    # a model whose [CLS] is called something else is read by name, not assumed to be id 2
    t = AlbertTokenizer(
        vocab_dir / "spiece.model", special_tokens={"cls_token": "[SEP]", "sep_token": "[CLS]"}
    )
    assert (t.cls_id, t.sep_id) == (3, 2)
    with pytest.raises(ValueError, match=r"no cls_token piece '\[BOS\]'"):
        AlbertTokenizer(vocab_dir / "spiece.model", special_tokens={"cls_token": "[BOS]"})


def test_vocab_conversions(tok: AlbertTokenizer) -> None:
    vocab = tok.get_vocab()
    assert len(vocab) == tok.vocab_size and vocab["[MASK]"] == 4
    pieces = tok.tokenize("The quick brown fox")
    ids = tok.convert_tokens_to_ids(pieces)
    assert ids == tok.encode_ids("The quick brown fox")
    assert tok.convert_ids_to_tokens(ids) == pieces
    assert tok.convert_tokens_to_ids(["no-such-piece-xyz"]) == [tok.unk_id]
    with pytest.raises(IndexError, match="out of range"):
        tok.id_to_piece(8000)


# ----------------------------------------------------------------------------------------------------
# preprocessing
# ----------------------------------------------------------------------------------------------------


def test_preprocess_text_rules() -> None:
    assert preprocess_text("  a \t b\n\nc  ") == "a b c"
    assert preprocess_text("``Hi,'' she said") == '"hi," she said'
    assert preprocess_text("Café ﬁne Ångström") == "cafe fine angstrom"
    assert preprocess_text("Café", keep_accents=True) == "café"
    assert preprocess_text("Café", do_lower_case=False) == "Cafe"
    assert preprocess_text(" a  b ", remove_space=False, do_lower_case=False) == " a  b "
    # whole-string lower-casing: the final sigma, as Python's str.lower on the original's string
    assert preprocess_text("ΟΔΥΣΣΕΥΣ") == "οδυσσευς"


@pytest.mark.parametrize("options", [(True, False, True), (True, True, True), (False, False, False)])
def test_aligned_preprocess_matches_whole_string_for_every_bmp_character(options: tuple) -> None:
    remove_space, keep_accents, lower = options
    block = 512
    for start in range(0, 0x10000, block):
        chars = [chr(c) for c in range(start, start + block) if not 0xD800 <= c <= 0xDFFF]
        text = "x".join(chars) + " Σ ΑΣ"
        res = aligned_preprocess(text, remove_space, keep_accents, lower)
        assert res is not None, hex(start)
        out, starts, ends = res
        if starts is None or ends is None:  # identity alignment
            starts, ends = list(range(len(out))), list(range(1, len(out) + 1))
        assert out == preprocess_text(
            text, remove_space=remove_space, keep_accents=keep_accents, do_lower_case=lower
        )
        assert len(starts) == len(ends) == len(out)
        assert all(0 <= s < e <= len(text) for s, e in zip(starts, ends))


def test_aligned_preprocess_identity_fast_path() -> None:
    assert aligned_preprocess("Plain ASCII, single spaces.", True, False, True) == (
        "plain ascii, single spaces.",
        None,
        None,
    )
    assert aligned_preprocess("two  spaces", True, False, True)[1] is not None  # type: ignore[index]
    assert aligned_preprocess("caf\u00e9", True, False, True)[1] is not None  # type: ignore[index]


def test_aligned_preprocess_spans() -> None:
    text = "  Cafe\u0301  ``Ok''"
    out, starts, ends = aligned_preprocess(text, True, False, True)  # type: ignore[misc]
    assert out == 'cafe "ok"'
    spans = [text[s:e] for s, e in zip(starts, ends)]
    # the dropped combining accent widens the span of "e"; the joining space spans the whitespace run
    assert spans == ["C", "a", "f", "e\u0301", "  ", "``", "O", "k", "''"]


# ----------------------------------------------------------------------------------------------------
# tokenization
# ----------------------------------------------------------------------------------------------------


def test_digit_comma_pieces_are_resplit(tok: AlbertTokenizer, sentences: list[str]) -> None:
    # the vocabulary learnt such pieces from the wiki text ...
    learnt = [tok.id_to_piece(i) for i in range(tok.vocab_size) if _is_digit_comma(tok.id_to_piece(i))]
    assert learnt, "the test vocabulary should contain pieces like '▁1999,'"
    # ... and the tokenizer never emits them: the comma comes off as its own piece
    for text in [*ts.HARD_CASES, *sentences, *(p.replace(SPIECE_UNDERLINE, " ") for p in learnt)]:
        pieces = tok.tokenize(text)
        assert not any(_is_digit_comma(p) for p in pieces), (text, pieces)
        assert tok.convert_tokens_to_ids(pieces) == tok.encode_ids(text)
    piece = learnt[0]
    pieces = tok.tokenize(piece.replace(SPIECE_UNDERLINE, " ") + " x")
    assert pieces[:2] != [piece] and "," in pieces


def test_offsets_path_gives_the_same_ids(tok: AlbertTokenizer, sentences: list[str]) -> None:
    texts = [*ts.HARD_CASES, *sentences]
    with_offsets = tok._encode_offsets_batch(texts, 2)
    assert [ids for ids, _ in with_offsets] == tok._encode_ids_batch(texts, 2)
    assert tok.offset_fallbacks == 0


def test_encode_ids_batch_is_encode_ids_of_each(tok: AlbertTokenizer, sentences: list[str]) -> None:
    texts = [*ts.HARD_CASES, *sentences[:50]]
    expected = [tok.encode_ids(t) for t in texts]
    assert tok.encode_ids_batch(texts) == expected
    assert tok.encode_ids_batch([t.encode("utf-8") for t in texts], num_workers=2) == expected
    assert tok.encode_ids_batch([]) == []
    with pytest.raises(TypeError, match="list of texts"):
        tok.encode_ids_batch("one text")  # type: ignore[arg-type]
    with pytest.raises(ValueError, match=r"texts\[1\] is not valid UTF-8"):
        tok.encode_ids_batch(["ok", b"\xff"])


def test_offsets_into_the_original_text(tok: AlbertTokenizer, sentences: list[str]) -> None:
    reasons = ts.check_sp_offsets(tok, [*ts.HARD_CASES, *sentences])
    assert any(s == "½" for s, _ in reasons["expansion"])  # "½" -> "1⁄2": three tokens, one character
    assert reasons["final_sigma"] and all("Σ" in s for s, _ in reasons["final_sigma"])


def test_offsets_examples(tok: AlbertTokenizer) -> None:
    text = "  Héllo   WORLD, ``x''"
    ids, spans = tok.encode_with_offsets(text)
    pieces = tok.convert_ids_to_tokens(ids)
    got = [(p, text[a:b]) for p, (a, b) in zip(pieces, spans)]
    # every non-empty span is the original text of the token, accents and case as written
    assert "".join(s for _, s in got) == "Héllo" + "WORLD," + "``x''"
    assert got[-1] == ('"', "''") and ('"', "``") in got
    # a lone "▁" piece has an empty span
    ids, spans = tok.encode_with_offsets("a ☃ b")
    for i, (a, b) in zip(ids, spans):
        if tok.id_to_piece(i) == SPIECE_UNDERLINE:
            assert a == b


def test_proto_fallback_parser_matches_offset_mapping(tok: AlbertTokenizer) -> None:
    texts = [tok.preprocess(t) for t in ts.HARD_CASES if t.strip()]
    protos = tok.sp.encode(texts, out_type="serialized_proto")
    mapped = tok.sp.encode(texts, out_type="offset_mapping")
    for text, proto, ref in zip(texts, protos, mapped):
        assert _offsets_from_proto(text, proto) == (ref["ids"], ref["pieces"], ref["offsets"])


def test_decode(tok: AlbertTokenizer, sentences: list[str]) -> None:
    for text in sentences[:100]:
        if text.isascii() and "``" not in text and "''" not in text:
            assert tok.decode(tok.encode(text)["input_ids"]) == " ".join(text.split()).lower()
    ids = tok.encode("hello", "world")["input_ids"]
    assert tok.decode(ids, skip_special_tokens=False) == "[CLS] hello [SEP] world [SEP]"


# ----------------------------------------------------------------------------------------------------
# encode: layout, truncation, padding
# ----------------------------------------------------------------------------------------------------


def test_single_and_pair_layout(tok: AlbertTokenizer) -> None:
    a, b = tok.encode_ids("first text"), tok.encode_ids("second one here")
    enc = tok.encode("first text")
    assert enc["input_ids"] == [2, *a, 3]
    assert enc["token_type_ids"] == [0] * (len(a) + 2)
    assert enc["attention_mask"] == [1] * (len(a) + 2)
    enc = tok.encode("first text", "second one here", return_offsets=True)
    assert enc["input_ids"] == [2, *a, 3, *b, 3]
    assert enc["token_type_ids"] == [0] * (len(a) + 2) + [1] * (len(b) + 1)
    assert enc["sequence_ids"] == [None, *[0] * len(a), None, *[1] * len(b), None]
    spans_b = [s for s, q in zip(enc["offsets"], enc["sequence_ids"]) if q == 1]
    assert ["second one here"[x:y] for x, y in spans_b if y > x] == ["second", "one", "here"]
    assert tok.encode("")["input_ids"] == [2, 3]
    assert tok.encode(" \n ", "")["input_ids"] == [2, 3, 3]


@pytest.mark.parametrize(
    ("la", "lb", "max_length", "expected"),
    [
        (10, 4, 10, (4, 3)),  # 7 to remove: 6 from the longer A, then 1 from B (tie)
        (10, 10, 13, (5, 5)),
        (10, 10, 14, (6, 5)),  # odd excess: B loses first on the tie
        (3, 12, 12, (3, 6)),
        (6, 5, 11, (4, 4)),
    ],
)
def test_longest_first_truncation(
    tok: AlbertTokenizer, la: int, lb: int, max_length: int, expected: tuple
) -> None:
    # reference: the original _truncate_seq_pair, one token at a time from the longer side (B on ties)
    a, b = la, lb
    while a + b > max_length - 3:
        if a > b:
            a -= 1
        else:
            b -= 1
    enc = tok.encode(_words(tok, la), _words(tok, lb), max_length=max_length)
    assert len(enc["input_ids"]) == max_length
    assert enc["token_type_ids"].count(1) - 1 == b and len(enc["input_ids"]) - 3 - b == a
    assert (a, b) == expected


def test_only_first_only_second_and_errors(tok: AlbertTokenizer) -> None:
    a, b = _words(tok, 10), _words(tok, 6)
    enc = tok.encode(a, b, max_length=12, truncation="only_first")
    assert enc["token_type_ids"] == [0] * 5 + [1] * 7  # A cut to 3
    enc = tok.encode(a, b, max_length=16, truncation="only_second")
    assert enc["token_type_ids"] == [0] * 12 + [1] * 4
    with pytest.raises(ValueError, match="second text would lose all its 6 tokens"):
        tok.encode(a, b, max_length=13, truncation="only_second")
    with pytest.raises(ValueError, match="first text would lose all its 10 tokens"):
        tok.encode(a, b, max_length=9, truncation="only_first")
    with pytest.raises(ValueError, match="truncation=None"):
        tok.encode(a, b, max_length=12, truncation=None)
    with pytest.raises(ValueError, match="needs a text pair"):
        tok.encode(a, max_length=5, truncation="only_second")
    with pytest.raises(ValueError, match="no room"):
        tok.encode(a, max_length=1)
    with pytest.raises(ValueError, match="a text would lose all its tokens"):
        tok.encode(a, b, max_length=4)
    assert len(tok.encode(a, max_length=5)["input_ids"]) == 5
    with pytest.raises(ValueError, match="truncation must be"):
        tok.encode(a, truncation="longest")  # type: ignore[arg-type]


def test_padding(tok: AlbertTokenizer) -> None:
    enc = tok.encode("short", max_length=8, padding="max_length", return_offsets=True)
    n = len(tok.encode_ids("short")) + 2
    assert enc["input_ids"][n:] == [0] * (8 - n)
    assert enc["attention_mask"] == [1] * n + [0] * (8 - n)
    assert enc["token_type_ids"] == [0] * 8
    assert enc["offsets"][n:] == [None] * (8 - n) and enc["sequence_ids"][n:] == [None] * (8 - n)
    batch = tok.batch_encode(["a b c d e f", "a"], padding="longest")
    assert len(batch[0]["input_ids"]) == len(batch[1]["input_ids"])
    assert batch[1]["attention_mask"].count(1) == len(tok.encode_ids("a")) + 2
    with pytest.raises(ValueError, match="needs max_length"):
        tok.encode("x", padding="max_length")


def test_batch_encode_equals_encode_in_every_mode(tok: AlbertTokenizer, sentences: list[str]) -> None:
    texts, pairs = sentences[:200], sentences[200:400]
    kwargs = dict(max_length=48, truncation="longest_first", return_offsets=True)
    expected = [tok.encode(a, b, **kwargs) for a, b in zip(texts, pairs)]
    assert tok.batch_encode(texts, pairs, num_workers=1, **kwargs) == expected
    assert tok.batch_encode(texts, pairs, num_workers=2, **kwargs) == expected
    old = tok.process_pool_min_batch
    tok.process_pool_min_batch = 10  # force the forked worker processes
    try:
        assert tok.batch_encode(texts, pairs, num_workers=2, **kwargs) == expected
        assert tok.batch_encode(texts, num_workers=2) == [tok.encode(t) for t in texts]
    finally:
        tok.process_pool_min_batch = old


# ----------------------------------------------------------------------------------------------------
# files
# ----------------------------------------------------------------------------------------------------


def test_save_and_load_round_trip(tok: AlbertTokenizer, tmp_path: Path) -> None:
    files = tok.save_pretrained(tmp_path / "out")
    assert sorted(f.name for f in files) == [
        "special_tokens_map.json",
        "spiece.model",
        "tokenizer.json",
        "tokenizer_config.json",
    ]
    again = load_tokenizer(tmp_path / "out")
    assert isinstance(again, AlbertTokenizer) and again.fingerprint == tok.fingerprint
    text = "Another Text, with 1,000 Ünïcode words."
    assert again.encode(text) == tok.encode(text)
    # options travel in tokenizer_config.json
    cased = AlbertTokenizer(tmp_path / "out" / "spiece.model", do_lower_case=False, keep_accents=True)
    cased.save_pretrained(tmp_path / "cased")
    back = AlbertTokenizer.from_pretrained(tmp_path / "cased")
    assert (back.do_lower_case, back.keep_accents) == (False, True)
    assert back.tokenize("Ünï") == cased.tokenize("Ünï") != tok.tokenize("Ünï")
    # a released-checkpoint directory: 30k-clean.model and no config
    released = tmp_path / "released"
    released.mkdir()
    (released / "30k-clean.model").write_bytes((tmp_path / "out" / "spiece.model").read_bytes())
    assert load_tokenizer(released).encode(text) == tok.encode(text)
    assert load_tokenizer(released / "30k-clean.model").encode(text) == tok.encode(text)


def test_pickle_round_trip(tok: AlbertTokenizer) -> None:
    again = pickle.loads(pickle.dumps(tok))
    assert again.encode("pickled text", return_offsets=True) == tok.encode(
        "pickled text", return_offsets=True
    )


# ----------------------------------------------------------------------------------------------------
# bad input
# ----------------------------------------------------------------------------------------------------


@pytest.mark.parametrize(
    "content",
    [b"", b"this is just text\n", bytes(range(256)) * 4, b"[PAD]\n[UNK]\n[CLS]\n"],
    ids=["empty", "text", "binary", "vocab-txt"],
)
def test_not_a_sentencepiece_model(tmp_path: Path, content: bytes) -> None:
    p = tmp_path / "spiece.model"
    p.write_bytes(content)
    with pytest.raises(ValueError, match=r"spiece\.model: not a SentencePiece model"):
        AlbertTokenizer(p)
    with pytest.raises(ValueError, match="not a SentencePiece model"):
        load_tokenizer(tmp_path)


def test_missing_paths(tmp_path: Path) -> None:
    with pytest.raises(ValueError, match="no tokenizer here"):
        load_tokenizer(tmp_path)
    with pytest.raises(ValueError, match="no such file"):
        load_tokenizer(tmp_path / "nope")
    with pytest.raises(ValueError, match="cannot read"):
        AlbertTokenizer(tmp_path / "nope.model")


def test_text_that_is_not_valid_utf8(tok: AlbertTokenizer) -> None:
    assert tok.encode("héllo".encode()) == tok.encode("héllo")
    with pytest.raises(ValueError, match=r"text is not valid UTF-8: invalid continuation byte at byte 1"):
        tok.encode(b"h\xe9llo")
    with pytest.raises(ValueError, match=r"text_pair is not valid UTF-8"):
        tok.encode("ok", b"\xff")
    with pytest.raises(ValueError, match=r"texts\[1\] is not valid UTF-8"):
        tok.batch_encode(["ok", b"\xc3("])
    with pytest.raises(ValueError, match="not valid Unicode: surrogates not allowed at character 1"):
        tok.encode("a\udce9b")
    with pytest.raises(TypeError, match="must be str or UTF-8 bytes"):
        tok.encode(123)  # type: ignore[arg-type]
    with pytest.raises(TypeError, match="list of texts"):
        tok.batch_encode("a string")


def test_wordpiece_file_is_chosen_by_name(tmp_path: Path) -> None:
    vocab = tmp_path / "vocab.txt"
    vocab.write_text("[PAD]\n[UNK]\n[CLS]\n[SEP]\n[MASK]\nhello\n", encoding="utf-8")
    assert isinstance(load_tokenizer(tmp_path), WordPieceTokenizer)
    assert isinstance(load_tokenizer(vocab), WordPieceTokenizer)


def test_nfkd_accent_removal_is_unicodedata_combining() -> None:
    # keep_accents=False drops exactly the characters with a non-zero canonical combining class
    text = "e\u0301 \u093f\u094d"  # acute (ccc 230), devanagari vowel sign i (ccc 0), virama (ccc 9)
    assert preprocess_text(text, do_lower_case=False) == "e \u093f"
    assert unicodedata.combining("\u094d") == 9
