"""Training's share of issue 15: no code runs from a checkpoint, non-finite numbers are refused and never
written as a "good" state, a resume works from any directory and refuses another world size, and the
fine-tuning epsilon reaches the optimizer."""

from __future__ import annotations

import json
import math
import os
from pathlib import Path

import numpy as np
import pytest
import torch

from albert_lm.optim import Lamb, build_optimizer, build_scheduler
from albert_lm.optim.schedules import WarmupPolyDecay
from albert_lm.pretrain.config import ConfigError, PretrainConfig
from albert_lm.train import OptimSettings, Trainer, TrainerConfig, TrainingDiverged
from albert_lm.train import checkpoint as ckpt_io
from albert_lm.train.state_files import StateFileError, load_state, save_state
from toy_training import Stream, Toy

SRC = Path(__file__).resolve().parents[3] / "src"


def make(steps: int = 4, optimizer: str = "lamb", **cfg):
    torch.manual_seed(0)
    model = Toy(dropout=0.1)
    opt = build_optimizer(model, optimizer, lr=0.05)
    sched = build_scheduler(opt, total_steps=steps)
    config = TrainerConfig(max_steps=steps, progress=False, tensorboard=False, **{"precision": "fp32", **cfg})
    return model, opt, sched, config


def params_of(model):
    return {k: v.detach().clone() for k, v in model.state_dict().items()}


def train(run_dir: Path, stop_at: int, total: int = 4, resume: bool = False) -> Toy:
    model, opt, sched, cfg = make(total)
    cfg.max_steps = stop_at
    Trainer(model, opt, sched, cfg, run_dir=run_dir).fit(Stream(seed=3), resume=resume)
    return model


class Payload:
    """Unpickling it creates the file ``marker``: what a crafted trainer.pt did on ``albert pretrain
    --resume`` while checkpoints were loaded with ``torch.load(weights_only=False)``."""

    def __init__(self, marker: Path) -> None:
        self.marker = str(marker)

    def __reduce__(self):
        return (open, (self.marker, "w"))


def as_pickled_layout(ckpt: Path) -> None:
    """Rewrite a checkpoint's training state in the earlier layout (optimizer.pt, trainer.pt, rank_states.pt)."""
    state = ckpt_io.read_training_state(ckpt)
    for f in ckpt.glob(f"{ckpt_io.TRAINING_STATE}.*"):
        f.unlink()
    torch.save(state["optimizer"], ckpt / "optimizer.pt")
    torch.save(state["trainer"], ckpt / "trainer.pt")
    torch.save(state["ranks"], ckpt / "rank_states.pt")


# ------------------------------------------------------------------------------------------------ item 1
def test_a_crafted_pickle_in_a_checkpoint_is_refused_and_never_run(tmp_path):
    model, opt, sched, cfg = make()
    cfg.max_steps = 2
    Trainer(model, opt, sched, cfg, run_dir=tmp_path / "run").fit(Stream(seed=3))
    ckpt = ckpt_io.latest_checkpoint(tmp_path / "run")
    # the checkpoint's state in the pickled layout, with a payload in trainer.pt
    for f in ckpt.glob("training_state.*"):
        f.unlink()
    marker = tmp_path / "payload-ran"
    torch.save(opt.state_dict(), ckpt / "optimizer.pt")
    torch.save({"scheduler": Payload(marker), "scaler": {}}, ckpt / "trainer.pt")
    torch.save([{"rng": ckpt_io.rng_state(), "data": {"pos": 2}}], ckpt / "rank_states.pt")
    model, opt, sched, cfg = make()
    with pytest.raises(ValueError) as refused:
        Trainer(model, opt, sched, cfg, run_dir=tmp_path / "run").fit(Stream(seed=3), resume=True)
    assert not marker.exists(), "the checkpoint's payload ran"
    message = str(refused.value)
    assert "trainer.pt: refused to load: it asks to call or build io.open" in message
    assert "weights_only=False" not in message  # no advice to do what the attacker wants


