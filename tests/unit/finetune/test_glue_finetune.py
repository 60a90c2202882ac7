"""`albert finetune glue` -> `albert predict` -> `albert evaluate` on the GLUE fixtures with a tiny random
model, and the model-directory checks."""

from __future__ import annotations

import io
import json
import re
from pathlib import Path

import pytest

from albert_lm.cli.main import main
from albert_lm.config import AlbertConfig
from albert_lm.finetune.rundir import resolve_model_dir
from albert_lm.tasks.base import ModelDirError
from albert_lm.tasks.inputs import load_model_tokenizer
from conftest import FIXTURES

GLUE_DIR = FIXTURES / "glue"


def _vocab() -> list[str]:
    words: set[str] = set()
    for f in sorted(GLUE_DIR.rglob("*.tsv")):
        words.update(re.findall(r"\w+|[^\w\s]", f.read_text(encoding="utf-8").lower()))
    return ["[PAD]", "[UNK]", "[CLS]", "[SEP]", "[MASK]", *sorted(words)]


def sst2_argv(init: Path, output: Path) -> list[str]:
    """`albert finetune glue --task sst2` on the fixtures, from ``init`` into ``output``."""
    return ["finetune", "glue", "--task", "sst2", "--data-dir", str(GLUE_DIR), "--init", str(init), "--output",
            str(output)]  # fmt: skip


@pytest.fixture(scope="module")
def tiny_model_dir(tmp_path_factory: pytest.TempPathFactory) -> Path:
    """An encoder-only model directory (random albert-tiny) with a WordPiece vocab of the fixture words."""
    import torch

    from albert_lm.model import AlbertModel

    torch.manual_seed(0)
    d = tmp_path_factory.mktemp("init")
    vocab = _vocab()
    (d / "vocab.txt").write_text("\n".join(vocab) + "\n", encoding="utf-8")
    AlbertModel(AlbertConfig.from_preset("albert-tiny", vocab_size=len(vocab))).save_pretrained(d)
    return d


@pytest.fixture(scope="module")
def sst2_run(tiny_model_dir: Path, tmp_path_factory: pytest.TempPathFactory) -> Path:
    run = tmp_path_factory.mktemp("run") / "sst2"
    argv = ["finetune", "glue", "--task", "sst2", "--data-dir", str(GLUE_DIR), "--init", str(tiny_model_dir)]
    argv += ["--output", str(run), "--train-steps", "4", "--eval-every", "2", "--batch-size", "3"]
    argv += ["--learning-rate", "1e-3", "--max-seq-length", "32", "--no-progress"]
    argv += ["--precision", "fp32"]  # the dev predictions are compared with `albert predict`'s (fp32)
    assert main(argv) == 0
    return run


def test_run_dir_reports_best_and_last(sst2_run: Path) -> None:
    report = json.loads((sst2_run / "report.json").read_text())
    best, last = report["checkpoints"]["best"], report["checkpoints"]["last"]
    assert last["step"] == 4 and Path(last["dir"]).name == "step-00000004"
    assert Path(best["dir"]).name == "best"
    history = report["history"]
    assert [h["step"] for h in history] == [2, 4]
    # best is the first evaluation with the highest score (strictly better replaces)
    top = max(h["score"] for h in history)
    assert best["score"] == top and best["step"] == next(h["step"] for h in history if h["score"] == top)
    assert report["config"]["learning_rate"] == 1e-3 and report["total_steps"] == 4
    for which in ("best", "last"):
        d = resolve_model_dir(sst2_run, which)
        info = json.loads((d / "task.json").read_text())
        assert info["labels"] == ["0", "1"] and info["max_seq_length"] == 32
        assert (d / "vocab.txt").is_file() and load_model_tokenizer(d).vocab_size == len(_vocab())
        cfg = json.loads((d / "config.json").read_text())
        assert cfg["id2label"] == {"0": "0", "1": "1"}
    # leaderboard file of the test split, from the best checkpoint
    rows = [r.split("\t") for r in (sst2_run / "test" / "SST-2.tsv").read_text().splitlines()]
    assert rows[0] == ["index", "prediction"]
    assert [r[0] for r in rows[1:]] == ["0", "1"] and all(r[1] in ("0", "1") for r in rows[1:])
    assert len((sst2_run / "predictions" / "dev_best.jsonl").read_text().splitlines()) == 3


def test_predict_from_stdin_matches_the_dev_predictions(
    sst2_run: Path, monkeypatch: pytest.MonkeyPatch, capsys: pytest.CaptureFixture[str]
) -> None:
    dev = (GLUE_DIR / "SST-2" / "dev.tsv").read_text().splitlines()[1:]
    texts = [line.split("\t")[0] for line in dev]
    monkeypatch.setattr("sys.stdin", io.StringIO("\n".join(texts) + "\n"))
    assert main(["predict", "--model", str(sst2_run)]) == 0
    got = [json.loads(line) for line in capsys.readouterr().out.splitlines()]
    want = [
        json.loads(line) for line in (sst2_run / "predictions" / "dev_best.jsonl").read_text().splitlines()
    ]
    assert [g["text"] for g in got] == texts
    for g, w in zip(got, want):
        assert g["label"] == w["label"]
        assert g["probabilities"] == pytest.approx(w["probabilities"], abs=1e-5)
        assert sum(g["probabilities"].values()) == pytest.approx(1.0)


