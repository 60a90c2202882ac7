"""A task preset's max_seq_length (custom data: 128) is the one checked against the model, not fine-tuning's
general default (512): a 128-position model fine-tunes with the preset, as --print-config shows it will."""

from __future__ import annotations

import json
import sys
from pathlib import Path

import torch

from albert_lm.cli.main import main
from albert_lm.config import AlbertConfig

sys.path.insert(0, str(Path(__file__).resolve().parents[1]))  # tests/unit: its helper modules
from inference_support import TEXTS, VOCAB  # noqa: E402


def test_a_128_position_model_fine_tunes_with_the_custom_preset(tmp_path: Path, capsys) -> None:  # type: ignore[no-untyped-def]
    from albert_lm.model import AlbertModel

    torch.manual_seed(0)
    init = tmp_path / "init"
    init.mkdir()
    (init / "vocab.txt").write_text("\n".join(VOCAB) + "\n", encoding="utf-8")
    config = AlbertConfig.from_preset("albert-tiny", vocab_size=len(VOCAB))
    assert config.max_position_embeddings == 128
    AlbertModel(config).save_pretrained(init)
    data = tmp_path / "data.csv"
    rows = [f'"{t.strip()}",{i % 2}' for i, t in enumerate(TEXTS * 2)]
    data.write_text("text,label\n" + "\n".join(rows) + "\n", encoding="utf-8")
    argv = ["finetune", "custom", "--train", str(data), "--dev", str(data), "--text-column", "text"]
    argv += ["--label-column", "label", "--model", str(init), "--output", str(tmp_path / "run")]

    assert main([*argv, "--print-config"]) == 0
    assert "max_seq_length: 128" in capsys.readouterr().out
    assert (
        main([*argv, "--train-steps", "2", "--batch-size", "4", "--no-progress", "--precision", "fp32"]) == 0
    )
    report = json.loads((tmp_path / "run" / "report.json").read_text())
    assert report["config"]["max_seq_length"] == 128

    # a flag that does not fit the model is still refused, naming the flag
    capsys.readouterr()
    assert main([*argv, "--output", str(tmp_path / "run2"), "--max-seq-length", "512"]) == 1
    err = capsys.readouterr().err
    assert err.count("\n") == 1 and "--max-seq-length" in err and "128" in err
