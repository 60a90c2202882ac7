"""Model configuration and named presets.

`AlbertConfig` uses the field names of the released ``albert_config.json`` (google-research/albert), so a
released config loads as is. Two fields are ours:

* ``sharing``: which sub-layers the layers of a group share (paper Table 4: all / attention / ffn / none);
* ``model_type``: ``"albert"`` or ``"bert"``; decides only the checkpoint naming and the meaning of the
  sentence-pair head (SOP for ALBERT, NSP for BERT). A BERT is an ALBERT with no sharing and E = H.

Activation names are explicit: ``gelu_tanh`` is the tanh approximation that the original TF code calls
``gelu`` (google-research/albert modeling.py: ``0.5 * (1.0 + tf.tanh(sqrt(2/pi) * (x + 0.044715 x^3)))``);
``gelu`` is the exact erf form (what PyTorch and Hugging Face BERT call ``gelu``).
"""

from __future__ import annotations

import dataclasses
import json
import logging
from collections.abc import Sequence
from dataclasses import dataclass, fields
from pathlib import Path
from typing import Any

from albert_lm._io import atomic_write_text

logger = logging.getLogger(__name__)

SHARING_MODES: tuple[str, ...] = ("all", "attention", "ffn", "none")
ACTIVATIONS: tuple[str, ...] = ("gelu_tanh", "gelu", "relu", "tanh", "silu")

# Activation names as other configs spell them -> ours. The original TF code's "gelu" is the tanh form;
# Hugging Face's "gelu" is the exact form and its "gelu_new" / "gelu_pytorch_tanh" are the tanh form.
_ORIGINAL_ACT = {"gelu": "gelu_tanh", "relu": "relu", "tanh": "tanh", "swish": "silu", "silu": "silu"}
_HF_ACT = {
    "gelu": "gelu",
    "gelu_new": "gelu_tanh",
    "gelu_pytorch_tanh": "gelu_tanh",
    "gelu_fast": "gelu_tanh",
    "relu": "relu",
    "tanh": "tanh",
    "silu": "silu",
    "swish": "silu",
}
_TO_HF_ACT = {"gelu_tanh": "gelu_new", "gelu": "gelu", "relu": "relu", "tanh": "tanh", "silu": "silu"}


class ConfigError(ValueError):
    """A configuration that cannot work; the message names the field (and the file or flag).

    The one configuration error of the package (the model's config, the training settings of pretraining
    and fine-tuning). Built from a message, or from ``(field, reason)`` pairs, one per bad field, kept in
    ``problems`` and joined into the message as ``field: reason; field: reason``.
    """

    def __init__(self, message: str | Sequence[tuple[str, str]]) -> None:
        if isinstance(message, str):
            self.problems: list[tuple[str, str]] = []
            super().__init__(message)
        else:
            self.problems = [(str(name), str(reason)) for name, reason in message]
            super().__init__("; ".join(f"{name}: {reason}" for name, reason in self.problems))


class UnknownPresetError(ConfigError, KeyError):
    """A preset name that `PRESETS` lacks: a failed lookup (so a KeyError, as it always was) and a
    configuration error (so the CLI prints its message, which lists the presets, as one line)."""

    def __str__(self) -> str:  # KeyError's own shows the repr, quotes and all
        return str(self.args[0]) if self.args else ""


def read_config_file(path: str | Path) -> dict[str, Any]:
    """The JSON object of a configuration file (``config.json``, ``albert_config.json``).

    Raises:
        FileNotFoundError: no such file.
        ConfigError: not UTF-8 JSON, or not an object; the message names the file (and line).
    """
    path = Path(path)
    try:
        raw = json.loads(path.read_text(encoding="utf-8"))
    except FileNotFoundError:
        raise FileNotFoundError(f"config file not found: {path}") from None
    except UnicodeDecodeError as e:
        raise ConfigError(f"{path}: not UTF-8 text (byte {e.start})") from None
    except json.JSONDecodeError as e:
        raise ConfigError(f"{path}: not valid JSON (line {e.lineno}, column {e.colno}: {e.msg})") from None
    if not isinstance(raw, dict):
        raise ConfigError(f"{path}: expected a JSON object, got {type(raw).__name__}")
    return raw


