"""`albert finetune squad` -> `albert evaluate squad` -> `albert predict`, SQuAD 1.1 and 2.0 (both heads),
with a tiny random model on a hand-written SQuAD-format fixture."""

from __future__ import annotations

import io
import json
import re
from pathlib import Path

import pytest

from albert_lm.cli.main import main
from albert_lm.config import AlbertConfig
from albert_lm.tasks.squad_data import make_unanswerable, read_squad
from albert_lm.tasks.squad_metric import normalize_answer
from conftest import FIXTURES

TINY = FIXTURES / "squad" / "tiny-v1.1.json"


@pytest.fixture(scope="module")
def tiny_model_dir(tmp_path_factory: pytest.TempPathFactory) -> Path:
    import torch

    from albert_lm.model import AlbertModel

    torch.manual_seed(0)
    d = tmp_path_factory.mktemp("init")
    words = sorted(set(re.findall(r"\w+|[^\w\s]", TINY.read_text(encoding="utf-8").lower())))
    vocab = ["[PAD]", "[UNK]", "[CLS]", "[SEP]", "[MASK]", *words]
    (d / "vocab.txt").write_text("\n".join(vocab) + "\n", encoding="utf-8")
    AlbertModel(AlbertConfig.from_preset("albert-tiny", vocab_size=len(vocab))).save_pretrained(d)
    return d


@pytest.fixture(scope="module")
def tiny_v2(tmp_path_factory: pytest.TempPathFactory) -> Path:
    data = json.loads(TINY.read_text(encoding="utf-8"))["data"]
    path = tmp_path_factory.mktemp("v2") / "tiny-v2.0.json"
    path.write_text(json.dumps({"version": "v2.0", "data": make_unanswerable(data, 0.4, seed=1)}))
    return path


def _finetune(init: Path, out: Path, *extra: str) -> None:
    argv = ["finetune", "squad", "--init", str(init), "--output", str(out), "--no-progress"]
    argv += ["--train-steps", "6", "--eval-every", "3", "--batch-size", "4", "--learning-rate", "2e-3"]
    argv += ["--max-seq-length", "48", "--doc-stride", "16", "--max-query-length", "16", *extra]
    argv += ["--precision", "fp32"]  # the dev metrics are compared with `albert evaluate`'s (fp32)
    assert main(argv) == 0


def test_v11_finetune_evaluate_predict(tiny_model_dir: Path, tmp_path: Path, monkeypatch, capsys) -> None:
    run = tmp_path / "run"
    _finetune(tiny_model_dir, run, "--train-file", str(TINY), "--dev-file", str(TINY))
    report = json.loads((run / "report.json").read_text())
    assert [h["step"] for h in report["history"]] == [3, 6]
    assert {"exact_match", "f1", "score"} <= set(report["history"][0])
    assert report["config"]["batch_size"] == 4 and report["config"]["learning_rate"] == 2e-3
    info = json.loads((run / report["checkpoints"]["best"]["dir"] / "task.json").read_text())
    assert info["kind"] == "span" and info["version"] == "1.1" and info["doc_stride"] == 16
    counts = report["task"]["featurization"]
    assert counts["train"]["examples"] == counts["dev"]["examples"] == 19
    assert counts["train"]["answers_exact"] == 19 and counts["dev"]["features"] > 19  # stride 16: windows
    records = [json.loads(x) for x in (run / "predictions" / "dev_best.jsonl").read_text().splitlines()]
    assert len(records) == 19 and all(r["prediction"] for r in records)  # 1.1: always an answer
    contexts = {e.qas_id: e.context for e in read_squad(TINY).examples}
    assert all(r["prediction"] in contexts[r["guid"]] for r in records)  # text of the paragraph

    capsys.readouterr()
    assert main(["evaluate", "squad", "--model", str(run), "--dev-file", str(TINY), "--batch-size", "8"]) == 0
    summary = json.loads(capsys.readouterr().out)
    best = report["checkpoints"]["best"]
    assert summary["f1"] == pytest.approx(best["f1"]) and summary["exact_match"] == pytest.approx(
        best["exact_match"]
    )
    official = json.loads((run / best["dir"] / "eval" / "dev" / "predictions.json").read_text())
    assert set(official) == set(contexts)

    qa = {"id": "x", "question": "Who built the locomotive?", "context": contexts["q017"]}
    monkeypatch.setattr("sys.stdin", io.StringIO(json.dumps(qa) + "\n"))
    assert main(["predict", "--model", str(run)]) == 0
    (row,) = [json.loads(x) for x in capsys.readouterr().out.splitlines()]
    assert row["id"] == "x" and row["question"] == qa["question"]
    assert row["answer"] and row["answer"] in qa["context"] and 0 < row["probability"] <= 1


