"""A small stand-in for `albert_lm.tokenizer` in task tests: one token per lower-cased word or punctuation
mark, ids given in order of first appearance. Tests can then hand-compute inputs word by word."""

from __future__ import annotations

import re
from pathlib import Path

SPECIALS = ("[PAD]", "[UNK]", "[CLS]", "[SEP]", "[MASK]")


class WordTokenizer:
    kind = "wordpiece"
    do_lower_case = True
    fingerprint = "standin"

    def __init__(self, words: list[str] | None = None) -> None:
        self.vocab: dict[str, int] = {t: i for i, t in enumerate(SPECIALS)}
        for w in words or []:
            self.vocab.setdefault(w, len(self.vocab))
        self.pad_id, self.unk_id, self.cls_id, self.sep_id, self.mask_id = range(5)

    @property
    def vocab_size(self) -> int:
        return len(self.vocab)

    def tokenize(self, text: str) -> list[str]:
        return re.findall(r"\w+|[^\w\s]", text.lower())

    def encode_ids(self, text: str) -> list[int]:
        return [self.vocab.setdefault(t, len(self.vocab)) for t in self.tokenize(text)]

    def encode_ids_batch(self, texts: list[str], num_workers: int = 1) -> list[list[int]]:
        return [self.encode_ids(t) for t in texts]

    def convert_tokens_to_ids(self, tokens: list[str]) -> list[int]:
        return [self.vocab.get(t, self.unk_id) for t in tokens]

    def convert_ids_to_tokens(self, ids: list[int]) -> list[str]:
        inv = {i: t for t, i in self.vocab.items()}
        return [inv[i] for i in ids]

    def get_vocab(self) -> dict[str, int]:
        return dict(self.vocab)

    def save_pretrained(self, path: str | Path) -> None:
        p = Path(path)
        p.mkdir(parents=True, exist_ok=True)
        inv = sorted(self.vocab, key=self.vocab.__getitem__)
        (p / "vocab.txt").write_text("\n".join(inv) + "\n", encoding="utf-8")


def make_tiny_model_dir(path: Path, texts: list[str], seed: int = 0) -> Path:
    """An encoder-only model directory (random albert-tiny) with a real WordPiece vocab.txt holding the
    special tokens and every lower-cased word / punctuation mark of ``texts`` (so nothing is [UNK])."""
    import torch

    from albert_lm.config import AlbertConfig
    from albert_lm.model import AlbertModel

    words: set[str] = set()
    for t in texts:
        words.update(re.findall(r"\w+|[^\w\s]", t.lower()))
    vocab = [*SPECIALS, *sorted(words)]
    path.mkdir(parents=True, exist_ok=True)
    (path / "vocab.txt").write_text("\n".join(vocab) + "\n", encoding="utf-8")
    torch.manual_seed(seed)
    AlbertModel(AlbertConfig.from_preset("albert-tiny", vocab_size=len(vocab))).save_pretrained(path)
    return path
