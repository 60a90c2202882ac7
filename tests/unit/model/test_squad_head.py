"""ALBERT's SQuAD 2.0 head: shapes, masking, conditioning, loss, and agreement with a literal transcription
of the original TF graph (google-research/albert squad_utils.py create_v2_model, time-major layout)."""

from __future__ import annotations

import pytest
import torch
import torch.nn.functional as F

from albert_lm.config import AlbertConfig
from albert_lm.model.squad_head import AlbertForSquadV2, SquadV2Head

B, T, H = 3, 9, 8


def _inputs(seed=0):
    g = torch.Generator().manual_seed(seed)
    seq = torch.randn(B, T, H, generator=g)
    # [CLS] q q [SEP] d d d [SEP] pad  /  [CLS] q [SEP] d d d d d [SEP]  /  [CLS] q q q [SEP] d d [SEP] pad
    p_mask = torch.tensor(
        [[0, 1, 1, 1, 0, 0, 0, 1, 1], [0, 1, 1, 0, 0, 0, 0, 0, 1], [0, 1, 1, 1, 1, 0, 0, 1, 1]]
    )
    return seq, p_mask


def _head(**kw):
    head = SquadV2Head(H, start_n_top=3, end_n_top=2, **kw)
    with torch.no_grad():
        for p in head.parameters():
            p.normal_(0.0, 0.5)
    return head.eval()


def _original_graph(head, seq, p_mask, start_positions=None, start_n_top=3, end_n_top=2):
    """The original TF ops one by one: output is time-major (L, B, H), einsums as written there."""
    output = seq.transpose(0, 1)  # (L, B, H)
    pm = p_mask.float()
    w = lambda lin, x: x @ lin.weight.T + (lin.bias if lin.bias is not None else 0)  # noqa: E731
    start_logits = w(head.start, output).squeeze(-1).T  # (B, L)
    start_logits_masked = start_logits * (1 - pm) - 1e30 * pm
    start_log_probs = F.log_softmax(start_logits_masked, -1)
    ln = lambda x: F.layer_norm(x, (H,), head.end_norm.weight, head.end_norm.bias, 1e-12)  # noqa: E731
    res = {"start_log_probs": start_log_probs}
    if start_positions is not None:
        start_index = F.one_hot(start_positions, T).float()  # (B, L)
        start_features = torch.einsum("lbh,bl->bh", output, start_index)
        start_features = start_features[None].expand(T, B, H)
        end_logits = torch.tanh(w(head.end_dense, torch.cat([output, start_features], -1)))
        end_logits = w(head.end_out, ln(end_logits)).squeeze(-1).T
        end_logits_masked = end_logits * (1 - pm) - 1e30 * pm
        res["end_log_probs"] = F.log_softmax(end_logits_masked, -1)
    else:
        top_lp, top_idx = start_log_probs.topk(start_n_top)
        start_index = F.one_hot(top_idx, T).float()  # (B, k, L)
        start_features = torch.einsum("lbh,bkl->bkh", output, start_index)
        end_input = output[:, :, None].expand(T, B, start_n_top, H)
        start_features = start_features[None].expand(T, B, start_n_top, H)
        end_logits = torch.tanh(w(head.end_dense, torch.cat([end_input, start_features], -1)))
        end_logits = w(head.end_out, ln(end_logits)).reshape(T, -1, start_n_top).permute(1, 2, 0)
        end_logits_masked = end_logits * (1 - pm[:, None]) - 1e30 * pm[:, None]
        end_lp, end_idx = F.log_softmax(end_logits_masked, -1).topk(end_n_top)
        res.update(
            start_top_log_probs=top_lp,
            start_top_index=top_idx,
            end_top_log_probs=end_lp.reshape(-1, start_n_top * end_n_top),
            end_top_index=end_idx.reshape(-1, start_n_top * end_n_top),
        )
    cls_feature = torch.einsum("lbh,bl->bh", output, F.one_hot(torch.zeros(B, dtype=torch.long), T).float())
    start_p = F.softmax(start_logits_masked, -1)
    start_feature = torch.einsum("lbh,bl->bh", output, start_p)
    ans = torch.tanh(w(head.answer_dense, torch.cat([start_feature, cls_feature], -1)))
    res["cls_logits"] = w(head.answer_out, ans).squeeze(-1)
    return res


