"""The NER per-type report (precision, recall, F1, support per entity type) is seqeval's
classification_report, on real CoNLL-2003 data and on a model's real predictions, and it reaches
report.json and the terminal at the end of `albert finetune` / `albert evaluate`."""

from __future__ import annotations

import json
import random
from pathlib import Path

import pytest

from albert_lm.tasks.metrics import entity_report, entity_scores, format_entity_report
from albert_lm.tasks.ner import read_conll
from conftest import data_path

seqeval = pytest.importorskip("seqeval.metrics")


def _against_seqeval(preds: list[list[str]], golds: list[list[str]]) -> dict:
    ours = entity_report(preds, golds)
    theirs = seqeval.classification_report(golds, preds, output_dict=True, zero_division=0)
    assert set(ours) == set(theirs)
    for kind, row in theirs.items():
        for ours_key, their_key in (("precision", "precision"), ("recall", "recall"), ("f1", "f1-score")):
            assert ours[kind][ours_key] == pytest.approx(row[their_key], abs=1e-12), (kind, ours_key)
        assert ours[kind]["support"] == row["support"], kind
    micro = entity_scores(preds, golds)
    assert micro == pytest.approx({k: ours["micro avg"][k] for k in ("precision", "recall", "f1")})
    return ours


def _perturb(tags: list[str], rng: random.Random, types: list[str]) -> list[str]:
    """Model-like mistakes: another type, a dropped entity, a boundary moved, an I- after O."""
    out = list(tags)
    for i, t in enumerate(out):
        r = rng.random()
        if t != "O" and r < 0.08:
            out[i] = t[:2] + rng.choice(types)
        elif t != "O" and r < 0.12:
            out[i] = "O"
        elif t == "O" and r < 0.02:
            out[i] = rng.choice(["B-", "I-"]) + rng.choice(types)
    return out


@pytest.mark.data
def test_per_type_report_matches_seqeval_on_conll2003_dev() -> None:
    dev = read_conll(data_path("conll2003", "valid.txt"))
    golds = [ex.label for ex in dev]
    types = sorted({t[2:] for g in golds for t in g if t != "O"})
    assert types == ["LOC", "MISC", "ORG", "PER"]
    rng = random.Random(0)
    preds = [_perturb(g, rng, types) for g in golds]
    report = _against_seqeval(preds, golds)
    # CoNLL-2003 dev (valid.txt): 5,942 entities, 1,837 LOC / 922 MISC / 1,341 ORG / 1,842 PER
    assert {k: report[k]["support"] for k in types} == {"LOC": 1837, "MISC": 922, "ORG": 1341, "PER": 1842}
    assert 0.5 < report["micro avg"]["f1"] < 0.95  # a real mix of hits and misses
    assert _against_seqeval(golds, golds)["micro avg"]["f1"] == 1.0


def test_format_entity_report_lists_every_type_and_the_averages() -> None:
    golds = [["B-PER", "I-PER", "O", "B-LOC"], ["B-ORG", "O"]]
    preds = [["B-PER", "I-PER", "O", "B-ORG"], ["B-ORG", "O"]]
    table = format_entity_report(_against_seqeval(preds, golds))
    lines = table.splitlines()
    assert lines[0].split() == ["precision", "recall", "f1", "support"]
    assert lines[1].split() == ["LOC", "0.0000", "0.0000", "0.0000", "1"]
    assert lines[3].split() == ["PER", "1.0000", "1.0000", "1.0000", "1"]
    assert lines[5].split() == ["micro", "avg", "0.6667", "0.6667", "0.6667", "3"]


@pytest.mark.slow
@pytest.mark.data
def test_finetune_and_evaluate_report_per_type_on_real_predictions(
    tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    """A tiny model fine-tuned on 400 CoNLL-2003 sentences: report.json's per-type table of the best
    checkpoint is seqeval's on the predictions it wrote, and both commands print it."""
    from standin_tokenizer import make_tiny_model_dir

    from albert_lm.cli.main import main

    def head(name: str, n: int) -> Path:
        text = data_path("conll2003", name).read_text(encoding="utf-8")
        out = tmp_path / name
        out.write_text("\n\n".join(text.split("\n\n")[: n + 1]) + "\n", encoding="utf-8")
        return out

    train, dev = head("train.txt", 400), head("valid.txt", 150)
    words = [ex.meta["words"] for f in (train, dev) for ex in read_conll(f)]
    init = make_tiny_model_dir(tmp_path / "init", [" ".join(w) for w in words])
    run = tmp_path / "run"
    argv = [
        "finetune",
        "ner",
        "--train",
        str(train),
        "--dev",
        str(dev),
        "--model",
        str(init),
        "--output",
        str(run),
    ]
    argv += ["--train-steps", "300", "--batch-size", "16", "--learning-rate", "1e-3", "--eval-every", "100"]
    argv += ["--no-progress", "--precision", "fp32", "--seed", "0", "--max-seq-length", "64"]
    assert main(argv) == 0
    out = capsys.readouterr().out
    report = json.loads((run / "report.json").read_text())
    per_type = report["breakdown"]["dev"]["per_type"]
    preds = [
        json.loads(line)["tags"] for line in (run / "predictions" / "dev_best.jsonl").read_text().splitlines()
    ]
    golds = [ex.label for ex in read_conll(dev)]
    assert _against_seqeval(preds, golds) == per_type
    assert per_type["micro avg"]["f1"] > 0.05, "the model predicts no entity: a vacuous comparison"
    assert "per entity type, dev (best checkpoint):" in out and format_entity_report(per_type) in out
    assert main(["evaluate", "ner", "--model", str(run), "--dev", str(dev)]) == 0
    captured = capsys.readouterr()
    summary = json.loads(captured.out)
    assert summary["per_type"] == per_type  # the best checkpoint again, the same predictions
    assert format_entity_report(summary["per_type"]) in captured.err
