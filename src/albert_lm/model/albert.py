"""AlbertModel: embeddings -> shared encoder -> tanh pooler (as the original and Hugging Face).

Also the base class that every model of the package shares: configuration, original initialization and
the model-directory round trip (`from_pretrained` / `save_pretrained`, implemented in `albert_lm.convert.hf`).
"""

from __future__ import annotations

import inspect
from collections.abc import Mapping
from pathlib import Path
from typing import Any, ClassVar, TypeVar

import torch
from torch import nn

from albert_lm.config import AlbertConfig
from albert_lm.model.embeddings import Embeddings
from albert_lm.model.encoder import Encoder, attention_mask_for_sdpa, init_weights, real_tokens

M = TypeVar("M", bound="PreTrainedModule")


# transformers' output names -> ours (``out["last_hidden_state"]`` reads ``sequence_output``)
OUTPUT_ALIASES = {
    "last_hidden_state": "sequence_output",
    "pooler_output": "pooled_output",
    "prediction_logits": "mlm_logits",
    "logits": "mlm_logits",
}


class Output(dict):  # type: ignore[type-arg]
    """Model outputs: a dict (what the trainer reads) whose keys are also attributes, read as transformers'
    ``ModelOutput`` too: ``out[0]`` / `to_tuple` (``loss`` first when present, then the model's outputs in
    transformers' order, None left out) and transformers' names (``out["logits"]``, ``last_hidden_state``,
    ``pooler_output``, ``prediction_logits``: `OUTPUT_ALIASES`)."""

    #: the keys of `to_tuple` after ``loss``, in transformers' order (empty: every key, as inserted)
    order: tuple[str, ...] = ()

    def __getitem__(self, key: Any) -> Any:
        if isinstance(key, (int, slice)):
            return self.to_tuple()[key]
        if key not in self and OUTPUT_ALIASES.get(key) in self:
            key = OUTPUT_ALIASES[key]
        return super().__getitem__(key)

    def __getattr__(self, name: str) -> Any:
        try:
            return self[name]
        except KeyError:
            raise AttributeError(name) from None

    def ordered(self, *keys: str) -> Output:
        """This output with `to_tuple` giving ``keys`` after ``loss`` (transformers' fields of the model)."""
        self.order = keys
        return self

    def to_tuple(self) -> tuple[Any, ...]:
        """The values as transformers' ``ModelOutput.to_tuple`` gives them: ``loss`` first when present,
        then `order` (or every other key, as inserted), the None ones left out."""
        keys = self.order or tuple(k for k in self if k != "loss")
        values = [dict.get(self, "loss"), *(dict.get(self, k) for k in keys)]
        return tuple(v for v in values if v is not None)


def reject_unknown_inputs(model: nn.Module, unknown: Mapping[str, Any]) -> None:
    """Refuse keyword arguments that ``model.forward`` does not name.

    The models' ``forward(**batch)`` collects unknown keys only to refuse them here: silently ignored, a
    misspelled label key (``masked_lm_labels`` for ``mlm_labels``) would train on the other losses alone.

    Raises:
        TypeError: naming the unknown keys and the accepted ones.
    """
    if not unknown:
        return
    params = inspect.signature(type(model).forward).parameters.values()
    accepted = [p.name for p in params if p.name != "self" and p.kind is not p.VAR_KEYWORD]
    raise TypeError(
        f"{type(model).__name__}.forward got unknown input(s) {', '.join(sorted(unknown))}; "
        f"it accepts {', '.join(accepted)}"
    )


class PreTrainedModule(nn.Module):
    """Base of all models: holds the config, initializes as the original, loads and saves model dirs."""

    #: extra constructor arguments that are stored in config.json (e.g. num_labels)
    extra_config_keys: ClassVar[tuple[str, ...]] = ()

    def __init__(self, config: AlbertConfig) -> None:
        super().__init__()
        self.config = config

    def init_weights(self) -> None:
        self.apply(lambda m: init_weights(m, self.config.initializer_range))

    def extra_config(self) -> dict[str, Any]:
        return {k: getattr(self, k) for k in self.extra_config_keys}

    @classmethod
    def from_pretrained(
        cls: type[M],
        path: str | Path,
        *,
        device: str | torch.device | None = None,
        dtype: torch.dtype | None = None,
        require_head: bool = False,
        revision: str | None = None,
        **kwargs: Any,
    ) -> M:
        """Load a model directory: ours, a Hugging Face ALBERT one (AlbertModel / ForPreTraining /
        ForMaskedLM / ForSequenceClassification ...) or a Hugging Face BERT one (BertModel /
        ForPreTraining / ForMaskedLM ...). Heads missing from the checkpoint are freshly initialized and
        logged (an error with ``require_head=True``, for prediction); any other missing, unexpected or
        mis-shaped tensor is an error naming it.

        ``path`` may be a Hugging Face Hub id (``albert/albert-base-v2``, at ``revision``), resolved through
        ``huggingface_hub`` and its cache as transformers does. Keyword arguments are constructor
        arguments of the class (e.g. ``num_labels``) or AlbertConfig fields to override (e.g.
        ``hidden_dropout_prob=0.0``).
        """
        from albert_lm.convert.hf import load_model_dir

        return load_model_dir(
            cls,
            Path(path),
            device=device,
            dtype=dtype,
            require_head=require_head,
            revision=revision,
            **kwargs,
        )

    def save_pretrained(self, path: str | Path, tokenizer: Any = None) -> None:
        """Write a model directory (config.json + model.safetensors [+ tokenizer files]) that Hugging Face
        transformers reads as well."""
        from albert_lm.convert.hf import save_model_dir

        save_model_dir(self, Path(path), tokenizer=tokenizer)

    def num_parameters(self, exclude_embeddings: bool = False) -> int:
        seen: set[int] = set()
        total = 0
        for name, p in self.named_parameters():
            if id(p) in seen or (exclude_embeddings and "embeddings" in name):
                continue
            seen.add(id(p))
            total += p.numel()
        return total


class AlbertModel(PreTrainedModule):
    """The ALBERT (or BERT) encoder: returns ``sequence_output`` (B, T, H) and ``pooled_output`` (B, H)."""

    def __init__(self, config: AlbertConfig, add_pooler: bool = True) -> None:
        super().__init__(config)
        self.embeddings = Embeddings(config)
        self.encoder = Encoder(config)
        # pooler: dense + tanh on the first token (original modeling.py)
        self.pooler = nn.Linear(config.hidden_size, config.hidden_size) if add_pooler else None
        self.init_weights()

    def forward(
        self,
        input_ids: torch.Tensor,
        token_type_ids: torch.Tensor | None = None,
        attention_mask: torch.Tensor | None = None,
        **unknown: Any,
    ) -> Output:
        reject_unknown_inputs(self, unknown)
        x = self.embeddings(input_ids, token_type_ids)  # (B, T, H)
        mask = attention_mask_for_sdpa(attention_mask)
        keep = real_tokens(attention_mask)  # None: padding kept (outside `skip_padding`)
        if keep is None:
            x = self.encoder(x, mask)  # (B, T, H)
        else:  # the encoder on the N real tokens only, scattered back with 0 at padded positions
            b, t, h = x.shape
            x = self.encoder(x.reshape(b * t, h).index_select(0, keep), mask, keep)  # (N, H)
            x = x.new_zeros(b * t, h).index_copy_(0, keep, x).view(b, t, h)  # (B, T, H)
        pooled = torch.tanh(self.pooler(x[:, 0])) if self.pooler is not None else None  # (B, H)
        return Output(sequence_output=x, pooled_output=pooled)
