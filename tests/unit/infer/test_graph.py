"""Every task model is export-safe: no data-dependent branch or host sync on the attention-mask path, so
torch.export (dynamic batch / sequence / options axes) and torch.compile(fullgraph=True) capture it whole,
and the captured graph computes what eager PyTorch computes on padded batches of other shapes."""

from __future__ import annotations

import pytest
import torch

from albert_lm.config import AlbertConfig
from albert_lm.infer.graph import (
    HEAD_OUTPUTS,
    InferenceGraph,
    example_inputs,
    export_program,
    input_names,
    output_names,
)
from albert_lm.model import HEADS, AlbertForSequenceClassification
from albert_lm.model.encoder import attention_mask_for_sdpa

TASK_HEADS = [
    "classification",
    "multiple_choice",
    "question_answering",
    "squad_v2",
    "mlm",
    "pretraining",
    None,
]


def _model(head: str | None) -> torch.nn.Module:
    torch.manual_seed(0)
    return HEADS[head](AlbertConfig.from_preset("albert-tiny")).eval()


def _eager(model: torch.nn.Module, batch: dict[str, torch.Tensor]) -> tuple[torch.Tensor, ...]:
    graph = InferenceGraph(model)
    with torch.no_grad():
        return graph(**{k: batch[k] for k in graph.input_names})


def test_the_mask_is_always_built() -> None:
    """The old branch returned None for an unpadded batch (a host sync and a data-dependent branch)."""
    full = torch.ones(2, 5, dtype=torch.long)
    mask = attention_mask_for_sdpa(full)
    assert mask is not None and mask.shape == (2, 1, 1, 5) and mask.dtype == torch.bool and bool(mask.all())
    assert attention_mask_for_sdpa(None) is None


@pytest.mark.parametrize("head", TASK_HEADS)
def test_torch_export_with_dynamic_axes_matches_eager(head: str | None) -> None:
    model = _model(head)
    program = export_program(model)  # traced on a 2 x 16 padded batch (3 options for multiple choice)
    other = example_inputs(model, batch=3, seq=29, choices=4, seed=3)  # other sizes, rows padded
    got = program.module()(**{k: other[k] for k in input_names(model)})
    want = _eager(model, other)
    assert len(got) == len(want) == len(output_names(model))
    for g, w in zip(got, want):
        assert g.shape == w.shape
        torch.testing.assert_close(g, w, rtol=1e-5, atol=1e-5)


@pytest.mark.parametrize("head", TASK_HEADS)
def test_compile_fullgraph_has_no_graph_break(head: str | None) -> None:
    """fullgraph=True raises on any graph break (a Python branch on tensor data is one); the eager backend
    keeps it to tracing, which is what this checks."""
    model = _model(head)
    compiled = torch.compile(model, fullgraph=True, backend="eager", dynamic=True)
    for batch, seq in ((2, 11), (3, 19)):
        inputs = example_inputs(model, batch=batch, seq=seq, seed=seq)
        with torch.no_grad():
            out = compiled(**inputs)
            ref = model(**inputs)
        for name in output_names(model):
            torch.testing.assert_close(out[name], ref[name])


def test_squad_v2_graph_is_the_inference_beam() -> None:
    model = _model("squad_v2")
    model.train()  # an inference graph is always in eval mode: the beam outputs, no dropout
    graph = InferenceGraph(model)
    assert not model.training and input_names(model)[-1] == "p_mask"
    batch = example_inputs(model, batch=2, seq=12)
    with torch.no_grad():
        outs = dict(zip(graph.output_names, graph(**batch)))
    assert outs["end_top_index"].shape == (2, 25) and outs["cls_logits"].shape == (2,)


def test_a_padded_row_equals_the_row_alone() -> None:
    """The mask reaches attention: padding changes nothing for the real tokens."""
    model = _model("classification")
    batch = example_inputs(model, batch=3, seq=20)
    n = int(batch["attention_mask"][2].sum())
    alone = {k: v[2:3, :n] for k, v in batch.items()}
    (padded,) = _eager(model, batch)
    (single,) = _eager(model, alone)
    torch.testing.assert_close(padded[2:3], single, rtol=1e-5, atol=1e-6)
    assert n < 20


def test_head_outputs_cover_every_head() -> None:
    assert set(HEAD_OUTPUTS) == set(HEADS)
    bare = HEADS[None](AlbertConfig.from_preset("albert-tiny"), add_pooler=False)
    assert output_names(bare) == ("sequence_output",)
    assert output_names(AlbertForSequenceClassification(AlbertConfig.from_preset("albert-tiny"))) == (
        "logits",
    )
