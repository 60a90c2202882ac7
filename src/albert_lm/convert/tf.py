"""Released TensorFlow 1 checkpoints -> our models, without TensorFlow.

The TF name tables (`albert_lm.convert.keymap` ``TF_*``, the same ``{}`` templates as the Hugging Face ones)
map our name template -> TF variable name template(s); several TF names are concatenated along dim 0 (the
fused QKV projection, rows [q; k; v]). How a TF tensor becomes ours follows from its name alone:

* ``.../kernel`` (dense layers, ``tf.layers.dense`` and modeling.py ``dense_layer_2d/3d``) is stored
  (in, out): transposed to nn.Linear's (out, in). Attention kernels of older exports stored as
  (H, heads, head_dim) / (heads, head_dim, H) are flattened to 2-D first.
* Embedding tables (V, E) and ``output_weights`` (out, in; used as ``matmul(x, w, transpose_b=True)``
  in run_pretraining.py and classifier_utils.py) are copied as they are.
* LayerNorm ``gamma`` / ``beta`` are weight / bias.

Layouts (detected from the variable names; a leading ``module/`` of TF-Hub graphs is ignored):

``google``      google-research/albert modeling.py, the release tarballs, TF-Hub modules and the albert_zh
                "google" checkpoints: ``bert/encoder/transformer/group_{g}/inner_group_{i}/...``, the
                E->H projection at ``bert/encoder/embedding_hidden_mapping_in``.
``brightmart``  brightmart/albert_zh modeling.py (albert_tiny/base/large/xlarge_zh): BERT names under one
                shared scope ``bert/encoder/layer_shared/...``, and the factorization *inside* the word
                embedding: ``word_embeddings`` (V, E) times ``word_embeddings_2`` (E, H), no bias; position
                and token-type tables, LayerNorm and the MLM transform at size H; MLM logits
                ``x @ word_embeddings_2.T @ word_embeddings.T`` (run_pretraining.py). Exactly our model with
                E = H: word table ``word_embeddings @ word_embeddings_2`` (computed in float64, rounded once
                to float32) and an identity E->H projection (kept so that Hugging Face's ALBERT, which
                always has one, loads the result too).
``bert``        google-research/bert (``bert/encoder/layer_{l}/...``): no sharing, E = H, NSP head.

Optimizer slots (``adam_m``/``adam_v`` of AdamWeightDecayOptimizer, ``lamb_m``/``lamb_v`` of the LAMB
optimizer, ``Adam``/``Adam_1`` of tf.train.AdamOptimizer) and bookkeeping (``global_step``, ...) are
skipped with one log line. Any other variable that no rule uses is an error naming it, unless
``allow_unused``.
"""

from __future__ import annotations

import logging
import re
from collections.abc import Iterable, Mapping
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

import numpy as np
import torch
from torch.overrides import TorchFunctionMode

from albert_lm._io import atomic_write_dir, recover_dir
from albert_lm.config import AlbertConfig, ConfigError, read_config_file
from albert_lm.convert import keymap
from albert_lm.convert.keymap import KeyRule
from albert_lm.convert.tf_checkpoint import TFCheckpoint
from albert_lm.model import PreTrainedModule
from albert_lm.optim._checks import first_non_finite_tensor

logger = logging.getLogger(__name__)

# Optimizer state and bookkeeping: never weights of the model.
_SKIP = re.compile(
    r"/(adam_[mv]|lamb_[mv]|Adam(_1)?|Momentum|RMSProp(_1)?|Adagrad|Adafactor_\w+|"
    r"AdamWeightDecayOptimizer(_1)?|LAMBOptimizer(_1)?|ExponentialMovingAverage)$"
    r"|(^|/)(global_step|beta[12]_power|good_steps|current_loss_scale|loss_scale|_CHECKPOINTABLE_OBJECT_GRAPH)$"
)
_HUB_PREFIX = "module/"


class ConversionError(ValueError):
    """A checkpoint that cannot be converted; the message names the tensor(s) and the file."""


