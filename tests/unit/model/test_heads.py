"""The one head-name -> class table (albert_lm.model.HEADS) and what is derived from it: the converters' name
tables, config.json's ``architectures`` and `load_model`."""

from __future__ import annotations

import json

import pytest
import torch

from albert_lm import load_model
from albert_lm.config import AlbertConfig, ConfigError
from albert_lm.convert import keymap
from albert_lm.model import HEADS, AlbertForPreTraining, AlbertModel, PreTrainedModule, head_of

EXTRA = {"classification": {"num_labels": 3}, "squad_v2": {"start_n_top": 4, "end_n_top": 3}}


def _config(model_type: str) -> AlbertConfig:
    if model_type == "bert":  # E = H, no sharing, no projection
        return AlbertConfig.from_preset(
            "albert-tiny",
            model_type="bert",
            embedding_size=32,
            sharing="none",
            num_hidden_groups=4,
            embedding_projection=False,
        )
    return AlbertConfig.from_preset("albert-tiny")


def test_every_class_has_one_name() -> None:
    assert len(set(HEADS.values())) == len(HEADS)
    for name, cls in HEADS.items():
        assert head_of(cls) == name
    assert head_of(AlbertModel(_config("albert"))) is None

    class Mine(AlbertForPreTraining):
        pass

    assert head_of(Mine) == "pretraining"  # a subclass is its nearest base in the table
    with pytest.raises(ValueError, match="Stranger is none of the model classes"):

        class Stranger(PreTrainedModule):
            pass

        head_of(Stranger)


def test_every_head_has_its_name_tables() -> None:
    heads = {h for h in HEADS if h is not None}
    assert set(keymap.TF_HEADS) == heads - keymap.TF_WITHOUT_ORIGINAL
    for model_type, tables in keymap.HF_HEADS.items():
        assert set(tables) == heads, model_type


def test_architectures_are_transformers_names() -> None:
    assert keymap.hf_architecture("albert", "classification") == "AlbertForSequenceClassification"
    assert keymap.hf_architecture("bert", "pretraining") == "BertForPreTraining"
    assert keymap.hf_architecture("bert", None) == "BertModel"
    # the SQuAD 2.0 head has no transformers class: its directory is the bare encoder for transformers
    assert keymap.hf_architecture("albert", "squad_v2") == "AlbertModel"
    for model_type in keymap.HF_HEADS:
        for head in HEADS:
            arch = keymap.hf_architecture(model_type, head)
            expected = None if head in keymap.HF_WITHOUT_CLASS else head
            assert keymap.head_of_architecture(arch) == expected
    with pytest.raises(ConfigError, match="'RobertaModel' is none of ours: AlbertForMaskedLM"):
        keymap.head_of_architecture("RobertaModel")


@pytest.mark.parametrize("model_type", ["albert", "bert"])
@pytest.mark.parametrize("head", list(HEADS))
def test_load_model_builds_the_class_config_json_names(head, model_type, tmp_path) -> None:
    cls = HEADS[head]
    torch.manual_seed(0)
    model = cls(_config(model_type), **EXTRA.get(head, {}))
    model.save_pretrained(tmp_path)
    raw = json.loads((tmp_path / "config.json").read_text())
    unloadable = head in keymap.HF_WITHOUT_CLASS  # named by our class: transformers refuses it
    assert raw["architectures"] == [cls.__name__ if unloadable else keymap.hf_architecture(model_type, head)]

    loaded = load_model(tmp_path)
    assert type(loaded) is cls
    assert loaded.config.replace(embedding_projection=None) == model.config.replace(embedding_projection=None)
    for key, value in EXTRA.get(head, {}).items():
        assert getattr(loaded, key) == value
    want = model.state_dict()
    assert all(torch.equal(t, want[k]) for k, t in loaded.state_dict().items())

    # a directory that transformers wrote has no albert_head: the architecture alone decides
    if not unloadable:
        del raw["albert_head"]
        (tmp_path / "config.json").write_text(json.dumps(raw))
        assert type(load_model(tmp_path)) is cls


def test_load_model_errors_and_the_bare_default(tmp_path) -> None:
    AlbertForPreTraining(_config("albert")).save_pretrained(tmp_path)
    raw = json.loads((tmp_path / "config.json").read_text())
    del raw["albert_head"], raw["architectures"]  # a released albert_config.json names no class
    (tmp_path / "config.json").write_text(json.dumps(raw))
    bare = load_model(tmp_path, dtype=torch.float64, hidden_dropout_prob=0.2)
    assert type(bare) is AlbertModel and bare.config.hidden_dropout_prob == 0.2
    assert {p.dtype for p in bare.parameters()} == {torch.float64}

    raw["architectures"] = ["AlbertForCausalLM"]  # an architecture none of our classes is
    (tmp_path / "config.json").write_text(json.dumps(raw))
    with pytest.raises(ConfigError, match=r"config.json: architecture 'AlbertForCausalLM'"):
        load_model(tmp_path)
    raw["albert_head"] = "tagging"
    (tmp_path / "config.json").write_text(json.dumps(raw))
    with pytest.raises(ConfigError, match="albert_head 'tagging' is none of the heads"):
        load_model(tmp_path)
