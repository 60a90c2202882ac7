"""Model directories: the one currency between the steps of the workflow, readable by Hugging Face too.

A model directory holds ``config.json`` + ``model.safetensors`` (+ tokenizer files). We write Hugging
Face's tensor names (``albert.*`` for ALBERT, ``bert.*`` for BERT) so that
``transformers.AlbertForPreTraining.from_pretrained(dir)`` reads what we write, and we read what
transformers writes (AlbertModel / ForPreTraining / ForMaskedLM / ForSequenceClassification / ...,
BertModel / ForPreTraining / ForMaskedLM / ...). Partial sharing (attention-only or FFN-only) has no
Hugging Face layout and is written under our own names.

Safetensors first; a ``pytorch_model.bin`` is read only with ``torch.load(weights_only=True)``.
"""

from __future__ import annotations

import json
import logging
from pathlib import Path
from typing import Any, TypeVar

import torch

from albert_lm._hub import resolve_model_dir
from albert_lm._io import atomic_write, atomic_write_text
from albert_lm.config import (
    MODEL_TYPE_KEY,
    UNLOADABLE_MODEL_TYPE,
    AlbertConfig,
    ConfigError,
    read_config_file,
)
from albert_lm.convert import keymap
from albert_lm.convert.keymap import KeyRule
from albert_lm.model import HEADS, PreTrainedModule, head_of
from albert_lm.optim._checks import first_non_finite_tensor

logger = logging.getLogger(__name__)

M = TypeVar("M", bound=PreTrainedModule)

CONFIG_NAME = "config.json"
WEIGHTS_NAME = "model.safetensors"
WEIGHTS_INDEX_NAME = "model.safetensors.index.json"
PICKLE_NAME = "pytorch_model.bin"
NATIVE_FORMAT = "albert-native"
HEAD_KEY = "albert_head"  # config.json: our head name (albert_lm.model.HEADS)


class CheckpointError(ValueError):
    """A checkpoint that does not fit the model; the message names the file and tensor."""


# ------------------------------------------------------------------------------------------------ reading
def read_state_dict(path: Path) -> tuple[dict[str, torch.Tensor], dict[str, str], Path]:
    """Tensors of a model directory (safetensors, sharded safetensors, or a weights-only pickle)."""
    from safetensors import SafetensorError
    from safetensors.torch import load_file, safe_open

    single, index, pickle = path / WEIGHTS_NAME, path / WEIGHTS_INDEX_NAME, path / PICKLE_NAME
    try:
        if single.exists():
            with safe_open(str(single), framework="pt") as f:
                meta = f.metadata() or {}
            return load_file(str(single)), meta, single
        if index.exists():
            shards = sorted(set(json.loads(index.read_text())["weight_map"].values()))
            state: dict[str, torch.Tensor] = {}
            for shard in shards:
                state.update(load_file(str(path / shard)))
            return state, {}, index
    except (SafetensorError, OSError, ValueError, KeyError) as e:
        bad = single if single.exists() else index
        damage = _safetensors_damage(single) if bad == single else ""
        raise CheckpointError(f"{bad}: cannot read weights: {e}{damage}") from None
    if pickle.exists():
        try:
            obj = torch.load(pickle, map_location="cpu", weights_only=True)
        except Exception as e:  # noqa: BLE001 - any unpickling failure is a bad file
            raise CheckpointError(f"{pickle}: cannot read weights: {_refusal(e)}") from None
        if not isinstance(obj, dict) or not all(isinstance(v, torch.Tensor) for v in obj.values()):
            raise CheckpointError(f"{pickle}: expected a dict of tensors")
        return obj, {}, pickle
    raise CheckpointError(f"{path}: no {WEIGHTS_NAME}, {WEIGHTS_INDEX_NAME} or {PICKLE_NAME} found")


def check_finite_weights(state: dict[str, torch.Tensor], source: Path | str, doing: str = "") -> None:
    """Refuse weights holding NaN or infinity, naming ``source`` (the file) and the first bad tensor.

    The one check of every model directory read (`load_model_dir`: predict, evaluate, serve, export,
    ``finetune --model``, ``pretrain --init``) and written (`save_model_dir`: ``convert``, fine-tuning and
    pretraining outputs): a NaN weight gives NaN probabilities and argmax class 0, with exit 0.

    Raises:
        CheckpointError: ``source: tensor 'name' holds NaN or infinite values``.
    """
    bad = first_non_finite_tensor(state.items())
    if bad is not None:
        raise CheckpointError(
            f"{doing}{source}: tensor {bad!r} holds NaN or infinite values (the weights are broken: a run "
            "that diverged, or a damaged file)"
        )


