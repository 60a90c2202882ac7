"""Issue 15, the model side: no silently ignored inputs, no silently initialized task heads, no tracebacks
for damaged checkpoints (each error names the file and the tensor), and `albert convert` never clobbers
an output directory."""

from __future__ import annotations

import pytest
import torch

from albert.config import AlbertConfig
from albert.model import HEADS, AlbertForPreTraining, PreTrainedModule

EXTRA = {"classification": {"num_labels": 3}}


def _tiny() -> AlbertConfig:
    return AlbertConfig.from_preset("albert-tiny")


# ------------------------------------------------------------------------- item 12: unknown inputs
@pytest.mark.parametrize("head", list(HEADS), ids=str)
def test_every_model_refuses_an_unknown_input(head: str | None) -> None:
    model: PreTrainedModule = HEADS[head](_tiny(), **EXTRA.get(head, {}))
    ids = torch.tensor([[2, 5, 6, 3]])
    with pytest.raises(TypeError) as e:
        model(input_ids=ids, masked_lm_labels=torch.full_like(ids, -100))
    message = str(e.value)
    assert "masked_lm_labels" in message
    assert f"{type(model).__name__}.forward" in message and "accepts input_ids, token_type_ids" in message


def test_pretraining_batch_with_a_misspelled_label_key_does_not_train_on_sop_alone() -> None:
    """The issue's case: ``masked_lm_labels`` instead of ``mlm_labels`` used to give loss = SOP loss."""
    model = AlbertForPreTraining(_tiny())
    batch = {
        "input_ids": torch.tensor([[2, 5, 6, 3, 7, 3]]),
        "masked_lm_labels": torch.tensor([[-100, 9, -100, -100, -100, -100]]),
        "sop_labels": torch.tensor([1]),
    }
    with pytest.raises(TypeError, match=r"masked_lm_labels; it accepts .*mlm_labels, sop_labels"):
        model(**batch)
    batch["mlm_labels"] = batch.pop("masked_lm_labels")
    out = model(**batch)
    torch.testing.assert_close(out["loss"], out["mlm_loss"] + out["sop_loss"])
