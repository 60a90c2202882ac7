"""`albert pretrain --resume` continues the run it names, or refuses: another data content, learning rate,
seed, model or optimizer is one error naming each field (old then new) and nothing of the run is written;
the settings that may change (step cap, cadences) are applied and recorded in run_config.json's changes."""

from __future__ import annotations

import json
from pathlib import Path

import pytest
from data_support import WIKI_SAMPLE, make_tokenizer, train_spm


@pytest.fixture(scope="module")
def two_data_dirs(tmp_path_factory) -> tuple[Path, Path]:
    from albert_lm.data import PrepareConfig, prepare

    root = tmp_path_factory.mktemp("resume_identity")
    tok = make_tokenizer(train_spm(root / "spiece.model", vocab_size=400))
    for name, seed in (("data", 1), ("other", 2)):
        prepare([WIKI_SAMPLE], tok, root / name,
                PrepareConfig(max_seq_length=32, dupe_factor=1, input_format="lines", seed=seed))  # fmt: skip
    return root / "data", root / "other"


def _argv(data: Path, run: Path) -> list[str]:
    return ["pretrain", "--recipe", "smoke", "--data-dir", str(data), "--output", str(run),
            "--set", "schedule.train_steps=4", "--set", "run.max_steps=2", "--set", "run.eval_every=null",
            "--set", "run.threads=1", "--set", "run.precision=fp32", "--set", "run.progress=false"]  # fmt: skip


def _files(run: Path) -> dict[Path, bytes]:
    return {p: p.read_bytes() for p in sorted(run.rglob("*")) if p.is_file()}


def _steps(run: Path) -> list[int]:
    lines = (run / "metrics.jsonl").read_text().splitlines()
    return [r["step"] for r in map(json.loads, lines) if "loss" in r]


def test_a_resume_as_another_run_is_refused_naming_each_field_and_writes_nothing(
    two_data_dirs, tmp_path, capsys
):
    from albert_lm.cli.main import main

    data, other = two_data_dirs
    run = tmp_path / "run"
    assert main(_argv(data, run)) == 0
    before = _files(run)
    capsys.readouterr()

    resume = ["pretrain", "--resume", str(run)]
    assert main([*resume, "--data-dir", str(other), "--learning-rate", "0.5", "--seed", "7"]) == 1
    err = capsys.readouterr().err
    assert err.count("\n") == 1 and err.startswith("albert pretrain: error: ")
    assert "run_config.json" in err and "--optim.learning_rate: " in err and "then, 0.5 now" in err
    assert "--run.seed: 12345 then, 7 now" in err and "data: sha256 " in err
    assert _files(run) == before  # run_config.json included

    for flags, field in (
        (["--set", "model.preset=albert-base-v2"], "--model.preset: "),
        (["--set", "optim.optimizer=adamw"], "--optim.optimizer: 'lamb' then, 'adamw' now"),
        (["--set", "run.global_batch_size=3"], "--run.global_batch_size: "),
    ):
        assert main([*resume, *flags]) == 1
        err = capsys.readouterr().err
        assert err.count("\n") == 1 and field in err, err
        assert _files(run) == before

    assert main([*resume, "--set", "run.max_steps=3"]) == 0  # the refusals left the run resumable
    assert _steps(run) == [1, 2, 3]


def test_allowed_changes_are_applied_and_recorded_at_their_step(two_data_dirs, tmp_path):
    from albert_lm.cli.main import main

    run = tmp_path / "run"
    assert main(_argv(two_data_dirs[0], run)) == 0
    assert (
        main(["pretrain", "--resume", str(run), "--set", "run.max_steps=3", "--set", "run.keep_last=3"]) == 0
    )
    record = json.loads((run / "run_config.json").read_text())
    assert record["run"]["max_steps"] == 3
    assert {"step": 2, "field": "run.max_steps", "old": 2, "new": 3} in record["changes"]
    assert {"step": 2, "field": "run.keep_last", "old": 2, "new": 3} in record["changes"]
    assert (
        main(["pretrain", "--resume", str(run), "--set", "run.max_steps=4", "--set", "run.keep_last=3"]) == 0
    )
    changes = json.loads((run / "run_config.json").read_text())["changes"]
    assert [(c["step"], c["field"]) for c in changes] == [(2, "run.max_steps"), (2, "run.keep_last"),
                                                          (3, "run.max_steps")]  # fmt: skip
    assert _steps(run) == [1, 2, 3, 4]


def test_a_run_killed_before_its_first_checkpoint_is_resumed_from_step_0(two_data_dirs, tmp_path, capsys):
    from albert_lm.cli.main import main

    run = tmp_path / "run"
    argv = _argv(two_data_dirs[0], run)
    assert main(argv) == 0
    # what a kill before the first save leaves: the settings and the first log lines, no checkpoint
    for name in ("checkpoints", "model"):
        import shutil

        shutil.rmtree(run / name)
    (run / "result.json").unlink()
    capsys.readouterr()

    assert main(argv) == 1  # a plain rerun names the command that works
    assert "--resume continues it" in capsys.readouterr().err
    assert main(["pretrain", "--resume", str(run)]) == 0
    assert _steps(run) == [1, 2]  # started over, not appended to the killed run's log
    assert (run / "model" / "config.json").is_file()
