"""Issue 15, the model side: no silently ignored inputs, no silently initialized task heads, no tracebacks
for damaged checkpoints (each error names the file and the tensor), and `albert convert` never clobbers
an output directory."""

from __future__ import annotations

import json
import shutil
from pathlib import Path

import numpy as np
import pytest
import torch
from safetensors.torch import load_file, save_file

from albert_lm._io import TMP_PREFIX
from albert_lm.config import AlbertConfig, ConfigError
from albert_lm.convert.hf import CheckpointError, load_model
from albert_lm.convert.tf import ConversionError, convert_tf_checkpoint, load_tf_checkpoint
from albert_lm.convert.tf_checkpoint import write_checkpoint
from albert_lm.model import (
    HEADS,
    AlbertForPreTraining,
    AlbertForSequenceClassification,
    AlbertModel,
    PreTrainedModule,
)

TF_FIXTURES = Path(__file__).resolve().parents[2] / "fixtures" / "tf"
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


# ----------------------------------------------------------------- item 9: damaged model directories
@pytest.fixture
def saved(tmp_path: Path) -> Path:
    AlbertForPreTraining(_tiny()).save_pretrained(tmp_path)
    return tmp_path


def _edit(path: Path, fn) -> None:  # noqa: ANN001
    state = load_file(str(path / "model.safetensors"))
    fn(state)
    save_file(state, str(path / "model.safetensors"), metadata={"format": "pt"})


def test_truncated_safetensors_names_the_file_and_the_tensors_cut_off(saved: Path) -> None:
    weights = saved / "model.safetensors"
    data = weights.read_bytes()
    weights.write_bytes(data[:-10])  # the last tensor in the file loses its last bytes
    with pytest.raises(CheckpointError) as e:
        AlbertForPreTraining.from_pretrained(saved)
    message = str(e.value)
    assert message.startswith(f"{weights}: cannot read weights")
    assert f"truncated: {len(data) - 10} bytes" in message and "past the end of the file" in message
    header = json.loads(data[8 : 8 + int.from_bytes(data[:8], "little")])
    last = max((k for k in header if k != "__metadata__"), key=lambda k: header[k]["data_offsets"][1])
    assert f"tensor {last} past the end" in message


@pytest.mark.parametrize("shape", [(16, 32), (32, 16)])
def test_fused_qkv_part_of_the_wrong_shape_is_named(saved: Path, shape: tuple[int, int]) -> None:
    """Was a raw ``torch.cat`` RuntimeError (32, 16), or a message naming only the concatenation (16, 32)."""
    key = "albert.encoder.albert_layer_groups.0.albert_layers.0.attention.key.weight"
    _edit(saved, lambda s: s.__setitem__(key, torch.zeros(shape)))
    with pytest.raises(CheckpointError) as e:
        AlbertForPreTraining.from_pretrained(saved)
    message = str(e.value)
    assert message.startswith(f"{saved / 'model.safetensors'}: tensor '{key}' has shape {shape}")
    assert (
        "one of the 3 row blocks of the model's 'albert.encoder.attention.0.qkv.weight' (96, 32)" in message
    )
    assert "needs (32, 32)" in message


def test_integer_tensor_is_not_cast_silently(saved: Path) -> None:
    _edit(saved, lambda s: s.__setitem__("albert.pooler.weight", torch.ones(32, 32, dtype=torch.int32)))
    with pytest.raises(CheckpointError, match=r"'albert.pooler.weight' is torch.int32, not a floating"):
        AlbertForPreTraining.from_pretrained(saved)


@pytest.mark.parametrize(
    ("content", "reason"),
    [
        (b"\xff\xfe\x00garbage", r"not UTF-8 text \(byte 0\)"),
        (b'{"hidden_size": 32,\n', r"not valid JSON \(line 2"),
    ],
)
def test_unreadable_config_json_names_the_file(saved: Path, content: bytes, reason: str) -> None:
    (saved / "config.json").write_bytes(content)
    with pytest.raises(ConfigError, match=rf"config.json: {reason}"):
        AlbertModel.from_pretrained(saved)


def test_bert_config_without_hidden_size_is_a_config_error() -> None:
    with pytest.raises(ConfigError, match=r"bert_config.json: no field 'hidden_size'"):
        AlbertConfig.from_dict({"model_type": "bert", "num_hidden_layers": 2}, source="bert_config.json")


def test_tf_split_heads_kernel_that_does_not_flatten_to_the_kernel_is_refused(tmp_path: Path) -> None:
    """A (heads, H, head_dim) key kernel has the right number of values but is no C-order view of the (H, H)
    kernel; it used to be reshaped silently into a wrong matrix."""
    a = np.load(TF_FIXTURES / "google" / "arrays.npz")
    arrays = {k: a[k] for k in a.files}
    name = "bert/encoder/transformer/group_0/inner_group_1/attention_1/self/key/kernel"
    arrays[name] = arrays[name].reshape(2, 16, 8)  # H = 16, 2 heads of 8
    write_checkpoint(tmp_path / "model.ckpt", arrays)
    with pytest.raises(
        ConversionError, match=rf"tensor '{name}' has shape \(2, 16, 8\), expected \(16, 16\)"
    ):
        load_tf_checkpoint(
            tmp_path / "model.ckpt", HEADS, config=TF_FIXTURES / "google" / "albert_config.json"
        )


