"""Bad checkpoints get errors that name the file and tensor; nothing is silently skipped."""

from __future__ import annotations

import json

import pytest
import torch
from safetensors.torch import load_file, save_file

from albert_lm._io import TMP_PREFIX
from albert_lm.config import AlbertConfig, ConfigError
from albert_lm.convert.hf import CheckpointError
from albert_lm.model import AlbertForPreTraining, AlbertForSequenceClassification, AlbertModel


@pytest.fixture
def saved(tmp_path):
    m = AlbertForPreTraining(AlbertConfig.from_preset("albert-tiny"))
    m.save_pretrained(tmp_path)
    return tmp_path


def _edit(path, fn):
    state = load_file(str(path / "model.safetensors"))
    fn(state)
    save_file(state, str(path / "model.safetensors"), metadata={"format": "pt"})


def test_missing_tensor_is_named(saved):
    _edit(saved, lambda s: s.pop("albert.encoder.albert_layer_groups.1.albert_layers.0.ffn.weight"))
    with pytest.raises(CheckpointError, match=r"model.safetensors.*encoder.ffn.1.up.weight"):
        AlbertForPreTraining.from_pretrained(saved)


def test_unexpected_tensor_is_named(saved):
    _edit(saved, lambda s: s.__setitem__("albert.encoder.extra_thing.weight", torch.zeros(2)))
    with pytest.raises(CheckpointError, match="albert.encoder.extra_thing.weight"):
        AlbertForPreTraining.from_pretrained(saved)


def test_misshaped_tensor_is_named(saved):
    _edit(saved, lambda s: s.__setitem__("albert.pooler.weight", torch.zeros(3, 3)))
    with pytest.raises(CheckpointError, match=r"albert.pooler.weight.*\(3, 3\).*\(32, 32\)"):
        AlbertForPreTraining.from_pretrained(saved)


def test_corrupt_file(saved):
    (saved / "model.safetensors").write_bytes(b"\x00\x01garbage")
    with pytest.raises(CheckpointError, match="model.safetensors: cannot read weights"):
        AlbertModel.from_pretrained(saved)


def test_missing_config_and_dir(tmp_path):
    with pytest.raises(FileNotFoundError, match="model directory not found"):
        AlbertModel.from_pretrained(tmp_path / "nope")
    with pytest.raises(ConfigError, match="no config.json"):
        AlbertModel.from_pretrained(tmp_path)


def test_config_weights_disagree(saved):
    cfg = json.loads((saved / "config.json").read_text())
    cfg["hidden_size"] = 64
    (saved / "config.json").write_text(json.dumps(cfg))
    with pytest.raises(CheckpointError, match="shape"):
        AlbertModel.from_pretrained(saved)


def test_optional_head_absent_is_initialized_and_logged(saved, caplog):
    caplog.set_level("INFO")
    m = AlbertForSequenceClassification.from_pretrained(saved, num_labels=3)
    assert m.classifier.weight.shape == (3, 32)
    assert "classifier.weight" in caplog.text and "freshly initialized" in caplog.text
    assert "sop_classifier.classifier.weight" in caplog.text  # unused pretraining head is reported


def test_pickle_is_loaded_weights_only(saved, tmp_path):
    state = load_file(str(saved / "model.safetensors"))
    d = tmp_path / "pickled"
    d.mkdir()
    (d / "config.json").write_text((saved / "config.json").read_text())
    torch.save(state, d / "pytorch_model.bin")
    m = AlbertForPreTraining.from_pretrained(d)
    torch.testing.assert_close(m.albert.pooler.weight, state["albert.pooler.weight"])

    class Evil:
        def __reduce__(self):
            return (print, ("executed",))

    torch.save({"x": Evil()}, d / "pytorch_model.bin")
    with pytest.raises(CheckpointError, match="weights_only=True"):
        AlbertForPreTraining.from_pretrained(d)


def test_partial_sharing_round_trips_in_native_layout(tmp_path, caplog):
    c = AlbertConfig.from_preset("albert-tiny", sharing="attention")
    m = AlbertForPreTraining(c)
    m.save_pretrained(tmp_path)
    assert "no Hugging Face layout" in caplog.text
    back = AlbertForPreTraining.from_pretrained(tmp_path)
    assert back.config.sharing == "attention"
    for (k, a), (_, b) in zip(m.state_dict().items(), back.state_dict().items()):
        torch.testing.assert_close(a, b, atol=0, rtol=0, msg=k)


def test_save_is_atomic_on_failure(saved, monkeypatch):
    before = (saved / "model.safetensors").read_bytes()
    m = AlbertForPreTraining(AlbertConfig.from_preset("albert-tiny"))
    import safetensors.torch

    def boom(*a, **k):
        raise OSError("disk full")

    monkeypatch.setattr(safetensors.torch, "save_file", boom)
    with pytest.raises(OSError, match="disk full"):
        m.save_pretrained(saved)
    assert (saved / "model.safetensors").read_bytes() == before
    assert not [p for p in saved.iterdir() if p.name.startswith(TMP_PREFIX)]