def test_training_state_is_written_without_pickle(tmp_path):
    train(tmp_path, stop_at=2)
    ckpt = ckpt_io.latest_checkpoint(tmp_path)
    assert sorted(p.name for p in ckpt.iterdir()) == [
        "model.safetensors",
        "trainer_state.json",
        "training_state.json",
        "training_state.safetensors",
    ]
    tree = json.loads((ckpt / "training_state.json").read_text())
    assert set(tree) == {"optimizer", "trainer", "ranks"}


def test_a_checkpoint_of_the_earlier_pickle_layout_still_resumes_exactly(tmp_path):
    straight = train(tmp_path / "straight", stop_at=4)
    train(tmp_path / "resumed", stop_at=2)
    as_pickled_layout(ckpt_io.latest_checkpoint(tmp_path / "resumed"))  # numpy RNG arrays included
    resumed = train(tmp_path / "resumed", stop_at=4, resume=True)
    for k, v in params_of(straight).items():
        assert torch.equal(v, params_of(resumed)[k]), k


def test_no_source_file_unpickles_with_weights_only_false():
    hits = [str(p) for p in SRC.rglob("*.py") if "weights_only=False" in p.read_text(encoding="utf-8")]
    assert hits == []


def test_state_files_round_trip_what_json_cannot_hold(tmp_path):
    state = {
        "by_index": {0: {"m": torch.arange(3.0)}, 7: torch.tensor(2.5)},
        "python_rng": (3, tuple(range(5)), None),
        "numpy_rng": ("MT19937", np.arange(4, dtype=np.uint32), 2, 0, 0.0),
        "odd": [math.nan, math.inf, -math.inf, {"$tensor": "not a tag"}],
        "bf16": torch.ones(2, dtype=torch.bfloat16),
    }
    save_state(state, tmp_path, "s")
    back = load_state(tmp_path, "s")
    assert list(back["by_index"]) == [0, 7] and torch.equal(back["by_index"][0]["m"], torch.arange(3.0))
    assert back["python_rng"] == (3, (0, 1, 2, 3, 4), None)
    assert back["numpy_rng"][1].dtype == np.uint32 and back["numpy_rng"][1].tolist() == [0, 1, 2, 3]
    assert math.isnan(back["odd"][0]) and back["odd"][1:3] == [math.inf, -math.inf]
    assert back["odd"][3] == {"$tensor": "not a tag"}
    assert back["bf16"].dtype == torch.bfloat16
    with pytest.raises(TypeError, match=r"bad\.x: a object cannot be stored"):
        save_state({"x": object()}, tmp_path, "bad")


def test_state_files_that_do_not_fit_are_named(tmp_path):
    save_state({"w": torch.ones(2)}, tmp_path, "s")
    (tmp_path / "s.json").write_text('{"w": {"$tensor": "t9"}}')
    with pytest.raises(StateFileError, match=r"s\.json: s\.w: refers to tensor 't9'"):
        load_state(tmp_path, "s")
    (tmp_path / "s.json").write_text('{"w": {"$pickle": "x"}}')
    with pytest.raises(StateFileError, match=r"unknown or malformed entry '\$pickle'"):
        load_state(tmp_path, "s")
    (tmp_path / "s.safetensors").write_bytes(b"\x00garbage")
    with pytest.raises(StateFileError, match=r"s\.safetensors: cannot read tensors"):
        load_state(tmp_path, "s")


# ------------------------------------------------------------------------------------------------ item 2
@pytest.mark.parametrize("name", ["lamb", "adamw", "adamw_original"])
@pytest.mark.parametrize(
    "given, field",
    [
        ({"lr": math.inf}, "lr"),
        ({"lr": math.nan}, "lr"),
        ({"eps": math.nan}, "eps"),
        ({"weight_decay": math.inf}, "weight_decay"),
        ({"betas": (math.nan, 0.999)}, "beta1"),
    ],
)
def test_optimizers_refuse_non_finite_hyperparameters(name, given, field):
    kwargs = {"lr": 1e-3, **given}
    with pytest.raises(ValueError, match=f"{field} must be a finite number"):
        build_optimizer(Toy(), name, **kwargs)


