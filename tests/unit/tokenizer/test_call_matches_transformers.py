"""``tokenizer(text, text_pair, padding=..., truncation=..., max_length=..., return_tensors=...)`` gives what
transformers' ``AutoTokenizer`` gives on the same model directory: ids, token types, attention masks and
tensors, for one text, a batch and pairs, with every padding and truncation, on 1,000 real sentences (the
polarity corpus fetched by `make data`), on the real all-MiniLM-L6-v2 directory (WordPiece) and on a
SentencePiece directory that `albert tokenizer train` writes from the Wikipedia dump (ALBERT's kind).

The reference for pairs cut ``longest_first`` is the slow tokenizer (``BertTokenizer``, ``AlbertTokenizer``): the `tokenizers`
library gives the odd token of a pair cut to halves to the longer segment, the original and we to the first
(tests/parity/test_tokenizer_parity.py, difference 5). Texts whose plain ids already differ from either
reference (characters transformers drops that the original keeps, difference 3; SentencePiece's
digit-comma re-encoding that a tokenizer.json cannot express, difference 6) are left out, and counted.
"""

from __future__ import annotations

import csv
import random
import sys
from pathlib import Path
from typing import Any

import numpy as np
import pytest
import torch

transformers = pytest.importorskip("transformers")
transformers.logging.set_verbosity_error()

DATA = Path(__file__).resolve().parents[3] / "data"
MINILM = DATA / "minilm"
POLARITY = DATA / "polarity" / "polarity-en-pang-lee.csv"
WIKI = DATA / "wiki" / "enwiki-shortened.xml.bz2"
FIXTURES = Path(__file__).resolve().parents[2] / "fixtures"
KEYS = ("input_ids", "token_type_ids", "attention_mask")


def _need(path: Path) -> Path:
    if not path.exists():
        pytest.skip(f"{path} not fetched (run `make data`)")
    return path


@pytest.fixture(scope="module", params=["wordpiece", "sentencepiece"])
def toks(request: pytest.FixtureRequest, tmp_path_factory: pytest.TempPathFactory) -> tuple[Any, Any, Any]:
    from albert_lm.tokenizer import load_tokenizer

    if request.param == "wordpiece":
        d = _need(MINILM)
    else:
        _need(WIKI)
        sys.path.insert(0, str(FIXTURES / "tokenizer"))
        import tokenizer_support

        d = tokenizer_support.train_test_vocab(tmp_path_factory.getbasetemp())
    if int(transformers.__version__.split(".")[0]) >= 5:  # the 4.x run (make test) compares both
        pytest.skip("transformers 5 has no slow (Python) tokenizers, half of this file's reference")
    fast = transformers.AutoTokenizer.from_pretrained(str(d))
    if request.param == "wordpiece":
        slow = transformers.AutoTokenizer.from_pretrained(str(d), use_fast=False)
    else:  # our SentencePiece directory names the generic fast class; the slow one is asked for by name
        slow = transformers.AlbertTokenizer.from_pretrained(str(d))
    assert fast.is_fast and not slow.is_fast
    return load_tokenizer(d), fast, slow


@pytest.fixture(scope="module")
def texts(toks: tuple[Any, Any, Any]) -> list[str]:
    ours, fast, slow = toks
    with _need(POLARITY).open(encoding="utf-8-sig", newline="") as f:
        rows = [row[1] for row in csv.reader(f) if len(row) > 1 and row[1].strip()]
    sample = random.Random(7).sample(rows, 1000)
    same = [
        t
        for t in sample
        if ours.encode_ids(t)
        == fast(t, add_special_tokens=False)["input_ids"]
        == slow(t, add_special_tokens=False)["input_ids"]
    ]
    assert len(same) >= 990, f"{1000 - len(same)} of 1000 real sentences tokenize differently"
    return same


def _assert_same(got: Any, want: Any, what: str) -> None:
    assert set(got) == set(want), what
    for key in want:
        g, w = got[key], want[key]
        if isinstance(w, torch.Tensor):
            assert isinstance(g, torch.Tensor) and g.dtype == w.dtype and torch.equal(g, w), f"{what}: {key}"
        elif isinstance(w, np.ndarray):
            assert isinstance(g, np.ndarray) and g.dtype == w.dtype and np.array_equal(g, w), f"{what}: {key}"
        else:
            assert g == w, f"{what}: {key}"


