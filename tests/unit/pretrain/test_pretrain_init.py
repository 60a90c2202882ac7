"""`albert pretrain --init MODEL_DIR` (model.init_from): continued pretraining from an ALBERT or BERT model
directory, checked against the data's vocabulary, with model.overrides applied to (or refused by) the
loaded config. Tiny model directories made here; the real MiniLM directory where it is fetched."""

from __future__ import annotations

import json
import logging
import re
from pathlib import Path

import pytest
import torch
from data_support import WIKI_SAMPLE, make_tokenizer, train_spm

from albert_lm.config import AlbertConfig
from albert_lm.model import AlbertForPreTraining, AlbertModel
from albert_lm.pretrain.config import ConfigError, apply_dict, recipe

TINY_BERT = {"vocab_size": 300, "hidden_size": 32, "num_hidden_layers": 2, "num_attention_heads": 4,
             "intermediate_size": 64, "max_position_embeddings": 64, "model_type": "bert"}  # fmt: skip


def bert_config(vocab: int, **changes) -> AlbertConfig:
    d = {**TINY_BERT, "vocab_size": vocab, **changes}
    return AlbertConfig.from_dict(d)


@pytest.fixture(scope="module")
def world(tmp_path_factory) -> dict[str, Path]:
    """Two SentencePiece vocabularies (300 and 200 pieces; a third of 300 trained differently), DATA_DIRs
    made with the first and the second, and model directories with the first's tokenizer."""
    from albert_lm.data import PrepareConfig, prepare

    root = tmp_path_factory.mktemp("init")
    tok = make_tokenizer(train_spm(root / "a" / "spiece.model", vocab_size=300))
    other = make_tokenizer(train_spm(root / "b" / "spiece.model", vocab_size=200))
    short = WIKI_SAMPLE.read_text(encoding="utf-8")[:20_000]
    (root / "short.txt").write_text(short, encoding="utf-8")
    same_size = make_tokenizer(
        train_spm(root / "c" / "spiece.model", vocab_size=300, text_file=root / "short.txt")
    )
    assert same_size.vocab_size == tok.vocab_size and same_size.fingerprint != tok.fingerprint
    cfg = PrepareConfig(max_seq_length=32, dupe_factor=1, input_format="lines")
    prepare([WIKI_SAMPLE], tok, root / "data", cfg)
    prepare([WIKI_SAMPLE], other, root / "data_other", cfg)
    prepare([WIKI_SAMPLE], same_size, root / "data_same_size", cfg)

    torch.manual_seed(1)
    full = AlbertForPreTraining(bert_config(tok.vocab_size))
    with torch.no_grad():  # "trained" heads: not what a fresh initialization gives
        for p in (*full.mlm.parameters(), *full.sop.parameters()):
            p.add_(0.5)
    full.save_pretrained(root / "bert_full", tokenizer=tok)
    AlbertModel(bert_config(tok.vocab_size)).save_pretrained(root / "bert_bare", tokenizer=tok)
    AlbertModel(bert_config(tok.vocab_size)).save_pretrained(root / "bert_no_tokenizer")
    AlbertModel(bert_config(tok.vocab_size, max_position_embeddings=16)).save_pretrained(
        root / "bert_short", tokenizer=tok
    )
    return {"root": root, "data": root / "data", "data_other": root / "data_other",
            "data_same_size": root / "data_same_size", "tok": root / "a"}  # fmt: skip


def config_for(world, init: Path, data: Path | None = None, **sections):
    base = {
        "model": {"init_from": str(init)},
        "data": {"data_dir": str(data or world["data"]), "tokenizer": str(world["tok"])},
        "schedule": {"train_steps": 2, "warmup_steps": 0},
        "run": {"run_dir": str(world["root"] / "runs" / init.name), "eval_every": None, "save_every": None,
                "threads": 1, "precision": "fp32"},
    }  # fmt: skip
    for section, values in sections.items():
        base.setdefault(section, {}).update(values)
    return apply_dict(recipe("smoke"), base, "test")


def build(cfg):
    from albert_lm.pretrain.run import _build_model

    return _build_model(cfg, cfg.data.data_dir, rank=0)