# Sizes beyond any model this library can run: refused by `AlbertConfig.validate` before anything is
# allocated (a config.json asking for 10^6 layers hangs the first forward pass; 10^9 layers or an
# intermediate_size of 10^12 exhausts memory in the constructor).
MAX_FIELD: dict[str, int] = {
    "vocab_size": 1 << 24,  # 16.8M entries; the largest released vocabularies have ~250k
    "embedding_size": 1 << 17,
    "hidden_size": 1 << 17,  # 131,072; ALBERT-xxlarge has 4,096
    "num_hidden_layers": 1000,  # shared layers cost compute, not parameters: bounded apart
    "num_hidden_groups": 1000,
    "inner_group_num": 1000,
    "num_attention_heads": 1 << 12,
    "intermediate_size": 1 << 20,  # 1M; ALBERT-xxlarge has 16,384
    "max_position_embeddings": 1 << 20,
    "type_vocab_size": 1 << 16,
}
MAX_PARAMETERS = 20_000_000_000
"""The most parameters a config may describe (`AlbertConfig.approx_parameters`): 80 GB in fp32."""


@dataclass(frozen=True)
class AlbertConfig:
    """ALBERT / BERT architecture. Field names follow the released ``albert_config.json``."""

    vocab_size: int = 30000
    """Vocabulary size V (the released SentencePiece model has 30000 pieces)."""
    embedding_size: int = 128
    """Factorized embedding size E (paper Sec. 3.1); E == hidden_size means no E->H projection for BERT."""
    hidden_size: int = 768
    """Hidden size H."""
    num_hidden_layers: int = 12
    """Depth L."""
    num_hidden_groups: int = 1
    """Number of parameter groups across depth; layer l uses group int(l / L * num_hidden_groups)."""
    inner_group_num: int = 1
    """Layers inside one group (run one after the other each time the group is applied)."""
    num_attention_heads: int = 12
    intermediate_size: int = 3072
    """Feed-forward inner size (4H in every paper configuration)."""
    hidden_act: str = "gelu_tanh"
    """One of gelu_tanh (the original TF `gelu`), gelu (exact erf), relu, tanh, silu."""
    hidden_dropout_prob: float = 0.0
    attention_probs_dropout_prob: float = 0.0
    max_position_embeddings: int = 512
    type_vocab_size: int = 2
    initializer_range: float = 0.02
    """Std of the truncated normal initializer (original: truncated at 2 sigma)."""
    layer_norm_eps: float = 1e-12
    """LayerNorm epsilon (original TF code and Hugging Face: 1e-12)."""
    sharing: str = "all"
    """Which sub-layers the layers of a group share: all | attention | ffn | none (paper Table 4)."""
    model_type: str = "albert"
    """albert (sentence-order prediction head) or bert (next-sentence prediction head)."""
    embedding_projection: bool | None = None
    """Whether there is an E->H projection; None: only when E != H (the original code). Hugging Face
    ALBERT checkpoints always have one."""
    classifier_dropout_prob: float = 0.1
    """Dropout before classification heads (original run_classifier.py: 0.1)."""

    def __post_init__(self) -> None:
        self.validate()

    # ------------------------------------------------------------------ validation and derived values
    def validate(self) -> None:
        def need(cond: bool, name: str, msg: str) -> None:
            if not cond:
                raise ConfigError(f"AlbertConfig.{name}: {msg} (got {getattr(self, name)!r})")

        for name in (
            "vocab_size",
            "embedding_size",
            "hidden_size",
            "num_hidden_layers",
            "num_hidden_groups",
            "inner_group_num",
            "num_attention_heads",
            "intermediate_size",
            "max_position_embeddings",
            "type_vocab_size",
        ):
            value = getattr(self, name)
            need(
                isinstance(value, int) and not isinstance(value, bool) and value > 0,
                name,
                "must be a positive integer",
            )
            need(value <= MAX_FIELD[name], name, f"must be at most {MAX_FIELD[name]:,}")
        need(
            self.hidden_size % self.num_attention_heads == 0,
            "hidden_size",
            f"must be divisible by num_attention_heads={self.num_attention_heads}",
        )
        need(
            self.num_hidden_groups <= self.num_hidden_layers,
            "num_hidden_groups",
            f"cannot exceed num_hidden_layers={self.num_hidden_layers}",
        )
        parts = self._parameter_parts()
        need(
            sum(parts.values()) <= MAX_PARAMETERS,
            max(parts, key=lambda k: parts[k]),  # the field whose part is the largest
            f"with hidden_size={self.hidden_size}, intermediate_size={self.intermediate_size}, "
            f"vocab_size={self.vocab_size} and sharing={self.sharing!r} the model would have about "
            f"{self.approx_parameters():.3g} parameters, more than {MAX_PARAMETERS:.3g}",
        )
        need(self.hidden_act in ACTIVATIONS, "hidden_act", f"must be one of {ACTIVATIONS}")
        need(self.sharing in SHARING_MODES, "sharing", f"must be one of {SHARING_MODES}")
        need(self.model_type in ("albert", "bert"), "model_type", "must be 'albert' or 'bert'")
        for name in ("hidden_dropout_prob", "attention_probs_dropout_prob", "classifier_dropout_prob"):
            need(0.0 <= getattr(self, name) < 1.0, name, "must be in [0, 1)")
        need(self.initializer_range > 0, "initializer_range", "must be positive")
        need(self.layer_norm_eps > 0, "layer_norm_eps", "must be positive")
        if self.embedding_projection is False:
            need(
                self.embedding_size == self.hidden_size,
                "embedding_projection",
                f"can only be False when embedding_size == hidden_size ({self.embedding_size} != {self.hidden_size})",
            )

    def approx_parameters(self) -> int:
        """The encoder's parameter count from the sizes alone (embeddings, E->H projection, attention and
        feed-forward blocks, pooler), without building it: the bound of `validate` (`MAX_PARAMETERS`)."""
        return sum(self._parameter_parts().values())

    def _parameter_parts(self) -> dict[str, int]:
        """`approx_parameters` by the field that sizes each part (the one an error names)."""
        e, h, i = self.embedding_size, self.hidden_size, self.intermediate_size
        projection = (e + 1) * h if e != h else 0
        return {
            "vocab_size": (self.vocab_size + self.max_position_embeddings + self.type_vocab_size + 2) * e,
            "hidden_size": self.num_attention_blocks * (4 * (h * h + h) + 2 * h) + h * h + h + projection,
            "intermediate_size": self.num_ffn_blocks * (2 * h * i + i + 3 * h),
        }

    @property
    def has_projection(self) -> bool:
        """True when the embeddings are projected from E to H."""
        if self.embedding_projection is None:
            return self.embedding_size != self.hidden_size
        return self.embedding_projection

    @property
    def head_dim(self) -> int:
        return self.hidden_size // self.num_attention_heads

    def group_of_layer(self, layer: int) -> int:
        """Group used at depth ``layer`` (original modeling.py: ``int(layer_idx / num_hidden_layers *
        num_hidden_groups)``)."""
        return int(layer / self.num_hidden_layers * self.num_hidden_groups)

    # The sharing -> blocks rule (paper Table 4). The encoder keeps its attention and feed-forward blocks in
    # two flat lists; a sub-layer that the layers of a group share has one block per (group, inner layer),
    # one that is not shared has one block per (layer, inner layer):
    #     all: G*I attention + G*I FFN    attention: G*I + L*I    ffn: L*I + G*I    none: L*I + L*I
    @property
    def shares_attention(self) -> bool:
        """True when the layers of a group share their attention sub-layers (sharing all | attention)."""
        return self.sharing in ("all", "attention")

    @property
    def shares_ffn(self) -> bool:
        """True when the layers of a group share their feed-forward sub-layers (sharing all | ffn)."""
        return self.sharing in ("all", "ffn")

    @property
    def num_attention_blocks(self) -> int:
        """Distinct attention blocks of the encoder: G * I when shared, else L * I."""
        return self._num_blocks(self.shares_attention)

    @property
    def num_ffn_blocks(self) -> int:
        """Distinct feed-forward blocks of the encoder: G * I when shared, else L * I."""
        return self._num_blocks(self.shares_ffn)

    def attention_block(self, layer: int, inner: int) -> int:
        """Index of the attention block that inner layer ``inner`` of depth ``layer`` uses."""
        return self._block(self.shares_attention, layer, inner)

    def ffn_block(self, layer: int, inner: int) -> int:
        """Index of the feed-forward block that inner layer ``inner`` of depth ``layer`` uses."""
        return self._block(self.shares_ffn, layer, inner)

    def _num_blocks(self, shared: bool) -> int:
        outer = self.num_hidden_groups if shared else self.num_hidden_layers
        return outer * self.inner_group_num

    def _block(self, shared: bool, layer: int, inner: int) -> int:
        outer = self.group_of_layer(layer) if shared else layer
        return outer * self.inner_group_num + inner

    def replace(self, **changes: Any) -> AlbertConfig:
        return dataclasses.replace(self, **changes)

    # ------------------------------------------------------------------ presets
    @classmethod
    def from_preset(cls, name: str, **overrides: Any) -> AlbertConfig:
        """A named preset (see `PRESETS`), with fields overridden, e.g.
        ``AlbertConfig.from_preset("albert-base-v2", embedding_size=768, sharing="ffn")``."""
        if name not in PRESETS:
            raise UnknownPresetError(f"unknown preset {name!r}; known presets: {', '.join(PRESETS)}")
        base = PRESETS[name]
        unknown = set(overrides) - {f.name for f in fields(cls)}
        if unknown:
            raise ConfigError(
                f"unknown AlbertConfig field(s) {sorted(unknown)} in overrides of preset {name!r}"
            )
        return dataclasses.replace(base, **overrides)

    # ------------------------------------------------------------------ (de)serialisation
    def to_dict(self) -> dict[str, Any]:
        return dataclasses.asdict(self)

    def to_hf_dict(self) -> dict[str, Any]:
        """config.json in Hugging Face's layout (AlbertConfig or BertConfig), with our fields kept too."""
        d = self.to_dict()
        d["hidden_act"] = _TO_HF_ACT[self.hidden_act]
        d["albert_hidden_act"] = self.hidden_act  # the unambiguous name, read back first
        if self.model_type == "albert":
            d["architectures"] = ["AlbertForPreTraining"]
            if self.sharing == "none":
                # Hugging Face expresses "no sharing" as one group per layer; the groups the user asked for
                # are kept under our own key and read back first by `from_dict`.
                d["num_hidden_groups"] = self.num_hidden_layers
                d["albert_num_hidden_groups"] = self.num_hidden_groups
        else:
            d["architectures"] = ["BertForPreTraining"]
            d["classifier_dropout"] = None
        d["pad_token_id"] = 0
        d.pop("embedding_projection")
        d["embedding_projection"] = self.has_projection
        return d

    @classmethod
    def from_dict(cls, raw: dict[str, Any], source: str = "<dict>") -> AlbertConfig:
        """Read a released ``albert_config.json``, a Hugging Face ALBERT or BERT ``config.json``, or ours."""
        d = dict(raw)
        if d.get("model_type") == UNLOADABLE_MODEL_TYPE:  # ours, kept from transformers (convert.hf)
            d["model_type"] = d.get(MODEL_TYPE_KEY, "albert")
        model_type = d.get("model_type")
        kwargs: dict[str, Any] = {}
        names = {f.name for f in fields(cls)}

        act = d.get("albert_hidden_act")
        if act is None:
            raw_act = d.get("hidden_act", "gelu")
            table = _HF_ACT if model_type in ("albert", "bert") else _ORIGINAL_ACT
            if raw_act not in table:
                raise ConfigError(f"{source}: field 'hidden_act' has unsupported value {raw_act!r}")
            act = table[raw_act]
        kwargs["hidden_act"] = act

        if model_type == "bert" or (
            model_type is None and "num_hidden_groups" not in d and "embedding_size" not in d
        ):
            # A BERT config: no factorization, no sharing.
            kwargs["model_type"] = "bert"
            if "hidden_size" not in d:
                raise ConfigError(f"{source}: no field 'hidden_size' (a BERT config has no default for it)")
            kwargs["embedding_size"] = d["hidden_size"]
            kwargs["sharing"] = d.get("sharing", "none")
            kwargs["num_hidden_groups"] = d.get("num_hidden_groups", d.get("num_hidden_layers", 12))
            kwargs["embedding_projection"] = False
            if d.get("position_embedding_type", "absolute") != "absolute":
                raise ConfigError(
                    f"{source}: position_embedding_type {d['position_embedding_type']!r} is not supported"
                )
        else:
            kwargs["model_type"] = "albert"
            kwargs["sharing"] = d.get("sharing", "all")
            if model_type == "albert" and "embedding_projection" not in d:
                kwargs["embedding_projection"] = True  # Hugging Face ALBERT always has the mapping
        if "classifier_dropout_prob" in d and d["classifier_dropout_prob"] is not None:
            kwargs["classifier_dropout_prob"] = d["classifier_dropout_prob"]
        for key, value in d.items():
            if key in names and key not in kwargs:
                kwargs[key] = value
        if "albert_num_hidden_groups" in d:  # written by `to_hf_dict` (no sharing: one group per layer)
            kwargs["num_hidden_groups"] = d["albert_num_hidden_groups"]
        try:
            return cls(**kwargs)
        except ConfigError as e:
            raise ConfigError(f"{source}: {e}") from None
        except TypeError as e:
            raise ConfigError(f"{source}: {e}") from None

    @classmethod
    def from_json(cls, path: str | Path) -> AlbertConfig:
        """Read a config file (see `from_dict`); errors name the file."""
        return cls.from_dict(read_config_file(path), source=str(path))

    @classmethod
    def from_pretrained(cls, path: str | Path, *, revision: str | None = None) -> AlbertConfig:
        """The ``config.json`` of a model directory or a Hugging Face Hub id (``albert/albert-base-v2``,
        at ``revision``; see `albert_lm._hub`).

        Raises:
            ConfigError: no ``config.json`` there, or a bad one (the message names the file and field).
            HubModelNotFound: an id that cannot be resolved (offline and not cached, ...).
        """
        from albert_lm._hub import resolve_model_dir

        directory = resolve_model_dir(path, revision)
        config_file = directory / "config.json" if directory.is_dir() else directory
        if not config_file.is_file():
            raise ConfigError(f"{config_file}: no such file (not a model directory?)")
        return cls.from_json(config_file)

    def save_json(self, path: str | Path) -> None:
        """Write `to_hf_dict` as ``config.json`` (atomically)."""
        atomic_write_text(path, json.dumps(self.to_hf_dict(), indent=2, sort_keys=True) + "\n")


