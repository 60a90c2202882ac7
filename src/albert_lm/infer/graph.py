"""Task models as fixed-signature graphs: what torch.export, torch.compile and the ONNX exporter trace.

A task model's ``forward`` takes keyword tensors and returns an `Output` dict that also carries training
extras (``sequence_output`` beside the logits, losses when labels are given). An exported graph wants
named tensors in and a tuple of named tensors out. `InferenceGraph` wraps a model that way:

* inputs ``input_ids``, ``attention_mask``, ``token_type_ids`` (B, T) -- (B, C, T) for multiple choice --
  plus ``p_mask`` for the SQuAD 2.0 head, which needs to know where no answer can be;
* outputs `HEAD_OUTPUTS` of the model's head: what its task's post-processing reads, nothing more;
* batch, sequence (and options) axes dynamic (`dynamic_shapes`); the sequence axis runs up to
  ``max_position_embeddings``.

`example_inputs` makes a *padded* batch (later rows end in padding), so that a graph that lost the
attention mask computes something else and parity checks see it.
"""

from __future__ import annotations

import inspect
from typing import Any

import torch
from torch import nn

from albert_lm.config import AlbertConfig
from albert_lm.tasks.registry import HEAD_OUTPUTS as TASK_HEAD_OUTPUTS

#: Head name (`albert_lm.model.HEADS`) -> the outputs an inference graph returns, in this order: for the
#: heads of fine-tuning tasks, what the task's post-processing reads (`albert_lm.tasks.registry`, from each
#: `Task.head_outputs`); for the encoder and the pretraining heads, their own outputs.
HEAD_OUTPUTS: dict[str | None, tuple[str, ...]] = {
    None: ("sequence_output", "pooled_output"),
    "pretraining": ("mlm_logits", "sop_logits"),
    "mlm": ("mlm_logits",),
    **TASK_HEAD_OUTPUTS,
}

#: The inputs every graph takes, in this order; ``p_mask`` is added for models whose forward needs it.
BASE_INPUTS: tuple[str, ...] = ("input_ids", "attention_mask", "token_type_ids")


def config_of(model: nn.Module) -> AlbertConfig:
    """The `AlbertConfig` of an albert model."""
    config = getattr(model, "config", None)
    if not isinstance(config, AlbertConfig):
        raise TypeError(f"{type(model).__name__} is not an albert model (no AlbertConfig)")
    return config


def head_name(model: nn.Module) -> str | None:
    """The `albert_lm.model.HEADS` name of ``model`` (None: the bare encoder)."""
    from albert_lm.model import head_of

    return head_of(model)  # type: ignore[arg-type]


def input_names(model: nn.Module) -> tuple[str, ...]:
    """The graph inputs of ``model``: `BASE_INPUTS`, plus ``p_mask`` when its forward takes one."""
    extra = ("p_mask",) if "p_mask" in inspect.signature(model.forward).parameters else ()
    return BASE_INPUTS + extra


def is_multiple_choice(model: nn.Module) -> bool:
    """Whether the inputs have an options axis, (B, C, T)."""
    return head_name(model) == "multiple_choice"


def output_names(model: nn.Module) -> tuple[str, ...]:
    """The outputs of ``model``'s head that it computes (the bare encoder without a pooler has no
    ``pooled_output``)."""
    names = HEAD_OUTPUTS[head_name(model)]
    pooler = getattr(getattr(model, "albert", model), "pooler", True)
    return tuple(n for n in names if not (n == "pooled_output" and pooler is None))


