"""Continued pretraining from released weights: ``albert pretrain --init MODEL_DIR`` (``model.init_from``).

MODEL_DIR is an ALBERT or BERT model directory (ours, Hugging Face's, a converted TF checkpoint). Its
``config.json`` is the architecture (``model.preset`` is not used); ``model.overrides`` may change only what
does not shape or reinterpret the weights (`OVERRIDABLE`: dropout, and the initializer range of the heads
the directory lacks). The parts the directory holds are loaded: the encoder always, the masked-LM head and
the pooler when present; the rest (e.g. the SOP/NSP head of a bare ``BertModel``) starts from a fresh
initialization, and `load_init_model` logs which is which.

The pretraining data must have been prepared with the model's own vocabulary: the same size as the
model's embedding table and, when MODEL_DIR has tokenizer files, the same tokenizer fingerprint (sha256 of
the vocabulary file) as ``DATA_DIR/manifest.json`` records. Anything else would train the embeddings of
one vocabulary on the ids of another, which "works" (MiniLM's 30522 WordPiece ids fed shards made
with a 1000-piece SentencePiece vocabulary, exit 0) and is always wrong, so `check_vocabulary` refuses it.
"""

from __future__ import annotations

import logging
from collections.abc import Mapping
from pathlib import Path
from typing import Any

import torch

from albert_lm.config import AlbertConfig, ConfigError
from albert_lm.model import AlbertForPreTraining

logger = logging.getLogger(__name__)

# AlbertConfig fields that model.overrides may change on loaded weights: regularization, and the
# initialization of the parts the directory does not hold. Every other field shapes the weights or changes
# what they compute (sizes, activation, sharing, LayerNorm epsilon, position table).
OVERRIDABLE = (
    "hidden_dropout_prob",
    "attention_probs_dropout_prob",
    "classifier_dropout_prob",
    "initializer_range",
)
# The heads of AlbertForPreTraining (albert_lm.model.heads: the MLMHead `mlm`, the SOP/NSP linear `sop`), the pooler
# under the SOP/NSP head, by parameter-name prefix: the parts a model directory may lack, and those that
# optim.head_lr_scale applies to (a sentence-embedding model such as all-MiniLM-L6-v2 carries a pooler it
# never trained: weights of std 0.009, outputs ~0.05).
HEAD_PARTS = {"masked-LM head": "mlm.", "SOP/NSP head": "sop.", "pooler": "albert.pooler."}


def init_config(init_dir: str | Path, overrides: Mapping[str, Any]) -> AlbertConfig:
    """The architecture of ``init_dir`` with ``overrides`` applied: the config the run really uses.

    Raises:
        ConfigError: an override of a field outside `OVERRIDABLE` that differs from the directory's value,
            or an unknown field (naming it and what may be overridden).
    """
    path = Path(init_dir)
    if not (path / "config.json").is_file():
        raise ConfigError(f"model.init_from {path}: no config.json (not a model directory)")
    loaded = AlbertConfig.from_json(path / "config.json")
    fields = loaded.to_dict()
    refused = []
    for name, value in overrides.items():
        if name not in fields:
            raise ConfigError(f"model.overrides: unknown AlbertConfig field {name!r}")
        if name not in OVERRIDABLE and value != fields[name]:
            refused.append(f"{name}={value!r} (the model has {fields[name]!r})")
    if refused:
        raise ConfigError(
            f"model.overrides {', '.join(refused)} cannot apply to the weights of model.init_from {path}: "
            f"they shape the weights or change what they compute; with init_from only "
            f"{', '.join(OVERRIDABLE)} may change"
        )
    return loaded.replace(**dict(overrides)) if overrides else loaded


def _init_tokenizer(init_dir: Path) -> Any:
    """The tokenizer stored in ``init_dir``, or None when there is none."""
    from albert_lm.tokenizer import load_tokenizer

    try:
        return load_tokenizer(init_dir)
    except ValueError:  # no spiece.model / *.model / vocab.txt here
        return None


def check_vocabulary(init_dir: str | Path, config: AlbertConfig, data_dir: str | Path, data_tok: Any) -> None:
    """Refuse pretraining ``init_dir``'s weights on a DATA_DIR made with another vocabulary.

    ``data_tok`` is the DATA_DIR's tokenizer record (``manifest["tokenizer"]``: fingerprint, kind,
    vocab_size). Compared: the model's embedding rows with the data's vocabulary size, and the fingerprint
    of the tokenizer stored in ``init_dir`` (when there is one) with the data's.

    Raises:
        ConfigError: naming both vocabularies (size, kind, fingerprint) and how to prepare matching data.
    """
    init_dir = Path(init_dir)
    tok = _init_tokenizer(init_dir)
    theirs = f"{data_tok['kind']} vocabulary of {data_tok['vocab_size']} (fingerprint {data_tok['fingerprint'][:12]})"
    if tok is None:
        ours = f"{config.vocab_size} embedding rows and no tokenizer files"
    else:
        ours = f"a {tok.kind} vocabulary of {tok.vocab_size} (fingerprint {tok.fingerprint[:12]})"
    same_size = config.vocab_size == int(data_tok["vocab_size"])
    if not same_size or (tok is not None and tok.fingerprint != data_tok["fingerprint"]):
        raise ConfigError(
            f"model.init_from {init_dir} has {ours}, but DATA_DIR {data_dir} was prepared with a {theirs}: "
            f"continued pretraining needs the model's own vocabulary (albert prepare --tokenizer {init_dir})"
        )
    if tok is None:
        logger.warning(
            "model.init_from %s has no tokenizer files: only the vocabulary size (%d) could be checked "
            "against DATA_DIR's",
            init_dir,
            config.vocab_size,
        )


def load_init_model(
    init_dir: str | Path, config: AlbertConfig, seed: int, head_lr_scale: float = 1.0
) -> AlbertForPreTraining:
    """``init_dir``'s weights as an `AlbertForPreTraining` with ``config`` (from `init_config`); logs which
    parts were loaded and which start fresh (with a hint at ``optim.head_lr_scale`` when it is 1). The fresh
    parts are initialized from ``seed``."""
    overrides = {k: v for k, v in config.to_dict().items() if k in OVERRIDABLE}
    torch.manual_seed(seed)
    model = AlbertForPreTraining.from_pretrained(init_dir, **overrides)
    # A part the directory lacks keeps its seeded initialization, bit for bit: compare with a fresh model
    # built from the same seed (trained weights never equal their random initialization exactly).
    torch.manual_seed(seed)
    fresh = dict(AlbertForPreTraining(config).named_parameters())
    params = dict(model.named_parameters())
    loaded, initialized = [], []
    for part, prefix in HEAD_PARTS.items():
        names = [n for n in params if n.startswith(prefix)]
        if any(not torch.equal(params[n], fresh[n]) for n in names):
            loaded.append(part)
        elif names:
            initialized.append(part)
    del fresh
    logger.info(
        "init from %s (%s, %.1fM parameters): encoder%s loaded%s",
        init_dir,
        config.model_type,
        sum(p.numel() for p in model.parameters()) / 1e6,
        "".join(f", {p}" for p in loaded),
        f"; freshly initialized: {', '.join(initialized)}" if initialized else "",
    )
    if initialized and head_lr_scale == 1:
        logger.info(
            "the fresh parts learn at the encoder's lr; at a continued-pretraining lr (1e-4) a fresh SOP/NSP "
            "head hardly moves in a few hundred steps: --set optim.head_lr_scale=10 trains them 10x faster"
        )
    return model