def is_skipped(name: str) -> bool:
    """Optimizer slots and training bookkeeping, skipped by the converter."""
    return bool(_SKIP.search(name))


def detect_layout(names: Iterable[str]) -> str:
    """``google``, ``brightmart`` or ``bert`` (see the module docstring), from the variable names."""
    names = list(names)
    if any(n.startswith("bert/encoder/transformer/group_") for n in names):
        return "google"
    if any(n.startswith("bert/encoder/layer_shared/") for n in names):
        return "brightmart"
    if any(re.match(r"bert/encoder/layer_\d+/", n) for n in names):
        return "bert"
    sample = ", ".join(sorted(names)[:6])
    raise ConversionError(
        "no ALBERT/BERT encoder variables found (expected bert/encoder/transformer/group_0/..., "
        f"bert/encoder/layer_shared/... or bert/encoder/layer_0/...); the checkpoint has: {sample}"
    )


# ------------------------------------------------------------------------------------------ config, files
_CONFIG_NAMES = ("albert_config.json", "bert_config.json", "config.json")


def _candidate_dirs(prefix: Path) -> list[Path]:
    """Directories that may hold the config and vocabulary of a checkpoint: its own, the TF-Hub module
    root and ``assets/`` (for ``variables/variables``)."""
    d = prefix.parent
    dirs = [d, d / "assets"]
    if d.name == "variables":
        dirs += [d.parent, d.parent / "assets"]
    return [x for x in dirs if x.is_dir()]


def find_config(prefix: Path) -> Path | None:
    for d in _candidate_dirs(prefix):
        for name in _CONFIG_NAMES:
            if (d / name).is_file():
                return d / name
        brightmart = sorted(d.glob("albert_config*.json"))  # albert_zh: albert_config_tiny.json, ...
        if len(brightmart) == 1:
            return brightmart[0]
    return None


def find_vocab(prefix: Path) -> Path | None:
    """The release's SentencePiece model (``30k-clean.model``, ``spiece.model``) or WordPiece ``vocab.txt``."""
    for d in _candidate_dirs(prefix):
        models = sorted(d.glob("*.model"))
        if models:
            return models[0]
        if (d / "vocab.txt").is_file():
            return d / "vocab.txt"
    return None


def _config_for_layout(config: AlbertConfig, raw: dict[str, Any], layout: str, source: str) -> AlbertConfig:
    if layout == "brightmart":
        if str(raw.get("ln_type", "postln")).lower() == "preln":
            raise ConversionError(
                f"{source}: ln_type 'preln' (brightmart modeling_preln.py) is not supported"
            )
        # E = H with an identity projection, one shared layer (see the module docstring)
        return config.replace(
            embedding_size=config.hidden_size,
            embedding_projection=True,
            sharing="all",
            num_hidden_groups=1,
            inner_group_num=1,
            model_type="albert",
        )
    if layout == "bert" and config.model_type != "bert":
        raise ConversionError(
            f"{source}: the checkpoint has BERT's layout but the config is not a BERT config"
        )
    if layout == "google" and config.model_type != "albert":
        raise ConversionError(f"{source}: the checkpoint has ALBERT's layout but the config is a BERT config")
    return config


# ------------------------------------------------------------------------------------------- conversion
@dataclass
class TFConversionReport:
    """What `load_tf_checkpoint` did."""

    prefix: Path
    layout: str
    head: str | None
    config_source: str
    used: list[str] = field(default_factory=list)
    skipped: list[str] = field(default_factory=list)
    unused: list[str] = field(default_factory=list)


