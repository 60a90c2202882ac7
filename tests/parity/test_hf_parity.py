"""Parity with Hugging Face transformers on random weights (litgpt-style): build a random HF model, save
it, load it with our loader, compare outputs; and the reverse direction, ours saved for HF to load."""

from __future__ import annotations

import pytest
import torch

transformers = pytest.importorskip("transformers")

from albert_lm.config import AlbertConfig  # noqa: E402
from albert_lm.convert import keymap  # noqa: E402
from albert_lm.convert.hf import load_model  # noqa: E402
from albert_lm.model import (  # noqa: E402
    HEADS,
    AlbertForMaskedLM,
    AlbertForPreTraining,
    AlbertForQuestionAnswering,
    AlbertForSequenceClassification,
    AlbertModel,
)
from albert_lm.model.heads import IGNORE_INDEX, AlbertForTokenClassification  # noqa: E402

TOL = dict(atol=1e-5, rtol=1e-5)

HF_CONFIGS = {
    "tiny": dict(
        vocab_size=99,
        embedding_size=16,
        hidden_size=32,
        num_hidden_layers=3,
        num_hidden_groups=1,
        inner_group_num=1,
        num_attention_heads=4,
        intermediate_size=37,
        max_position_embeddings=64,
    ),
    "groups": dict(
        vocab_size=120,
        embedding_size=24,
        hidden_size=48,
        num_hidden_layers=6,
        num_hidden_groups=3,
        inner_group_num=2,
        num_attention_heads=6,
        intermediate_size=64,
        max_position_embeddings=64,
    ),
    "albert-base": dict(
        vocab_size=30000,
        embedding_size=128,
        hidden_size=768,
        num_hidden_layers=12,
        num_hidden_groups=1,
        inner_group_num=1,
        num_attention_heads=12,
        intermediate_size=3072,
        max_position_embeddings=512,
    ),
}


def _batch(vocab: int, b: int = 3, t: int = 20) -> dict[str, torch.Tensor]:
    g = torch.Generator().manual_seed(1)
    ids = torch.randint(0, vocab, (b, t), generator=g)
    mask = torch.ones(b, t, dtype=torch.long)
    mask[1, 13:] = 0  # padding in the batch
    mask[2, 7:] = 0
    types = torch.zeros(b, t, dtype=torch.long)
    types[:, 5:] = 1
    return dict(input_ids=ids, attention_mask=mask, token_type_ids=types)


def _hf_albert(kind: str, cls_name: str = "AlbertForPreTraining", **extra):
    cfg = transformers.AlbertConfig(
        hidden_act="gelu_new",
        hidden_dropout_prob=0.0,
        attention_probs_dropout_prob=0.0,
        classifier_dropout_prob=0.0,
        attn_implementation="eager",
        **HF_CONFIGS[kind],
        **extra,
    )
    torch.manual_seed(0)
    model = getattr(transformers, cls_name)(cfg).eval()
    with torch.no_grad():  # non-trivial LayerNorm and bias values, so a swapped tensor cannot pass
        for name, p in model.named_parameters():
            if "LayerNorm" in name or name.endswith("bias"):
                p.add_(torch.randn_like(p) * 0.1)
    return model


def _valid(mask: torch.Tensor) -> torch.Tensor:
    return mask.bool()


@pytest.mark.parametrize("kind", ["tiny", "groups", "albert-base"])
def test_hf_albert_pretraining_loads_into_ours(kind, tmp_path):
    hf = _hf_albert(kind)
    hf.save_pretrained(tmp_path)
    ours = AlbertForPreTraining.from_pretrained(tmp_path).eval()
    batch = _batch(hf.config.vocab_size)
    with torch.no_grad():
        ref = hf(**batch, output_hidden_states=True)
        out = ours(**batch)
    valid = _valid(batch["attention_mask"])
    torch.testing.assert_close(out.sequence_output[valid], ref.hidden_states[-1][valid], **TOL)
    torch.testing.assert_close(out.mlm_logits[valid], ref.prediction_logits[valid], **TOL)
    torch.testing.assert_close(out.sop_logits, ref.sop_logits, **TOL)


