"""`albert pretrain` and an existing run directory: a fresh run is refused there (it appended to the old
run's metrics.jsonl), --overwrite replaces the old run, --resume continues it."""

from __future__ import annotations

import json
from pathlib import Path

import pytest
from data_support import WIKI_SAMPLE, make_tokenizer, train_spm


@pytest.fixture(scope="module")
def tiny_data(tmp_path_factory) -> Path:
    from albert_lm.data import PrepareConfig, prepare

    root = tmp_path_factory.mktemp("tiny_pretrain_rundir")
    tok = make_tokenizer(train_spm(root / "spiece.model", vocab_size=400))
    prepare(
        [WIKI_SAMPLE],
        tok,
        root / "data",
        PrepareConfig(max_seq_length=32, dupe_factor=1, input_format="lines"),
    )
    return root / "data"


def steps_logged(run: Path) -> list[int]:
    lines = (run / "metrics.jsonl").read_text().splitlines()
    return [r["step"] for r in map(json.loads, lines) if "loss" in r]


def test_an_earlier_run_is_refused_replaced_or_continued(tiny_data, tmp_path, capsys):
    from albert_lm.cli.main import main

    run = tmp_path / "run"
    argv = ["pretrain", "--recipe", "smoke", "--data-dir", str(tiny_data), "--run-dir", str(run),
            "--set", "schedule.train_steps=4", "--set", "run.max_steps=2", "--set", "run.eval_every=null",
            "--set", "run.threads=1", "--set", "run.precision=fp32"]  # fmt: skip
    assert main(argv) == 0 and steps_logged(run) == [1, 2]
    before = {p: p.read_bytes() for p in run.rglob("*") if p.is_file()}
    capsys.readouterr()

    assert main(argv) == 1  # a fresh run on top of the old one
    err = capsys.readouterr().err
    assert err.count("\n") == 1 and "exists and is not empty" in err and "--overwrite replaces it" in err
    assert {p: p.read_bytes() for p in run.rglob("*") if p.is_file()} == before  # nothing touched

    assert main([*argv, "--overwrite", "--resume"]) == 1
    assert "give one" in capsys.readouterr().err

    assert main(["pretrain", "--resume", str(run), "--set", "run.max_steps=3"]) == 0
    assert steps_logged(run) == [1, 2, 3]  # continued

    assert main([*argv, "--overwrite"]) == 0
    assert steps_logged(run) == [1, 2]  # the old run replaced, not appended to
    assert [p.name for p in tmp_path.iterdir()] == ["run"]  # nothing left aside


def test_overwrite_puts_the_old_run_back_when_the_new_one_fails(tiny_data, tmp_path, capsys):
    from albert_lm.cli.main import main

    run = tmp_path / "run"
    run.mkdir()
    (run / "metrics.jsonl").write_text('{"step": 1, "loss": 1.0}\n')
    argv = ["pretrain", "--recipe", "smoke", "--data-dir", str(tiny_data), "--run-dir", str(run), "--overwrite",
            "--set", "data.max_seq_length=64"]  # fmt: skip
    assert main(argv) == 1  # refused by the data (prepared at 32) after the old run was moved aside
    assert "data.max_seq_length 64 differs" in capsys.readouterr().err
    assert steps_logged(run) == [1] and [p.name for p in tmp_path.iterdir()] == ["run"]