SINGLE = [
    dict(),
    dict(padding=True),
    dict(padding="longest", return_tensors="pt"),
    dict(padding=True, return_tensors="np"),
    dict(truncation=True, max_length=16),
    dict(truncation=True, max_length=16, padding=True, return_tensors="pt"),
    dict(truncation="longest_first", max_length=32, padding="max_length"),
    dict(truncation=True, max_length=64, padding="max_length", return_tensors="pt"),
    dict(padding="max_length", max_length=40, truncation=False),  # longer texts stay longer
    dict(padding=True, return_attention_mask=False, return_token_type_ids=False),
    dict(padding=True, return_tensors="pt", return_token_type_ids=False),
]


@pytest.mark.parametrize("kwargs", SINGLE, ids=[str(k) for k in SINGLE])
def test_batch_of_texts(toks: tuple[Any, Any, Any], texts: list[str], kwargs: dict[str, Any]) -> None:
    ours, fast, slow = toks
    got = ours(texts, **kwargs)
    _assert_same(got, fast(texts, **kwargs), f"fast {kwargs}")
    _assert_same(got, slow(texts, **kwargs), f"slow {kwargs}")
    assert list(got.keys()) == [k for k in KEYS if k in got] and got.input_ids is got["input_ids"]


@pytest.mark.parametrize("kwargs", SINGLE, ids=[str(k) for k in SINGLE])
def test_one_text(toks: tuple[Any, Any, Any], texts: list[str], kwargs: dict[str, Any]) -> None:
    ours, fast, _ = toks
    for text in texts[:40]:
        _assert_same(ours(text, **kwargs), fast(text, **kwargs), f"{text!r} {kwargs}")


def _fits(ours: Any, a: str, b: str, max_length: int, truncation: str) -> bool:
    """Whether ``truncation`` can cut the pair to ``max_length`` without emptying a segment (where it
    cannot, transformers returns an over-long sequence with a logged error and we raise)."""
    la, lb = len(ours.encode_ids(a)), len(ours.encode_ids(b))
    excess = la + lb + 3 - max_length
    if excess <= 0:
        return True
    return {"only_first": la > excess, "only_second": lb > excess}.get(truncation, min(la, lb) > 0)


@pytest.mark.parametrize("truncation", ["longest_first", "only_first", "only_second"])
@pytest.mark.parametrize("max_length", [24, 64])
def test_pairs(toks: tuple[Any, Any, Any], texts: list[str], truncation: Any, max_length: int) -> None:
    ours, fast, slow = toks
    rng = random.Random(max_length)
    pairs = [(rng.choice(texts), rng.choice(texts)) for _ in range(600)]
    name = truncation
    pairs = [p for p in pairs if _fits(ours, *p, max_length, name)]
    assert len(pairs) >= 60
    a, b = [p[0] for p in pairs], [p[1] for p in pairs]
    cut = sum(len(ours.encode_ids(x)) + len(ours.encode_ids(y)) + 3 > max_length for x, y in pairs)
    assert cut > 0  # the cut is exercised
    reference = slow if name == "longest_first" else fast
    for kwargs in (
        dict(truncation=truncation, max_length=max_length),
        dict(truncation=truncation, max_length=max_length, padding="max_length", return_tensors="pt"),
        dict(truncation=truncation, max_length=max_length, padding=True, return_tensors="np"),
    ):
        got = ours(a, b, **kwargs)
        _assert_same(got, reference(a, b, **kwargs), f"pairs {kwargs}")
        _assert_same(ours(list(zip(a, b)), **kwargs), got, f"list of pairs {kwargs}")
        if name == "longest_first":  # truncation=True is longest_first, as in transformers
            _assert_same(ours(a, b, **{**kwargs, "truncation": True}), got, f"True {kwargs}")
    for x, y in pairs[:20]:  # one pair at a time
        kwargs = dict(truncation=truncation, max_length=max_length, return_tensors="pt")
        _assert_same(ours(x, y, **kwargs), reference(x, y, **kwargs), f"{x!r} / {y!r}")


def test_misuse_is_loud(toks: tuple[Any, Any, Any], texts: list[str]) -> None:
    ours = toks[0]
    with pytest.raises(ValueError, match="different lengths.*padding=True"):
        ours(texts[:10], return_tensors="pt")
    with pytest.raises(ValueError, match="needs max_length"):
        ours(texts[:2], truncation=True)
    with pytest.raises(ValueError, match="padding must be one of"):
        ours(texts[:2], padding="longst")
    with pytest.raises(ValueError, match="return_tensors"):
        ours(texts[:2], return_tensors="tf")
    with pytest.raises(ValueError, match="text_pair must be a list as long as text"):
        ours(texts[:2], texts[:3])
    assert ours.encode(texts[0])["input_ids"] == ours(texts[0])["input_ids"]  # the old API still there
