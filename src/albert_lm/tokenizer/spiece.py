"""ALBERT's SentencePiece tokenizer, exactly as the original, with offsets into the original text.

The original pipeline (google-research/albert tokenization.py, `preprocess_text` + `encode_pieces`):

1.-4. whitespace, quotes, NFKD and lower-casing: `albert_lm.tokenizer.preprocess.preprocess_text`;
5. SentencePiece, then every piece that ends in a digit followed by "," (``"▁1999,"``) is encoded again
   without the comma, and the comma appended as its own piece (BERT README, "Tokenization").

Ids are computed by SentencePiece's C++ encoder for whole batches (threads, GIL released); the Python
side is whitespace/quote/case handling, with Unicode normalization only for non-ASCII text.

Offsets: steps 1-4 are done a second time character by character, recording for every output
character the span of input characters it came from (`albert_lm.tokenizer.preprocess.aligned_preprocess`);
SentencePiece's own offsets (into its input, step 4's output) are then mapped through that table. The
character-wise result is checked against the whole-string one; where they differ (never seen in
practice) the spans of that text fall back to the whole text and a counter is increased
(`AlbertTokenizer.offset_fallbacks`).
"""

from __future__ import annotations

import hashlib
import logging
from collections.abc import Sequence
from pathlib import Path
from typing import Any

import sentencepiece as spm

from albert_lm._io import atomic_write_bytes, proto_fields
from albert_lm.tokenizer.base import Offsets, Tokenizer, _special_tokens, as_text
from albert_lm.tokenizer.preprocess import aligned_preprocess, preprocess_text
from albert_lm.tokenizer.tokenizer_json import TOKENIZER_JSON, sentencepiece_tokenizer_json

__all__ = ["AlbertTokenizer", "preprocess_text", "SPIECE_UNDERLINE"]

logger = logging.getLogger(__name__)

SPIECE_UNDERLINE = "\u2581"  # "▁", SentencePiece's word-boundary marker

#: Special-token pieces of the released ALBERT models (and of `albert tokenizer train`).
DEFAULT_SPECIAL_TOKENS = {
    "pad_token": "<pad>",
    "unk_token": "<unk>",
    "cls_token": "[CLS]",
    "sep_token": "[SEP]",
    "mask_token": "[MASK]",
}

# ------------------------------------------------------------------------------------------------------
# SentencePiece offsets. sentencepiece >= 0.2.3 returns them directly ("offset_mapping"); older versions
# only as a serialized SentencePieceText proto, read here by a minimal wire-format parser.
# ------------------------------------------------------------------------------------------------------


def _parse_spt(buf: bytes) -> list[tuple[int, str, int, int]]:
    """(id, piece, begin_byte, end_byte) of each piece of a serialized SentencePieceText."""
    out = []
    for field, _, value in proto_fields(buf):
        if field != 2 or not isinstance(value, bytes):  # 2: the repeated SentencePiece message
            continue
        piece, pid, begin, stop = "", 0, 0, 0
        for f, _, v in proto_fields(value):
            if f == 1 and isinstance(v, bytes):
                piece = v.decode("utf-8")
            elif f == 2 and isinstance(v, int):
                pid = v
            elif f == 4 and isinstance(v, int):
                begin = v
            elif f == 5 and isinstance(v, int):
                stop = v
        out.append((pid, piece, begin, stop))
    return out


def _offsets_from_proto(text: str, buf: bytes) -> tuple[list[int], list[str], list[tuple[int, int]]]:
    parsed = _parse_spt(buf)
    if text.isascii():
        to_char = None
    else:
        to_char = [0] * (len(text.encode("utf-8")) + 1)
        b = 0
        for i, c in enumerate(text):
            n = len(c.encode("utf-8"))
            for k in range(n):
                to_char[b + k] = i
            b += n
        to_char[b] = len(text)
    ids, pieces, offs = [], [], []
    for pid, piece, begin, end in parsed:
        ids.append(pid)
        pieces.append(piece)
        offs.append((begin, end) if to_char is None else (to_char[begin], to_char[end]))
    return ids, pieces, offs