class _NoInit(TorchFunctionMode):
    """Skips initializers while the model skeleton is built on the meta device: its parameters are all
    replaced by the checkpoint's (``load_state_dict(assign=True)``), and torch's meta ``normal_`` alone costs
    seconds on first use (it imports torch._dynamo)."""

    _INIT = frozenset(
        {
            "normal_",
            "uniform_",
            "trunc_normal_",
            "kaiming_uniform_",
            "xavier_uniform_",
            "constant_",
            "zeros_",
            "ones_",
        }
        | {"zero_", "fill_"}
    )

    def __torch_function__(self, func: Any, types: Any, args: tuple = (), kwargs: dict | None = None) -> Any:
        kwargs = kwargs or {}
        if getattr(func, "__name__", None) in self._INIT:
            return args[0] if args else kwargs["tensor"]
        return func(*args, **kwargs)


def _choose_head(names: set[str]) -> str | None:
    if {"output_weights", "output_bias"} <= names:
        return "classification"
    if "cls/squad/output_weights" in names:
        return "question_answering"
    if "answer_class/dense_1/kernel" in names:
        return "squad_v2"
    if "cls/predictions/output_bias" in names:
        return "pretraining" if "cls/seq_relationship/output_weights" in names else "mlm"
    return None


_FLOAT_DTYPES = ("float32", "float16", "bfloat16", "float64")


def _read_part(ckpt: TFCheckpoint, name: str, kernel: bool, out: np.ndarray, verify: bool, hint: str) -> None:
    """Read the TF variable ``name`` into ``out`` (our layout, float32): kernels (in, out) transposed as they
    stream from the file, everything else as it is; no other copy of the tensor is made."""
    entry = ckpt.entries[name]
    tf_shape = out.shape[::-1] if kernel else out.shape
    if entry.dtype not in _FLOAT_DTYPES or entry.numel != int(np.prod(tf_shape)):
        raise ConversionError(
            f"{ckpt.prefix}: tensor {name!r} is {entry.dtype} {entry.shape}, but it must be a float tensor of "
            f"shape {tuple(tf_shape)} here ({hint})"
        )
    if entry.shape == tf_shape:
        ckpt.read(name, verify=verify, out=out, transpose=kernel)
        return
    if not _merges_into(entry.shape, tf_shape):
        raise ConversionError(
            f"{ckpt.prefix}: tensor {name!r} has shape {entry.shape}, expected {tuple(tf_shape)} ({hint})"
        )
    # (H, heads, head_dim) query/key/value kernels, (heads, head_dim, H) output kernels and (heads, head_dim)
    # biases of older exports: their C-order flattening is the 2-D (1-D) variable of modeling.py.
    arr = ckpt.read(name, verify=verify).reshape(tf_shape)
    out[...] = arr.T if kernel else arr


def _merges_into(shape: tuple[int, ...], target: tuple[int, ...]) -> bool:
    """Whether merging runs of consecutive dimensions of ``shape`` gives ``target`` (so that its C-order
    flattening is the ``target`` tensor): (16, 2, 8) -> (16, 16) yes, (8, 32) -> (16, 16) no."""
    if len(shape) <= len(target):
        return tuple(shape) == tuple(target)
    dims = iter(shape)
    for want in target:
        got = next(dims, None)
        while got is not None and 0 < got < want and want % got == 0:
            nxt = next(dims, None)
            got = None if nxt is None else got * nxt
        if got != want:
            return False
    return next(dims, None) is None


def load_tf_checkpoint(
    path: str | Path,
    models: Mapping[str | None, type[PreTrainedModule]],
    *,
    config: AlbertConfig | str | Path | None = None,
    head: str | None = "auto",
    allow_unused: bool = False,
    verify: bool = True,
) -> tuple[PreTrainedModule, TFConversionReport]:
    """Build one of our models from a TensorFlow 1 checkpoint (prefix, one of its files, or its directory).

    Args:
        path: checkpoint prefix, one of its files, a release directory or a TF-Hub module directory.
        models: head name -> the model class to build (`albert_lm.model.HEADS`; the caller chooses the
            classes, this module only names the heads).
        config: an `AlbertConfig`, a path to ``albert_config.json`` (released, brightmart's or Hugging
            Face's), or None to look for one next to the checkpoint (and in a TF-Hub ``assets/``).
        head: ``auto`` (from the variables: ``output_weights`` -> classification, ``cls/squad`` -> question
            answering, ``answer_class`` -> the SQuAD 2.0 head, ``cls/predictions`` +
            ``cls/seq_relationship`` -> pretraining, ...), one of `keymap.TF_HEADS`, or None for the bare encoder.
        allow_unused: log variables that no rule uses instead of raising.
        verify: check every tensor's CRC32C (on by default).

    Returns:
        The model (float32, CPU) and a report of what was used, skipped and left unused.

    Raises:
        ConversionError: unknown or missing variables, shapes that do not fit the config.
        ChecksumError: a corrupt or truncated data file (names the tensor and the checksum).
    """
    ckpt = TFCheckpoint(path)
    try:
        return _load(ckpt, models, config, head, allow_unused, verify)
    finally:
        ckpt.close()