class InferenceGraph(nn.Module):
    """``model`` with named positional inputs and a tuple of `output_names` out (see the module
    docstring). Always in eval mode: dropout off, and the SQuAD 2.0 head in its beam-search branch."""

    def __init__(self, model: nn.Module) -> None:
        super().__init__()
        self.model = model.eval()
        self.input_names = input_names(model)
        self.output_names = output_names(model)

    def forward(
        self,
        input_ids: torch.Tensor,
        attention_mask: torch.Tensor,
        token_type_ids: torch.Tensor,
        p_mask: torch.Tensor | None = None,
    ) -> tuple[torch.Tensor, ...]:
        kwargs: dict[str, torch.Tensor] = {
            "input_ids": input_ids,
            "attention_mask": attention_mask,
            "token_type_ids": token_type_ids,
        }
        if p_mask is not None:
            kwargs["p_mask"] = p_mask
        out = self.model(**kwargs)
        return tuple(out[name] for name in self.output_names)

    def train(self, mode: bool = True) -> InferenceGraph:
        return super().train(False)  # an inference graph never trains (dropout, the SQuAD beam branch)


def example_inputs(
    model: nn.Module, batch: int = 2, seq: int = 16, choices: int = 3, seed: int = 0
) -> dict[str, torch.Tensor]:
    """A padded batch for ``model``'s graph inputs: row ``i`` has ``seq - 3 i`` real tokens (at least 2),
    the second half of each row is segment B, and for SQuAD 2.0 ``p_mask`` closes the "question" (tokens
    1-2) and the padding as `albert_lm.tasks.squad` does.

    Raises:
        ValueError: ``seq`` is longer than the model's position table.
    """
    config = config_of(model)
    if seq > config.max_position_embeddings:
        raise ValueError(f"seq {seq} > max_position_embeddings {config.max_position_embeddings}")
    gen = torch.Generator().manual_seed(seed)
    shape = (batch, choices, seq) if is_multiple_choice(model) else (batch, seq)
    # ids above the special tokens of the released vocabularies ([PAD] [UNK] [CLS] [SEP] [MASK] = 0..4)
    ids = torch.randint(5, config.vocab_size, shape, generator=gen)
    lengths = torch.tensor([max(2, seq - 3 * i) for i in range(batch)])  # (B,)
    real = torch.arange(seq) < lengths.view(batch, *([1] * (len(shape) - 1)))  # (B, [1,] T)
    mask = real.expand(shape).long()  # (B, [C,] T)
    types = torch.zeros_like(ids)
    types[..., seq // 2 :] = 1
    ids = ids.masked_fill(mask == 0, 0)
    types = types.masked_fill(mask == 0, 0)
    inputs = {"input_ids": ids, "attention_mask": mask, "token_type_ids": types}
    if "p_mask" in input_names(model):
        p_mask = 1 - mask
        p_mask[:, 1:3] = 1
        inputs["p_mask"] = p_mask
    return inputs


def dynamic_shapes(model: nn.Module, style: str = "export") -> dict[str, dict[int, Any]]:
    """Dynamic axes of every graph input: batch and sequence (and options for multiple choice).

    ``style="export"``: `torch.export.Dim.DYNAMIC` (the exporter derives the ranges: the sequence axis
    up to the position table, and the SQuAD 2.0 beam's ``min(start_n_top, T)`` stays symbolic, which a
    fixed named range would have to prove first). ``style="onnx"``: the same axes named ``batch``,
    ``choices`` and ``sequence`` in the ONNX graph.
    """
    if style not in ("export", "onnx"):
        raise ValueError(f"style must be 'export' or 'onnx', got {style!r}")
    axes = ("batch", "choices", "sequence") if is_multiple_choice(model) else ("batch", "sequence")
    dim: Any = torch.export.Dim.DYNAMIC
    spec = {i: (name if style == "onnx" else dim) for i, name in enumerate(axes)}
    return {name: dict(spec) for name in input_names(model)}


def export_program(model: nn.Module, example: dict[str, torch.Tensor] | None = None) -> Any:
    """``torch.export.export`` of ``model``'s `InferenceGraph` with dynamic axes (non-strict tracing).

    Raises whatever torch.export raises on a graph it cannot capture, e.g. a data-dependent branch.
    """
    graph = InferenceGraph(model)
    example = example if example is not None else example_inputs(model)
    kwargs = {name: example[name] for name in graph.input_names}
    return torch.export.export(graph, (), kwargs=kwargs, dynamic_shapes=dynamic_shapes(model), strict=False)