# config.json's model_type for a model that transformers cannot load whole (a head it has no class for,
# a sharing layout it cannot express): a type it refuses, instead of one it would fill with random weights.
# Our real model_type is then under MODEL_TYPE_KEY (`albert_lm.convert.hf.save_model_dir` writes both).
UNLOADABLE_MODEL_TYPE = "albert-lm"
MODEL_TYPE_KEY = "albert_model_type"


# ---------------------------------------------------------------------------------------------------------
# Presets. Sources:
#   [T1]  paper Table 1 (Lan et al. 2020): L, H, E, sharing, parameter counts.
#   [REL] the released albert_config.json files (google-research/albert, TF-Hub v1 / v2 modules).
#   [V2]  google-research/albert README: "v2 ... no dropout" (hidden/attention dropout 0 in v2 configs).
#   BERT rows in Table 1 use the same 30000-piece vocabulary as ALBERT ("V" fixed in Sec. 4.1), no
#   sharing, E = H, and NSP.
_ALBERT_SIZES: dict[str, dict[str, Any]] = {
    # [T1] / [REL]
    "base": dict(hidden_size=768, num_hidden_layers=12, num_attention_heads=12, intermediate_size=3072),
    "large": dict(hidden_size=1024, num_hidden_layers=24, num_attention_heads=16, intermediate_size=4096),
    "xlarge": dict(hidden_size=2048, num_hidden_layers=24, num_attention_heads=16, intermediate_size=8192),
    # [REL] xxlarge: 12 layers, 64 heads, FFN 16384 (the paper's Table 1 lists 12 layers, H 4096).
    "xxlarge": dict(hidden_size=4096, num_hidden_layers=12, num_attention_heads=64, intermediate_size=16384),
}