class AlbertTokenizer(Tokenizer):
    """ALBERT's SentencePiece tokenizer (`spiece.model` / the released ``30k-clean.model``).

    Args:
        model_file: path of a SentencePiece model.
        do_lower_case: lower-case text (True for every released English ALBERT).
        remove_space: collapse whitespace runs and strip the ends.
        keep_accents: skip NFKD and the removal of combining characters.
        special_tokens: overrides of the special-token pieces (keys ``pad_token``, ``unk_token``,
            ``cls_token``, ``sep_token``, ``mask_token``); each must exist in the model.

    Raises:
        ValueError: the file is not a SentencePiece model, or lacks a special token.
    """

    kind = "sentencepiece"
    #: No worker processes: SentencePiece's C++ encoder spreads a batch over threads itself (the GIL is
    #: released), and that measured faster than forked processes, whose results must be pickled back
    #: (benchmarks/bench_tokenizer.py: 24.1k vs 15.1k sentences/s on 2 cores).
    process_pool_min_batch = 1 << 62

    def __init__(
        self,
        model_file: str | Path,
        *,
        do_lower_case: bool = True,
        remove_space: bool = True,
        keep_accents: bool = False,
        special_tokens: dict[str, str] | None = None,
    ) -> None:
        path = Path(model_file)
        try:
            data = path.read_bytes()
        except OSError as e:
            raise ValueError(f"{path}: cannot read the SentencePiece model ({e.strerror})") from None
        self._init(data, str(path), do_lower_case, remove_space, keep_accents, special_tokens or {})

    def _init(
        self,
        data: bytes,
        source: str,
        do_lower_case: bool,
        remove_space: bool,
        keep_accents: bool,
        special_tokens: dict[str, str],
    ) -> None:
        sp = spm.SentencePieceProcessor()
        try:
            sp.LoadFromSerializedProto(data)
        except Exception as e:  # sentencepiece raises RuntimeError/OSError with its own message
            raise ValueError(
                f"{source}: not a SentencePiece model ({str(e).strip() or type(e).__name__})"
            ) from None
        if sp.get_piece_size() == 0:
            raise ValueError(f"{source}: not a SentencePiece model (no pieces)")
        self.sp = sp
        self._model_bytes = data
        self.source = source
        self.do_lower_case = bool(do_lower_case)
        self.remove_space = bool(remove_space)
        self.keep_accents = bool(keep_accents)
        self.fingerprint = hashlib.sha256(data).hexdigest()
        self.vocab_size = sp.get_piece_size()
        names = {**DEFAULT_SPECIAL_TOKENS, **special_tokens}
        self.special_tokens = names
        unk = sp.unk_id()
        ids = {}
        for key, piece in names.items():
            i = sp.piece_to_id(piece)
            if i == unk and piece != sp.id_to_piece(unk):
                raise ValueError(
                    f"{source}: the SentencePiece model has no {key} piece {piece!r} "
                    "(ALBERT needs <pad>, <unk>, [CLS], [SEP] and [MASK])"
                )
            ids[key] = i
        self.pad_id = ids["pad_token"]
        self.unk_id = ids["unk_token"]
        self.cls_id = ids["cls_token"]
        self.sep_id = ids["sep_token"]
        self.mask_id = ids["mask_token"]
        # Pieces the original re-splits: ending in a digit followed by "," (tokenization.py encode_pieces).
        self._digit_comma_ids = frozenset(
            i for i in range(self.vocab_size) if _is_digit_comma(sp.id_to_piece(i))
        )
        # An unknown piece only merges unknown characters, so it can end in "," only if "," is unknown.
        self._check_unk = sp.piece_to_id(",") == unk
        self._has_offset_mapping = _supports_offset_mapping(sp)
        self._starts_with_underline = [
            sp.id_to_piece(i).startswith(SPIECE_UNDERLINE) for i in range(self.vocab_size)
        ]
        self._vocab: dict[str, int] | None = None
        self.offset_fallbacks = 0

    # ---------------------------------------------------------------------------------------------
    # construction, files
    # ---------------------------------------------------------------------------------------------

    @classmethod
    def from_bytes(
        cls,
        data: bytes,
        *,
        source: str = "<bytes>",
        do_lower_case: bool = True,
        remove_space: bool = True,
        keep_accents: bool = False,
        special_tokens: dict[str, str] | None = None,
    ) -> AlbertTokenizer:
        """A tokenizer over a serialized SentencePiece model (``source`` names it in error messages)."""
        tok = cls.__new__(cls)
        tok._init(data, source, do_lower_case, remove_space, keep_accents, special_tokens or {})
        return tok

    @classmethod
    def from_pretrained(cls, directory: str | Path) -> AlbertTokenizer:
        """Loads ``spiece.model`` (or the directory's single ``*.model``) and ``tokenizer_config.json``."""
        d = Path(directory)
        if d.is_file():
            return cls(d)
        model = find_sentencepiece_model(d)
        if model is None:
            raise ValueError(f"{d}: no spiece.model (or other *.model SentencePiece file) in this directory")
        cfg = cls._read_config(d)
        return cls(
            model,
            do_lower_case=bool(cfg.get("do_lower_case", True)),
            remove_space=bool(cfg.get("remove_space", True)),
            keep_accents=bool(cfg.get("keep_accents", False)),
            special_tokens=_special_tokens(cfg, DEFAULT_SPECIAL_TOKENS),
        )

    def save_pretrained(self, directory: str | Path) -> list[Path]:
        """Writes ``spiece.model``, ``tokenizer.json``, ``tokenizer_config.json`` and ``special_tokens_map.json``.

        transformers 4.x and 5.x read them: ``AutoTokenizer`` the ``tokenizer.json`` (a
        ``PreTrainedTokenizerFast`` with our ids, see `albert_lm.tokenizer.tokenizer_json`), 4.x's
        ``AlbertTokenizer`` the ``spiece.model``. ``albert_tokenizer_class`` records our class.
        """
        d = Path(directory)
        d.mkdir(parents=True, exist_ok=True)
        model = d / "spiece.model"
        atomic_write_bytes(model, self._model_bytes)
        names = self.special_tokens
        # transformers' AlbertTokenizer makes [MASK] an AddedToken that swallows the space before it.
        mask = {
            "content": names["mask_token"],
            "lstrip": True,
            "rstrip": False,
            "normalized": False,
            "single_word": False,
        }
        specials: dict[str, Any] = {
            "bos_token": names["cls_token"],
            "eos_token": names["sep_token"],
            "unk_token": names["unk_token"],
            "sep_token": names["sep_token"],
            "pad_token": names["pad_token"],
            "cls_token": names["cls_token"],
            "mask_token": mask,
        }
        pipeline = sentencepiece_tokenizer_json(self)
        cfg = {
            # transformers 5's AlbertTokenizer rebuilds the normalizer of tokenizer.json in code (and
            # differently); PreTrainedTokenizerFast reads the file as written (tokenizer_json.py)
            "tokenizer_class": "AlbertTokenizer" if pipeline is None else "PreTrainedTokenizerFast",
            "albert_tokenizer_class": "AlbertTokenizer",
            "model_input_names": ["input_ids", "token_type_ids", "attention_mask"],
            "do_lower_case": self.do_lower_case,
            "remove_space": self.remove_space,
            "keep_accents": self.keep_accents,
            "model_max_length": 512,  # ALBERT's max_position_embeddings
            **specials,
        }
        written = [model]
        if pipeline is None:
            (d / TOKENIZER_JSON).unlink(missing_ok=True)  # a stale one would be read instead of spiece.model
        else:
            written.append(self._write_json(d / TOKENIZER_JSON, pipeline, indent=None))
        return [
            *written,
            self._write_json(d / "tokenizer_config.json", cfg),
            self._write_json(d / "special_tokens_map.json", specials),
        ]

    def __getstate__(self) -> dict[str, Any]:
        return {
            "data": self._model_bytes,
            "source": self.source,
            "do_lower_case": self.do_lower_case,
            "remove_space": self.remove_space,
            "keep_accents": self.keep_accents,
            "special_tokens": self.special_tokens,
        }

    def __setstate__(self, state: dict[str, Any]) -> None:
        self._init(
            state["data"],
            state["source"],
            state["do_lower_case"],
            state["remove_space"],
            state["keep_accents"],
            state["special_tokens"],
        )

    # ---------------------------------------------------------------------------------------------
    # vocabulary
    # ---------------------------------------------------------------------------------------------

    def id_to_piece(self, i: int) -> str:
        return str(self.sp.id_to_piece(self._check_id(int(i))))

    def get_vocab(self) -> dict[str, int]:
        if self._vocab is None:
            self._vocab = {self.sp.id_to_piece(i): i for i in range(self.vocab_size)}
        return dict(self._vocab)

    def convert_tokens_to_ids(self, tokens: Sequence[str]) -> list[int]:
        return [int(self.sp.piece_to_id(t)) for t in tokens]

    def decode(self, ids: Sequence[int], skip_special_tokens: bool = True) -> str:
        """Text of ``ids``. Special tokens ([CLS], [SEP], [MASK], <pad>) are dropped, or written as their
        piece with ``skip_special_tokens=False``; an unknown id decodes as SentencePiece's " ⁇ "."""
        special = self.special_ids
        parts: list[str] = []
        run: list[int] = []
        for raw in ids:
            i = self._check_id(int(raw))
            if i in special:
                if not skip_special_tokens:
                    if run:
                        parts.append(self.sp.decode(run))
                        run = []
                    parts.append(self.sp.id_to_piece(i))
            else:
                run.append(i)
        if run:
            parts.append(self.sp.decode(run))
        return " ".join(p.strip() for p in parts if p.strip())

    # ---------------------------------------------------------------------------------------------
    # encoding
    # ---------------------------------------------------------------------------------------------

    def preprocess(self, text: str) -> str:
        """This tokenizer's `preprocess_text`."""
        return preprocess_text(
            text,
            remove_space=self.remove_space,
            keep_accents=self.keep_accents,
            do_lower_case=self.do_lower_case,
        )

    def _preprocess_fast(self, text: str) -> str:
        if text.isascii() and self.remove_space and "``" not in text and "''" not in text:
            out = " ".join(text.split())
            return out.lower() if self.do_lower_case else out
        return self.preprocess(text)

    def _resplit(self, piece: str) -> list[str]:
        """The original's treatment of a piece ending in digit + "," (encode_pieces)."""
        cur = self.sp.encode(piece[:-1].replace(SPIECE_UNDERLINE, ""), out_type=str)
        if piece[0] != SPIECE_UNDERLINE and cur and cur[0][0] == SPIECE_UNDERLINE:
            cur = cur[1:] if len(cur[0]) == 1 else [cur[0][1:], *cur[1:]]
        return [*cur, piece[-1]]

    def _pieces(self, processed: str) -> list[str]:
        out: list[str] = []
        for piece in self.sp.encode(processed, out_type=str):
            if _is_digit_comma(piece):
                out.extend(self._resplit(piece))
            else:
                out.append(piece)
        return out

    def tokenize(self, text: str | bytes) -> list[str]:
        """Pieces of ``text`` (what transformers' ``AlbertTokenizer.tokenize`` returns)."""
        return self._pieces(self._preprocess_fast(as_text(text)))

    def _sp_encode(self, texts: list[str], num_workers: int, out_type: Any) -> Any:
        try:
            return self.sp.encode(texts, out_type=out_type, num_threads=max(1, num_workers))
        except (UnicodeEncodeError, TypeError):  # sentencepiece >= 0.2.3 says TypeError for a surrogate
            for i, t in enumerate(texts):
                try:
                    t.encode("utf-8")
                except UnicodeEncodeError as e:
                    raise ValueError(
                        f"text {i} is not valid Unicode: {e.reason} at character {e.start} "
                        f"({t[max(0, e.start - 8) : e.start + 8]!r})"
                    ) from None
            raise

    def _encode_ids_batch(self, texts: list[str], num_workers: int) -> list[list[int]]:
        processed = [self._preprocess_fast(t) for t in texts]
        ids: list[list[int]] = self._sp_encode(processed, num_workers, int)
        dc, unk, check_unk = self._digit_comma_ids, self.unk_id, self._check_unk
        for i, x in enumerate(ids):
            if not dc.isdisjoint(x) or (check_unk and unk in x):
                ids[i] = [int(self.sp.piece_to_id(p)) for p in self._pieces(processed[i])]
        return ids

    def _offset_mapping(
        self, processed: list[str], num_workers: int
    ) -> list[tuple[list[int], list[str], Offsets]]:
        if self._has_offset_mapping:
            res = self._sp_encode(processed, num_workers, "offset_mapping")
            return [(r["ids"], r["pieces"], r["offsets"]) for r in res]
        protos = self._sp_encode(processed, num_workers, "serialized_proto")
        return [_offsets_from_proto(t, b) for t, b in zip(processed, protos)]

    def _encode_offsets_batch(self, texts: list[str], num_workers: int) -> list[tuple[list[int], Offsets]]:
        aligned = []
        for t in texts:
            a = aligned_preprocess(t, self.remove_space, self.keep_accents, self.do_lower_case)
            if a is None:  # character-wise and whole-string preprocessing disagree: whole-text spans
                self.offset_fallbacks += 1
                p = self.preprocess(t)
                a = (p, [0] * len(p), [len(t)] * len(p))
            aligned.append(a)
        mapped = self._offset_mapping([a[0] for a in aligned], num_workers)
        out = []
        for (processed, starts, ends), (ids, pieces, offs), text in zip(aligned, mapped, texts):
            out.append(self._map_offsets(text, processed, starts, ends, ids, pieces, offs))
        return out

    def _map_offsets(
        self,
        text: str,
        processed: str,
        starts: list[int] | None,
        ends: list[int] | None,
        ids: list[int],
        pieces: list[str],
        offs: Offsets,
    ) -> tuple[list[int], Offsets]:
        """Final ids (with the digit-comma re-split) and their spans in ``text``."""
        dc = self._digit_comma_ids
        if (
            starts is None
            and self.remove_space
            and dc.isdisjoint(ids)
            and not (self._check_unk and self.unk_id in ids)
        ):
            # the common case, in one pass: identity alignment, single spaces, nothing to re-split
            u = self._starts_with_underline
            return ids, [
                (b + 1, e) if u[i] and b < e and processed[b] == " " else (b, e)
                for i, (b, e) in zip(ids, offs)
            ]
        final: list[tuple[int, str, int, int]] = []  # (id, piece, begin, end) in `processed`
        for i, piece, (b, e) in zip(ids, pieces, offs):
            if i in dc or (self._check_unk and i == self.unk_id and _is_digit_comma(piece)):
                final.extend(self._resplit_with_offsets(processed, piece, b, e))
            else:
                final.append((i, piece, b, e))
        n = len(processed)
        spans: Offsets = []
        for _, piece, b, e in final:
            if piece.startswith(SPIECE_UNDERLINE):  # the span of a word excludes the space before it
                while b < e and processed[b].isspace():
                    b += 1
            if starts is None or ends is None:  # identity alignment
                spans.append((b, e) if b < e else (b, b))
            elif b < e:
                spans.append((starts[b], ends[e - 1]))
            else:
                x = starts[b] if b < n else (ends[-1] if n else len(text))
                spans.append((x, x))
        return [f[0] for f in final], spans

    def _resplit_with_offsets(
        self, processed: str, piece: str, b: int, e: int
    ) -> list[tuple[int, str, int, int]]:
        new_pieces = self._resplit(piece)
        bs = b
        while bs < e and processed[bs].isspace():
            bs += 1
        body = piece[:-1].replace(SPIECE_UNDERLINE, "")
        out: list[tuple[int, str, int, int]] = []
        comma_span = (e - 1, e) if e > bs and processed[e - 1] == "," else (bs, e)
        if processed[bs : e - 1] == body:
            # the surface is the normalized piece: spans of the re-encoded body map 1:1
            sub = self._offset_mapping([body], 1)[0]
            sub_spans = list(sub[2])
            if len(new_pieces) - 1 < len(sub_spans):  # the lone leading "▁" was dropped
                sub_spans = sub_spans[1:]
            for p, (sb, se) in zip(new_pieces[:-1], sub_spans):
                out.append((int(self.sp.piece_to_id(p)), p, bs + sb, bs + se))
        else:  # SentencePiece's normalizer changed the surface: each piece gets the whole body span
            self.offset_fallbacks += 1
            for p in new_pieces[:-1]:
                out.append((int(self.sp.piece_to_id(p)), p, bs, comma_span[0]))
        out.append((int(self.sp.piece_to_id(new_pieces[-1])), new_pieces[-1], *comma_span))
        return out


def _is_digit_comma(piece: str) -> bool:
    return len(piece) > 1 and piece[-1] == "," and piece[-2].isdigit()


def _supports_offset_mapping(sp: spm.SentencePieceProcessor) -> bool:
    try:
        sp.encode(["a"], out_type="offset_mapping")
    except (ValueError, TypeError, RuntimeError):
        return False
    return True


def find_sentencepiece_model(directory: Path) -> Path | None:
    """``spiece.model`` in ``directory``, else its only ``*.model`` file (e.g. ``30k-clean.model``)."""
    p = directory / "spiece.model"
    if p.is_file():
        return p
    models = sorted(directory.glob("*.model"))
    return models[0] if len(models) == 1 else None