def test_training_outputs_match_the_original_graph():
    head = _head()
    seq, p_mask = _inputs()
    starts = torch.tensor([5, 0, 6])
    ours = head(seq, p_mask, starts, torch.tensor([6, 0, 6]), torch.tensor([0.0, 1.0, 0.0]))
    ref = _original_graph(head, seq, p_mask, starts)
    for key in ("start_log_probs", "end_log_probs", "cls_logits"):
        open_ = ref[key] > -1e20
        torch.testing.assert_close(ours[key][open_], ref[key][open_], rtol=1e-5, atol=1e-5)
    assert ours.start_log_probs.shape == ours.end_log_probs.shape == (B, T) and ours.cls_logits.shape == (B,)


def test_inference_beam_matches_the_original_graph():
    head = _head()
    seq, p_mask = _inputs(1)
    ours = head(seq, p_mask)
    ref = _original_graph(head, seq, p_mask)
    assert ours.start_top_index.shape == (B, 3) and ours.end_top_index.shape == (B, 6)
    for key in ("start_top_log_probs", "start_top_index", "end_top_log_probs", "end_top_index", "cls_logits"):
        torch.testing.assert_close(ours[key], ref[key], rtol=1e-5, atol=1e-5)


def test_masked_positions_never_chosen_and_carry_no_probability():
    head = _head()
    seq, p_mask = _inputs(2)
    out = head(seq, p_mask)
    assert torch.all(out.start_log_probs.exp()[p_mask.bool()] == 0)
    for b in range(B):
        open_pos = set(torch.nonzero(p_mask[b] == 0).flatten().tolist())
        assert set(out.start_top_index[b].tolist()) <= open_pos
        assert set(out.end_top_index[b].tolist()) <= open_pos
    # [CLS] stays open: it is the no-answer position
    assert torch.all(out.start_log_probs[:, 0] > -1e20)


def test_end_is_conditioned_on_the_start():
    head = _head()
    seq, p_mask = _inputs(3)
    ends = torch.tensor([6, 7, 6])
    a = head(seq, p_mask, torch.tensor([4, 3, 5]), ends).end_log_probs
    b = head(seq, p_mask, torch.tensor([6, 5, 6]), ends).end_log_probs
    assert not torch.allclose(a, b)
    # the beam's ends for its i-th start are the training-path ends given that start as the gold one
    beam = head(seq, p_mask)
    for i in range(3):
        given = head(seq, p_mask, beam.start_top_index[:, i], ends).end_log_probs  # (B, T)
        expected = given.topk(2, dim=-1).values
        torch.testing.assert_close(
            beam.end_top_log_probs[:, 2 * i : 2 * i + 2], expected, rtol=1e-5, atol=1e-5
        )


def test_answer_class_reads_cls_and_the_start_distribution_only():
    head = _head()
    seq, p_mask = _inputs(4)
    base = head(seq, p_mask).cls_logits
    changed = seq.clone()
    changed[0, 2] += 5.0  # a question position of example 0: no start probability there
    torch.testing.assert_close(head(changed, p_mask).cls_logits, base)
    changed = seq.clone()
    changed[0, 0] += 1.0  # [CLS]
    assert not torch.allclose(head(changed, p_mask).cls_logits[0], base[0])
    # and not on the end: the same cls_logits in the training and the inference path
    train = head(seq, p_mask, torch.tensor([5, 0, 6]), torch.tensor([5, 0, 6])).cls_logits
    torch.testing.assert_close(train, base)


def test_loss_is_half_span_plus_half_bce():
    head = _head()
    seq, p_mask = _inputs(5)
    starts, ends = torch.tensor([5, 0, 5]), torch.tensor([6, 0, 6])
    impossible = torch.tensor([0.0, 1.0, 0.0])
    out = head(seq, p_mask, starts, ends, impossible)
    rows = torch.arange(B)
    start_ce = -out.start_log_probs[rows, starts].mean()
    end_ce = -out.end_log_probs[rows, ends].mean()
    p = torch.sigmoid(out.cls_logits)
    bce = -(impossible * p.log() + (1 - impossible) * (1 - p).log()).mean()
    torch.testing.assert_close(out.loss, (start_ce + end_ce) / 2 + 0.5 * bce)
    torch.testing.assert_close(out.cls_loss, bce)
    # without is_impossible it is read from start == 0 ([CLS])
    torch.testing.assert_close(head(seq, p_mask, starts, ends).loss, out.loss)
    out.loss.backward()
    assert all(p.grad is not None and torch.isfinite(p.grad).all() for p in head.parameters())