PRESETS: dict[str, AlbertConfig] = {}
for _size, _dims in _ALBERT_SIZES.items():
    # v1: dropout 0.1 [REL v1]; v2: no dropout [V2]. E = 128 throughout [T1].
    PRESETS[f"albert-{_size}-v1"] = AlbertConfig(
        embedding_size=128, hidden_dropout_prob=0.1, attention_probs_dropout_prob=0.1, **_dims
    )
    PRESETS[f"albert-{_size}-v2"] = AlbertConfig(
        embedding_size=128, hidden_dropout_prob=0.0, attention_probs_dropout_prob=0.0, **_dims
    )

_BERT_SIZES: dict[str, dict[str, Any]] = {
    # [T1]: BERT-base 108M, BERT-large 334M, BERT-xlarge 1270M (H 2048, 24 layers).
    "base": dict(hidden_size=768, num_hidden_layers=12, num_attention_heads=12, intermediate_size=3072),
    "large": dict(hidden_size=1024, num_hidden_layers=24, num_attention_heads=16, intermediate_size=4096),
    "xlarge": dict(hidden_size=2048, num_hidden_layers=24, num_attention_heads=32, intermediate_size=8192),
}
for _size, _dims in _BERT_SIZES.items():
    PRESETS[f"bert-{_size}"] = AlbertConfig(
        vocab_size=30000,
        embedding_size=_dims["hidden_size"],
        num_hidden_groups=_dims["num_hidden_layers"],
        sharing="none",
        model_type="bert",
        embedding_projection=False,
        hidden_dropout_prob=0.1,
        attention_probs_dropout_prob=0.1,
        **_dims,
    )

# A tiny model for tests and smoke runs (not from the paper).
PRESETS["albert-tiny"] = AlbertConfig(
    vocab_size=1000,
    embedding_size=16,
    hidden_size=32,
    num_hidden_layers=4,
    num_hidden_groups=2,
    inner_group_num=1,
    num_attention_heads=4,
    intermediate_size=64,
    max_position_embeddings=128,
)

# The demo's small model (embedding 128, hidden 256, 4 shared layers, 4 heads, FFN 1024), the size of the
# reference run quoted in the pretraining issue.
PRESETS["albert-small"] = AlbertConfig(
    embedding_size=128,
    hidden_size=256,
    num_hidden_layers=4,
    num_attention_heads=4,
    intermediate_size=1024,
    max_position_embeddings=512,
)
