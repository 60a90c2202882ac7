"""``--micro-batch-size`` in `albert finetune`: the batch of a step (``--batch-size``) in several forward
passes, accumulated into the same optimizer step (pretraining's ``run.micro_batch_size``)."""

from __future__ import annotations

from pathlib import Path

import pytest
import torch
from finetune_support import finetune_argv, report, tiny_init, write_data
from safetensors.torch import load_file

from albert_lm.cli.main import main
from albert_lm.config import ConfigError
from albert_lm.finetune.config import FinetuneConfig
from albert_lm.finetune.run import micro_batches
from albert_lm.train import load_metrics


def _weights(out: Path) -> dict[str, torch.Tensor]:
    return load_file(str(out / "checkpoints" / "step-00000005" / "model.safetensors"))


@pytest.mark.slow
def test_four_micro_batches_of_8_train_as_one_batch_of_32(tmp_path: Path) -> None:
    """5 optimizer steps over 64 examples (2 batches of 32 an epoch) through the real finetune code path:
    with --micro-batch-size 8 each step is 4 forward/backward passes, and the weights end where one pass
    of 32 takes them (float tolerance: the sums are taken in another order)."""
    init = tiny_init(tmp_path / "init")
    train, dev = write_data(tmp_path / "train.csv", 64), write_data(tmp_path / "dev.csv", 16, seed=1)
    common = ["--batch-size", "32", "--train-steps", "5", "--learning-rate", "1e-3", "--optimizer", "adamw"]
    whole, micro = tmp_path / "whole", tmp_path / "micro"
    assert main(finetune_argv(init, train, dev, whole, *common)) == 0
    assert main(finetune_argv(init, train, dev, micro, *common, "--micro-batch-size", "8")) == 0
    a, b = _weights(whole), _weights(micro)
    start = load_file(str(init / "model.safetensors"))
    start = {f"albert.{k}": v for k, v in start.items()}  # an encoder-only directory: no albert. prefix
    moved = [k for k in a if k in start and not torch.equal(a[k], start[k])]
    assert len(moved) > 10  # the runs trained the encoder (the comparison below is not of untouched weights)
    for name in a:
        torch.testing.assert_close(b[name], a[name], rtol=1e-4, atol=1e-6, msg=name)
    # the logged loss of each step is the batch's mean loss in both runs
    losses = [[r["loss"] for r in load_metrics(d) if "loss" in r] for d in (whole, micro)]
    assert len(losses[0]) == 5 and losses[1] == pytest.approx(losses[0], rel=1e-5)
    assert (
        report(micro)["config"]["micro_batch_size"] == 8 and "micro_batch_size" not in report(whole)["config"]
    )
    assert report(micro)["steps_per_epoch"] == report(whole)["steps_per_epoch"] == 2


def test_the_split_follows_pretraining_rule() -> None:
    assert micro_batches(FinetuneConfig(batch_size=32, micro_batch_size=8), world_size=1) == (8, 4)
    assert micro_batches(FinetuneConfig(batch_size=32, micro_batch_size=8), world_size=2) == (8, 2)
    assert micro_batches(FinetuneConfig(batch_size=32), world_size=1) == (32, 1)  # default: all of it
    with pytest.raises(ConfigError, match="batch_size=32 over 1 rank.s. is 32 per rank, not a multiple of "
                                          "micro_batch_size=12"):  # fmt: skip
        micro_batches(FinetuneConfig(batch_size=32, micro_batch_size=12), world_size=1)


def test_a_micro_batch_size_that_does_not_divide_the_batch_is_one_line_exit_1(
    tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    init = tiny_init(tmp_path / "init")
    train = write_data(tmp_path / "train.csv", 8)
    argv = finetune_argv(init, train, train, tmp_path / "out", "--batch-size", "4", "--micro-batch-size", "3")
    assert main(argv) == 1
    err = capsys.readouterr().err.strip().splitlines()
    assert len(err) == 1 and "micro_batch_size=3" in err[0] and err[0].startswith("albert finetune: error:")


def test_one_flag_and_one_field_in_both_commands(capsys: pytest.CaptureFixture[str], tmp_path: Path) -> None:
    """``--micro-batch-size`` sets ``run.micro_batch_size`` in `albert pretrain` and `albert finetune` alike."""
    from albert_lm.train.settings import parse_yaml

    assert main(["pretrain", "--recipe", "smoke", "--micro-batch-size", "4", "--print-config"]) == 0
    pre = parse_yaml(capsys.readouterr().out, "pretrain")
    argv = ["finetune", "glue", "--task", "sst2", "--data-dir", str(tmp_path), "--model", str(tmp_path)]
    assert main([*argv, "--output", str(tmp_path / "o"), "--micro-batch-size", "4", "--print-config"]) == 0
    fine = parse_yaml(capsys.readouterr().out, "finetune")
    assert pre["run"]["micro_batch_size"] == fine["run"]["micro_batch_size"] == 4
    assert pre["run"]["global_batch_size"] == 8 and fine["finetune"]["batch_size"] == 32  # the step's batch


def test_batches_split_into_micro_batches_of_near_equal_parts() -> None:
    from albert_lm.tasks.collate import LengthGroupedBatches

    feats = [{"input_ids": [1] * (i % 7 + 2), "example_index": i} for i in range(44)]
    whole = LengthGroupedBatches(feats, 16, lambda fs: [f["example_index"] for f in fs], seed=3)
    split = LengthGroupedBatches(
        feats, 16, lambda fs: [f["example_index"] for f in fs], seed=3, micro_batches=4
    )
    batches, parts = whole.batch_indices(), list(split)
    assert [len(b) for b in batches] and sorted(len(b) for b in batches) == [12, 16, 16]
    assert len(split) == len(parts) == 12  # each batch as 4 micro-batches
    for i, b in enumerate(batches):  # the same examples, in the same order, in 4 consecutive parts
        assert sum(parts[4 * i : 4 * i + 4], []) == b
        assert sorted(len(p) for p in parts[4 * i : 4 * i + 4]) == [len(b) // 4] * 4
    # a final batch with fewer examples than micro-batches cannot make a step of them all: skipped
    short = LengthGroupedBatches(feats[:18], 16, lambda fs: fs, shuffle=False, micro_batches=4)
    assert [len(b) for b in short.batch_indices()] == [16]