@pytest.mark.parametrize("head", ["verifier", "span"])
def test_v20_finetune_reports_hasans_noans(
    head: str, tiny_model_dir: Path, tiny_v2: Path, tmp_path: Path, monkeypatch, capsys
) -> None:
    run = tmp_path / head
    _finetune(
        tiny_model_dir,
        run,
        "--version",
        "2.0",
        "--head",
        head,
        "--train-file",
        str(tiny_v2),
        "--dev-file",
        str(tiny_v2),
    )
    report = json.loads((run / "report.json").read_text())
    last = report["history"][-1]
    for key in ("exact", "f1", "HasAns_f1", "NoAns_f1", "best_f1", "best_f1_thresh", "null_threshold"):
        assert key in last, key
    assert last["threshold_chosen"] == 1.0 and last["f1"] == pytest.approx(last["best_f1"])
    assert last["HasAns_total"] + last["NoAns_total"] == 19 and last["NoAns_total"] > 0
    best_dir = run / report["checkpoints"]["best"]["dir"]
    info = json.loads((best_dir / "task.json").read_text())
    assert info["head"] == head and isinstance(info["null_threshold"], float)

    capsys.readouterr()
    argv = ["evaluate", "squad", "--model", str(run), "--dev-file", str(tiny_v2), "--null-threshold", "1e9"]
    assert main(argv) == 0  # a fixed threshold above every null score: always answer
    summary = json.loads(capsys.readouterr().out)
    preds = json.loads((best_dir / "eval" / "dev" / "predictions.json").read_text())
    assert summary["threshold_chosen"] == 0.0 and all(preds.values())
    # an answer still scores on an unanswerable question when it normalizes to "" ("a", "the", ".")
    noans = [e.qas_id for e in read_squad(tiny_v2).examples if e.is_impossible]
    empty = sum(normalize_answer(preds[q]) == "" for q in noans)
    assert summary["NoAns_f1"] == pytest.approx(100.0 * empty / len(noans))
    odds = json.loads((best_dir / "eval" / "dev" / "null_odds.json").read_text())
    assert len(odds) == 19

    # predict uses the threshold chosen on dev while fine-tuning
    monkeypatch.setattr(
        "sys.stdin", io.StringIO("What is melted to make glass?\tGlass is made by melting sand.\n")
    )
    assert main(["predict", "--model", str(run)]) == 0
    (row,) = [json.loads(x) for x in capsys.readouterr().out.splitlines()]
    expect_empty = row["null_odds"] > info["null_threshold"]
    assert (row["answer"] == "") == expect_empty


def test_bad_squad_file_is_a_clear_error(tiny_model_dir: Path, tmp_path: Path, capsys) -> None:
    bad = tmp_path / "bad.json"
    bad.write_text('{"data": [ {"paragraphs": [ {"context": "x", "qas": [ {"id": 1}]}]}]}')
    argv = ["finetune", "squad", "--init", str(tiny_model_dir), "--output", str(tmp_path / "r")]
    assert main([*argv, "--train-file", str(bad), "--no-progress", "--max-seq-length", "48"]) == 1
    assert capsys.readouterr().err == (
        f"albert finetune: error: {bad}: data[0].paragraphs[0].qas[0] (id 1): missing field 'question'\n"
    )
