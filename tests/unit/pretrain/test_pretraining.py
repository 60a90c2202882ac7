"""Pretraining glue: pooled MLM/SOP metrics, the held-out evaluator, baselines, a smoke run, `albert plot`."""

from __future__ import annotations

import json
import re
from pathlib import Path

import pytest
import torch
from data_support import WIKI_SAMPLE, make_tokenizer, train_spm

from albert_lm.pretrain.run import PretrainingEvaluator, baselines, count_mlm, pretraining_metrics


@pytest.fixture(scope="module")
def tiny_data(tmp_path_factory) -> Path:
    from albert_lm.data import PrepareConfig, prepare

    root = tmp_path_factory.mktemp("tiny_pretrain")
    tok = make_tokenizer(train_spm(root / "spiece.model", vocab_size=400))
    cfg = PrepareConfig(max_seq_length=32, dupe_factor=1, input_format="lines")
    prepare([WIKI_SAMPLE], tok, root / "data", cfg)
    return root / "data"


def test_count_mlm_pools_over_masked_positions():
    labels = torch.tensor([[-100, 3, -100, 1], [2, -100, -100, -100]])  # 3 masked
    logits = torch.zeros(3, 5)
    logits[0, 3] = logits[1, 0] = logits[2, 2] = 5.0  # right, wrong (label 1), right
    correct, count, loss = count_mlm(logits, labels)
    assert (correct.item(), count.item()) == (2.0, 3.0)
    full = torch.zeros(2, 4, 5)  # (B, T, V) logits give the same counts
    full[labels != -100] = logits
    assert count_mlm(full, labels)[0].item() == 2.0
    want = torch.nn.functional.cross_entropy(logits, torch.tensor([3, 1, 2]), reduction="sum")
    assert loss.item() == pytest.approx(want.item())


def test_pretraining_metrics_are_ratios_of_counts():
    batch = {"mlm_labels": torch.tensor([[-100, 1, 2]]), "sop_labels": torch.tensor([1, 0])}
    out = {
        "mlm_logits": torch.tensor([[0.0, 9.0, 0.0], [9.0, 0.0, 0.0]]),
        "sop_logits": torch.tensor([[0.0, 1.0], [0.0, 1.0]]),
    }
    m = pretraining_metrics(batch, out)
    assert [t.item() for t in m["mlm_accuracy"]] == [1, 2]
    assert [t.item() for t in m["sop_accuracy"]] == [1, 2]
    # with the model's per-batch accuracies: the same pooled counts without another argmax
    out.update(mlm_accuracy=torch.tensor(0.5), sop_accuracy=torch.tensor(0.5))
    m = pretraining_metrics(batch, out)
    assert [t.item() for t in m["mlm_accuracy"]] == [1, 2]
    assert [t.item() for t in m["sop_accuracy"]] == [1, 2]


def test_evaluator_matches_a_direct_count_and_is_deterministic(tiny_data):
    from albert_lm.config import AlbertConfig
    from albert_lm.data import PretrainingDataset
    from albert_lm.model import AlbertForPreTraining

    vocab = PretrainingDataset(tiny_data).vocab_size
    model = AlbertForPreTraining(AlbertConfig.from_preset("albert-tiny", vocab_size=vocab)).eval()
    ev = PretrainingEvaluator(tiny_data, batch_size=8, max_batches=3)
    with torch.no_grad():
        a, b = ev(model), ev(model)
        assert a == b  # same examples, same masks each time
        correct = n = sop_correct = 0
        for i, batch in enumerate(PretrainingDataset(tiny_data, shuffle=False, batch_size=8)):
            if i == 3:
                break
            out = model(**batch)
            targets = batch["mlm_labels"][batch["mlm_labels"] != -100]
            correct += int((out["mlm_logits"].argmax(-1) == targets).sum())
            n += targets.numel()
            sop_correct += int((out["sop_logits"].argmax(-1) == batch["sop_labels"]).sum())
    assert a["eval_masked_tokens"] == n and a["eval_sequences"] == 24
    assert a["eval_mlm_accuracy"] == pytest.approx(correct / n)
    assert a["eval_sop_accuracy"] == pytest.approx(sop_correct / 24)


