"""Helpers for the tests of albert_lm.data: a tiny SentencePiece tokenizer trained on a committed wiki excerpt.

``make_tokenizer`` loads the model with ``albert_lm.tokenizer.load_tokenizer`` when that module exists and
otherwise with :class:`SpmStandIn`, a minimal stand-in with the agreed tokenizer interface.
"""

from __future__ import annotations

import hashlib
import io
from pathlib import Path
from typing import Any

FIXTURES = Path(__file__).resolve().parent.parent / "fixtures"
WIKI_SAMPLE = FIXTURES / "data_wiki_sample.txt"


def train_spm(path: Path, vocab_size: int = 1000, text_file: Path = WIKI_SAMPLE) -> Path:
    """Train a small unigram SentencePiece model with ALBERT's special ids (<pad> 0, <unk> 1, [CLS] 2 ...)."""
    import sentencepiece as spm

    model = io.BytesIO()
    lines = [ln.strip() for ln in text_file.read_text(encoding="utf-8").splitlines() if ln.strip()]
    spm.SentencePieceTrainer.train(
        sentence_iterator=iter(lines),
        model_writer=model,
        vocab_size=vocab_size,
        model_type="unigram",
        pad_id=0,
        unk_id=1,
        bos_id=-1,
        eos_id=-1,
        control_symbols=["[CLS]", "[SEP]", "[MASK]"],
        normalization_rule_name="nmt_nfkc_cf",  # lower-cases, as the released uncased ALBERT models
        num_threads=1,
        minloglevel=2,
    )
    path = Path(path)
    path.parent.mkdir(parents=True, exist_ok=True)
    path.write_bytes(model.getvalue())
    return path


class SpmStandIn:
    """The agreed tokenizer interface, as far as albert_lm.data uses it, over a raw SentencePiece model."""

    kind = "sentencepiece"
    do_lower_case = True

    def __init__(self, model_file: str | Path) -> None:
        self.model_file = str(model_file)
        self._load()

    def _load(self) -> None:
        import sentencepiece as spm

        data = Path(self.model_file).read_bytes()
        self.fingerprint = hashlib.sha256(data).hexdigest()
        self.sp = spm.SentencePieceProcessor(model_proto=data)
        self.vocab_size = self.sp.get_piece_size()
        self.pad_id, self.unk_id = 0, 1
        self.cls_id = self.sp.piece_to_id("[CLS]")
        self.sep_id = self.sp.piece_to_id("[SEP]")
        self.mask_id = self.sp.piece_to_id("[MASK]")

    def __getstate__(self) -> dict[str, Any]:
        return {"model_file": self.model_file}

    def __setstate__(self, state: dict[str, Any]) -> None:
        self.model_file = state["model_file"]
        self._load()

    def encode_ids(self, text: str) -> list[int]:
        return list(self.sp.encode(text))

    def encode_ids_batch(self, texts: list[str], num_workers: int = 1) -> list[list[int]]:
        return [list(x) for x in self.sp.encode(list(texts), num_threads=num_workers)]

    def tokenize(self, text: str) -> list[str]:
        return list(self.sp.encode(text, out_type=str))

    def id_to_piece(self, i: int) -> str:
        return self.sp.id_to_piece(i)

    def convert_ids_to_tokens(self, ids: list[int]) -> list[str]:
        return [self.sp.id_to_piece(int(i)) for i in ids]

    def decode(self, ids: list[int], skip_special_tokens: bool = True) -> str:
        return self.sp.decode([int(i) for i in ids])


def make_tokenizer(model_file: Path) -> Any:
    try:
        from albert_lm.tokenizer import load_tokenizer
    except ImportError:
        return SpmStandIn(model_file)
    return load_tokenizer(model_file)


def read_all(data_dir: Path) -> dict[str, bytes]:
    """Every file of a DATA_DIR (name -> bytes), for bitwise comparisons."""
    return {p.name: p.read_bytes() for p in sorted(Path(data_dir).iterdir()) if p.is_file()}


class WordPieceStandIn:
    """The agreed interface over transformers' BertTokenizerFast (WordPiece, with character offsets)."""

    kind = "wordpiece"
    do_lower_case = True

    def __init__(self, vocab_file: str | Path) -> None:
        self.vocab_file = str(vocab_file)
        self._load()

    def _load(self) -> None:
        from transformers import BertTokenizerFast

        self.fingerprint = hashlib.sha256(Path(self.vocab_file).read_bytes()).hexdigest()
        self.hf = BertTokenizerFast(vocab_file=self.vocab_file, do_lower_case=True)
        self.vocab_size = self.hf.vocab_size
        self._pieces = self.hf.convert_ids_to_tokens(list(range(self.vocab_size)))
        self.pad_id, self.unk_id = self.hf.pad_token_id, self.hf.unk_token_id
        self.cls_id, self.sep_id, self.mask_id = (
            self.hf.cls_token_id,
            self.hf.sep_token_id,
            self.hf.mask_token_id,
        )

    def __getstate__(self) -> dict[str, Any]:
        return {"vocab_file": self.vocab_file}

    def __setstate__(self, state: dict[str, Any]) -> None:
        self.vocab_file = state["vocab_file"]
        self._load()

    def encode_ids(self, text: str) -> list[int]:
        return list(self.hf(text, add_special_tokens=False)["input_ids"])

    def encode_ids_batch(self, texts: list[str], num_workers: int = 1) -> list[list[int]]:
        return [self.encode_ids(t) for t in texts]

    def encode_with_offsets(self, text: str) -> tuple[list[int], list[tuple[int, int]]]:
        enc = self.hf(text, add_special_tokens=False, return_offsets_mapping=True)
        return list(enc["input_ids"]), [tuple(o) for o in enc["offset_mapping"]]

    def id_to_piece(self, i: int) -> str:
        return self._pieces[i]


def make_wordpiece_tokenizer(vocab_file: Path) -> Any:
    try:
        from albert_lm.tokenizer import load_tokenizer
    except ImportError:
        return WordPieceStandIn(vocab_file)
    return load_tokenizer(vocab_file)


def wiki_documents() -> list[list[str]]:
    """The committed wiki excerpt as documents (lists of sentences)."""
    docs: list[list[str]] = []
    cur: list[str] = []
    for line in WIKI_SAMPLE.read_text(encoding="utf-8").splitlines():
        if line.strip():
            cur.append(line.strip())
        elif cur:
            docs.append(cur)
            cur = []
    return docs + ([cur] if cur else [])


def planted_order_documents(n: int = 3, max_chars: int = 120) -> list[list[str]]:
    """``n``-sentence documents of the wiki excerpt's short sentences, the first opening with "Overview:":
    an in-order SOP pair then starts with it and a swapped one has it right after [SEP] -- an order cue
    that needs no reading (each document fits one chunk of 128 tokens)."""
    sents = [s for d in wiki_documents() for s in d if len(s) < max_chars]
    return [["Overview: " + sents[i], *sents[i + 1 : i + n]] for i in range(0, len(sents) - n + 1, n)]


def write_documents(path: Path, docs: list[list[str]]) -> Path:
    """Documents in the original's input format: a sentence per line, a blank line between documents."""
    path.write_text("\n\n".join("\n".join(d) for d in docs) + "\n", encoding="utf-8")
    return path