def test_lamb_and_the_schedule_refuse_non_finite_values_given_directly():
    with pytest.raises(ValueError, match="Lamb: lr must be a finite number"):
        Lamb(Toy().parameters(), lr=math.inf)
    with pytest.raises(ValueError, match="Lamb param group 0: lr must be a finite number"):
        Lamb([{"params": list(Toy().parameters()), "lr": math.nan}])
    with pytest.raises(ValueError, match="schedule: power must be a finite number"):
        WarmupPolyDecay(total_steps=10, power=math.nan)


@pytest.mark.parametrize("field", ["max_grad_norm", "max_time_s"])
@pytest.mark.parametrize("value", [math.inf, math.nan])
def test_trainer_config_refuses_non_finite_numbers(field, value):
    with pytest.raises(ValueError, match=f"TrainerConfig.{field}: must be (a )?finite"):
        TrainerConfig(max_steps=1, **{field: value})


def test_a_pretrain_config_built_in_code_refuses_non_finite_numbers():
    cfg = PretrainConfig()
    cfg.optim.learning_rate = math.inf
    with pytest.raises(ConfigError, match=r"optim\.learning_rate: must be a finite number, got inf"):
        cfg.validate()
    cfg = PretrainConfig()
    cfg.schedule.power = math.nan
    with pytest.raises(ConfigError, match=r"schedule\.power: must be a finite number"):
        cfg.validate()


def test_pretrain_flag_lr_inf_is_refused(capsys):
    from albert_lm.cli.main import main

    with pytest.raises(SystemExit) as exited:
        main(["pretrain", "--recipe", "smoke", "--optim.learning_rate", "inf", "--print-config"])
    assert exited.value.code == 2
    assert (
        "--learning-rate/--optim.learning_rate/--optim.lr: must be a finite number, got inf"
        in capsys.readouterr().err
    )


def test_a_checkpoint_with_nan_weights_is_never_written(tmp_path):
    model = Toy()
    with torch.no_grad():
        model.down.weight[0, 3] = math.nan
    with pytest.raises(ValueError, match=r"best: down\.weight holds NaN or infinite values"):
        ckpt_io.write_checkpoint(tmp_path, "best", model=model, trainer_state={})
    assert not (tmp_path / "best").exists()
    assert issubclass(ckpt_io.NonFiniteError, ValueError)


def test_after_the_weights_turn_non_finite_the_last_good_checkpoint_is_good(tmp_path):
    torch.manual_seed(0)
    model = Toy()
    opt = torch.optim.SGD(model.parameters(), lr=0.01)
    # The third update has an infinite rate (what --optim.learning_rate inf did before it was refused): its loss and
    # gradient are finite, the weights after it are not, and every later loss is NaN.
    sched = torch.optim.lr_scheduler.LambdaLR(opt, lambda step: math.inf if step >= 2 else 1.0)
    cfg = TrainerConfig(
        precision="fp32", max_steps=20, save_every=2, max_bad_steps=2, progress=False, tensorboard=False
    )
    with pytest.raises(
        TrainingDiverged, match=r"no checkpoint was written; the last good one is \S*step-00000002"
    ):
        Trainer(model, opt, sched, cfg, run_dir=tmp_path).fit(Stream())
    assert [p.name for p in ckpt_io.list_checkpoints(tmp_path / "checkpoints")] == ["step-00000002"]
    reloaded = Toy()
    ckpt_io.load_model_weights(reloaded, ckpt_io.latest_checkpoint(tmp_path))
    assert all(torch.isfinite(p).all() for p in reloaded.parameters())


