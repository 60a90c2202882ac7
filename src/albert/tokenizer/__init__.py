"""Tokenizers: ALBERT's SentencePiece (exactly as the original) and BERT's WordPiece, one interface.

    from albert.tokenizer import load_tokenizer
    tok = load_tokenizer("path/to/model_dir")        # spiece.model -> SentencePiece, vocab.txt -> WordPiece
    enc = tok.encode("A question?", "Its context.", max_length=384, return_offsets=True)

See `albert.tokenizer.base.Tokenizer` for the shared interface.
"""

from __future__ import annotations

from pathlib import Path

from albert.tokenizer.base import Encoding, Offsets, Tokenizer
from albert.tokenizer.spiece import AlbertTokenizer, find_sentencepiece_model, preprocess_text
from albert.tokenizer.wordpiece import WordPieceTokenizer

__all__ = [
    "load_tokenizer",
    "Tokenizer",
    "AlbertTokenizer",
    "WordPieceTokenizer",
    "Encoding",
    "Offsets",
    "preprocess_text",
]


def load_tokenizer(path: str | Path) -> AlbertTokenizer | WordPieceTokenizer:
    """Loads the tokenizer of a model directory or a vocabulary file.

    A directory with ``spiece.model`` (or a single ``*.model``, e.g. the released ``30k-clean.model``)
    gives an `AlbertTokenizer`; one with ``vocab.txt`` a `WordPieceTokenizer`; options come from its
    ``tokenizer_config.json`` when present. A file ``*.model`` / ``*.txt`` is loaded with the defaults
    (lower-casing on, as every released ALBERT and the Chinese models).

    Raises:
        ValueError: nothing loadable at ``path``, or the file is not what its name says.
    """
    p = Path(path)
    if p.is_dir():
        if find_sentencepiece_model(p) is not None:
            return AlbertTokenizer.from_pretrained(p)
        if (p / "vocab.txt").is_file():
            return WordPieceTokenizer.from_pretrained(p)
        raise ValueError(
            f"{p}: no tokenizer here (expected spiece.model or another single *.model file, or vocab.txt)"
        )
    if p.is_file():
        if p.suffix == ".txt" or p.name.endswith(".vocab.txt"):
            return WordPieceTokenizer(p)
        return AlbertTokenizer(p)
    raise ValueError(f"{p}: no such file or directory")