def _refusal(error: BaseException) -> str:
    """Why torch's weights-only unpickler refused a file, without torch's advice: its message suggests
    turning ``weights_only`` off "if you trust the source", which runs whatever a crafted file asks for."""
    import pickle as pickle_module
    import re

    if isinstance(error, pickle_module.UnpicklingError):
        found = re.search(r"GLOBAL (\S+)", str(error))
        asks = f"it asks to call or build {found.group(1)}" if found else "it holds more than tensors"
        return (
            f"refused to unpickle (weights_only=True): {asks}, but a weights file holds only tensors. Do "
            "not load it with full pickle: that runs whatever the file asks for"
        )
    first = str(error).strip().splitlines()[0] if str(error).strip() else type(error).__name__
    return first  # an unreadable file (truncated zip, not a torch file): torch's first line says which


def _safetensors_damage(path: Path) -> str:
    """Why safetensors refuses ``path``, where the file itself tells: the tensors that its header places
    beyond the end of a truncated file (empty when the header is unreadable too)."""
    try:
        size = path.stat().st_size
        with open(path, "rb") as f:
            header_len = int.from_bytes(f.read(8), "little")  # safetensors: u64 LE header size, JSON header
            if not 0 < header_len <= size - 8:
                return ""
            header = json.loads(f.read(header_len))
        data_len = size - 8 - header_len
        ends = {k: v["data_offsets"] for k, v in header.items() if k != "__metadata__"}  # [begin, end)
        cut = [k for k in sorted(ends, key=lambda k: ends[k][0]) if ends[k][1] > data_len]
    except (OSError, ValueError, KeyError, TypeError, IndexError, AttributeError):
        return ""
    if not cut:
        return ""
    return f" (truncated: {size} bytes; tensor {_first_8(cut)} past the end of the file)"


def _first_8(names: list[str]) -> str:
    return ", ".join(names[:8]) + (f" and {len(names) - 8} more" if len(names) > 8 else "")


def _read_config(path: Path) -> tuple[AlbertConfig, dict[str, Any]]:
    if not path.is_dir():
        raise FileNotFoundError(f"model directory not found: {path}")
    cfg_path = path / CONFIG_NAME
    if not cfg_path.exists():
        raise ConfigError(f"{path}: no {CONFIG_NAME} (not a model directory)")
    raw = read_config_file(cfg_path)
    return AlbertConfig.from_dict(raw, source=str(cfg_path)), raw


def _is_native(state: dict[str, torch.Tensor], meta: dict[str, str]) -> bool:
    return meta.get("albert_format") == NATIVE_FORMAT or any(
        k.startswith(("encoder.attention.", "albert.encoder.attention.")) for k in state
    )


def _all_head_names(config: AlbertConfig) -> set[str]:
    """Every foreign name that any head (or the pooler) may have: present but unused is not an error."""
    names: set[str] = set()
    for table in keymap.HF_HEADS[config.model_type].values():
        for rule in keymap.expand(table, config):
            names.update(rule.theirs)
    return names