def test_baselines_most_frequent_token_and_majority_sop(tiny_data):
    from albert_lm.data import PretrainingDataset

    b = baselines(tiny_data, tiny_data, max_batches=5, batch_size=8)
    batches = [x for _, x in zip(range(5), PretrainingDataset(tiny_data, shuffle=False, batch_size=8))]
    labels = torch.cat([x["mlm_labels"][x["mlm_labels"] != -100] for x in batches])
    top = int(torch.bincount(labels).argmax())
    assert b["mlm_most_frequent_token"] == top
    assert b["mlm_most_frequent_accuracy"] == pytest.approx(float((labels == top).float().mean()))
    sop = torch.cat([x["sop_labels"] for x in batches]).float().mean().item()
    # (single-segment chunks are "random next" = 1 in the original, so the classes are not 50/50)
    assert b["sop_majority_accuracy"] == pytest.approx(max(sop, 1 - sop))


def test_smoke_pretraining_run_writes_metrics_checkpoints_and_model(tiny_data, tmp_path):
    from albert_lm.model import AlbertForPreTraining
    from albert_lm.pretrain.config import apply_dict, recipe
    from albert_lm.pretrain.run import pretrain

    cfg = apply_dict(
        recipe("smoke"),
        {
            "data": {"data_dir": str(tiny_data), "eval_data_dir": str(tiny_data)},
            "schedule": {"train_steps": 6, "warmup_steps": 1},
            "run": {"output": str(tmp_path / "run"), "eval_every": 3, "save_every": 3, "threads": 1},
        },
        "test",
    )
    result = pretrain(cfg)
    assert result.steps == 6 and result.stop_reason == "max_steps"
    recs = [json.loads(line) for line in (tmp_path / "run" / "metrics.jsonl").read_text().splitlines()]
    train = [r for r in recs if "loss" in r]
    for key in (
        "step",
        "loss",
        "mlm_loss",
        "sop_loss",
        "mlm_accuracy",
        "sop_accuracy",
        "lr",
        "grad_norm",
        "tokens_per_s",
    ):
        assert key in train[0], key
    assert train[0]["tokens"] == 8 * 32  # global batch 8 x seq 32
    assert train[0]["loss"] == pytest.approx(train[0]["mlm_loss"] + train[0]["sop_loss"], rel=1e-5)
    evals = [r for r in recs if "eval_mlm_accuracy" in r]
    assert [r["step"] for r in evals] == [3, 6]
    assert "eval_sop_accuracy" in evals[0]
    model = AlbertForPreTraining.from_pretrained(tmp_path / "run" / "model")
    assert model.config.vocab_size == 400  # taken from the DATA_DIR's tokenizer
    saved = json.loads((tmp_path / "run" / "run_config.json").read_text())
    assert saved["schedule"]["train_steps"] == 6


def test_plot_writes_a_png(tmp_path):
    from albert_lm.cli.main import main

    lines = [
        {"step": s, "loss": 8 - s * 0.1, "mlm_loss": 7 - s * 0.1, "sop_loss": 0.69, "mlm_accuracy": 0.01 * s,
         "sop_accuracy": 0.5, "lr": 1e-3, "grad_norm": 1.0, "tokens_per_s": 1000.0}
        for s in range(1, 11)
    ]  # fmt: skip
    lines.append({"step": 10, "eval_mlm_accuracy": 0.05, "eval_sop_accuracy": 0.6, "eval_mlm_loss": 6.5})
    (tmp_path / "metrics.jsonl").write_text("".join(json.dumps(x) + "\n" for x in lines))
    assert main(["plot", str(tmp_path)]) == 0
    png = (tmp_path / "curves.png").read_bytes()
    assert png[:8] == b"\x89PNG\r\n\x1a\n" and len(png) > 10_000


