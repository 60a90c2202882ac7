"""TF1 checkpoints -> model directories, checked against TensorFlow and against transformers' own converter.

The fixtures (tests/fixtures/tf/, written by scripts/make_tf_fixture.py with tensorflow-cpu 2.21) carry
``arrays.npz`` (every variable), ``expected.npz`` (the original model's outputs computed with TensorFlow
ops from the same variables) and ``hf.npz`` (what transformers' load_tf_weights_in_albert, which needs
TensorFlow, makes of the same checkpoint).
"""

from __future__ import annotations

import logging
import shutil
from pathlib import Path

import numpy as np
import pytest
import torch

from albert_lm.cli.main import main as cli
from albert_lm.convert.tf import ConversionError, convert_tf_checkpoint, load_tf_checkpoint
from albert_lm.convert.tf_checkpoint import ChecksumError, TFCheckpoint, write_checkpoint
from albert_lm.model import HEADS, AlbertForPreTraining, AlbertForSequenceClassification, AlbertModel

transformers = pytest.importorskip("transformers")

FIXTURES = Path(__file__).resolve().parent.parent / "fixtures" / "tf"


def _forward(model: torch.nn.Module, expected: np.lib.npyio.NpzFile) -> dict[str, torch.Tensor]:
    with torch.no_grad():
        return model.eval()(
            input_ids=torch.from_numpy(expected["input_ids"]).long(),
            token_type_ids=torch.from_numpy(expected["token_type_ids"]).long(),
        )


def _assert_state_equals_hf(model_dir: Path, hf_cls: str, hf_npz: Path) -> None:
    """transformers loads our directory to exactly the tensors its own TF converter makes."""
    hf = getattr(transformers, hf_cls).from_pretrained(model_dir)
    got = hf.state_dict()
    want = np.load(hf_npz)
    assert sorted(got) == sorted(want.files)
    for name in want.files:
        assert torch.equal(got[name], torch.from_numpy(want[name])), name


# ------------------------------------------------------------------------------- release tarball (google)
def test_release_tarball_converts_exactly(tmp_path: Path, caplog: pytest.LogCaptureFixture) -> None:
    src = FIXTURES / "google"
    with caplog.at_level(logging.INFO, logger="albert_lm.convert.tf"):
        report = convert_tf_checkpoint(src, tmp_path / "model", HEADS)
    assert report.layout == "google" and report.head == "pretraining" and report.unused == []
    assert len(report.skipped) == 2 * 80 + 1  # adam_m + adam_v of each of the 80 variables, global_step
    assert any("skipped 161 optimizer / bookkeeping variables" in r.getMessage() for r in caplog.records)
    assert {"config.json", "model.safetensors", "spiece.model"} <= {
        p.name for p in (tmp_path / "model").iterdir()
    }

    a = np.load(src / "arrays.npz")
    model = AlbertForPreTraining.from_pretrained(tmp_path / "model")
    sd = {k: v.numpy() for k, v in model.state_dict().items()}
    g = "bert/encoder/transformer/group_1/inner_group_1/"  # our attention block 1 * inner_group_num(2) + 1
    # embeddings and output_weights as they are, kernels transposed, q/k/v stacked as rows
    assert np.array_equal(sd["albert.embeddings.word.weight"], a["bert/embeddings/word_embeddings"])
    assert np.array_equal(sd["sop.weight"], a["cls/seq_relationship/output_weights"])
    assert np.array_equal(sd["mlm.bias"], a["cls/predictions/output_bias"])
    assert np.array_equal(
        sd["albert.embeddings.project.weight"], a["bert/encoder/embedding_hidden_mapping_in/kernel"].T
    )
    qkv = np.concatenate([a[g + f"attention_1/self/{n}/kernel"].T for n in ("query", "key", "value")])
    assert np.array_equal(sd["albert.encoder.attention.3.qkv.weight"], qkv)
    assert np.array_equal(sd["albert.encoder.attention.3.norm.weight"], a[g + "LayerNorm/gamma"])
    assert np.array_equal(sd["albert.encoder.ffn.3.norm.bias"], a[g + "LayerNorm_1/beta"])
    assert np.array_equal(
        sd["albert.encoder.ffn.3.down.weight"], a[g + "ffn_1/intermediate/output/dense/kernel"].T
    )

    # every tensor, as transformers' own converter makes it
    _assert_state_equals_hf(tmp_path / "model", "AlbertForPreTraining", src / "hf.npz")

    # and the outputs of the original model (TensorFlow ops on the same variables)
    expected = np.load(src / "expected.npz")
    out = _forward(model, expected)
    for key in ("sequence_output", "pooled_output", "mlm_logits", "sop_logits"):
        torch.testing.assert_close(out[key], torch.from_numpy(expected[key]), atol=5e-5, rtol=1e-5, msg=key)