def load_model_dir(
    cls: type[M],
    path: Path,
    *,
    device: str | torch.device | None = None,
    dtype: torch.dtype | None = None,
    require_head: bool = False,
    revision: str | None = None,
    **kwargs: Any,
) -> M:
    """Build ``cls`` from a model directory (see module docstring), `PreTrainedModule.from_pretrained`.

    Args:
        cls: the model class to build.
        path: the model directory, or a Hugging Face Hub id (``albert/albert-base-v2``, `albert_lm._hub`).
        revision: the Hub revision of an id (branch, tag or commit).
        device, dtype: where and in which precision to put the model.
        require_head: every tensor of ``cls`` must be in the checkpoint, the head's (and the pooler's)
            included: a model directory without trained head weights is an error naming them instead
            of a freshly initialized head (for prediction and evaluation; fine-tuning leaves it False).
        **kwargs: constructor arguments of ``cls`` (its ``extra_config_keys``) or AlbertConfig fields
            to override.

    Raises:
        FileNotFoundError: no such directory.
        ConfigError: no or a bad ``config.json``.
        CheckpointError: unreadable weights; a missing, unexpected or mis-shaped tensor (named).
    """
    path = resolve_model_dir(path, revision)
    config, raw = _read_config(path)
    field_names = set(config.to_dict())
    overrides = {k: v for k, v in kwargs.items() if k in field_names}
    ctor = {k: v for k, v in kwargs.items() if k not in field_names}
    unknown = set(ctor) - set(cls.extra_config_keys)
    if unknown:
        raise TypeError(f"{cls.__name__}.from_pretrained: unknown argument(s) {sorted(unknown)}")
    if overrides:
        config = config.replace(**overrides)
    for key in cls.extra_config_keys:
        if key not in ctor and key in raw:
            ctor[key] = raw[key]
        elif key == "num_labels" and key not in ctor and "id2label" in raw:
            ctor[key] = len(raw["id2label"])
    model = cls(config, **ctor)
    state, meta, source = read_state_dict(path)
    check_finite_weights(state, source)
    target = model.state_dict()
    if _is_native(state, meta):
        new_state = _load_native(state, target, source)
    else:
        new_state = _load_hf(state, target, config, head_of(cls), source)
    _report_missing(target, new_state, source, cls.__name__ if require_head else None)
    model.load_state_dict(new_state, strict=False)
    logger.info("loaded %s from %s (%d tensors)", cls.__name__, path, len(new_state))
    if device is not None or dtype is not None:
        model.to(device=device, dtype=dtype)
    return model


def model_class(raw: dict[str, Any], source: str = CONFIG_NAME) -> type[PreTrainedModule]:
    """The class that a ``config.json`` names: our head name (``albert_head``, which we write), else
    Hugging Face's ``architectures`` (AlbertForMaskedLM, BertModel, ...), else the bare encoder (a
    released ``albert_config.json`` names none)."""
    if HEAD_KEY in raw:
        head = raw[HEAD_KEY]
        if head not in HEADS:
            known = ", ".join(str(h) for h in HEADS)
            raise ConfigError(f"{source}: {HEAD_KEY} {head!r} is none of the heads ({known})")
        return HEADS[head]
    architectures = raw.get("architectures") or []
    if not architectures:
        return HEADS[None]
    try:
        return HEADS[keymap.head_of_architecture(architectures[0])]
    except ConfigError as e:
        raise ConfigError(f"{source}: {e}") from None


def load_model(
    path: str | Path,
    *,
    device: str | torch.device | None = None,
    dtype: torch.dtype | None = None,
    require_head: bool = False,
    revision: str | None = None,
    **kwargs: Any,
) -> PreTrainedModule:
    """Load a model directory (or a Hub id) as the class its ``config.json`` names (see `model_class`),
    e.g. a fine-tuned classifier as `AlbertForSequenceClassification`. Arguments as for `load_model_dir`."""
    path = resolve_model_dir(path, revision)
    _, raw = _read_config(path)
    cls = model_class(raw, str(path / CONFIG_NAME))
    return load_model_dir(cls, path, device=device, dtype=dtype, require_head=require_head, **kwargs)


def _check_tensor(
    foreign: str, got: torch.Tensor, want: tuple[int, ...], needed_by: str, source: Path
) -> None:
    """``got`` (the checkpoint's ``foreign``) must have the shape ``want`` that ``needed_by`` (our tensor,
    in words) needs, and be a floating-point tensor (our parameters all are; an integer tensor would be
    silently cast)."""
    if tuple(got.shape) != want:
        raise CheckpointError(
            f"{source}: tensor {foreign!r} has shape {tuple(got.shape)}, but {needed_by} "
            f"needs {want} (config.json and weights disagree?)"
        )
    if not got.is_floating_point():
        raise CheckpointError(f"{source}: tensor {foreign!r} is {got.dtype}, not a floating-point tensor")


