"""``tokenizer.json``: our SentencePiece tokenizer in the file format of Hugging Face's `tokenizers`.

Why a model directory carries one (measured with transformers 4.57.6 / tokenizers 0.22.2 and
transformers 5.24.0 / tokenizers 0.23.3 on an 8000-piece vocabulary of the Wikipedia dump, against our
ids on the 36,049 Wikipedia, Botchan and polarity sentences of the tokenizer tests):

- given only ``spiece.model``, ``AutoTokenizer`` of both lines converts it into a `tokenizers` pipeline,
  and the conversion makes ALBERT's user-defined symbols ``( ) " - . – £ €`` added tokens, matched in
  the raw text before normalization, so "job ." loses the "▁" before the "." (4.57: 21,434 of the
  36,049 sentences get our ids);
- transformers 5's ``AlbertTokenizer`` takes only the vocabulary from a ``tokenizer.json`` and builds
  its normalizer and pre-tokenizer in code; that normalizer differs from ALBERT's on 1,391 of the
  1,112,064 code points (``StripAccents`` drops every mark, the original only combining ones; control
  characters; Hangul, which `tokenizers`' ``Precompiled`` does not recompose after NFKD).

So a SentencePiece directory names ``PreTrainedTokenizerFast`` (both lines read its ``tokenizer.json``
as written) and this module writes a pipeline that does what `AlbertTokenizer` does:

    normalizer     ALBERT's preprocess_text       whitespace runs (Python's str.split set) -> " ", strip;
                                                  `` and '' -> "; NFKD; combining characters (the
                                                  exact set unicodedata.combining() gives) dropped;
                                                  final sigma; lower-case
                   SentencePiece's normalizer     NFC (see below); the model's precompiled charsmap;
                                                  extra spaces removed
    pre-tokenizer  split at spaces, Metaspace     "▁" before each word (the dummy prefix)
    model          Unigram                        the model's pieces and scores

Scores differ from the model's in two places, both for pieces SentencePiece never outputs from text:
control and unknown pieces (SentencePiece skips them; Unigram would match "<unk>" in the text) and
pieces ending in a digit followed by "," (the original re-encodes them, albert/tokenization.py
``encode_pieces``). These get a score below any segmentation of their span into single characters, so
Unigram never picks them. Where SentencePiece's best segmentation has such a piece, the original's
re-encoding and Unigram's best segmentation without it can still differ (14 of the 36,049 sentences:
"1837," -> "▁18" "<unk>" "," in the original, whose re-encoded "37" lacks its "▁" and is no piece).

A control piece read as text (transformers' ``split_special_tokens=True``) is out of reach only where
its characters are known pieces: a cased model reading "[CLS]" with a lower-cased vocabulary (C, L, S
unknown) gets the control piece, as every unknown character scores below it (`tokenizers` derives that
score from the lowest one in the vocabulary). By default transformers matches special-token strings
before any of this and gives their special ids.

NFC goes before the charsmap because `tokenizers` applies a charsmap to a grapheme of 6 or more bytes
character by character, so NFKD's Hangul jamo would stay apart; SentencePiece matches them whole.

The character classes come from this Python's `unicodedata`, which our tokenizer uses at run time, so
the file matches the tokenizer that wrote it (measured: every code point in context, "a{c}b {c}", but 4
whose compatibility decompositions the Unicode tables of `tokenizers`' NFKD lack).
"""

from __future__ import annotations

import base64
import logging
import unicodedata
from collections.abc import Callable
from functools import cache
from typing import TYPE_CHECKING, Any

from albert_lm._io import proto_fields

if TYPE_CHECKING:  # the tokenizer classes import this module
    from albert_lm.tokenizer.spiece import AlbertTokenizer

__all__ = ["sentencepiece_tokenizer_json", "TOKENIZER_JSON"]

logger = logging.getLogger(__name__)

TOKENIZER_JSON = "tokenizer.json"
SPIECE_UNDERLINE = "\u2581"
UNK_PENALTY = 10.0  # SentencePiece's and tokenizers' unknown-piece score: the lowest score minus 10

