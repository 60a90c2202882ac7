from __future__ import annotations

import json

import pytest

from albert_lm.config import PRESETS, AlbertConfig, ConfigError


def test_released_albert_config_json_loads(tmp_path):
    # The released albert_base v2 albert_config.json (google-research/albert), verbatim field set.
    released = {
        "attention_probs_dropout_prob": 0,
        "hidden_act": "gelu",
        "hidden_dropout_prob": 0,
        "embedding_size": 128,
        "hidden_size": 768,
        "initializer_range": 0.02,
        "intermediate_size": 3072,
        "max_position_embeddings": 512,
        "num_attention_heads": 12,
        "num_hidden_layers": 12,
        "num_hidden_groups": 1,
        "net_structure_type": 0,
        "layers_to_keep": [],
        "gap_size": 0,
        "num_memory_blocks": 0,
        "inner_group_num": 1,
        "down_scale_factor": 1,
        "type_vocab_size": 2,
        "vocab_size": 30000,
    }
    path = tmp_path / "albert_config.json"
    path.write_text(json.dumps(released))
    c = AlbertConfig.from_json(path)
    assert c.hidden_act == "gelu_tanh"  # the original's "gelu" is the tanh approximation
    assert c.model_type == "albert" and c.sharing == "all" and c.has_projection
    assert c == AlbertConfig.from_preset("albert-base-v2")


def test_hf_configs_activation_names():
    hf_albert = {
        "model_type": "albert",
        "hidden_act": "gelu_new",
        "embedding_size": 128,
        "hidden_size": 768,
        "num_attention_heads": 12,
    }
    assert AlbertConfig.from_dict(hf_albert).hidden_act == "gelu_tanh"
    hf_bert = {
        "model_type": "bert",
        "hidden_act": "gelu",
        "hidden_size": 384,
        "num_attention_heads": 12,
        "num_hidden_layers": 6,
        "intermediate_size": 1536,
        "vocab_size": 30522,
    }
    b = AlbertConfig.from_dict(hf_bert)
    assert (b.hidden_act, b.model_type, b.embedding_size, b.sharing, b.has_projection) == (
        "gelu",
        "bert",
        384,
        "none",
        False,
    )


@pytest.mark.parametrize("name", sorted(PRESETS))
def test_hf_round_trip_keeps_everything(name, tmp_path):
    c = PRESETS[name]
    c.save_json(tmp_path / "config.json")
    back = AlbertConfig.from_json(tmp_path / "config.json")
    assert back.replace(embedding_projection=None) == c.replace(embedding_projection=None)
    assert back.has_projection == c.has_projection


@pytest.mark.parametrize(
    "overrides,field",
    [
        ({"hidden_size": 100, "num_attention_heads": 12}, "hidden_size"),
        ({"sharing": "some"}, "sharing"),
        ({"hidden_act": "gelu_fast"}, "hidden_act"),
        ({"num_hidden_groups": 13}, "num_hidden_groups"),
        ({"vocab_size": 0}, "vocab_size"),
        ({"hidden_dropout_prob": 1.5}, "hidden_dropout_prob"),
        ({"embedding_projection": False, "embedding_size": 128}, "embedding_projection"),
    ],
)
def test_invalid_configs_name_the_field(overrides, field):
    with pytest.raises(ConfigError, match=field):
        AlbertConfig.from_preset("albert-base-v2", **overrides)


def test_bad_json_names_file_and_line(tmp_path):
    p = tmp_path / "config.json"
    p.write_text('{\n  "hidden_size": 768,\n  oops\n}')
    with pytest.raises(ConfigError, match=r"config.json: not valid JSON \(line 3"):
        AlbertConfig.from_json(p)


def test_preset_overrides_and_unknown_names():
    c = AlbertConfig.from_preset("albert-base-v2", embedding_size=768, sharing="ffn")
    assert (c.embedding_size, c.sharing, c.has_projection) == (768, "ffn", False)
    with pytest.raises(KeyError, match="unknown preset"):
        AlbertConfig.from_preset("albert-huge")
    with pytest.raises(ConfigError, match="hidden_sise"):
        AlbertConfig.from_preset("albert-base-v2", hidden_sise=3)


def test_v1_has_dropout_v2_has_none():
    assert AlbertConfig.from_preset("albert-large-v1").hidden_dropout_prob == 0.1
    assert AlbertConfig.from_preset("albert-large-v2").hidden_dropout_prob == 0.0


def test_group_of_layer_matches_original_formula():
    c = AlbertConfig.from_preset("albert-base-v2", num_hidden_groups=3)
    # int(layer_idx / num_hidden_layers * num_hidden_groups): 12 layers, 3 groups -> 4 layers each
    assert [c.group_of_layer(i) for i in range(12)] == [0] * 4 + [1] * 4 + [2] * 4


@pytest.mark.parametrize(
    "sharing,n_attn,n_ffn",
    [("all", 3 * 2, 3 * 2), ("attention", 3 * 2, 12 * 2), ("ffn", 12 * 2, 3 * 2), ("none", 12 * 2, 12 * 2)],
)
def test_sharing_decides_the_blocks(sharing, n_attn, n_ffn):
    """Paper Table 4: a shared sub-layer has one block per (group, inner layer), else one per (layer, inner)."""
    c = AlbertConfig.from_preset("albert-base-v2", num_hidden_groups=3, inner_group_num=2, sharing=sharing)
    assert (c.num_attention_blocks, c.num_ffn_blocks) == (n_attn, n_ffn)
    # layer 5, inner layer 1: group 1 (layers 4-7), so block 1 * 2 + 1 when shared, 5 * 2 + 1 when not
    assert c.attention_block(5, 1) == (3 if c.shares_attention else 11)
    assert c.ffn_block(5, 1) == (3 if c.shares_ffn else 11)
    blocks = {c.attention_block(layer, i) for layer in range(12) for i in range(2)}
    assert blocks == set(range(n_attn))  # every block is used, none is out of range


def test_unshared_albert_keeps_its_groups_through_hugging_face_layout():
    c = AlbertConfig.from_preset("albert-base-v2", sharing="none", num_hidden_groups=3)
    d = c.to_hf_dict()
    assert (d["num_hidden_groups"], d["albert_num_hidden_groups"]) == (12, 3)  # one group per layer for HF
    assert AlbertConfig.from_dict(d).replace(embedding_projection=None) == c
