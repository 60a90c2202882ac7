"""Every model directory we write either loads whole in transformers (its Auto class for the head finds
every tensor) or transformers refuses it: never a model with heads or layers filled in at random behind
transformers' generic warning. The SQuAD 2.0 verifier head (no transformers class) and the sharing
layouts transformers cannot express (attention-only, FFN-only) are the refused ones; albert_lm still loads
them, and says so when it writes them."""

from __future__ import annotations

import json
import logging
from pathlib import Path

import pytest
import torch

from albert_lm import AlbertConfig, load_model
from albert_lm.model import HEADS

transformers = pytest.importorskip("transformers")
transformers.logging.set_verbosity_error()

AUTO = {
    None: "AutoModel",
    "pretraining": "AutoModelForPreTraining",
    "mlm": "AutoModelForMaskedLM",
    "classification": "AutoModelForSequenceClassification",
    "multiple_choice": "AutoModelForMultipleChoice",
    "question_answering": "AutoModelForQuestionAnswering",
    "token_classification": "AutoModelForTokenClassification",
}


def _config(sharing: str = "all") -> AlbertConfig:
    return AlbertConfig.from_preset("albert-tiny", vocab_size=60, sharing=sharing)


@pytest.mark.parametrize("sharing", ["all", "none"])
@pytest.mark.parametrize("head", list(AUTO), ids=[str(h) for h in AUTO])
def test_loadable_directories_load_whole(head: str | None, sharing: str, tmp_path: Path) -> None:
    model = HEADS[head](_config(sharing)).eval()
    model.save_pretrained(tmp_path)
    theirs, info = getattr(transformers, AUTO[head]).from_pretrained(str(tmp_path), output_loading_info=True)
    assert info["missing_keys"] == [] and info["mismatched_keys"] == [], info
    ids = torch.randint(5, 60, (2, 3, 7) if head == "multiple_choice" else (2, 7))
    with torch.no_grad():
        torch.testing.assert_close(model(ids).to_tuple()[0], theirs.eval()(ids, return_dict=False)[0])


REFUSED = [
    ("squad_v2", "all", "AutoModelForQuestionAnswering", "no class for the squad_v2 head"),
    ("classification", "ffn", "AutoModelForSequenceClassification", "sharing='ffn' has no Hugging Face"),
    ("mlm", "attention", "AutoModelForMaskedLM", "sharing='attention' has no Hugging Face"),
    (None, "ffn", "AutoModel", "sharing='ffn'"),
]


@pytest.mark.parametrize(("head", "sharing", "auto", "why"), REFUSED)
def test_unloadable_directories_are_refused_by_transformers(
    head: str | None, sharing: str, auto: str, why: str, tmp_path: Path, caplog: pytest.LogCaptureFixture
) -> None:
    model = HEADS[head](_config(sharing)).eval()
    with caplog.at_level(logging.WARNING, logger="albert_lm.convert.hf"):
        model.save_pretrained(tmp_path)
    assert any("transformers cannot load" in r.message and why in r.message for r in caplog.records)
    for name in (auto, "AutoModel", "AutoConfig"):
        with pytest.raises(ValueError, match="albert-lm"):
            getattr(transformers, name).from_pretrained(str(tmp_path))
    raw = json.loads((tmp_path / "config.json").read_text())
    assert raw["architectures"] == [type(model).__name__]  # not a transformers class name
    again = load_model(tmp_path).eval()  # albert_lm reads it whole
    assert type(again) is type(model) and again.config.sharing == sharing
    for name, tensor in model.state_dict().items():
        assert torch.equal(again.state_dict()[name], tensor), name