def test_bad_p_mask_is_a_clear_error():
    head = _head()
    seq, p_mask = _inputs()
    with pytest.raises(ValueError, match="p_mask has shape"):
        head(seq, p_mask[:, :5])


def _tiny_config():
    return AlbertConfig(
        vocab_size=50, embedding_size=8, hidden_size=16, num_hidden_layers=2, num_attention_heads=2,
        intermediate_size=32, max_position_embeddings=32,
    )  # fmt: skip


def test_model_trains_on_a_collated_batch():
    from albert_lm.tasks.squad_data import SquadAnswer, SquadExample, collate, featurize

    class Tok:
        cls_id, sep_id, pad_id = 1, 2, 0

        def encode_with_offsets(self, text):
            pos = [i for i, c in enumerate(text) if not c.isspace()]
            return [5 + (ord(text[i]) % 40) for i in pos], [(i, i + 1) for i in pos]

        def encode_ids(self, text):
            return self.encode_with_offsets(text)[0]

    exs = [
        SquadExample("a", "x?", "abc def", [SquadAnswer("def", 4)]),
        SquadExample("b", "y?", "ghij", [], is_impossible=True),
    ]
    feats, _ = featurize(exs, Tok(), max_seq_length=16, max_query_length=4)
    batch = collate(feats)
    model = AlbertForSquadV2(_tiny_config())
    opt = torch.optim.Adam(model.parameters(), lr=1e-2)
    losses = []
    for _ in range(30):
        out = model(**batch)
        opt.zero_grad()
        out.loss.backward()
        opt.step()
        losses.append(float(out.loss.detach()))
    assert losses[-1] < 0.2 * losses[0]
    model.eval()
    with torch.no_grad():
        pred = model(
            **{
                k: v
                for k, v in batch.items()
                if k not in ("start_positions", "end_positions", "is_impossible")
            }
        )
    assert pred.start_top_index[0, 0] == batch["start_positions"][0]
    assert pred.cls_logits[1] > 0 > pred.cls_logits[0]


def test_model_directory_round_trip(tmp_path):
    model = AlbertForSquadV2(_tiny_config(), start_n_top=4, end_n_top=3).eval()
    model.save_pretrained(tmp_path / "m")
    again = AlbertForSquadV2.from_pretrained(tmp_path / "m").eval()
    assert (again.start_n_top, again.end_n_top) == (4, 3)
    for (name, a), (_, b) in zip(model.state_dict().items(), again.state_dict().items()):
        torch.testing.assert_close(a, b, msg=name)


@pytest.mark.data
@pytest.mark.slow  # ~10 s: building and loading the 22M-parameter model on a shared CPU
def test_loads_real_bert_weights_with_a_fresh_head(minilm_dir):
    from safetensors.torch import load_file

    model = AlbertForSquadV2.from_pretrained(minilm_dir)
    ref = load_file(str(minilm_dir / "model.safetensors"))
    torch.testing.assert_close(model.albert.embeddings.word.weight, ref["embeddings.word_embeddings.weight"])
    assert model.squad.end_dense.weight.shape == (384, 768)
    assert float(model.squad.start.weight.std()) == pytest.approx(0.02, rel=0.2)  # original initializer


def test_eval_mode_with_labels_gives_loss_and_beam():
    head = _head()
    seq, p_mask = _inputs(6)
    labels = (torch.tensor([5, 0, 6]), torch.tensor([6, 0, 6]))
    both = head(seq, p_mask, *labels)  # eval mode
    plain = head(seq, p_mask)
    assert "loss" in both and "end_log_probs" in both
    for key in ("start_top_index", "end_top_index", "end_top_log_probs", "cls_logits"):
        torch.testing.assert_close(both[key], plain[key])
    assert "start_top_index" not in head.train()(seq, p_mask, *labels)