def test_tfhub_module_layout(tmp_path: Path) -> None:
    """A TF-Hub module: variables/variables.* with the config and vocabulary under assets/."""
    src = FIXTURES / "google"
    module = tmp_path / "albert_base_hub"
    (module / "variables").mkdir(parents=True)
    (module / "assets").mkdir()
    for f in src.glob("model.ckpt-best.*"):
        shutil.copy(f, module / "variables" / f.name.replace("model.ckpt-best", "variables"))
    shutil.copy(src / "albert_config.json", module / "assets")
    shutil.copy(src / "30k-clean.model", module / "assets")
    convert_tf_checkpoint(module, tmp_path / "out", HEADS)
    assert (tmp_path / "out" / "spiece.model").read_bytes() == (src / "30k-clean.model").read_bytes()
    _assert_state_equals_hf(tmp_path / "out", "AlbertForPreTraining", src / "hf.npz")


def test_albert_zh_google_layout_with_wordpiece(tmp_path: Path) -> None:
    """albert_zh's "google" releases: Google's variable names, albert_model.ckpt, a WordPiece vocab.txt."""
    src = FIXTURES / "google"
    zh = tmp_path / "albert_tiny_google_zh"
    zh.mkdir()
    for f in src.glob("model.ckpt-best.*"):
        shutil.copy(f, zh / f.name.replace("model.ckpt-best", "albert_model.ckpt"))
    shutil.copy(src / "albert_config.json", zh)
    chars = [chr(0x4E00 + i) for i in range(95)]
    (zh / "vocab.txt").write_text(
        "\n".join(["[PAD]", "[UNK]", "[CLS]", "[SEP]", "[MASK]", *chars]) + "\n", encoding="utf-8"
    )
    report = convert_tf_checkpoint(zh, tmp_path / "out", HEADS)
    assert report.layout == "google" and report.prefix.name == "albert_model.ckpt"
    assert (tmp_path / "out" / "vocab.txt").is_file() and not (tmp_path / "out" / "spiece.model").exists()
    tok = transformers.AutoTokenizer.from_pretrained(tmp_path / "out")
    assert tok.convert_tokens_to_ids(["[CLS]", chr(0x4E00)]) == [2, 5]
    _assert_state_equals_hf(tmp_path / "out", "AlbertForPreTraining", src / "hf.npz")


# ----------------------------------------------------------------- fine-tuned classifier (TF-Hub, sharded)
def test_finetuned_classifier(tmp_path: Path) -> None:
    src = FIXTURES / "classifier"
    assert TFCheckpoint(src).num_shards == 2
    report = convert_tf_checkpoint(src, tmp_path / "model", HEADS)
    assert report.head == "classification"
    assert all(n.startswith("module/bert/") or n.startswith("output_") for n in report.used)
    model = AlbertForSequenceClassification.from_pretrained(tmp_path / "model")
    assert model.num_labels == 3
    a = np.load(src / "arrays.npz")
    assert np.array_equal(model.classifier.weight.detach().numpy(), a["output_weights"])  # (labels, H): as is
    _assert_state_equals_hf(tmp_path / "model", "AlbertForSequenceClassification", src / "hf.npz")
    expected = np.load(src / "expected.npz")
    out = _forward(model, expected)
    torch.testing.assert_close(out["logits"], torch.from_numpy(expected["logits"]), atol=5e-5, rtol=1e-5)