# sentencepiece_model.proto field numbers
_MODEL_TRAINER_SPEC, _MODEL_NORMALIZER_SPEC = 2, 3
_TRAINER_TREAT_WHITESPACE_AS_SUFFIX, _TRAINER_BYTE_FALLBACK = 24, 35
_NORM_CHARSMAP, _NORM_ADD_DUMMY_PREFIX, _NORM_REMOVE_EXTRA_WS, _NORM_ESCAPE_WS = 2, 3, 4, 5


def _model_specs(model: bytes) -> tuple[dict[int, int | bytes], dict[int, int | bytes]]:
    """The trainer and normalizer specs of a serialized SentencePiece ModelProto (field -> value)."""
    trainer: dict[int, int | bytes] = {}
    normalizer: dict[int, int | bytes] = {}
    for field, _, value in proto_fields(model):
        if field == _MODEL_TRAINER_SPEC and isinstance(value, bytes):
            trainer.update((f, v) for f, _, v in proto_fields(value))
        elif field == _MODEL_NORMALIZER_SPEC and isinstance(value, bytes):
            normalizer.update((f, v) for f, _, v in proto_fields(value))
    return trainer, normalizer


@cache
def _char_class(name: str) -> str:
    """A regex character class (Oniguruma syntax) of every code point with property ``name``."""
    pred: Callable[[str], bool] = {
        "space": str.isspace,  # what str.split() splits on
        "combining": lambda c: unicodedata.combining(c) != 0,
    }[name]
    parts = []
    start = None
    for cp in range(0x110001):
        inside = cp < 0x110000 and not 0xD800 <= cp <= 0xDFFF and pred(chr(cp))
        if inside and start is None:
            start = cp
        elif not inside and start is not None:
            end = cp - 1
            parts.append(f"\\x{{{start:X}}}" if start == end else f"\\x{{{start:X}}}-\\x{{{end:X}}}")
            start = None
    return "[" + "".join(parts) + "]"


def _replace(pattern: str, content: str, *, regex: bool = True) -> dict[str, Any]:
    return {"type": "Replace", "pattern": {"Regex" if regex else "String": pattern}, "content": content}


def _normalizers(tok: AlbertTokenizer, charsmap: bytes, remove_extra_spaces: bool) -> list[dict[str, Any]]:
    steps: list[dict[str, Any]] = []
    # ALBERT's preprocess_text (albert_lm.tokenizer.preprocess)
    if tok.remove_space:
        steps += [
            _replace(_char_class("space") + "+", " "),
            {"type": "Strip", "strip_left": True, "strip_right": True},
        ]
    steps += [_replace("``", '"', regex=False), _replace("''", '"', regex=False)]
    if not tok.keep_accents:
        steps += [{"type": "NFKD"}, _replace(_char_class("combining"), "")]
    if tok.do_lower_case:
        # str.lower() of a whole string gives the final sigma; Lowercase maps each character alone.
        steps += [
            _replace("(?<=\\p{Cased})\u03a3(?!\\p{Case_Ignorable}*\\p{Cased})", "\u03c2"),
            {"type": "Lowercase"},
        ]
    # SentencePiece's own normalizer
    if charsmap:
        steps += [
            {"type": "NFC"},
            {"type": "Precompiled", "precompiled_charsmap": base64.b64encode(charsmap).decode("ascii")},
        ]
    if remove_extra_spaces:
        steps += [_replace(" +", " "), {"type": "Strip", "strip_left": True, "strip_right": True}]
    return steps


def _vocabulary(tok: AlbertTokenizer) -> list[list[Any]]:
    """[piece, score] per id, with the pieces SentencePiece never outputs from text scored out of reach."""
    sp = tok.sp
    n = tok.vocab_size
    normal = [
        i for i in range(n) if not (sp.is_control(i) or sp.is_unknown(i) or sp.is_unused(i) or sp.is_byte(i))
    ]
    lowest = min((sp.get_score(i) for i in normal), default=0.0)
    longest = max(len(sp.id_to_piece(i)) for i in range(n))
    # Any segmentation of a piece's span into single characters (each >= lowest, or an unknown
    # character at lowest - UNK_PENALTY) scores above this.
    never = (lowest - UNK_PENALTY) * (longest + 1) - 1.0
    skipped = frozenset(i for i in range(n) if sp.is_control(i) or sp.is_unknown(i)) | tok._digit_comma_ids
    return [[sp.id_to_piece(i), never if i in skipped else float(sp.get_score(i))] for i in range(n)]


