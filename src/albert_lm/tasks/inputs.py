"""What goes into a fine-tuned model: its directory's tokenizer, and token ids built as the original builds them.

* `load_model_tokenizer`: the tokenizer of a model directory, checked against the model's vocabulary;
* `tokenizer_record` / `check_tokenizer`: the fingerprint a fine-tuned model records of its tokenizer,
  and the check that the tokenizer beside it is still that one;
* `truncate_longest_first`: the fine-tuning pair truncation (one token at a time from the longer text),
  not the pretraining one of `albert_lm.data.instances`, which cuts from the front or the back at random;
* `build_inputs`: ``[CLS] a [SEP] (b [SEP])`` with the original's token types, the one place every task
  (classification, RACE, SQuAD, NER) builds its inputs; `encode_text_pair(s)`: tokenized, truncated and
  built, one tokenizer call for a whole list.
"""

from __future__ import annotations

from collections.abc import Sequence
from pathlib import Path
from typing import Any

from albert_lm.tasks.base import ModelDirError

TOKENIZER_FILES: tuple[str, ...] = ("spiece.model", "vocab.txt")


def read_model_config(model_dir: str | Path) -> Any:
    """The `AlbertConfig` of a model directory.

    Raises:
        ModelDirError: the directory or its config.json is missing.
        ConfigError: config.json does not describe a model (the message names the file and field).
    """
    from albert_lm._hub import resolve_model_dir
    from albert_lm.config import AlbertConfig

    path = resolve_model_dir(model_dir)
    if not path.is_dir():
        raise ModelDirError(
            f"{path}: not a model directory (expected config.json, model weights and a tokenizer)"
        )
    config_file = path / "config.json"
    if not config_file.is_file():
        raise ModelDirError(f"{path}: no config.json; is this a model directory?")
    return AlbertConfig.from_json(config_file)


def load_model_tokenizer(model_dir: str | Path) -> Any:
    """The tokenizer of a model directory, checked against the model's vocabulary.

    Raises:
        ModelDirError: the directory or its config.json is missing, it has no tokenizer file
            (``spiece.model`` or ``vocab.txt``), or the tokenizer's vocabulary size differs from the
            model's ``vocab_size`` (ids would index the wrong, or no, embedding rows).
    """
    from albert_lm._hub import resolve_model_dir
    from albert_lm.tokenizer import load_tokenizer

    path = resolve_model_dir(model_dir)
    config = read_model_config(path)
    if not any((path / name).is_file() for name in TOKENIZER_FILES):
        raise ModelDirError(
            f"{path}: no tokenizer in the model directory (looked for {' or '.join(TOKENIZER_FILES)}); "
            "copy the SentencePiece model / WordPiece vocab the checkpoint was trained with into it"
        )
    tokenizer = load_tokenizer(path)
    if tokenizer.vocab_size != config.vocab_size:
        raise ModelDirError(
            f"{path}: the tokenizer has {tokenizer.vocab_size} entries but config.json says vocab_size="
            f"{config.vocab_size}; the tokenizer does not belong to this model"
        )
    return tokenizer


def tokenizer_record(tokenizer: Any) -> dict[str, Any]:
    """What identifies a tokenizer beyond its size: kind, vocabulary size and fingerprint (sha256 of its
    vocabulary / model file, the one `albert pretrain --init` and `albert prepare` compare too)."""
    return {
        "kind": getattr(tokenizer, "kind", None),
        "vocab_size": int(tokenizer.vocab_size),
        "fingerprint": getattr(tokenizer, "fingerprint", None),
    }


def check_tokenizer(model_dir: str | Path, recorded: Any, tokenizer: Any) -> None:
    """Refuse a tokenizer other than the one the model was fine-tuned with (``recorded``: the
    `tokenizer_record` in its task.json; None for a model written before it was recorded: not checked).

    Another vocabulary of the same size passes the vocabulary-size check of `load_model_tokenizer` and
    gives every token another id: predictions are noise, with exit 0.

    Raises:
        ModelDirError: naming the directory and both fingerprints.
    """
    if not isinstance(recorded, dict) or not recorded.get("fingerprint"):
        return
    now = tokenizer_record(tokenizer)
    if now["fingerprint"] != recorded["fingerprint"]:
        raise ModelDirError(
            f"{model_dir}: its tokenizer ({now['kind']}, {now['vocab_size']} entries, fingerprint "
            f"{str(now['fingerprint'])[:12]}) is not the one the model was fine-tuned with (fingerprint "
            f"{str(recorded['fingerprint'])[:12]}, task.json); put the fine-tuning tokenizer back"
        )


def pad_id_of(tokenizer: Any) -> int:
    """The tokenizer's padding id (0 when it has none: the released ALBERT and BERT vocabularies)."""
    return int(getattr(tokenizer, "pad_id", 0) or 0)


def truncate_longest_first(a: list[int], b: list[int], max_length: int) -> None:
    """Truncate in place, one token at a time from the end of the longer sequence (from ``b`` on a tie),
    until ``len(a) + len(b) <= max_length`` (original classifier_utils.py _truncate_seq_pair)."""
    while len(a) + len(b) > max_length:
        if len(a) > len(b):
            a.pop()
        else:
            b.pop()


def build_inputs(tokenizer: Any, a: list[int], b: list[int] | None = None) -> tuple[list[int], list[int]]:
    """``[CLS] a [SEP]`` or ``[CLS] a [SEP] b [SEP]`` with type ids 0 for CLS, a and the first SEP and 1
    for b and its SEP (original classifier_utils.py convert_single_example)."""
    ids = [tokenizer.cls_id, *a, tokenizer.sep_id]
    types = [0] * len(ids)
    if b is not None:
        ids += [*b, tokenizer.sep_id]
        types += [1] * (len(b) + 1)
    return ids, types


def encode_text_pair(tokenizer: Any, a: str, b: str | None, max_length: int) -> tuple[list[int], list[int]]:
    """Tokenize, truncate as the original and add special tokens."""
    return encode_text_pairs(tokenizer, [a], None if b is None else [b], max_length)[0]


def encode_text_pairs(
    tokenizer: Any, a: Sequence[str], b: Sequence[str] | None, max_length: int, num_workers: int = 1
) -> list[tuple[list[int], list[int]]]:
    """`encode_text_pair` of many texts (or pairs, ``b`` given) with ONE tokenizer call: for short texts
    the per-call cost is more than the model's (`albert predict`, `albert serve`); ``num_workers``: the
    threads the tokenizer may use."""
    if max_length < 3 + (b is not None):
        raise ValueError(f"max_seq_length {max_length} leaves no room for text")
    if b is not None and len(b) != len(a):
        raise ValueError(f"{len(a)} first texts for {len(b)} second texts")
    ids = tokenizer.encode_ids_batch([*a, *(b or [])], num_workers=num_workers) if a else []
    out = []
    for i in range(len(a)):
        ids_a = list(ids[i])
        if b is None:
            out.append(build_inputs(tokenizer, ids_a[: max_length - 2]))  # account for [CLS] and [SEP]
            continue
        ids_b = list(ids[len(a) + i])
        truncate_longest_first(ids_a, ids_b, max_length - 3)  # account for [CLS], [SEP], [SEP]
        out.append(build_inputs(tokenizer, ids_a, ids_b))
    return out