def test_init_from_a_pretraining_dir_reuses_every_head(world, caplog):
    with caplog.at_level(logging.INFO, logger="albert_lm.pretrain.init"):
        model, seq = build(config_for(world, world["root"] / "bert_full"))
    saved = AlbertForPreTraining.from_pretrained(world["root"] / "bert_full")
    for (name, a), (_, b) in zip(model.named_parameters(), saved.named_parameters()):
        assert torch.equal(a, b), name
    assert model.config.model_type == "bert" and seq == 32  # its architecture, not the smoke preset's
    assert "masked-LM head, SOP/NSP head, pooler loaded" in caplog.text
    assert "freshly initialized" not in caplog.text


def test_init_from_a_bare_encoder_initializes_the_heads_and_says_so(world, caplog):
    with caplog.at_level(logging.INFO, logger="albert_lm.pretrain.init"):
        model, _ = build(config_for(world, world["root"] / "bert_bare"))
    bare = AlbertModel.from_pretrained(world["root"] / "bert_bare")
    ours = model.albert.state_dict()
    assert all(torch.equal(ours[k], v) for k, v in bare.state_dict().items())  # the whole encoder (+ pooler)
    assert "encoder, pooler loaded; freshly initialized: masked-LM head, SOP/NSP head" in caplog.text
    assert "--set optim.head_lr_scale=10" in caplog.text  # the hint, as optim.head_lr_scale is 1 here


def test_head_lr_scale_trains_the_fresh_heads_faster_than_the_loaded_encoder(world):
    from albert_lm.pretrain.run import _optimizer

    cfg = config_for(
        world, world["root"] / "bert_bare", optim={"name": "adamw", "lr": 1e-4, "head_lr_scale": 10}
    )
    cfg.validate()
    model, _ = build(cfg)
    optimizer, _ = _optimizer(cfg, model)
    rate = {n: g["lr"] for g in optimizer.param_groups for n in g["names"]}
    assert rate.keys() == {n for n, _ in model.named_parameters()}
    heads = {n for n in rate if n.startswith(("mlm.", "sop.", "albert.pooler."))}
    assert {n.split(".")[0] for n in heads} == {"mlm", "sop", "albert"}
    assert all(rate[n] == pytest.approx(1e-3) for n in heads)
    assert all(rate[n] == 1e-4 for n in rate.keys() - heads)  # the encoder and the tied embeddings
    assert optimizer.param_groups[0]["lr"] == 1e-4  # the rate the trainer logs
    with pytest.raises(ConfigError, match="optim.head_lr_scale: must be greater than 0"):
        config_for(world, world["root"] / "bert_bare", optim={"head_lr_scale": 0}).validate()


def test_a_different_vocabulary_size_is_an_error_naming_both(world):
    with pytest.raises(ConfigError) as e:
        build(config_for(world, world["root"] / "bert_full", data=world["data_other"]))
    msg = str(e.value)
    assert "sentencepiece vocabulary of 300" in msg and "sentencepiece vocabulary of 200" in msg
    assert "albert prepare --tokenizer" in msg


def test_the_same_size_with_another_fingerprint_is_an_error(world):
    with pytest.raises(ConfigError, match="fingerprint") as e:
        build(config_for(world, world["root"] / "bert_full", data=world["data_same_size"]))
    assert str(e.value).count("vocabulary of 300") == 2


def test_without_tokenizer_files_the_size_is_checked_and_the_gap_logged(world, caplog):
    with caplog.at_level(logging.WARNING, logger="albert_lm.pretrain.init"):
        build(config_for(world, world["root"] / "bert_no_tokenizer"))
    assert "no tokenizer files" in caplog.text
    with pytest.raises(ConfigError, match="300 embedding rows and no tokenizer files"):
        build(config_for(world, world["root"] / "bert_no_tokenizer", data=world["data_other"]))


def test_overrides_apply_to_the_loaded_config(world):
    drop = {"hidden_dropout_prob": 0.3, "attention_probs_dropout_prob": 0.2}
    model, _ = build(config_for(world, world["root"] / "bert_full", model={"overrides": drop}))
    assert (model.config.hidden_dropout_prob, model.config.attention_probs_dropout_prob) == (0.3, 0.2)
    # an architecture field equal to the model's own is no change
    build(config_for(world, world["root"] / "bert_full", model={"overrides": {"hidden_size": 32}}))