# ------------------------------------------------------------------------------------------------ item 11
@pytest.fixture(scope="module")
def tiny_data(tmp_path_factory) -> Path:
    from data_support import WIKI_SAMPLE, make_tokenizer, train_spm

    from albert_lm.data import PrepareConfig, prepare

    root = tmp_path_factory.mktemp("tiny_pretrain")
    tok = make_tokenizer(train_spm(root / "spiece.model", vocab_size=400))
    prepare(
        [WIKI_SAMPLE],
        tok,
        root / "data",
        PrepareConfig(max_seq_length=32, dupe_factor=1, input_format="lines"),
    )
    return root / "data"


def test_resume_from_another_working_directory(tiny_data, tmp_path, monkeypatch):
    from albert_lm.cli.main import main
    from albert_lm.pretrain.config import apply_dict, recipe
    from albert_lm.pretrain.run import pretrain

    first, other = tmp_path / "first", tmp_path / "somewhere" / "else"  # a relative path differs between them
    first.mkdir()
    other.mkdir(parents=True)
    monkeypatch.chdir(first)
    run = {"output": "run", "max_steps": 2, "eval_every": None, "save_every": 2, "threads": 1}
    given = {"data": {"data_dir": os.path.relpath(tiny_data)}, "schedule": {"train_steps": 4}, "run": run}
    pretrain(apply_dict(recipe("smoke"), given, "test"))

    monkeypatch.chdir(other)  # where the relative data path means nothing
    assert main(["pretrain", "--resume", str(first / "run"), "--run.max_steps", "4"]) == 0
    assert ckpt_io.read_trainer_state(ckpt_io.latest_checkpoint(first / "run"))["step"] == 4
    saved = json.loads((first / "run" / "run_config.json").read_text())
    assert saved["data"]["data_dir"] == str(tiny_data) and saved["run"]["output"] == str(first / "run")


# ------------------------------------------------------------------------------------------------ also fix
def test_load_training_refuses_more_ranks_than_the_checkpoint_has(tmp_path):
    train(tmp_path, stop_at=2)
    ckpt = ckpt_io.latest_checkpoint(tmp_path)
    model, opt, sched, _ = make()
    scaler = torch.amp.GradScaler("cpu", enabled=False)
    for rank in (0, 1):  # the job grew from 1 to 2 ranks: rank 1 used to get rank 0's RNG and data position
        with pytest.raises(ValueError, match=r"written by 1 rank\(s\), this run has 2"):
            ckpt_io.load_training(
                ckpt, model=model, optimizer=opt, scheduler=sched, scaler=scaler, rank=rank, world_size=2
            )


def test_resume_refuses_a_checkpoint_of_more_ranks(tmp_path):
    train(tmp_path, stop_at=2)
    ckpt = ckpt_io.latest_checkpoint(tmp_path)
    state = ckpt_io.read_training_state(ckpt)
    state["ranks"] = state["ranks"] * 2  # as written by two ranks
    save_state(state, ckpt, ckpt_io.TRAINING_STATE)
    model, opt, sched, cfg = make()
    with pytest.raises(ValueError, match=r"written by 2 rank\(s\), this run has 1"):
        Trainer(model, opt, sched, cfg, run_dir=tmp_path).fit(Stream(seed=3), resume=True)


@pytest.mark.parametrize("optimizer", ["adamw", "adamw_original", "lamb"])
def test_for_finetuning_passes_the_epsilon_to_the_optimizer(optimizer):
    cfg = TrainerConfig(precision="fp32", max_steps=2, progress=False, tensorboard=False)
    optim = OptimSettings(optimizer=optimizer, learning_rate=1e-3, adam_epsilon=1e-8)
    trainer = Trainer.for_finetuning(Toy(), optim=optim, total_steps=2, config=cfg)
    assert [g["eps"] for g in trainer.optimizer.param_groups] == [1e-8, 1e-8]