def _added_tokens(tok: AlbertTokenizer) -> list[dict[str, Any]]:
    """The special tokens, matched in text by transformers unless split_special_tokens=True."""
    out = {}
    for key, piece in tok.special_tokens.items():
        i = int(tok.sp.piece_to_id(piece))
        out[i] = {
            "id": i, "content": piece, "single_word": False,
            "lstrip": key == "mask_token",  # as transformers' AlbertTokenizer: "[MASK]" takes the space before it
            "rstrip": False, "normalized": False, "special": True,
        }  # fmt: skip
    return [out[i] for i in sorted(out)]


def _post_processor(tok: AlbertTokenizer) -> dict[str, Any]:
    cls, sep = tok.special_tokens["cls_token"], tok.special_tokens["sep_token"]

    def special(name: str, type_id: int) -> dict[str, Any]:
        return {"SpecialToken": {"id": name, "type_id": type_id}}

    def sequence(name: str, type_id: int) -> dict[str, Any]:
        return {"Sequence": {"id": name, "type_id": type_id}}

    return {
        "type": "TemplateProcessing",
        "single": [special(cls, 0), sequence("A", 0), special(sep, 0)],
        "pair": [special(cls, 0), sequence("A", 0), special(sep, 0), sequence("B", 1), special(sep, 1)],
        "special_tokens": {
            name: {"id": name, "ids": [int(tok.sp.piece_to_id(name))], "tokens": [name]}
            for name in (cls, sep)
        },
    }


def sentencepiece_tokenizer_json(tok: AlbertTokenizer) -> dict[str, Any] | None:
    """The ``tokenizer.json`` of ``tok`` (a JSON object), or None for a SentencePiece model with an option
    this pipeline does not reproduce (whitespace as a suffix, no whitespace escaping, byte fallback)."""
    trainer, normalizer = _model_specs(tok._model_bytes)
    unsupported = [
        name
        for name, value in (
            ("treat_whitespace_as_suffix", trainer.get(_TRAINER_TREAT_WHITESPACE_AS_SUFFIX, 0)),
            ("byte_fallback", trainer.get(_TRAINER_BYTE_FALLBACK, 0)),
            ("escape_whitespaces=false", not normalizer.get(_NORM_ESCAPE_WS, 1)),
        )
        if value
    ]
    if unsupported:
        logger.warning(
            "%s: SentencePiece option %s: no tokenizer.json written (transformers converts spiece.model "
            "itself, and may tokenize differently)", tok.source, ", ".join(unsupported),
        )  # fmt: skip
        return None
    charsmap = normalizer.get(_NORM_CHARSMAP, b"")
    dummy_prefix = bool(normalizer.get(_NORM_ADD_DUMMY_PREFIX, 1))
    single_spaces = bool(normalizer.get(_NORM_REMOVE_EXTRA_WS, 1))
    metaspace: dict[str, Any] = {
        "type": "Metaspace",
        "replacement": SPIECE_UNDERLINE,
        "prepend_scheme": "always" if dummy_prefix else "never",
        "split": True,
    }
    pre_tokenizer: dict[str, Any] = metaspace
    if dummy_prefix and single_spaces:
        # the same words, but split off at the space (SentencePiece's only separator once normalized), so
        # that a space is not part of the next token's offsets (as in SentencePiece's own offsets and ours)
        split = {"type": "Split", "pattern": {"String": " "}, "behavior": "Removed", "invert": False}
        pre_tokenizer = {"type": "Sequence", "pretokenizers": [split, metaspace]}
    return {
        "version": "1.0",
        "truncation": None,
        "padding": None,
        "added_tokens": _added_tokens(tok),
        "normalizer": {
            "type": "Sequence",
            "normalizers": _normalizers(
                tok,
                charsmap if isinstance(charsmap, bytes) else b"",
                single_spaces,
            ),
        },
        "pre_tokenizer": pre_tokenizer,
        "post_processor": _post_processor(tok),
        "decoder": metaspace,
        "model": {"type": "Unigram", "unk_id": tok.unk_id, "vocab": _vocabulary(tok), "byte_fallback": False},
    }