@pytest.mark.parametrize("kind", ["tiny", "groups"])
def test_ours_saved_loads_into_hf(kind, tmp_path):
    hf_cfg = HF_CONFIGS[kind]
    config = AlbertConfig(**hf_cfg, embedding_projection=True)
    torch.manual_seed(0)
    ours = AlbertForPreTraining(config).eval()
    with torch.no_grad():
        for p in ours.parameters():
            p.add_(torch.randn_like(p) * 0.05)
    ours.save_pretrained(tmp_path)
    hf = transformers.AlbertForPreTraining.from_pretrained(tmp_path, attn_implementation="eager").eval()
    batch = _batch(config.vocab_size)
    with torch.no_grad():
        ref = hf(**batch, output_hidden_states=True)
        out = ours(**batch)
    valid = _valid(batch["attention_mask"])
    torch.testing.assert_close(ref.hidden_states[-1][valid], out.sequence_output[valid], **TOL)
    torch.testing.assert_close(ref.prediction_logits[valid], out.mlm_logits[valid], **TOL)
    torch.testing.assert_close(ref.sop_logits, out.sop_logits, **TOL)
    # and back: the round trip gives the same tensors
    again = AlbertForPreTraining.from_pretrained(tmp_path)
    for (k, a), (_, b) in zip(ours.state_dict().items(), again.state_dict().items()):
        torch.testing.assert_close(a, b, atol=0, rtol=0, msg=k)


def test_mlm_logits_at_masked_positions_match_full(tmp_path):
    hf = _hf_albert("tiny")
    hf.save_pretrained(tmp_path)
    ours = AlbertForPreTraining.from_pretrained(tmp_path).eval()
    batch = _batch(hf.config.vocab_size)
    labels = torch.full_like(batch["input_ids"], -100)
    labels[0, 3], labels[1, 8], labels[2, 1] = 5, 6, 7
    with torch.no_grad():
        ref = hf(**batch, labels=labels, sentence_order_label=torch.tensor([0, 1, 1]))
        out = ours(**batch, mlm_labels=labels, sop_labels=torch.tensor([0, 1, 1]))
    assert out.mlm_logits.shape == (3, hf.config.vocab_size)
    torch.testing.assert_close(out.mlm_logits, ref.prediction_logits[labels != -100], **TOL)
    torch.testing.assert_close(out.loss, ref.loss, **TOL)


@pytest.mark.parametrize(
    "hf_cls,ours_cls,extra",
    [
        ("AlbertModel", AlbertModel, {}),
        ("AlbertForMaskedLM", AlbertForMaskedLM, {}),
        ("AlbertForSequenceClassification", AlbertForSequenceClassification, {"num_labels": 3}),
        ("AlbertForQuestionAnswering", AlbertForQuestionAnswering, {}),
        ("AlbertForTokenClassification", AlbertForTokenClassification, {"num_labels": 5}),
    ],
)
def test_hf_albert_heads(hf_cls, ours_cls, extra, tmp_path):
    hf = _hf_albert("groups", hf_cls, **extra)
    hf.save_pretrained(tmp_path)
    ours = ours_cls.from_pretrained(tmp_path).eval()
    assert type(load_model(tmp_path)) is ours_cls  # the class transformers' config.json names
    batch = _batch(hf.config.vocab_size)
    valid = _valid(batch["attention_mask"])
    with torch.no_grad():
        ref = hf(**batch)
        out = ours(**batch)
    if hf_cls == "AlbertModel":
        torch.testing.assert_close(out.sequence_output[valid], ref.last_hidden_state[valid], **TOL)
        torch.testing.assert_close(out.pooled_output, ref.pooler_output, **TOL)
    elif hf_cls == "AlbertForMaskedLM":
        torch.testing.assert_close(out.mlm_logits[valid], ref.logits[valid], **TOL)
    elif hf_cls == "AlbertForSequenceClassification":
        assert ours.num_labels == 3
        torch.testing.assert_close(out.logits, ref.logits, **TOL)
    elif hf_cls == "AlbertForTokenClassification":
        assert ours.num_labels == 5
        torch.testing.assert_close(out.logits[valid], ref.logits[valid], **TOL)
    else:
        torch.testing.assert_close(out.start_logits[valid], ref.start_logits[valid], **TOL)
        torch.testing.assert_close(out.end_logits[valid], ref.end_logits[valid], **TOL)