@pytest.mark.parametrize(("overrides", "match"), [
    ({"hidden_size": 64}, r"hidden_size=64 \(the model has 32\) cannot apply"),
    ({"hidden_act": "relu"}, "hidden_act"),
    ({"no_such_field": 1}, "unknown AlbertConfig field 'no_such_field'"),
])  # fmt: skip
def test_overrides_that_cannot_apply_to_loaded_weights_are_refused(world, overrides, match):
    with pytest.raises(ConfigError, match=match):
        build(config_for(world, world["root"] / "bert_full", model={"overrides": overrides}))


def test_the_used_config_is_the_one_validated(world):
    # the init model's position table (16) is shorter than the data's sequences (32); the smoke preset's is not
    with pytest.raises(ValueError, match="sequence length 32 > max_position_embeddings 16"):
        build(config_for(world, world["root"] / "bert_short"))


def test_albert_pretrain_init_runs_and_refuses_a_mismatch(world, tmp_path, capsys):
    from albert_lm.cli.main import main

    common = ["pretrain", "--recipe", "smoke", "--tokenizer", str(world["tok"]), "--set", "schedule.train_steps=2",
              "--set", "run.eval_every=null", "--set", "run.threads=1", "--set", "run.precision=fp32"]  # fmt: skip
    init = str(world["root"] / "bert_bare")
    assert (
        main([*common, "--init", init, "--data-dir", str(world["data"]), "--run-dir", str(tmp_path / "r")])
        == 0
    )
    out = AlbertForPreTraining.from_pretrained(tmp_path / "r" / "model")
    assert out.config.model_type == "bert" and out.config.hidden_size == 32
    assert json.loads((tmp_path / "r" / "run_config.json").read_text())["model"]["init_from"]
    capsys.readouterr()
    rc = main(
        [*common, "--init", init, "--data-dir", str(world["data_other"]), "--run-dir", str(tmp_path / "x")]
    )
    assert rc == 1
    err = capsys.readouterr().err
    assert re.search(
        r"^albert pretrain: error: .*was prepared with a sentencepiece vocabulary of 200", err, re.M
    )
    assert not (tmp_path / "x" / "checkpoints").exists()


def test_minilm_on_data_of_another_vocabulary_is_refused(world, minilm_dir):
    """Issue 15 item 4: MiniLM (30522 WordPiece pieces) on shards made with a SentencePiece vocabulary."""
    with pytest.raises(ConfigError) as e:
        build(config_for(world, minilm_dir))
    msg = str(e.value)
    assert "wordpiece vocabulary of 30522" in msg and "sentencepiece vocabulary of 300" in msg


@pytest.mark.slow
def test_continued_pretraining_from_minilm(minilm_dir, tmp_path):
    from albert_lm.data import PrepareConfig, prepare
    from albert_lm.pretrain.run import pretrain
    from albert_lm.tokenizer import load_tokenizer

    text = tmp_path / "wiki.txt"
    text.write_text(WIKI_SAMPLE.read_text(encoding="utf-8")[:30_000], encoding="utf-8")
    prepare([text], load_tokenizer(minilm_dir), tmp_path / "data",
            PrepareConfig(max_seq_length=32, dupe_factor=1, input_format="lines"))  # fmt: skip
    cfg = apply_dict(recipe("smoke"), {
        "model": {"init_from": str(minilm_dir)},
        "data": {"data_dir": str(tmp_path / "data"), "tokenizer": str(minilm_dir)},
        "optim": {"optimizer": "adamw", "learning_rate": 1e-4},
        "schedule": {"train_steps": 3, "warmup_steps": 0},
        "run": {"run_dir": str(tmp_path / "run"), "eval_every": None, "save_every": None, "precision": "fp32"},
    }, "test")  # fmt: skip
    result = pretrain(cfg)
    assert result.steps == 3
    out = AlbertForPreTraining.from_pretrained(tmp_path / "run" / "model")
    assert out.config.vocab_size == 30522 and (tmp_path / "run" / "model" / "vocab.txt").exists()
    # three AdamW steps at lr 1e-4 away from MiniLM's weights: moved, but by about 3e-4 at most
    start = AlbertModel.from_pretrained(minilm_dir).embeddings.word.weight
    moved = (out.albert.embeddings.word.weight - start).abs().max().item()
    assert 0 < moved < 1e-3