def _load_native(
    state: dict[str, torch.Tensor], target: dict[str, torch.Tensor], source: Path
) -> dict[str, torch.Tensor]:
    out: dict[str, torch.Tensor] = {}
    prefixed = any(k.startswith(keymap.OUR_BACKBONE_PREFIX) for k in target)
    for key, tensor in state.items():
        name = key
        if (
            prefixed
            and not key.startswith(keymap.OUR_BACKBONE_PREFIX)
            and keymap.OUR_BACKBONE_PREFIX + key in target
        ):
            name = keymap.OUR_BACKBONE_PREFIX + key
        elif not prefixed and key.startswith(keymap.OUR_BACKBONE_PREFIX):
            name = key[len(keymap.OUR_BACKBONE_PREFIX) :]
        if name in target:
            _check_tensor(key, tensor, tuple(target[name].shape), f"the model's {name!r}", source)
            out[name] = tensor
        else:
            logger.info("%s: tensor %r is not used by this model", source, key)
    return out


def _report_missing(
    target: dict[str, torch.Tensor],
    loaded: dict[str, torch.Tensor],
    source: Path,
    require_head_of: str | None,
) -> None:
    """Missing encoder tensors are an error; a missing head (or pooler) is freshly initialized and logged,
    or an error when ``require_head_of`` names the model class (``load_model_dir(require_head=True)``)."""
    missing = [k for k in target if k not in loaded]
    backbone = ("embeddings.", "encoder.", "albert.embeddings.", "albert.encoder.")
    backbone_missing = [k for k in missing if k.startswith(backbone)]
    if backbone_missing:
        raise CheckpointError(f"{source}: no tensor for {_first_8(backbone_missing)}")
    if missing and require_head_of is not None:
        raise CheckpointError(
            f"{source}: no tensor for {_first_8(missing)}: the weights of the {require_head_of} head are "
            "not in the checkpoint (not a model fine-tuned for this task?)"
        )
    if missing:
        logger.info("%s: %s not in the checkpoint: freshly initialized", source, ", ".join(missing))