# -------------------------------------------------------------------------------- albert_zh (brightmart)
def test_brightmart_albert_zh(tmp_path: Path) -> None:
    src = FIXTURES / "brightmart"
    report = convert_tf_checkpoint(src, tmp_path / "model", HEADS)
    assert report.layout == "brightmart" and report.head == "pretraining"
    assert report.config_source.endswith("albert_config_tiny.json")
    assert all(s.endswith(("lamb_m", "lamb_v", "global_step")) for s in report.skipped)
    assert (tmp_path / "model" / "vocab.txt").read_text(encoding="utf-8") == (src / "vocab.txt").read_text(
        encoding="utf-8"
    )
    a = np.load(src / "arrays.npz")
    model = AlbertForPreTraining.from_pretrained(tmp_path / "model")
    h = model.config.hidden_size
    assert model.config.embedding_size == h  # the factorization is folded into the word table
    words = a["bert/embeddings/word_embeddings"].astype(np.float64) @ a["bert/embeddings/word_embeddings_2"]
    assert np.array_equal(model.albert.embeddings.word.weight.detach().numpy(), words.astype(np.float32))
    assert torch.equal(model.albert.embeddings.project.weight, torch.eye(h))
    assert np.array_equal(
        model.albert.encoder.ffn[0].down.weight.detach().numpy(),
        a["bert/encoder/layer_shared/output/dense/kernel"].T,
    )
    expected = np.load(src / "expected.npz")
    out = _forward(model, expected)
    for key in ("sequence_output", "pooled_output", "mlm_logits", "sop_logits"):
        torch.testing.assert_close(out[key], torch.from_numpy(expected[key]), atol=5e-5, rtol=1e-5, msg=key)
    # transformers reads the same directory to the same outputs
    hf = transformers.AlbertForPreTraining.from_pretrained(tmp_path / "model").eval()
    with torch.no_grad():
        ho = hf(
            input_ids=torch.from_numpy(expected["input_ids"]).long(),
            token_type_ids=torch.from_numpy(expected["token_type_ids"]).long(),
        )
    torch.testing.assert_close(ho.prediction_logits, out["mlm_logits"], atol=1e-5, rtol=1e-5)
    assert transformers.AutoTokenizer.from_pretrained(tmp_path / "model").cls_token_id == 2


# ------------------------------------------------------------------------------------------ errors
def _google_plus(tmp_path: Path, extra: dict[str, np.ndarray]) -> Path:
    """The google fixture re-written with our writer, plus ``extra`` variables."""
    a = np.load(FIXTURES / "google" / "arrays.npz")
    prefix = tmp_path / "ckpt" / "model.ckpt"
    write_checkpoint(prefix, {**{k: a[k] for k in a.files}, **extra})
    shutil.copy(FIXTURES / "google" / "albert_config.json", prefix.parent)
    return prefix


def test_unknown_variable_is_an_error_unless_allowed(tmp_path: Path) -> None:
    prefix = _google_plus(
        tmp_path,
        {"bert/encoder/transformer/group_0/inner_group_0/adapter/kernel": np.ones((2, 2), np.float32)},
    )
    with pytest.raises(
        ConversionError, match=r"match nothing .*group_0/inner_group_0/adapter/kernel.*--allow-unused"
    ):
        load_tf_checkpoint(prefix, HEADS)
    model, report = load_tf_checkpoint(prefix, HEADS, allow_unused=True)
    assert report.unused == ["bert/encoder/transformer/group_0/inner_group_0/adapter/kernel"]
    assert isinstance(model, AlbertForPreTraining)


