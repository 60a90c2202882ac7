"""Padding removal at inference (`albert_lm.runtime.attention.skip_padding`): the encoder runs on a padded batch's
real tokens only; every real position's output is the padded model's, padded positions are 0, and the
predict function every inference path shares (`model_predict_fn`) runs it."""

from __future__ import annotations

import pytest
import torch

from albert_lm.config import AlbertConfig
from albert_lm.model import (
    AlbertForMultipleChoice,
    AlbertForSequenceClassification,
    AlbertForSquadV2,
    AlbertModel,
)
from albert_lm.model.encoder import real_tokens
from albert_lm.runtime.attention import skip_padding
from albert_lm.tasks.evaluate import model_predict_fn


def tiny(**kw) -> AlbertConfig:
    return AlbertConfig.from_preset("albert-tiny", **kw)


def padded_batch(lengths: list[int], vocab: int, seed: int = 0) -> dict[str, torch.Tensor]:
    gen = torch.Generator().manual_seed(seed)
    t = max(lengths)
    ids = torch.randint(5, vocab, (len(lengths), t), generator=gen)
    mask = torch.zeros_like(ids)
    types = torch.zeros_like(ids)
    for row, n in enumerate(lengths):
        mask[row, :n] = 1
        types[row, n // 2 : n] = 1
        ids[row, n:] = 0  # [PAD]
    return {"input_ids": ids, "token_type_ids": types, "attention_mask": mask}


@pytest.mark.parametrize("sharing", ["all", "attention", "ffn", "none"])
def test_real_positions_match_the_padded_model_and_padding_is_zero(sharing: str) -> None:
    torch.manual_seed(0)
    model = AlbertModel(
        tiny(num_hidden_layers=3, num_hidden_groups=2, inner_group_num=2, sharing=sharing)
    ).eval()
    batch = padded_batch([7, 19, 1, 12], model.config.vocab_size)
    real = batch["attention_mask"].bool()
    with torch.no_grad():
        padded = model(**batch)
        with skip_padding():
            skipped = model(**batch)
    torch.testing.assert_close(
        skipped.sequence_output[real], padded.sequence_output[real], atol=2e-5, rtol=1e-5
    )
    torch.testing.assert_close(skipped.pooled_output, padded.pooled_output, atol=2e-5, rtol=1e-5)
    assert torch.count_nonzero(skipped.sequence_output[~real]) == 0
    assert torch.count_nonzero(padded.sequence_output[~real]) > 0  # the padded model does write there


def test_the_encoder_sees_only_the_real_tokens() -> None:
    """The projections and the FFN run on (N, H): N = the batch's real tokens, not B x T."""
    torch.manual_seed(0)
    model = AlbertModel(tiny()).eval()
    batch = padded_batch([3, 10, 6], model.config.vocab_size)
    rows: list[tuple[int, ...]] = []
    hook = model.encoder.ffn[0].up.register_forward_hook(
        lambda m, args, out: rows.append(tuple(args[0].shape))
    )
    with torch.no_grad(), skip_padding():
        model(**batch)
    hook.remove()
    assert rows and all(r == (19, model.config.hidden_size) for r in rows)


def test_heads_give_the_padded_models_answers() -> None:
    """Classification (first token), multiple choice (flattened choices) and the SQuAD 2.0 head (p_mask masks
    the padding) read nothing at padded positions: their outputs are the padded model's."""
    torch.manual_seed(0)
    cls = AlbertForSequenceClassification(tiny(), num_labels=3).eval()
    batch = padded_batch([5, 17, 9], cls.config.vocab_size)
    mc = AlbertForMultipleChoice(tiny()).eval()
    mc_batch = {k: v.view(1, 3, -1) for k, v in batch.items()}
    squad = AlbertForSquadV2(tiny()).eval()
    p_mask = 1 - batch["attention_mask"]
    p_mask[:, 0] = 1
    for model, inputs, key in (
        (cls, batch, "logits"),
        (mc, mc_batch, "logits"),
        (squad, {**batch, "p_mask": p_mask}, "start_log_probs"),
    ):
        with torch.no_grad():
            want = model(**inputs)[key]
            with skip_padding():
                got = model(**inputs)[key]
        torch.testing.assert_close(got, want, atol=2e-5, rtol=1e-5)


def test_gradients_of_the_real_tokens_match() -> None:
    """Skipping padding is exact in training too (dropout off): the same loss and parameter gradients."""
    torch.manual_seed(0)
    model = AlbertForSequenceClassification(tiny(), num_labels=2).eval()
    batch = {**padded_batch([4, 11], model.config.vocab_size), "labels": torch.tensor([0, 1])}
    model(**batch)["loss"].backward()
    want = {n: p.grad.clone() for n, p in model.named_parameters() if p.grad is not None}
    model.zero_grad()
    with skip_padding():
        model(**batch)["loss"].backward()
    for name, grad in want.items():
        torch.testing.assert_close(dict(model.named_parameters())[name].grad, grad, atol=1e-5, rtol=1e-4)


# the embeddings' length check, traced as a constant, warns
@pytest.mark.filterwarnings("ignore::torch.jit.TracerWarning")
def test_padding_is_kept_outside_the_switch_without_a_mask_and_when_tracing() -> None:
    mask = torch.tensor([[1, 1, 0], [1, 0, 0]])
    assert real_tokens(mask) is None
    with skip_padding():
        assert real_tokens(mask).tolist() == [0, 1, 3]
        assert real_tokens(None) is None
        with skip_padding(False):
            assert real_tokens(mask) is None
        assert real_tokens(mask) is not None
    with pytest.raises(RuntimeError), skip_padding():
        raise RuntimeError  # the switch is restored on the way out
    assert real_tokens(mask) is None
    # a traced graph stays the padded one (no data-dependent shapes): traced on a padded batch, it runs others
    torch.manual_seed(0)
    model = AlbertModel(tiny(), add_pooler=False).eval()
    batch = padded_batch([6, 2], model.config.vocab_size)
    args = (batch["input_ids"], batch["token_type_ids"], batch["attention_mask"])

    class SequenceOutput(torch.nn.Module):
        def __init__(self) -> None:
            super().__init__()
            self.model = model

        def forward(self, *a: torch.Tensor) -> torch.Tensor:
            return self.model(*a)["sequence_output"]

    with torch.no_grad(), skip_padding():
        # check_trace off: the check reruns the module eagerly, inside the switch, where padded positions are 0
        traced = torch.jit.trace(SequenceOutput(), args, check_trace=False)
        other = padded_batch([6, 6], model.config.vocab_size, seed=1)
        out = traced(other["input_ids"], other["token_type_ids"], other["attention_mask"])
    assert "nonzero" not in str(traced.inlined_graph)
    with torch.no_grad():
        want = model(**other)["sequence_output"]
    torch.testing.assert_close(out, want, atol=2e-5, rtol=1e-5)


def test_model_predict_fn_skips_padding() -> None:
    torch.manual_seed(0)
    model = AlbertForSequenceClassification(tiny(), num_labels=2).eval()
    batch = padded_batch([2, 15, 8, 8], model.config.vocab_size)
    rows: list[int] = []
    hook = model.albert.encoder.ffn[0].up.register_forward_hook(
        lambda m, args, out: rows.append(args[0].shape[0])
    )
    out = model_predict_fn(model, output_keys=["logits"])(batch)
    hook.remove()
    assert set(rows) == {33}
    with torch.no_grad():
        want = model(**batch)["logits"].numpy()
    assert abs(out["logits"] - want).max() < 2e-5
