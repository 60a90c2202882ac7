"""The models read as transformers users expect: the label names of transformers' ALBERT heads, and the
outputs as a ``ModelOutput`` (``out[0]``, ``out["logits"]``, ``to_tuple()`` in transformers' order), each
checked against transformers' own model on the same weights (a directory we write, read by its classes)."""

from __future__ import annotations

from pathlib import Path
from typing import Any

import pytest
import torch

from albert_lm import AlbertConfig
from albert_lm.model import HEADS

transformers = pytest.importorskip("transformers")
transformers.logging.set_verbosity_error()

B, T, C = 2, 9, 3
# our head -> (transformers' class, its label names -> a function of the batch making them)
CASES: dict[str, tuple[str, dict[str, Any]]] = {
    "pretraining": ("AlbertForPreTraining", {"labels": "mlm", "sentence_order_label": "pair"}),
    "mlm": ("AlbertForMaskedLM", {"labels": "mlm"}),
    "classification": ("AlbertForSequenceClassification", {"labels": "pair"}),
    "multiple_choice": ("AlbertForMultipleChoice", {"labels": "choice"}),
    "question_answering": ("AlbertForQuestionAnswering", {"start_positions": "pos", "end_positions": "pos"}),
    "token_classification": ("AlbertForTokenClassification", {"labels": "tags"}),
    None: ("AlbertModel", {}),
}


def _batch(head: str | None, vocab: int, labels: dict[str, Any]) -> dict[str, torch.Tensor]:
    g = torch.Generator().manual_seed(3)
    shape = (B, C, T) if head == "multiple_choice" else (B, T)
    ids = torch.randint(5, vocab, shape, generator=g)
    mask = torch.ones(shape, dtype=torch.long)
    mask[..., -2:] = 0
    batch = {"input_ids": ids, "token_type_ids": torch.zeros_like(ids), "attention_mask": mask}
    mlm = torch.full((B, T), -100)
    mlm[:, 1:4] = ids[..., 1:4] if head != "multiple_choice" else 0
    make = {
        "mlm": mlm,
        "pair": torch.tensor([0, 1]),
        "choice": torch.tensor([2, 0]),
        "pos": torch.tensor([1, 3]),
    }
    if head != "multiple_choice":
        tags = torch.randint(0, 2, (B, T), generator=g)
        make["tags"] = torch.where(mask.bool(), tags, torch.tensor(-100))
    return {**batch, **{name: make[kind] for name, kind in labels.items()}}


@pytest.mark.parametrize("head", list(CASES), ids=[str(h) for h in CASES])
def test_outputs_and_label_names_match_transformers(head: str | None, tmp_path: Path) -> None:
    hf_class, labels = CASES[head]
    config = AlbertConfig.from_preset("albert-tiny", vocab_size=60)
    ours = HEADS[head](config).eval()
    ours.save_pretrained(tmp_path)
    theirs = getattr(transformers, hf_class).from_pretrained(str(tmp_path)).eval()
    batch = _batch(head, 60, labels)
    with torch.no_grad():
        got = ours(**batch)  # transformers' label names, accepted as they are
        want = theirs(**batch, return_dict=False)
    got_tuple = got.to_tuple()
    assert len(got_tuple) == len(want), (head, [k for k in got])
    for i, (g, w) in enumerate(zip(got_tuple, want)):
        if head in ("pretraining", "mlm") and i == 1:  # MLM logits: ours at the labelled positions only
            w = w[batch["labels"] != -100]
        torch.testing.assert_close(g, w, rtol=1e-4, atol=1e-4, msg=f"{head}: tuple field {i}")
        torch.testing.assert_close(got[i], g)
    if labels:
        assert got[0] is got["loss"] and got.loss.ndim == 0
    if head in ("mlm", "classification", "multiple_choice", "token_classification"):
        assert got["logits"] is got_tuple[1] and got.logits is got_tuple[1]
    if head is None:
        assert got["last_hidden_state"] is got["sequence_output"] and got.pooler_output is got.pooled_output
    if head == "pretraining":
        assert got["prediction_logits"] is got["mlm_logits"]


def test_our_and_transformers_label_names_give_the_same_loss_but_not_both() -> None:
    config = AlbertConfig.from_preset("albert-tiny", vocab_size=60)
    model = HEADS["pretraining"](config).eval()
    batch = _batch("pretraining", 60, {})
    mlm = _batch("pretraining", 60, {"labels": "mlm"})["labels"]
    sop = torch.tensor([1, 0])
    with torch.no_grad():
        theirs = model(**batch, labels=mlm, sentence_order_label=sop)
        ours = model(**batch, mlm_labels=mlm, sop_labels=sop)
    assert torch.equal(theirs.loss, ours.loss) and torch.equal(theirs.sop_loss, ours.sop_loss)
    with pytest.raises(TypeError, match="mlm_labels or labels"):
        model(**batch, mlm_labels=mlm, labels=mlm)
    with pytest.raises(TypeError, match="unknown input"):
        model(**batch, masked_lm_labels=mlm)  # still refused, not ignored