def _load(
    ckpt: TFCheckpoint,
    models: Mapping[str | None, type[PreTrainedModule]],
    config: AlbertConfig | str | Path | None,
    head: str | None,
    allow_unused: bool,
    verify: bool,
) -> tuple[PreTrainedModule, TFConversionReport]:
    where = str(ckpt.prefix)
    # our view of the names: without TF-Hub's "module/" scope
    tf_names = {(n[len(_HUB_PREFIX) :] if n.startswith(_HUB_PREFIX) else n): n for n in ckpt.entries}
    skipped = sorted(n for n in tf_names if is_skipped(n))
    names = {n for n in tf_names if not is_skipped(n)}
    layout = detect_layout(names)
    cfg, cfg_source = _resolve_config(ckpt.prefix, config, layout)
    if head == "auto":
        head = _choose_head(names)
    model = _skeleton(ckpt, tf_names, models, head, cfg)
    name = type(model).__name__
    target = model.state_dict()
    bare = not any(k.startswith(keymap.OUR_BACKBONE_PREFIX) for k in target)
    rules = keymap.tf_rules(cfg, layout, head, bare=bare)
    state, used, missing, not_needed = _read_tensors(
        ckpt, tf_names, rules, target, layout, cfg_source, verify
    )
    if layout == "brightmart":  # the identity E->H projection (see the module docstring)
        proj = ("" if bare else keymap.OUR_BACKBONE_PREFIX) + "embeddings.project."
        state[proj + "weight"] = torch.eye(cfg.hidden_size)
        state[proj + "bias"] = torch.zeros(cfg.hidden_size)

    bad = first_non_finite_tensor(state.items())
    if bad is not None:
        raise ConversionError(
            f"{where}: the value for {bad!r} holds NaN or infinite values (a damaged checkpoint)"
        )
    not_loaded = [k for k in target if k not in state]
    if not_loaded:
        detail = f"; absent TF variables: {', '.join(sorted(set(missing))[:8])}" if missing else ""
        raise ConversionError(
            f"{where}: no value for {_first_8(not_loaded)}{detail} "
            f"(layout {layout!r}, {name}; does {cfg_source} describe this checkpoint?)"
        )
    # Variables of other heads (e.g. the pretraining heads left in a fine-tuned checkpoint) are known.
    known = {t for h in keymap.TF_HEADS.values() for rule in keymap.expand(h, cfg) for t in rule.theirs}
    known |= not_needed
    leftover = sorted(n for n in names if n not in used)
    unknown = [tf_names[n] for n in leftover if n not in known]
    if unknown and not allow_unused:
        raise ConversionError(
            f"{where}: variable(s) that match nothing in layout {layout!r}: {_first_8(unknown)}"
            " (pass --allow-unused to convert anyway)"
        )
    report = TFConversionReport(
        ckpt.prefix,
        layout,
        head,
        cfg_source,
        used=sorted(tf_names[n] for n in used),
        skipped=[tf_names[n] for n in skipped],
        unused=[tf_names[n] for n in leftover],
    )
    if skipped:
        logger.info(
            "skipped %d optimizer / bookkeeping variables (adam_m, adam_v, global_step, ...)", len(skipped)
        )
    if report.unused:
        logger.info("not used by %s: %s", name, ", ".join(report.unused))
    model.load_state_dict(state, strict=True, assign=True)
    model.eval()
    logger.info("converted %d TF variables (%s layout) into %s", len(used), layout, name)
    return model, report


