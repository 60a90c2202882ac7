"""ALBERT's text normalization before SentencePiece, and the same steps with a character alignment.

The original (google-research/albert tokenization.py ``preprocess_text``):

1. whitespace collapsed: ``" ".join(text.strip().split())``;
2. ``` `` ``` and ``''`` -> ``"`` (from XLNet's prepro_utils.py, which ALBERT's tokenization was derived
   from; ALBERT's own `preprocess_text` dropped the line, transformers' AlbertTokenizer has it. We follow
   transformers: it only matters for those two quote digraphs);
3. NFKD and every combining character dropped, unless ``keep_accents``;
4. lower-casing of the whole string when ``do_lower_case``.

`aligned_preprocess` does steps 1-4 a second time character by character, recording for every output
character the ``[start, end)`` span of input characters it came from; the tokenizer maps SentencePiece's
offsets (into step 4's output) back to the caller's text through that table.
"""

from __future__ import annotations

import re
import unicodedata
from functools import lru_cache

__all__ = ["preprocess_text", "aligned_preprocess"]

_WORD = re.compile(r"\S+")  # \S is exactly the complement of what str.split() splits on
_QUOTES = re.compile(r"``|''")

# The text after each step, and per output character the first and one-past-last input character.
_Aligned = tuple[str, list[int], list[int]]


def preprocess_text(
    text: str, *, remove_space: bool = True, keep_accents: bool = False, do_lower_case: bool = True
) -> str:
    """ALBERT's text normalization before SentencePiece (steps 1-4 of the module docstring)."""
    out = " ".join(text.strip().split()) if remove_space else text
    if "``" in out or "''" in out:
        out = out.replace("``", '"').replace("''", '"')
    if not keep_accents and not out.isascii():
        out = unicodedata.normalize("NFKD", out)
        out = "".join(c for c in out if not unicodedata.combining(c))
    if do_lower_case:
        out = out.lower()
    return out


@lru_cache(maxsize=65536)
def _strip_char(c: str) -> str:
    """NFKD of one character with the combining characters dropped."""
    d = unicodedata.normalize("NFKD", c)
    return "".join(x for x in d if not unicodedata.combining(x))


def aligned_preprocess(
    text: str, remove_space: bool, keep_accents: bool, do_lower_case: bool
) -> tuple[str, list[int] | None, list[int] | None] | None:
    """`preprocess_text` plus, for each output character, the [start, end) span of input it came from.

    The spans are None when output character j comes from input character j (most real sentences:
    single spaces, ASCII). Returns None when the character-wise result differs from the whole-string one.
    """
    if (
        (text.isascii() or keep_accents)
        and "``" not in text
        and "''" not in text
        and (not remove_space or text == " ".join(text.split()))
    ):
        out = text.lower() if do_lower_case else text
        if len(out) == len(text):
            return out, None, None
    if remove_space:
        aligned = _collapse_whitespace(text)
    else:
        aligned = (text, list(range(len(text))), list(range(1, len(text) + 1)))
    if "``" in aligned[0] or "''" in aligned[0]:
        aligned = _merge_quotes(*aligned)
    if not keep_accents and not aligned[0].isascii():
        aligned = _strip_accents(*aligned)
    if do_lower_case:
        aligned = _lower(*aligned)
    if not text.isascii() and aligned[0] != preprocess_text(
        text, remove_space=remove_space, keep_accents=keep_accents, do_lower_case=do_lower_case
    ):  # (for ASCII text every step is exact by construction)
        return None
    return aligned


def _collapse_whitespace(text: str) -> _Aligned:
    """Step 1: words joined by one space; a joining space spans the whitespace run it replaced."""
    chars: list[str] = []
    starts: list[int] = []
    ends: list[int] = []
    prev_end = -1
    for m in _WORD.finditer(text):
        s, e = m.span()
        if prev_end >= 0:
            chars.append(" ")
            starts.append(prev_end)
            ends.append(s)
        chars.append(m.group())
        starts.extend(range(s, e))
        ends.extend(range(s + 1, e + 1))
        prev_end = e
    return "".join(chars), starts, ends


def _merge_quotes(out: str, starts: list[int], ends: list[int]) -> _Aligned:
    """Step 2: `` and '' -> "  (one output character spanning both input characters)."""
    pieces: list[str] = []
    new_s: list[int] = []
    new_e: list[int] = []
    pos = 0
    for m in _QUOTES.finditer(out):
        a, b = m.span()
        pieces.append(out[pos:a])
        new_s.extend(starts[pos:a])
        new_e.extend(ends[pos:a])
        pieces.append('"')
        new_s.append(starts[a])
        new_e.append(ends[b - 1])
        pos = b
    pieces.append(out[pos:])
    new_s.extend(starts[pos:])
    new_e.extend(ends[pos:])
    return "".join(pieces), new_s, new_e


def _strip_accents(out: str, starts: list[int], ends: list[int]) -> _Aligned:
    """Step 3: NFKD, combining characters dropped; a dropped character widens the span of the character
    before it, so that "e\\u0301" maps back to both input characters."""
    pieces: list[str] = []
    new_s: list[int] = []
    new_e: list[int] = []
    for c, s, e in zip(out, starts, ends):
        d = c if c.isascii() else _strip_char(c)
        if d:
            pieces.append(d)
            new_s.extend([s] * len(d))
            new_e.extend([e] * len(d))
        elif new_e and new_e[-1] == s:
            tail = new_e[-1]
            k = len(new_e) - 1
            while k >= 0 and new_e[k] == tail:  # every output char of the previous input char
                new_e[k] = e
                k -= 1
    return "".join(pieces), new_s, new_e


def _lower(out: str, starts: list[int], ends: list[int]) -> _Aligned:
    """Step 4: lower-casing of the whole string (context-dependent final sigma); only U+0130 changes
    length."""
    lowered = out.lower()
    if len(lowered) != len(out):
        new_s: list[int] = []
        new_e: list[int] = []
        for c, s, e in zip(out, starts, ends):
            n = len(c.lower())
            new_s.extend([s] * n)
            new_e.extend([e] * n)
        starts, ends = new_s, new_e
    return lowered, starts, ends
