"""Tokenizers: ALBERT's SentencePiece (exactly as the original) and BERT's WordPiece, one interface.

    from albert_lm.tokenizer import load_tokenizer
    tok = load_tokenizer("path/to/model_dir")        # spiece.model -> SentencePiece, vocab.txt -> WordPiece
    enc = tok.encode("A question?", "Its context.", max_length=384, return_offsets=True)

See `albert_lm.tokenizer.base.Tokenizer` for the shared interface.
"""

from __future__ import annotations

import logging
from pathlib import Path

from albert_lm._hub import resolve_model_dir
from albert_lm.tokenizer.base import Encoding, Offsets, Tokenizer
from albert_lm.tokenizer.spiece import AlbertTokenizer, find_sentencepiece_model, preprocess_text
from albert_lm.tokenizer.wordpiece import WordPieceTokenizer

__all__ = [
    "load_tokenizer",
    "Tokenizer",
    "AlbertTokenizer",
    "WordPieceTokenizer",
    "Encoding",
    "Offsets",
    "preprocess_text",
]


logger = logging.getLogger(__name__)

# tokenizer_config.json's albert_tokenizer_class: the class of ours that wrote the directory
OUR_CLASSES: dict[str, type[AlbertTokenizer] | type[WordPieceTokenizer]] = {
    "AlbertTokenizer": AlbertTokenizer,
    "WordPieceTokenizer": WordPieceTokenizer,
}

# tokenizer_config.json's tokenizer_class (transformers' names) -> ours
TOKENIZER_CLASSES: dict[str, type[AlbertTokenizer] | type[WordPieceTokenizer]] = {
    "AlbertTokenizer": AlbertTokenizer,
    "AlbertTokenizerFast": AlbertTokenizer,
    "BertTokenizer": WordPieceTokenizer,
    "BertTokenizerFast": WordPieceTokenizer,
}
# transformers' classes that read any tokenizer.json (ours name one for SentencePiece): the files decide
GENERIC_CLASSES = frozenset({"PreTrainedTokenizerFast", "TokenizersBackend"})


def load_tokenizer(path: str | Path, *, revision: str | None = None) -> AlbertTokenizer | WordPieceTokenizer:
    """Loads the tokenizer of a model directory, a Hugging Face Hub id (``albert/albert-base-v2`` at
    ``revision``, through ``huggingface_hub`` and its cache: `albert_lm._hub`) or a vocabulary file.

    A directory records its tokenizer type in ``tokenizer_config.json``: ``albert_tokenizer_class``
    (ours, written by our ``save_pretrained``) or else ``tokenizer_class`` (transformers' names:
    ``AlbertTokenizer`` -> SentencePiece, ``BertTokenizer`` -> WordPiece), and that decides when its
    file is there (a generic ``PreTrainedTokenizerFast`` leaves it to the files). Otherwise the files decide:
    ``spiece.model`` (or a single ``*.model``, e.g. the released ``30k-clean.model``) gives an
    `AlbertTokenizer`, ``vocab.txt`` a `WordPieceTokenizer`. The Chinese ALBERT checkpoints
    (google-research's albert_*_zh, brightmart/albert_zh and their Hugging Face ports) use BERT's WordPiece
    ``vocab.txt``, and some of them say ``AlbertTokenizer``: a recorded class whose file is missing falls
    back to the file present, with a warning. Options come from ``tokenizer_config.json``. A file
    ``*.model`` / ``*.txt`` is loaded with the defaults (lower-casing on, as every released ALBERT and the
    Chinese models).

    Raises:
        ValueError: nothing loadable at ``path``, or the file is not what its name says.
        HubModelNotFound: an id that cannot be resolved (offline and not cached, ...).
    """
    p = resolve_model_dir(path, revision)
    if p.is_dir():
        cls = _directory_class(p)
        if cls is None:
            raise ValueError(
                f"{p}: no tokenizer here (expected spiece.model or another single *.model file, or vocab.txt)"
            )
        return cls.from_pretrained(p)
    if p.is_file():
        if p.suffix == ".txt" or p.name.endswith(".vocab.txt"):
            return WordPieceTokenizer(p)
        return AlbertTokenizer(p)
    raise ValueError(f"{p}: no such file or directory")


def _directory_class(d: Path) -> type[AlbertTokenizer] | type[WordPieceTokenizer] | None:
    """The tokenizer class of directory ``d``: the recorded one when its file is there, else by the files."""
    present: list[type[AlbertTokenizer] | type[WordPieceTokenizer]] = []
    if find_sentencepiece_model(d) is not None:
        present.append(AlbertTokenizer)
    if (d / "vocab.txt").is_file():
        present.append(WordPieceTokenizer)
    key, recorded, cls = _recorded_class(d)
    if recorded is None:
        return present[0] if present else None
    if cls is None:
        known = OUR_CLASSES if key == "albert_tokenizer_class" else TOKENIZER_CLASSES
        logger.warning(
            "%s: %s %r is not one of %s; reading the tokenizer by the files present",
            d / "tokenizer_config.json", key, recorded, ", ".join(known),
        )  # fmt: skip
        return present[0] if present else None
    if cls in present:
        return cls
    if not present:
        return None
    fallback = present[0]
    logger.warning(
        "%s: tokenizer_config.json names %s but there is no %s; using %s (%s)",
        d, recorded, _FILE_OF[cls], _FILE_OF[fallback], fallback.__name__,
    )  # fmt: skip
    return fallback


def _recorded_class(
    d: Path,
) -> tuple[str, str | None, type[AlbertTokenizer] | type[WordPieceTokenizer] | None]:
    """(key, recorded name, our class of that name or None) of ``d/tokenizer_config.json``: ours
    (``albert_tokenizer_class``) first, then transformers' ``tokenizer_class``; the name is None when
    nothing is recorded or only a generic class."""
    config = Tokenizer._read_config(d) if (d / "tokenizer_config.json").is_file() else {}
    ours = config.get("albert_tokenizer_class")
    if ours is not None:
        return "albert_tokenizer_class", str(ours), OUR_CLASSES.get(str(ours))
    theirs = config.get("tokenizer_class")
    if theirs is None or str(theirs) in GENERIC_CLASSES:
        return "tokenizer_class", None, None
    return "tokenizer_class", str(theirs), TOKENIZER_CLASSES.get(str(theirs))


_FILE_OF: dict[type[Tokenizer], str] = {
    AlbertTokenizer: "SentencePiece model (spiece.model)",
    WordPieceTokenizer: "vocab.txt",
}