def _first_8(names: list[str]) -> str:
    return ", ".join(names[:8]) + (f" and {len(names) - 8} more" if len(names) > 8 else "")


def _resolve_config(
    prefix: Path, config: AlbertConfig | str | Path | None, layout: str
) -> tuple[AlbertConfig, str]:
    """The configuration (given, read from a path, or found next to the checkpoint) fitted to ``layout``,
    and where it came from."""
    if isinstance(config, AlbertConfig):
        return _config_for_layout(config, {}, layout, "<AlbertConfig>"), "<AlbertConfig>"
    cfg_path = Path(config) if config is not None else find_config(prefix)
    if cfg_path is None:
        raise ConfigError(
            f"{prefix}: no albert_config.json (or bert_config.json / config.json) next to the checkpoint; "
            "pass one with --config"
        )
    raw = read_config_file(cfg_path)
    cfg = AlbertConfig.from_dict(raw, source=str(cfg_path))
    return _config_for_layout(cfg, raw, layout, str(cfg_path)), str(cfg_path)


def _skeleton(
    ckpt: TFCheckpoint,
    tf_names: dict[str, str],
    models: Mapping[str | None, type[PreTrainedModule]],
    head: str | None,
    cfg: AlbertConfig,
) -> PreTrainedModule:
    """The caller's class for ``head``, built on the meta device (no memory, no initialization cost)."""
    if head is not None and head not in keymap.TF_HEADS:
        raise ValueError(f"unknown head {head!r}; choose one of {', '.join(keymap.TF_HEADS)} or None")
    if head not in models:
        raise ValueError(f"no model class for head {head!r} among {', '.join(map(str, models))}")
    ctor: dict[str, Any] = {}
    if head == "classification":
        if "output_weights" not in tf_names or is_skipped("output_weights"):
            raise ConversionError(f"{ckpt.prefix}: head 'classification' needs the variable output_weights")
        ctor["num_labels"] = ckpt.entries[tf_names["output_weights"]].shape[0]
    with torch.device("meta"), _NoInit():
        return models[head](cfg, **ctor)


def _read_tensors(
    ckpt: TFCheckpoint,
    tf_names: dict[str, str],
    rules: list[KeyRule],
    target: dict[str, torch.Tensor],
    layout: str,
    cfg_source: str,
    verify: bool,
) -> tuple[dict[str, torch.Tensor], set[str], list[str], set[str]]:
    """Read what ``rules`` name into tensors of ``target``'s shapes. Returns the state, the TF variables
    used, those absent, and those known but not needed by this model."""
    state: dict[str, torch.Tensor] = {}
    used: set[str] = set()
    missing: list[str] = []
    not_needed: set[str] = set()
    for rule in rules:
        if rule.ours not in target:
            not_needed.update(rule.theirs)  # e.g. the pooler: the SQuAD models do not use it
            continue
        want = tuple(target[rule.ours].shape)
        absent = [t for t in rule.theirs if t not in tf_names or is_skipped(t)]
        if absent:
            missing += absent
            continue
        hint = f"{rule.ours} {want}; does {cfg_source} describe this checkpoint?"
        dest = np.empty(want, dtype=np.float32)  # the fused q/k/v parts are read into row blocks of it
        rows = want[0] // len(rule.theirs)
        for k, t in enumerate(rule.theirs):
            part = dest[k * rows : (k + 1) * rows]
            if layout == "brightmart" and rule.ours.endswith("embeddings.word.weight"):
                _brightmart_words(ckpt, tf_names, part, verify)
                used.add(keymap.BRIGHTMART_PROJECTION)
            else:
                _read_part(ckpt, tf_names[t], t.endswith("/kernel"), part, verify, hint)
        state[rule.ours] = torch.from_numpy(dest)
        used.update(rule.theirs)
    return state, used, missing, not_needed


