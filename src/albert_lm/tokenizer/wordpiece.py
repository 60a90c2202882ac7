"""BERT's WordPiece tokenizer (``vocab.txt``): for BERT checkpoints and the Chinese ALBERT (albert_zh).

As the original (google-research/bert and google-research/albert tokenization.py, `BasicTokenizer` +
`WordpieceTokenizer`):

1. drop NUL, U+FFFD and control characters (Cc, Cf; tab/newline/CR count as whitespace), map
   whitespace (space, \\t, \\n, \\r, Zs) to a space;
2. put spaces around CJK ideographs (every Han character becomes a word);
3. split on whitespace; per word: lower-case and strip accents (NFD, drop Mn) when ``do_lower_case``;
4. split every punctuation character off (ASCII non-alphanumerics and Unicode P*);
5. greedy longest-match-first WordPiece over each word, continuation pieces prefixed "##"; a word
   longer than ``max_input_chars_per_word`` or with no segmentation becomes [UNK].

Every step keeps, for each character, the span of the input it came from, so each token carries its
span in the original text.
"""

from __future__ import annotations

import hashlib
import logging
import re
import unicodedata
from collections.abc import Sequence
from functools import lru_cache
from pathlib import Path
from typing import Any

from albert_lm._io import atomic_write_text
from albert_lm.tokenizer.base import Offsets, Tokenizer, _special_tokens, as_text

__all__ = ["WordPieceTokenizer", "is_cjk_codepoint", "load_vocab"]

logger = logging.getLogger(__name__)

DEFAULT_SPECIAL_TOKENS = {
    "pad_token": "[PAD]",
    "unk_token": "[UNK]",
    "cls_token": "[CLS]",
    "sep_token": "[SEP]",
    "mask_token": "[MASK]",
}

_WORD = re.compile(r"\S+")  # the complement of what str.split() splits on


def load_vocab(path: str | Path) -> list[str]:
    """The tokens of a ``vocab.txt``, one per line; the line number (from 0) is the id.

    Raises:
        ValueError: the file is not UTF-8 text (naming the line), is empty, or contains NUL bytes.
    """
    p = Path(path)
    try:
        raw = p.read_bytes()
    except OSError as e:
        raise ValueError(f"{p}: cannot read the WordPiece vocabulary ({e.strerror})") from None
    if not raw.strip():
        raise ValueError(f"{p}: empty file, not a WordPiece vocabulary")
    tokens = []
    for lineno, line in enumerate(raw.split(b"\n"), start=1):
        if lineno > 1 and not line and lineno == raw.count(b"\n") + 1:
            break  # the final newline
        try:
            tok = line.decode("utf-8")
        except UnicodeDecodeError as e:
            raise ValueError(
                f"{p}:{lineno}: not a WordPiece vocabulary (not UTF-8 text: {e.reason} at byte {e.start})"
            ) from None
        if "\x00" in tok:
            raise ValueError(f"{p}:{lineno}: not a WordPiece vocabulary (NUL byte)")
        # transformers keeps a trailing "\r"; a CRLF vocabulary would then match nothing, so it goes.
        tokens.append(tok.rstrip("\r"))
    return tokens


# ------------------------------------------------------------------------------------------------------
# character classes (original tokenization.py _is_whitespace / _is_control / _is_punctuation /
# _is_chinese_char)
# ------------------------------------------------------------------------------------------------------

_KEEP, _DROP, _SPACE, _CJK = 0, 1, 2, 3


def is_cjk_codepoint(cp: int) -> bool:
    """Is code point ``cp`` a CJK ideograph (the original tokenization.py ``_is_chinese_char``)?

    The CJK Unified Ideographs blocks, their extensions A-E and the compatibility ideographs. Hangul and
    kana are other blocks and, as the original's comment says, handled like any other script. The one
    definition of "a Chinese character" in the package: WordPiece puts spaces around these, and
    ``albert prepare --zh-whole-word`` groups them into jieba words.
    """
    return (
        0x4E00 <= cp <= 0x9FFF
        or 0x3400 <= cp <= 0x4DBF
        or 0x20000 <= cp <= 0x2A6DF
        or 0x2A700 <= cp <= 0x2B73F
        or 0x2B740 <= cp <= 0x2B81F
        or 0x2B820 <= cp <= 0x2CEAF
        or 0xF900 <= cp <= 0xFAFF
        or 0x2F800 <= cp <= 0x2FA1F
    )


@lru_cache(maxsize=65536)
def _clean_class(c: str) -> int:
    """What `_clean_text` and `_tokenize_chinese_chars` do with ``c``."""
    cp = ord(c)
    if c in " \t\n\r":
        return _SPACE
    if cp == 0 or cp == 0xFFFD:
        return _DROP
    cat = unicodedata.category(c)
    if cat in ("Cc", "Cf"):
        return _DROP
    if cat == "Zs":
        return _SPACE
    if is_cjk_codepoint(cp):
        return _CJK
    return _KEEP


