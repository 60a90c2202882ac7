from __future__ import annotations

import pytest
import torch

from albert_lm.config import AlbertConfig
from albert_lm.model import (
    AlbertForMultipleChoice,
    AlbertForPreTraining,
    AlbertForSequenceClassification,
    AlbertModel,
)


def tiny(**kw) -> AlbertConfig:
    return AlbertConfig.from_preset("albert-tiny", **kw)


@pytest.mark.parametrize(
    "sharing,n_attn,n_ffn",
    [("all", 2 * 2, 2 * 2), ("attention", 4, 6 * 2), ("ffn", 6 * 2, 4), ("none", 12, 12)],
)
def test_sharing_modes_block_counts(sharing, n_attn, n_ffn):
    m = AlbertModel(tiny(num_hidden_layers=6, num_hidden_groups=2, inner_group_num=2, sharing=sharing))
    assert (len(m.encoder.attention), len(m.encoder.ffn)) == (n_attn, n_ffn)
    schedule = m.encoder._schedule
    assert len(schedule) == 12  # 6 layers x 2 inner layers
    if sharing == "all":
        # layers 0-2 use group 0 (blocks 0, 1), layers 3-5 group 1 (blocks 2, 3)
        assert [a for a, _ in schedule] == [0, 1] * 3 + [2, 3] * 3
    if sharing == "none":
        assert [a for a, _ in schedule] == list(range(12))


def test_shared_weights_are_reused_across_depth():
    """With full sharing, changing the one shared block changes every layer; the gradient of the shared
    weight sums over all the layers that use it."""
    c = tiny(num_hidden_layers=4, num_hidden_groups=1)
    m = AlbertModel(c)
    ids = torch.randint(5, c.vocab_size, (2, 10))
    m(ids).sequence_output.sum().backward()
    g_shared = m.encoder.attention[0].qkv.weight.grad.clone()
    c1 = tiny(num_hidden_layers=1, num_hidden_groups=1)
    one = AlbertModel(c1)
    one.load_state_dict(m.state_dict())
    assert not torch.allclose(one(ids).sequence_output, m(ids).sequence_output)
    assert g_shared.abs().sum() > 0


def test_padding_does_not_change_real_tokens():
    c = tiny()
    m = AlbertModel(c).eval()
    ids = torch.randint(5, c.vocab_size, (1, 8))
    padded = torch.cat([ids, torch.zeros(1, 4, dtype=torch.long)], dim=1)
    mask = torch.cat([torch.ones(1, 8), torch.zeros(1, 4)], dim=1).long()
    with torch.no_grad():
        a = m(ids).sequence_output
        b = m(padded, attention_mask=mask).sequence_output[:, :8]
    torch.testing.assert_close(a, b, atol=1e-5, rtol=1e-5)


def test_no_projection_when_e_equals_h_original_behaviour():
    assert AlbertModel(tiny(embedding_size=32)).embeddings.project is None
    assert AlbertModel(tiny(embedding_size=32, embedding_projection=True)).embeddings.project is not None


def test_pretraining_losses_and_masked_logits():
    c = tiny()
    m = AlbertForPreTraining(c)
    ids = torch.randint(5, c.vocab_size, (2, 12))
    labels = torch.full_like(ids, -100)
    labels[0, 2], labels[1, 5], labels[1, 6] = 11, 12, 13
    out = m(ids, mlm_labels=labels, sop_labels=torch.tensor([0, 1]))
    assert out.mlm_logits.shape == (3, c.vocab_size)
    ref = torch.nn.functional.cross_entropy(out.mlm_logits, labels[labels != -100])
    torch.testing.assert_close(out.mlm_loss, ref)
    torch.testing.assert_close(out.loss, out.mlm_loss + out.sop_loss)
    assert m(ids).mlm_logits.shape == (2, 12, c.vocab_size)  # all positions without labels


def test_mlm_decoder_is_tied_to_word_embeddings():
    c = tiny()
    m = AlbertForPreTraining(c)
    ids = torch.randint(5, c.vocab_size, (2, 12))
    m(ids).mlm_logits.sum().backward()
    # the decoder gradient lands on the word embedding matrix: rows never used as input still get one
    unused = torch.ones(c.vocab_size, dtype=torch.bool)
    unused[ids.flatten()] = False
    assert m.albert.embeddings.word.weight.grad[unused].abs().sum() > 0
    assert "mlm.decoder_weight" not in m.state_dict()


def test_initialization_is_truncated_normal():
    c = AlbertConfig.from_preset("albert-base-v2", num_hidden_layers=1)
    w = AlbertModel(c).encoder.ffn[0].up.weight
    assert w.abs().max() <= 2 * c.initializer_range + 1e-7
    assert abs(w.std().item() - 0.88 * c.initializer_range) < 0.001  # std of N(0, s) truncated at 2s = 0.88s


def test_classification_regression_and_multiple_choice():
    c = tiny()
    ids = torch.randint(5, c.vocab_size, (3, 9))
    reg = AlbertForSequenceClassification(c, num_labels=1)
    out = reg(ids, labels=torch.tensor([0.5, 1.0, 2.0]))
    torch.testing.assert_close(
        out.loss, torch.nn.functional.mse_loss(out.logits.squeeze(-1), torch.tensor([0.5, 1.0, 2.0]))
    )
    mc = AlbertForMultipleChoice(c).eval()
    x = torch.randint(5, c.vocab_size, (2, 4, 9))
    out = mc(x, labels=torch.tensor([1, 3]))
    assert out.logits.shape == (2, 4)
    # each choice is scored independently: permuting choices permutes the logits
    perm = mc(x[:, [3, 2, 1, 0]]).logits
    torch.testing.assert_close(perm, out.logits[:, [3, 2, 1, 0]])


def test_sequence_longer_than_positions_is_an_error():
    c = tiny()
    with pytest.raises(ValueError, match="max_position_embeddings"):
        AlbertModel(c)(torch.zeros(1, c.max_position_embeddings + 1, dtype=torch.long))