def _brightmart_words(ckpt: TFCheckpoint, tf_names: dict[str, str], out: np.ndarray, verify: bool) -> None:
    """brightmart's factorized lookup ``gather(W, ids) @ P`` as one (V, H) table ``W @ P``, into ``out``."""
    if keymap.BRIGHTMART_PROJECTION not in tf_names:
        raise ConversionError(f"{ckpt.prefix}: brightmart layout without {keymap.BRIGHTMART_PROJECTION}")
    words = ckpt.read(tf_names["bert/embeddings/word_embeddings"], verify=verify)
    proj = ckpt.read(tf_names[keymap.BRIGHTMART_PROJECTION], verify=verify).astype(np.float64)
    if (
        words.ndim != 2
        or proj.ndim != 2
        or (words.shape[0], proj.shape[1]) != out.shape
        or words.shape[1] != proj.shape[0]
    ):
        raise ConversionError(
            f"{ckpt.prefix}: word_embeddings {words.shape} times {keymap.BRIGHTMART_PROJECTION} {proj.shape} is not the "
            f"{out.shape} word table of the config"
        )
    for i in range(0, words.shape[0], 4096):  # in row blocks: no (V, H) float64 temporary
        out[i : i + 4096] = words[i : i + 4096].astype(np.float64) @ proj


def convert_tf_checkpoint(
    path: str | Path,
    output: str | Path,
    models: Mapping[str | None, type[PreTrainedModule]],
    *,
    config: AlbertConfig | str | Path | None = None,
    tokenizer: str | Path | None = None,
    head: str | None = "auto",
    allow_unused: bool = False,
    overwrite: bool = False,
) -> TFConversionReport:
    """Convert a TF1 checkpoint into a model directory (config.json + model.safetensors + tokenizer files)
    that our package and Hugging Face transformers both load.

    Args:
        path, models, config, head, allow_unused: as for `load_tf_checkpoint`.
        output: the model directory, written as a whole (`albert_lm._io.atomic_write_dir`): a failed
            conversion leaves no directory, or the old one as it was.
        tokenizer: the vocabulary (a SentencePiece ``.model`` or a WordPiece ``vocab.txt``); by default
            the one next to the checkpoint.
        overwrite: replace an existing non-empty ``output``; without it that is an error, raised before
            anything is read.

    Raises:
        FileExistsError: ``output`` exists, is not an empty directory, and ``overwrite`` is not set.
        ConversionError, CheckpointFormatError, ConfigError: as for `load_tf_checkpoint`.
    """
    output = Path(output)
    recover_dir(output)  # an earlier write killed between its renames: what is there, before the check
    if output.exists() and not overwrite and (not output.is_dir() or any(output.iterdir())):
        raise FileExistsError(
            f"{output}: the output exists and is not an empty directory (pass --overwrite to replace it)"
        )
    model, report = load_tf_checkpoint(path, models, config=config, head=head, allow_unused=allow_unused)
    vocab = Path(tokenizer) if tokenizer is not None else find_vocab(report.prefix)
    tok = None
    if vocab is None:
        logger.warning(
            "no vocabulary (*.model / vocab.txt) next to %s: the model directory has no tokenizer",
            report.prefix,
        )
    else:
        from albert_lm.tokenizer import load_tokenizer

        tok = load_tokenizer(vocab)
        if tok.vocab_size != model.config.vocab_size:
            logger.warning(
                "%s has %d tokens but the model's vocab_size is %d",
                vocab,
                tok.vocab_size,
                model.config.vocab_size,
            )
    output.parent.mkdir(parents=True, exist_ok=True)
    atomic_write_dir(output, lambda tmp: model.save_pretrained(tmp, tokenizer=tok))
    logger.info("wrote %s", output)
    return report