def _load_hf(
    state: dict[str, torch.Tensor],
    target: dict[str, torch.Tensor],
    config: AlbertConfig,
    head: str | None,
    source: Path,
) -> dict[str, torch.Tensor]:
    hf_prefix = keymap.HF_BACKBONE_PREFIX[config.model_type]
    # Normalize the foreign names to a bare backbone: HF writes "albert.*" for task models, bare for AlbertModel.
    foreign = {(k[len(hf_prefix) :] if k.startswith(hf_prefix) else k): k for k in state}
    prefixed = any(k.startswith(keymap.OUR_BACKBONE_PREFIX) for k in target)
    rules: list[KeyRule] = keymap.hf_rules(config, None, bare=True)
    if prefixed:
        rules = [KeyRule(keymap.OUR_BACKBONE_PREFIX + r.ours, r.theirs) for r in rules]
    if head is not None:
        rules += keymap.hf_head_rules(config, head)
    out: dict[str, torch.Tensor] = {}
    used: set[str] = set()
    for rule in rules:
        if rule.ours not in target or not all(t in foreign for t in rule.theirs):
            continue  # not in this model (e.g. no pooler), or absent: judged by _report_missing
        want = tuple(target[rule.ours].shape)
        n = len(rule.theirs)
        needed_by = f"the model's {rule.ours!r}"
        if n > 1:  # fused parts (q, k, v): each a block of want[0] // n rows, checked before concatenating
            needed_by = f"as one of the {n} row blocks of {needed_by} {want}, it"
            want = (want[0] // n, *want[1:])
        for t in rule.theirs:
            _check_tensor(foreign[t], state[foreign[t]], want, needed_by, source)
        parts = [state[foreign[t]] for t in rule.theirs]
        out[rule.ours] = parts[0] if len(parts) == 1 else torch.cat(parts, dim=0)
        used.update(rule.theirs)
    leftover = [
        k
        for k in foreign
        if k not in used and k not in keymap.HF_TIED and not k.endswith(keymap.HF_BUFFERS_SUFFIXES)
    ]
    head_names = _all_head_names(config) | {r for r in foreign if r.startswith("pooler.")}
    unexpected = [foreign[k] for k in leftover if k not in head_names]
    if unexpected:
        raise CheckpointError(
            f"{source}: unexpected tensor(s) {_first_8(unexpected)}"
            " (a different architecture, or config.json does not match the weights)"
        )
    unused = [foreign[k] for k in leftover if k in head_names]
    if unused:
        logger.info("%s: tensor(s) not used by this model: %s", source, ", ".join(unused))
    return out


# ------------------------------------------------------------------------------------------------ writing
def to_hf_state_dict(model: PreTrainedModule) -> dict[str, torch.Tensor]:
    """Our state dict under Hugging Face names (requires sharing 'all' or 'none')."""
    config: AlbertConfig = model.config
    ours = model.state_dict()
    prefixed = any(k.startswith(keymap.OUR_BACKBONE_PREFIX) for k in ours)
    rules = keymap.hf_rules(config, head_of(model), bare=not prefixed)
    out: dict[str, torch.Tensor] = {}
    for rule in rules:
        if rule.ours not in ours:
            continue
        tensor = ours[rule.ours].detach().cpu()
        for name, part in zip(rule.theirs, tensor.chunk(len(rule.theirs), dim=0)):
            out[name] = part.contiguous().clone() if len(rule.theirs) > 1 else part.contiguous()
    missing = set(ours) - {r.ours for r in rules}
    if missing:
        raise CheckpointError(f"no Hugging Face name for tensor(s) {sorted(missing)}")
    return out


def transformers_cannot_load(config: AlbertConfig, head: str | None) -> str | None:
    """Why transformers cannot load a model of this config and head whole (None: it can): a head with no
    transformers class (the SQuAD 2.0 verifier), or a sharing layout with no Hugging Face names."""
    if head in keymap.HF_WITHOUT_CLASS:
        return f"transformers has no class for the {head} head"
    if not keymap.has_foreign_layout(config):
        return (
            f"sharing={config.sharing!r} has no Hugging Face layout; the weights are under albert's own names"
        )
    return None


def save_model_dir(model: PreTrainedModule, path: Path, tokenizer: Any = None) -> None:
    """Write config.json + model.safetensors (+ tokenizer files); each file atomically."""
    from safetensors.torch import save_file

    config: AlbertConfig = model.config
    head = head_of(model)
    path.mkdir(parents=True, exist_ok=True)
    unloadable = transformers_cannot_load(config, head)
    if unloadable:
        logger.warning(
            "%s: transformers cannot load this model (%s): its config.json names model_type %r, which "
            "transformers refuses instead of filling the model with random weights; albert_lm loads it",
            path, unloadable, UNLOADABLE_MODEL_TYPE,
        )  # fmt: skip
    if keymap.has_foreign_layout(config):
        state = to_hf_state_dict(model)
        meta = {"format": "pt"}
    else:
        state = {k: v.detach().cpu().contiguous() for k, v in model.state_dict().items()}
        meta = {"format": "pt", "albert_format": NATIVE_FORMAT}
    check_finite_weights(state, path / WEIGHTS_NAME, doing="not writing ")
    # Tied tensors are stored once (the MLM decoder is the word embedding matrix).
    atomic_write(path / WEIGHTS_NAME, lambda tmp: save_file(state, tmp, metadata=meta))

    cfg = config.to_hf_dict()
    cfg["architectures"] = [keymap.hf_architecture(config.model_type, head)]
    cfg[HEAD_KEY] = head  # names the class where the architecture cannot (the SQuAD 2.0 head)
    cfg["model_type"] = config.model_type
    if unloadable:  # a type transformers refuses; ours beside it (AlbertConfig.from_dict reads both)
        cfg.update(model_type=UNLOADABLE_MODEL_TYPE, architectures=[type(model).__name__])
        cfg[MODEL_TYPE_KEY] = config.model_type
    cfg.update(model.extra_config())
    if "num_labels" in cfg:
        n = int(cfg["num_labels"])
        labels = getattr(model, "label_names", None) or [f"LABEL_{i}" for i in range(n)]
        cfg["id2label"] = {str(i): name for i, name in enumerate(labels)}
        cfg["label2id"] = {name: i for i, name in enumerate(labels)}
    atomic_write_text(path / CONFIG_NAME, json.dumps(cfg, indent=2, sort_keys=True) + "\n")
    if tokenizer is not None:
        tokenizer.save_pretrained(path)