@lru_cache(maxsize=65536)
def _is_punctuation(c: str) -> bool:
    cp = ord(c)
    # All non-letter/number ASCII counts as punctuation ("^", "$", "`" are not Unicode P*).
    if 33 <= cp <= 47 or 58 <= cp <= 64 or 91 <= cp <= 96 or 123 <= cp <= 126:
        return True
    return unicodedata.category(c).startswith("P")


@lru_cache(maxsize=65536)
def _strip_accents_char(c: str) -> str:
    return "".join(x for x in unicodedata.normalize("NFD", c) if unicodedata.category(x) != "Mn")


def _strip_accents(text: str) -> str:
    return "".join(x for x in unicodedata.normalize("NFD", text) if unicodedata.category(x) != "Mn")


# ASCII fast path of _clean_text: control characters dropped, tab/newline/CR to a space.
_ASCII_CLEAN: dict[int, str | None] = {i: None for i in range(32)}
_ASCII_CLEAN.update({127: None, ord("\t"): " ", ord("\n"): " ", ord("\r"): " "})
_ASCII_WORD = re.compile(r"[A-Za-z0-9]+|[^A-Za-z0-9\s]")


class WordPieceTokenizer(Tokenizer):
    """BERT's WordPiece tokenizer over a ``vocab.txt``.

    Args:
        vocab_file: path of the vocabulary, one token per line.
        do_lower_case: lower-case and strip accents (the uncased BERT models, the Chinese models).
        strip_accents: None follows ``do_lower_case`` (as the original); True/False forces it.
        max_input_chars_per_word: longer words become [UNK]. 200 in the original tokenization.py;
            transformers' BertTokenizer uses 100.
        special_tokens: overrides of the special tokens (keys ``pad_token``, ``unk_token``,
            ``cls_token``, ``sep_token``, ``mask_token``); each must be in the vocabulary.

    Raises:
        ValueError: the file is not a WordPiece vocabulary (not text, or a special token missing).
    """

    kind = "wordpiece"

    def __init__(
        self,
        vocab_file: str | Path,
        *,
        do_lower_case: bool = True,
        strip_accents: bool | None = None,
        max_input_chars_per_word: int = 200,  # original tokenization.py WordpieceTokenizer
        special_tokens: dict[str, str] | None = None,
    ) -> None:
        path = Path(vocab_file)
        tokens = load_vocab(path)
        self._init(
            tokens,
            path.read_bytes(),
            str(path),
            do_lower_case,
            strip_accents,
            max_input_chars_per_word,
            special_tokens or {},
        )

    def _init(
        self,
        tokens: list[str],
        data: bytes,
        source: str,
        do_lower_case: bool,
        strip_accents: bool | None,
        max_input_chars_per_word: int,
        special_tokens: dict[str, str],
    ) -> None:
        self._tokens = tokens
        self._data = data
        self.source = source
        vocab: dict[str, int] = {}
        dupes = 0
        for i, t in enumerate(tokens):
            dupes += t in vocab
            vocab[t] = i  # a duplicated line maps to its last id, as transformers' load_vocab
        if dupes:
            logger.warning("%s: %d duplicated tokens; each maps to its last line", source, dupes)
        self._vocab = vocab
        self.vocab_size = len(tokens)
        self.do_lower_case = bool(do_lower_case)
        self.strip_accents = strip_accents
        self._strip = self.do_lower_case if strip_accents is None else bool(strip_accents)
        self.max_input_chars_per_word = int(max_input_chars_per_word)
        self.fingerprint = hashlib.sha256(data).hexdigest()
        names = {**DEFAULT_SPECIAL_TOKENS, **special_tokens}
        self.special_tokens = names
        missing = [t for t in names.values() if t not in vocab]
        if missing:
            raise ValueError(
                f"{source}: not a BERT WordPiece vocabulary: no {', '.join(missing)} "
                f"(first lines: {tokens[:3]!r})"
            )
        self.pad_id = vocab[names["pad_token"]]
        self.unk_id = vocab[names["unk_token"]]
        self.cls_id = vocab[names["cls_token"]]
        self.sep_id = vocab[names["sep_token"]]
        self.mask_id = vocab[names["mask_token"]]
        self._word_cache: dict[str, tuple[list[int], list[tuple[int, int]]]] = {}
        self._single_char_words: dict[str, tuple[str, ...]] = {}

    # ---------------------------------------------------------------------------------------------
    # construction, files
    # ---------------------------------------------------------------------------------------------

    @classmethod
    def from_pretrained(cls, directory: str | Path) -> WordPieceTokenizer:
        """Loads ``vocab.txt`` and ``tokenizer_config.json`` (``do_lower_case``, ``strip_accents``)."""
        d = Path(directory)
        if d.is_file():
            return cls(d)
        vocab = d / "vocab.txt"
        if not vocab.is_file():
            raise ValueError(f"{d}: no vocab.txt in this directory")
        cfg = cls._read_config(d)
        return cls(
            vocab,
            do_lower_case=bool(cfg.get("do_lower_case", True)),
            strip_accents=cfg.get("strip_accents"),
            max_input_chars_per_word=int(cfg.get("max_input_chars_per_word", 200)),
            special_tokens=_special_tokens(cfg, DEFAULT_SPECIAL_TOKENS),
        )

    def save_pretrained(self, directory: str | Path) -> list[Path]:
        """Writes ``vocab.txt``, ``tokenizer_config.json`` and ``special_tokens_map.json``
        (transformers' ``BertTokenizer.from_pretrained`` reads them)."""
        d = Path(directory)
        d.mkdir(parents=True, exist_ok=True)
        vocab = d / "vocab.txt"
        atomic_write_text(vocab, "".join(t + "\n" for t in self._tokens))
        (d / "tokenizer.json").unlink(missing_ok=True)  # transformers would take its vocabulary, not ours
        specials = dict(self.special_tokens)
        cfg = {
            "tokenizer_class": "BertTokenizer",
            "albert_tokenizer_class": "WordPieceTokenizer",
            "do_lower_case": self.do_lower_case,
            "strip_accents": self.strip_accents,
            "tokenize_chinese_chars": True,
            "max_input_chars_per_word": self.max_input_chars_per_word,
            "model_max_length": 512,
            **specials,
        }
        return [
            vocab,
            self._write_json(d / "tokenizer_config.json", cfg),
            self._write_json(d / "special_tokens_map.json", specials),
        ]

    def __getstate__(self) -> dict[str, Any]:
        return {
            "tokens": self._tokens,
            "data": self._data,
            "source": self.source,
            "do_lower_case": self.do_lower_case,
            "strip_accents": self.strip_accents,
            "max_input_chars_per_word": self.max_input_chars_per_word,
            "special_tokens": self.special_tokens,
        }

    def __setstate__(self, s: dict[str, Any]) -> None:
        self._init(
            s["tokens"],
            s["data"],
            s["source"],
            s["do_lower_case"],
            s["strip_accents"],
            s["max_input_chars_per_word"],
            s["special_tokens"],
        )

    # ---------------------------------------------------------------------------------------------
    # vocabulary
    # ---------------------------------------------------------------------------------------------

    def id_to_piece(self, i: int) -> str:
        return self._tokens[self._check_id(int(i))]

    def get_vocab(self) -> dict[str, int]:
        return dict(self._vocab)

    def convert_tokens_to_ids(self, tokens: Sequence[str]) -> list[int]:
        vocab, unk = self._vocab, self.unk_id
        return [vocab.get(t, unk) for t in tokens]

    def decode(self, ids: Sequence[int], skip_special_tokens: bool = True) -> str:
        """Tokens joined by spaces with "##" continuations glued to the piece before them."""
        special = self.special_ids
        toks = [
            self._tokens[self._check_id(int(i))]
            for i in ids
            if not (skip_special_tokens and int(i) in special)
        ]
        return " ".join(toks).replace(" ##", "").strip()

    # ---------------------------------------------------------------------------------------------
    # basic tokenization
    # ---------------------------------------------------------------------------------------------

    def _basic_words(self, text: str) -> list[tuple[str, list[int], list[int]]]:
        """Words after steps 1-4, each with the input span of every character."""
        # 1-2. clean, CJK spacing
        if text.isascii():
            cleaned = text.translate(_ASCII_CLEAN)
            if len(cleaned) == len(text):
                idx = None
            else:
                idx = [i for i, c in enumerate(text) if _clean_class(c) != _DROP]
        else:
            buf: list[str] = []
            idx = []
            for i, c in enumerate(text):
                k = _clean_class(c)
                if k == _KEEP:
                    buf.append(c)
                    idx.append(i)
                elif k == _SPACE:
                    buf.append(" ")
                    idx.append(i)
                elif k == _CJK:
                    buf.extend((" ", c, " "))
                    idx.extend((i, i, i))
            cleaned = "".join(buf)
        out: list[tuple[str, list[int], list[int]]] = []
        single = self._single_char_words
        for m in _WORD.finditer(cleaned):
            s, e = m.span()
            word = m.group()
            i = s if idx is None else idx[s]
            if e - s == 1:  # one character (every CJK ideograph): its words come from a cache
                words = single.get(word)
                if words is None:
                    words = tuple(w for w, _, _ in self._process_word(word, [0], [1]))
                    single[word] = words
                for w in words:
                    out.append((w, [i] * len(w), [i + 1] * len(w)))
                continue
            starts = list(range(s, e)) if idx is None else idx[s:e]
            out.extend(self._process_word(word, starts, [x + 1 for x in starts]))
        return out

    def _process_word(
        self, word: str, starts: list[int], ends: list[int]
    ) -> list[tuple[str, list[int], list[int]]]:
        """Steps 3-4 for one whitespace-delimited word."""
        # 3. lower-casing (of the whole word: final sigma) and accent stripping
        if self.do_lower_case:
            lowered = word.lower()
            if len(lowered) != len(word):  # only U+0130 "İ" lower-cases to two characters
                starts = [x for c, x in zip(word, starts) for _ in range(len(c.lower()))]
                ends = [x + 1 for x in starts]
            word = lowered
        if self._strip and not word.isascii():
            chars: list[str] = []
            ns: list[int] = []
            ne: list[int] = []
            for c, a, b in zip(word, starts, ends):
                d = _strip_accents_char(c) if not c.isascii() else c
                if d:
                    chars.append(d)
                    ns.extend([a] * len(d))
                    ne.extend([b] * len(d))
                elif ne:  # a dropped accent widens the span of the character before it
                    tail = ne[-1]
                    k = len(ne) - 1
                    while k >= 0 and ne[k] == tail:
                        ne[k] = b
                        k -= 1
            stripped = "".join(chars)
            if stripped != _strip_accents(word):  # reordered combining marks: whole-word spans
                stripped = _strip_accents(word)
                ns = [starts[0]] * len(stripped)
                ne = [ends[-1]] * len(stripped)
            word, starts, ends = stripped, ns, ne
        # 4. punctuation split (and whitespace that lower-casing/NFD may have produced)
        if word.isascii():
            if word.isalnum():
                return [(word, starts, ends)]
            return [
                (pm.group(), starts[pm.start() : pm.end()], ends[pm.start() : pm.end()])
                for pm in _ASCII_WORD.finditer(word)
            ]
        out: list[tuple[str, list[int], list[int]]] = []
        cur = 0
        for j, c in enumerate(word):
            if c.isspace() or _is_punctuation(c):
                if cur < j:
                    out.append((word[cur:j], starts[cur:j], ends[cur:j]))
                if not c.isspace():
                    out.append((c, starts[j : j + 1], ends[j : j + 1]))
                cur = j + 1
        if cur < len(word):
            out.append((word[cur:], starts[cur:], ends[cur:]))
        return out

    def basic_tokenize(self, text: str | bytes) -> list[str]:
        """Words after BERT's basic tokenizer (steps 1-4)."""
        return [w for w, _, _ in self._basic_words(as_text(text))]

    # ---------------------------------------------------------------------------------------------
    # WordPiece
    # ---------------------------------------------------------------------------------------------

    def _wordpiece(self, word: str) -> tuple[list[int], list[tuple[int, int]]]:
        """Ids and (start, end) character positions within ``word`` of its pieces (cached)."""
        hit = self._word_cache.get(word)
        if hit is not None:
            return hit
        vocab = self._vocab
        if len(word) > self.max_input_chars_per_word:
            res: tuple[list[int], list[tuple[int, int]]] = ([self.unk_id], [(0, len(word))])
        else:
            ids: list[int] = []
            pos: list[tuple[int, int]] = []
            start, n = 0, len(word)
            while start < n:
                end = n
                found = -1
                while start < end:
                    sub = word[start:end] if start == 0 else "##" + word[start:end]
                    i = vocab.get(sub)
                    if i is not None:
                        found = i
                        break
                    end -= 1
                if found < 0:
                    ids, pos = [self.unk_id], [(0, n)]
                    break
                ids.append(found)
                pos.append((start, end))
                start = end
            res = (ids, pos)
        if len(self._word_cache) < 500_000:
            self._word_cache[word] = res
        return res

    def tokenize(self, text: str | bytes) -> list[str]:
        """WordPiece tokens of ``text`` (what transformers' ``BertTokenizer.tokenize`` returns)."""
        toks = self._tokens
        return [toks[i] for w, _, _ in self._basic_words(as_text(text)) for i in self._wordpiece(w)[0]]

    def _encode_ids_batch(self, texts: list[str], num_workers: int) -> list[list[int]]:
        return [[i for w, _, _ in self._basic_words(t) for i in self._wordpiece(w)[0]] for t in texts]

    def _encode_offsets_batch(self, texts: list[str], num_workers: int) -> list[tuple[list[int], Offsets]]:
        out = []
        for t in texts:
            ids: list[int] = []
            spans: Offsets = []
            for word, starts, ends in self._basic_words(t):
                wids, pos = self._wordpiece(word)
                ids.extend(wids)
                spans.extend((starts[a], ends[b - 1]) for a, b in pos)
            out.append((ids, spans))
        return out