def test_evaluate_reproduces_the_reported_best_metrics(
    sst2_run: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    capsys.readouterr()
    argv = ["evaluate", "glue", "--task", "sst2", "--data-dir", str(GLUE_DIR), "--model", str(sst2_run)]
    assert main(argv) == 0
    out = json.loads(capsys.readouterr().out)
    best = json.loads((sst2_run / "report.json").read_text())["checkpoints"]["best"]
    assert out["accuracy"] == pytest.approx(best["accuracy"]) and out["num_examples"] == 3
    assert main([*argv, "--checkpoint", "last", "--split", "test"]) == 0
    assert (resolve_model_dir(sst2_run, "last") / "eval" / "SST-2.tsv").is_file()


def test_print_config_resolves_preset_and_overrides(
    tiny_model_dir: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    argv = ["finetune", "glue", "--task", "rte", "--data-dir", str(GLUE_DIR), "--init", str(tiny_model_dir)]
    from albert_lm.train.settings import parse_yaml

    assert main([*argv, "--output", "unused", "--print-config"]) == 0
    cfg = parse_yaml(capsys.readouterr().out, "stdout")  # the YAML of albert pretrain's
    steps = (cfg["schedule"]["train_steps"], cfg["schedule"]["warmup_steps"])
    assert (cfg["optim"]["learning_rate"], cfg["finetune"]["batch_size"], *steps) == (3e-5, 32, 800, 200)
    assert main([*argv, "--output", "unused", "--print-config", "--epochs", "2", "--batch-size", "8"]) == 0
    cfg = parse_yaml(capsys.readouterr().out, "stdout")
    steps = (cfg["schedule"]["train_steps"], cfg["schedule"]["warmup_steps"])
    assert (cfg["finetune"]["epochs"], cfg["finetune"]["batch_size"], *steps) == (2.0, 8, None, None)


# ------------------------------------------------------------------------------------ model directory checks
def test_model_dir_without_tokenizer_is_a_clear_error(tiny_model_dir: Path, tmp_path: Path, capsys) -> None:
    import shutil

    d = tmp_path / "no_tok"
    shutil.copytree(tiny_model_dir, d)
    (d / "vocab.txt").unlink()
    with pytest.raises(
        ModelDirError, match=r"no tokenizer in the model directory \(looked for spiece.model or vocab.txt\)"
    ):
        load_model_tokenizer(d)
    assert main([*sst2_argv(d, tmp_path / "r"), "--max-seq-length", "32"]) == 1
    err = capsys.readouterr().err
    assert err.startswith("albert finetune: error: ") and "no tokenizer in the model directory" in err


def test_tokenizer_vocab_mismatch_is_a_clear_error(tiny_model_dir: Path, tmp_path: Path) -> None:
    import shutil

    d = tmp_path / "mismatch"
    shutil.copytree(tiny_model_dir, d)
    with open(d / "vocab.txt", "a", encoding="utf-8") as f:
        f.write("extra1\nextra2\n")
    n = len(_vocab())
    with pytest.raises(
        ModelDirError, match=rf"the tokenizer has {n + 2} entries but config.json says vocab_size={n}"
    ):
        load_model_tokenizer(d)


def test_not_a_model_dir(tmp_path: Path) -> None:
    with pytest.raises(ModelDirError, match="no config.json"):
        load_model_tokenizer(tmp_path)
    with pytest.raises(ModelDirError, match="neither a model directory"):
        resolve_model_dir(tmp_path)


def test_random_init_keeps_the_architecture_and_draws_fresh_weights(
    tiny_model_dir: Path, tmp_path: Path
) -> None:
    """--random-init: same config and tokenizer as --init, every encoder tensor redrawn (seeded); with a
    zero learning rate the saved weights are the drawn ones."""
    from safetensors.torch import load_file

    def run(name: str, *extra: str) -> Path:
        out = tmp_path / name
        argv = sst2_argv(tiny_model_dir, out) + [
            "--train-steps",
            "1",
            "--batch-size",
            "3",
            "--learning-rate",
            "0",
        ]
        argv += ["--max-seq-length", "32", "--no-progress", "--no-test", "--seed", "7", *extra]
        assert main(argv) == 0
        return out

    pretrained, rnd, rnd2 = run("kept"), run("random", "--random-init"), run("random2", "--random-init")
    init = load_file(str(tiny_model_dir / "model.safetensors"))

    def weights(out: Path) -> dict:
        return load_file(str(out / "checkpoints" / "step-00000001" / "model.safetensors"))

    kept, fresh, fresh2 = weights(pretrained), weights(rnd), weights(rnd2)
    matrices = [k for k, v in init.items() if v.ndim == 2]
    assert matrices
    for k in matrices:
        (name,) = [n for n in kept if n.endswith(k)]
        assert (kept[name] == init[k]).all(), name  # lr 0: the loaded weights, unchanged
        assert not (fresh[name] == init[k]).all(), name  # redrawn
        assert (fresh[name] == fresh2[name]).all(), name  # seeded
    report = json.loads((rnd / "report.json").read_text())
    assert report["init"].startswith("random init") and str(tiny_model_dir) in report["init"]
    cfg = json.loads((rnd / "checkpoints" / "step-00000001" / "config.json").read_text())
    assert cfg["hidden_size"] == json.loads((tiny_model_dir / "config.json").read_text())["hidden_size"]