def test_split_heads_kernels_of_older_exports(tmp_path: Path) -> None:
    """Attention variables stored with split heads, (H, heads, head_dim) / (heads, head_dim, H) /
    (heads, head_dim), convert to the same model as the 2-D variables of modeling.py."""
    a = np.load(FIXTURES / "google" / "arrays.npz")
    arrays = {k: a[k] for k in a.files}
    s = "bert/encoder/transformer/group_0/inner_group_1/attention_1/"
    h, heads = 16, 2
    for n in ("query", "key", "value"):
        arrays[s + f"self/{n}/kernel"] = arrays[s + f"self/{n}/kernel"].reshape(h, heads, h // heads)
        arrays[s + f"self/{n}/bias"] = arrays[s + f"self/{n}/bias"].reshape(heads, h // heads)
    arrays[s + "output/dense/kernel"] = arrays[s + "output/dense/kernel"].reshape(heads, h // heads, h)
    write_checkpoint(tmp_path / "model.ckpt", arrays)
    split, _ = load_tf_checkpoint(
        tmp_path / "model.ckpt", HEADS, config=FIXTURES / "google" / "albert_config.json"
    )
    flat, _ = load_tf_checkpoint(FIXTURES / "google", HEADS)
    for (name, x), (_, y) in zip(split.state_dict().items(), flat.state_dict().items()):
        assert torch.equal(x, y), name


def test_head_variables_of_another_head_are_not_errors() -> None:
    model, report = load_tf_checkpoint(FIXTURES / "google", HEADS, head=None)
    assert isinstance(model, AlbertModel)
    assert "cls/seq_relationship/output_weights" in report.unused


def test_config_that_does_not_fit(tmp_path: Path) -> None:
    cfg = tmp_path / "albert_config.json"
    cfg.write_text(
        (FIXTURES / "google" / "albert_config.json")
        .read_text()
        .replace('"hidden_size": 16', '"hidden_size": 32')
    )
    with pytest.raises(
        ConversionError,
        match=r"embedding_hidden_mapping_in/kernel' is float32 \(8, 16\), but it must be .*\(8, 32\)",
    ):
        load_tf_checkpoint(FIXTURES / "google", HEADS, config=cfg)
    one_group = tmp_path / "one_group.json"
    one_group.write_text(
        (FIXTURES / "google" / "albert_config.json")
        .read_text()
        .replace('"num_hidden_groups": 2', '"num_hidden_groups": 1')
    )
    with pytest.raises(ConversionError, match=r"match nothing .*group_1/"):
        load_tf_checkpoint(FIXTURES / "google", HEADS, config=one_group)


def test_corrupt_data_file_is_refused_by_the_cli(tmp_path: Path, capsys: pytest.CaptureFixture[str]) -> None:
    src = tmp_path / "albert_base"
    shutil.copytree(FIXTURES / "google", src)
    name = "bert/embeddings/position_embeddings"
    entry = TFCheckpoint(src).entries[name]
    data = src / "model.ckpt-best.data-00000-of-00001"
    raw = bytearray(data.read_bytes())
    raw[entry.offset + 5] ^= 0x80
    data.write_bytes(bytes(raw))
    assert cli(["convert", "tf", str(src), "--output", str(tmp_path / "out")]) == 1
    err = capsys.readouterr().err
    assert name in err and f"crc32c stored {entry.crc32c:#010x}" in err
    assert not (tmp_path / "out" / "model.safetensors").exists()
    with pytest.raises(ChecksumError):
        load_tf_checkpoint(src, HEADS)


def test_cli_converts(tmp_path: Path, capsys: pytest.CaptureFixture[str]) -> None:
    prefix = FIXTURES / "classifier" / "model.ckpt-100"
    assert cli(["convert", "tf", f"{prefix}.index", "--output", str(tmp_path / "m")]) == 0
    out = capsys.readouterr().out
    assert "27 variables converted, 55 optimizer/bookkeeping variables skipped" in out  # 2 x 27 slots + step
    assert AlbertForSequenceClassification.from_pretrained(tmp_path / "m").num_labels == 3


# ----------------------------------------------------------------- BERT layout, real weights (MiniLM)
@pytest.mark.slow
@pytest.mark.data
def test_bert_layout_with_real_weights(tmp_path: Path, minilm_dir: Path) -> None:
    """MiniLM's real BERT weights, written under google-research/bert's TF names, convert and reproduce
    transformers' BertModel."""
    from safetensors.numpy import load_file

    from albert_lm.config import AlbertConfig
    from albert_lm.convert import keymap

    config = AlbertConfig.from_json(minilm_dir / "config.json")
    hf_state = load_file(str(minilm_dir / "model.safetensors"))
    hf_state = {k.removeprefix("bert."): v for k, v in hf_state.items()}
    ours_to_hf = {r.ours: r.theirs for r in keymap.expand(keymap.HF_BERT_BACKBONE, config)}
    tf_arrays: dict[str, np.ndarray] = {}
    for rule in keymap.expand(keymap.TF_BERT_BACKBONE, config):
        for tf_name, hf_name in zip(rule.theirs, ours_to_hf[rule.ours]):
            arr = hf_state[hf_name]
            tf_arrays[tf_name] = np.ascontiguousarray(arr.T) if tf_name.endswith("/kernel") else arr
    write_checkpoint(tmp_path / "bert_model.ckpt", tf_arrays)
    model, report = load_tf_checkpoint(tmp_path / "bert_model.ckpt", HEADS, config=minilm_dir / "config.json")
    assert report.layout == "bert" and isinstance(model, AlbertModel)
    hf = transformers.BertModel.from_pretrained(minilm_dir).eval()
    ids = torch.tensor([[101, 7592, 1010, 2088, 999, 102]])
    with torch.no_grad():
        want = hf(input_ids=ids).last_hidden_state
        got = model(input_ids=ids).sequence_output
    torch.testing.assert_close(got, want, atol=1e-4, rtol=1e-4)


def test_squad_v2_head_of_run_squad_v2(tmp_path: Path) -> None:
    """A checkpoint fine-tuned by the original run_squad_v2.py (squad_utils.create_v2_model's variables)
    converts to AlbertForSquadV2, and the head computes what the TF graph computes, in numpy: start logits,
    end logits from concat([sequence, start features]) -> tanh -> LayerNorm (eps 1e-12) -> dense, and the
    answerability logit from concat([start-weighted sequence, CLS]) -> tanh -> dense without bias."""
    from albert_lm.model import AlbertForSquadV2

    h = 16  # the google fixture's hidden size
    rng = np.random.default_rng(0)

    def w(*shape: int) -> np.ndarray:
        return rng.normal(0.0, 0.5, shape).astype(np.float32)

    head = {
        "start_logits/dense/kernel": w(h, 1),
        "start_logits/dense/bias": w(1),
        "end_logits/dense_0/kernel": w(2 * h, h),
        "end_logits/dense_0/bias": w(h),
        "end_logits/LayerNorm/gamma": 1.0 + w(h),
        "end_logits/LayerNorm/beta": w(h),
        "end_logits/dense_1/kernel": w(h, 1),
        "end_logits/dense_1/bias": w(1),
        "answer_class/dense_0/kernel": w(2 * h, h),
        "answer_class/dense_0/bias": w(h),
        "answer_class/dense_1/kernel": w(h, 1),
    }
    report = convert_tf_checkpoint(_google_plus(tmp_path, head), tmp_path / "model", HEADS)
    assert report.head == "squad_v2"
    assert set(head) <= {n.split("module/")[-1] for n in report.used}
    model = AlbertForSquadV2.from_pretrained(tmp_path / "model").eval()

    ids = torch.from_numpy(rng.integers(5, 100, (2, 12))).long()
    p_mask = torch.zeros(2, 12)
    p_mask[:, 1:4] = 1  # question tokens: not an answer
    starts = torch.tensor([5, 7])
    with torch.no_grad():
        seq = model.albert(ids).sequence_output.double().numpy()  # (B, T, H)
        out = model(ids, p_mask=p_mask)
        model.train()  # the end logits conditioned on the gold start are the training path
        model.squad.dropout.p = 0.0
        gold = model(ids, p_mask=p_mask, start_positions=starts, end_positions=starts, is_impossible=None)
    hd = {k: v.astype(np.float64) for k, v in head.items()}
    neg = -1e30 * p_mask.double().numpy()
    start = (seq @ hd["start_logits/dense/kernel"])[..., 0] + hd["start_logits/dense/bias"][0]
    start = start * (1 - p_mask.double().numpy()) + neg

    def log_softmax(x: np.ndarray) -> np.ndarray:
        z = x - x.max(-1, keepdims=True)
        return z - np.log(np.exp(z).sum(-1, keepdims=True))

    np.testing.assert_allclose(out["start_log_probs"].numpy()[:, 4:], log_softmax(start)[:, 4:], atol=1e-4)
    sf = seq[np.arange(2), starts.numpy()]  # (B, H) gold start features
    x = np.tanh(np.concatenate([seq, np.repeat(sf[:, None], 12, 1)], -1) @ hd["end_logits/dense_0/kernel"]
                + hd["end_logits/dense_0/bias"])  # fmt: skip
    x = (x - x.mean(-1, keepdims=True)) / np.sqrt(x.var(-1, keepdims=True) + 1e-12)
    x = x * hd["end_logits/LayerNorm/gamma"] + hd["end_logits/LayerNorm/beta"]
    end = (x @ hd["end_logits/dense_1/kernel"])[..., 0] + hd["end_logits/dense_1/bias"][0]
    end = end * (1 - p_mask.double().numpy()) + neg
    np.testing.assert_allclose(gold["end_log_probs"].numpy()[:, 4:], log_softmax(end)[:, 4:], atol=1e-4)
    sp = np.exp(log_softmax(start))
    feat = np.concatenate([np.einsum("bt,bth->bh", sp, seq), seq[:, 0]], -1)
    a = np.tanh(feat @ hd["answer_class/dense_0/kernel"] + hd["answer_class/dense_0/bias"])
    cls = (a @ hd["answer_class/dense_1/kernel"])[:, 0]
    np.testing.assert_allclose(out["cls_logits"].numpy(), cls, atol=1e-4)


def test_the_caller_chooses_the_model_class() -> None:
    """albert_lm.convert.tf names the head; the class comes from the table its caller passes."""

    class Mine(AlbertForPreTraining):
        pass

    model, report = load_tf_checkpoint(FIXTURES / "google", {**HEADS, "pretraining": Mine})
    assert report.head == "pretraining" and type(model) is Mine
    with pytest.raises(ValueError, match="no model class for head 'pretraining'"):
        load_tf_checkpoint(FIXTURES / "google", {None: AlbertModel})