# ------------------------------------------------------------ item 5: a model without its task head
def test_require_head_refuses_a_model_dir_without_the_task_head(saved: Path) -> None:
    with pytest.raises(CheckpointError) as e:
        AlbertForSequenceClassification.from_pretrained(saved, num_labels=3, require_head=True)
    message = str(e.value)
    assert message.startswith(
        f"{saved / 'model.safetensors'}: no tensor for classifier.weight, classifier.bias"
    )
    assert "AlbertForSequenceClassification head" in message
    # without it (fine-tuning from a pretrained model), the head is initialized, as before
    assert AlbertForSequenceClassification.from_pretrained(saved, num_labels=3).num_labels == 3


def test_require_head_accepts_a_complete_model_dir(tmp_path: Path) -> None:
    tuned = AlbertForSequenceClassification(_tiny(), num_labels=3)
    tuned.save_pretrained(tmp_path)
    back = load_model(tmp_path, require_head=True)
    assert isinstance(back, AlbertForSequenceClassification)
    torch.testing.assert_close(back.classifier.weight, tuned.classifier.weight, atol=0, rtol=0)


def test_require_head_in_the_native_layout(tmp_path: Path) -> None:
    """Partial sharing is saved under our own names; the rule is the same."""
    config = AlbertConfig.from_preset("albert-tiny", sharing="ffn")
    AlbertForSequenceClassification(config, num_labels=2).save_pretrained(tmp_path / "tuned")
    AlbertForSequenceClassification.from_pretrained(tmp_path / "tuned", require_head=True)
    AlbertModel(config).save_pretrained(tmp_path / "encoder")
    with pytest.raises(CheckpointError, match=r"no tensor for classifier.weight, classifier.bias"):
        AlbertForSequenceClassification.from_pretrained(tmp_path / "encoder", num_labels=2, require_head=True)


def test_require_head_counts_the_pooler(saved: Path) -> None:
    """The classifier reads the pooled output: an untrained pooler is as random as an untrained head."""
    tuned = AlbertForSequenceClassification(_tiny(), num_labels=2)
    tuned.save_pretrained(saved)
    _edit(saved, lambda s: [s.pop(k) for k in ("albert.pooler.weight", "albert.pooler.bias")])
    with pytest.raises(CheckpointError, match=r"no tensor for albert.pooler.weight, albert.pooler.bias"):
        AlbertForSequenceClassification.from_pretrained(saved, require_head=True)


# ------------------------------------------------------------------ item 6: convert's output directory
def _google(tmp_path: Path) -> Path:
    src = tmp_path / "albert_base"
    shutil.copytree(TF_FIXTURES / "google", src)
    return src


def test_convert_refuses_a_non_empty_output_unless_overwrite(tmp_path: Path) -> None:
    src, out = _google(tmp_path), tmp_path / "out"
    out.mkdir()
    (out / "notes.txt").write_text("mine")
    with pytest.raises(FileExistsError, match=rf"{out}: the output exists .* --overwrite"):
        convert_tf_checkpoint(src, out, HEADS)
    assert [p.name for p in out.iterdir()] == ["notes.txt"]

    convert_tf_checkpoint(src, out, HEADS, overwrite=True)
    names = {p.name for p in out.iterdir()}
    assert {"config.json", "model.safetensors", "spiece.model"} <= names and "notes.txt" not in names
    assert isinstance(load_model(out), AlbertForPreTraining)
    assert not [p for p in tmp_path.iterdir() if p.name.startswith(TMP_PREFIX)]


def test_convert_into_an_empty_directory_needs_no_overwrite(tmp_path: Path) -> None:
    (tmp_path / "out").mkdir()
    convert_tf_checkpoint(_google(tmp_path), tmp_path / "out", HEADS)
    assert (tmp_path / "out" / "model.safetensors").is_file()


def test_convert_overwrite_is_all_or_nothing(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    """A conversion that fails while writing leaves the old directory exactly as it was (never half old,
    half new: config.json is written after the weights, so a per-file write would have mixed them)."""
    src, out = _google(tmp_path), tmp_path / "out"
    convert_tf_checkpoint(src, out, HEADS, head=None)
    before = {p.name: p.read_bytes() for p in out.iterdir()}

    import albert_lm.convert.hf

    def fail_config(path: Path, text: str) -> None:
        raise OSError("simulated failure writing config.json")

    monkeypatch.setattr(albert_lm.convert.hf, "atomic_write_text", fail_config)
    with pytest.raises(OSError, match="simulated failure"):
        convert_tf_checkpoint(src, out, HEADS, overwrite=True)  # the pretraining head: other weights
    assert {p.name: p.read_bytes() for p in out.iterdir()} == before
    assert not [p for p in tmp_path.iterdir() if p.name.startswith(TMP_PREFIX)]