def test_plot_missing_run_is_a_clear_error(tmp_path, capsys):
    from albert_lm.cli.main import main

    assert main(["plot", str(tmp_path / "nope")]) == 1
    assert re.search(r"^albert plot: error: .*metrics\.jsonl not found", capsys.readouterr().err, re.M)


def test_activation_checkpointing_on_the_real_model_keeps_the_gradients():
    from albert_lm.config import AlbertConfig
    from albert_lm.model import AlbertForPreTraining
    from albert_lm.train.parallelize import enable_activation_checkpointing

    cfg = AlbertConfig.from_preset("albert-tiny", hidden_dropout_prob=0.0)
    torch.manual_seed(0)
    a = AlbertForPreTraining(cfg)
    b = AlbertForPreTraining(cfg)
    b.load_state_dict(a.state_dict())
    assert enable_activation_checkpointing(b) >= 1
    ids = torch.randint(5, cfg.vocab_size, (2, 16))
    labels = torch.full_like(ids, -100)
    labels[:, 3] = ids[:, 3]
    batch = dict(input_ids=ids, mlm_labels=labels, sop_labels=torch.tensor([0, 1]))
    for m in (a, b):
        m.train()
        m(**batch)["loss"].backward()
    for (name, pa), (_, pb) in zip(a.named_parameters(), b.named_parameters()):
        torch.testing.assert_close(pa.grad, pb.grad, msg=name)


def test_a_model_on_the_unigram_plateau_is_reported(tiny_data, caplog):
    from albert_lm.pretrain.run import PLATEAU_RATIO, _label_counts, warn_if_on_the_unigram_plateau
    from albert_lm.train.result import TrainResult

    counts = _label_counts(tiny_data, 20)[0]
    rate = float(counts.max() / counts.sum())

    def result(train_acc, eval_acc=None):
        return TrainResult(
            steps=10, tokens=0, elapsed_s=1.0, stop_reason="max_steps",
            train_metrics={"mlm_accuracy": train_acc},
            eval_metrics={} if eval_acc is None else {"eval_mlm_accuracy": eval_acc},
        )  # fmt: skip

    with caplog.at_level("WARNING", logger="albert_lm.pretrain.run"):
        assert warn_if_on_the_unigram_plateau(result(rate), tiny_data)  # frequencies, not context
        assert f"{100 * rate:.1f}%" in caplog.text and "unigram plateau" in caplog.text
        caplog.clear()
        assert not warn_if_on_the_unigram_plateau(result(PLATEAU_RATIO * rate * 1.01), tiny_data)
        # the held-out accuracy, when the run was evaluated, is the one judged
        assert warn_if_on_the_unigram_plateau(result(0.9, eval_acc=rate), tiny_data)
        assert not warn_if_on_the_unigram_plateau(result(0.0, eval_acc=0.9), tiny_data)
        assert not warn_if_on_the_unigram_plateau(result(float("nan")), tiny_data)


def test_sequence_length_is_the_data_s_and_a_different_one_is_refused(tiny_data):
    """The paper recipes used to pin 512 and pad shards prepared at 32 (or 128) to it without a word."""
    from albert_lm.data import load_manifest
    from albert_lm.pretrain.config import ConfigError, apply_dict, recipe
    from albert_lm.pretrain.run import data_seq_length

    manifest = load_manifest(tiny_data)
    cfg = recipe("albert-base")
    assert data_seq_length(cfg, str(tiny_data), manifest) == 32
    assert (
        data_seq_length(apply_dict(cfg, {"data": {"max_seq_length": 32}}, "t"), str(tiny_data), manifest)
        == 32
    )
    for other in (512, 16):
        with pytest.raises(
            ConfigError, match=rf"data.max_seq_length {other} differs from the 32 .*manifest.json"
        ):
            data_seq_length(
                apply_dict(cfg, {"data": {"max_seq_length": other}}, "t"), str(tiny_data), manifest
            )