def test_transformers_reads_our_token_classification_dir(tmp_path):
    """Our NER model directory (`albert finetune ner`'s checkpoints) is one transformers loads: the same
    class, tag names, logits and loss (IGNORE_INDEX positions left out of both)."""
    torch.manual_seed(0)
    cfg = AlbertConfig.from_preset("albert-tiny")
    ours = AlbertForTokenClassification(cfg, num_labels=3).eval()  # eval: no dropout on either side
    ours.label_names = ["O", "B-PER", "I-PER"]
    ours.save_pretrained(tmp_path)
    hf = transformers.AlbertForTokenClassification.from_pretrained(
        tmp_path, attn_implementation="eager"
    ).eval()
    assert hf.config.id2label == {0: "O", 1: "B-PER", 2: "I-PER"}
    batch = _batch(cfg.vocab_size)
    labels = torch.randint(0, 3, batch["input_ids"].shape, generator=torch.Generator().manual_seed(2))
    labels[batch["attention_mask"] == 0] = IGNORE_INDEX
    labels[:, 0] = IGNORE_INDEX  # [CLS], as the task labels it
    with torch.no_grad():
        out = ours(**batch, labels=labels)
        ref = hf(**batch, labels=labels)
    valid = _valid(batch["attention_mask"])
    torch.testing.assert_close(out.logits[valid], ref.logits[valid], **TOL)
    torch.testing.assert_close(out.loss, ref.loss, **TOL)


@pytest.mark.parametrize("hf_cls", ["BertModel", "BertForPreTraining", "BertForMaskedLM"])
def test_hf_bert_loads(hf_cls, tmp_path):
    cfg = transformers.BertConfig(
        vocab_size=101,
        hidden_size=32,
        num_hidden_layers=3,
        num_attention_heads=4,
        intermediate_size=40,
        max_position_embeddings=64,
        hidden_dropout_prob=0.0,
        attention_probs_dropout_prob=0.0,
        attn_implementation="eager",
    )
    torch.manual_seed(0)
    hf = getattr(transformers, hf_cls)(cfg).eval()
    hf.save_pretrained(tmp_path)
    cls = {
        "BertModel": AlbertModel,
        "BertForPreTraining": AlbertForPreTraining,
        "BertForMaskedLM": AlbertForMaskedLM,
    }
    ours = cls[hf_cls].from_pretrained(tmp_path).eval()
    assert type(load_model(tmp_path)) is cls[hf_cls]
    assert ours.config.model_type == "bert" and ours.config.hidden_act == "gelu"
    batch = _batch(cfg.vocab_size)
    valid = _valid(batch["attention_mask"])
    with torch.no_grad():
        ref = hf(**batch, output_hidden_states=True)
        out = ours(**batch)
    torch.testing.assert_close(out.sequence_output[valid], ref.hidden_states[-1][valid], **TOL)
    if hf_cls == "BertForPreTraining":
        torch.testing.assert_close(out.mlm_logits[valid], ref.prediction_logits[valid], **TOL)
        torch.testing.assert_close(out.sop_logits, ref.seq_relationship_logits, **TOL)
    # ours saved as BERT loads back into transformers' BERT class
    save = tmp_path / "ours"
    ours.save_pretrained(save)
    hf2 = getattr(transformers, hf_cls).from_pretrained(save, attn_implementation="eager").eval()
    with torch.no_grad():
        ref2 = hf2(**batch, output_hidden_states=True)
    torch.testing.assert_close(ref2.hidden_states[-1][valid], out.sequence_output[valid], **TOL)


def test_real_minilm_bert_weights(minilm_dir):
    """The real all-MiniLM-L6-v2 BERT weights give transformers' BertModel hidden states."""
    hf = transformers.BertModel.from_pretrained(minilm_dir, attn_implementation="eager").eval()
    ours = AlbertModel.from_pretrained(minilm_dir).eval()
    tok = transformers.BertTokenizer.from_pretrained(minilm_dir)
    enc = tok(
        ["ALBERT shares parameters across layers.", "A much longer first sentence, with padding after it."],
        ["What is factorized?", "Short."],
        padding=True,
        return_tensors="pt",
    )
    batch = {k: enc[k] for k in ("input_ids", "token_type_ids", "attention_mask")}
    valid = _valid(batch["attention_mask"])
    with torch.no_grad():
        ref = hf(**batch)
        out = ours(**batch)
    torch.testing.assert_close(out.sequence_output[valid], ref.last_hidden_state[valid], **TOL)
    torch.testing.assert_close(out.pooled_output, ref.pooler_output, **TOL)


def test_our_architectures_are_transformers_classes():
    """config.json's ``architectures`` (derived from albert_lm.model.HEADS) names classes transformers has."""
    for model_type in keymap.HF_HEADS:
        for head in HEADS:
            assert hasattr(transformers, keymap.hf_architecture(model_type, head)), (model_type, head)
