"""GLUE readers on the GLUE-layout fixtures (tests/fixtures/glue), featurization, metrics, submission
files and bad input."""

from __future__ import annotations

from pathlib import Path

import numpy as np
import pytest
import torch
from sklearn import metrics as skm
from standin_tokenizer import WordTokenizer

from albert_lm.finetune.config import FinetuneConfig
from albert_lm.tasks import glue
from albert_lm.tasks.base import TaskDataError
from albert_lm.tasks.evaluate import evaluate
from albert_lm.tasks.inputs import encode_text_pair, truncate_longest_first
from conftest import FIXTURES

GLUE_DIR = FIXTURES / "glue"

# (task, split) -> (number of examples, first example's texts, first label)
EXPECTED = {
    ("cola", "train"): (6, ("Our friends won't buy this analysis, let alone the next one we propose.",), "1"),
    ("cola", "dev"): (4, ("The professor talked us into a stupor.",), "1"),
    ("cola", "test"): (2, ("Bill sang himself hoarse.",), None),
    ("sst2", "train"): (6, ("hide new secretions from the parental units ",), "0"),
    ("sst2", "test"): (2, ("uneasy mishmash of styles and genres .",), None),
    ("mrpc", "dev"): (
        3,
        (
            "He said the foodservice pie business doesn 't fit the company 's long-term growth strategy .",
            '" The foodservice pie business does not fit our long-term growth strategy .',
        ),
        "1",
    ),
    ("stsb", "train"): (5, ("A plane is taking off.", "An air plane is taking off."), 5.0),
    ("stsb", "test"): (1, ("A girl is styling her hair.", "A girl is brushing her hair."), None),
    ("qqp", "train"): (
        4,
        (
            "How is the life of a math student? Could you describe your own experiences?",
            "Which level of prepration is enough for the exam jlpt5?",
        ),
        "0",
    ),
    ("mnli", "train"): (
        8,
        (
            "Conceptually cream skimming has two basic dimensions - product and geography.",
            "Product and geography are what make cream skimming work. ",
        ),
        "neutral",
    ),
    ("mnli", "dev"): (
        3,
        ("The new rights are nice enough", "Everyone really likes the newest benefits "),
        "neutral",
    ),
    ("mnli", "dev_mismatched"): (
        2,
        (
            "Your contribution helped make it possible for us to provide our students with a quality education.",
            "Your contributions were of no help with our students' education.",
        ),
        "contradiction",
    ),
    ("mnli", "ax"): (2, ("The cat sat on the mat.", "The cat did not sit on the mat."), None),
    ("qnli", "dev"): (
        2,
        (
            "What came into force after the new constitution was herald?",
            "As of that day, the new constitution heralding the Second Republic came into force.",
        ),
        "entailment",
    ),
    ("rte", "train"): (
        3,
        ("No Weapons of Mass Destruction Found in Iraq Yet.", "Weapons of Mass Destruction Found in Iraq."),
        "not_entailment",
    ),
    ("wnli", "dev"): (
        2,
        (
            "Dana Reeve, the widow of the actor Christopher Reeve, has died of lung cancer at age 44.",
            "Christopher Reeve had an accident.",
        ),
        "1",
    ),
    ("ax", "test"): (2, ("The cat sat on the mat.", "The cat did not sit on the mat."), None),
}


@pytest.mark.parametrize("task,split", sorted(EXPECTED))
def test_reader_first_example_and_counts(task: str, split: str) -> None:
    n, texts, label = EXPECTED[(task, split)]
    examples = glue.read_split(GLUE_DIR, glue.get_spec(task), split)
    assert len(examples) == n
    assert examples[0].texts == texts
    assert examples[0].label == label


@pytest.mark.parametrize("task", glue.TASK_NAMES)
def test_every_split_of_every_task_reads_with_known_labels(task: str) -> None:
    spec = glue.SPECS[task]
    for split, s in spec.splits.items():
        examples = glue.read_split(GLUE_DIR, spec, split)
        assert examples, (task, split)
        for ex in examples:
            assert len(ex.texts) == (1 if s.text_b is None else 2)
            assert all(isinstance(t, str) and t for t in ex.texts)
            if s.label is None:
                assert ex.label is None
            elif spec.labels is None:
                assert isinstance(ex.label, float)
            else:
                assert ex.label in spec.labels


def test_test_set_guids_are_the_index_column() -> None:
    ex = glue.read_split(GLUE_DIR, glue.get_spec("sst2"), "test")
    assert [e.guid for e in ex] == ["0", "1"]
    qqp = glue.read_split(GLUE_DIR, glue.get_spec("qqp"), "train")
    assert qqp[1].guid == "402555"


def test_quotes_are_literal_as_in_the_original() -> None:
    # SST-2 train row 6 holds '"rich"': csv quoting would swallow the quotes
    ex = glue.read_split(GLUE_DIR, glue.get_spec("sst2"), "train")
    assert ex[5].texts[0] == 'a "rich" and warm film '


def test_aliases_and_unknown_task() -> None:
    assert glue.get_spec("SST-2").name == "sst2"
    assert glue.get_spec("STS-B").name == "stsb"
    with pytest.raises(KeyError, match="known"):
        glue.get_spec("squad")
    with pytest.raises(KeyError, match="mismatched"):
        glue.get_spec("mnli-mm")


# ------------------------------------------------------------------------------------------- bad input
def _copy_task(tmp_path: Path, task_dir: str) -> Path:
    import shutil

    shutil.copytree(GLUE_DIR / task_dir, tmp_path / task_dir)
    return tmp_path


def test_wrong_column_count_names_file_and_line(tmp_path: Path) -> None:
    root = _copy_task(tmp_path, "RTE")
    f = root / "RTE" / "train.tsv"
    lines = f.read_text(encoding="utf-8").splitlines()
    lines[2] = lines[2].rsplit("\t", 1)[0]  # drop the label field of line 3
    f.write_text("\n".join(lines) + "\n", encoding="utf-8")
    with pytest.raises(TaskDataError, match=r"RTE/train\.tsv:3: 3 tab-separated fields, expected 4"):
        glue.read_split(root, glue.get_spec("rte"), "train")


def test_headerless_cola_wrong_column_count(tmp_path: Path) -> None:
    root = _copy_task(tmp_path, "CoLA")
    f = root / "CoLA" / "dev.tsv"
    f.write_text(f.read_text(encoding="utf-8") + "gj04\t1\tan extra\tfield\there\n", encoding="utf-8")
    with pytest.raises(TaskDataError, match=r"CoLA/dev\.tsv:5: 5 tab-separated fields, expected 4"):
        glue.read_split(root, glue.get_spec("cola"), "dev")


def test_unknown_label_names_file_line_and_labels(tmp_path: Path) -> None:
    root = _copy_task(tmp_path, "MNLI")
    f = root / "MNLI" / "dev_matched.tsv"
    text = f.read_text(encoding="utf-8").replace("\tcontradiction\n", "\tcontradicts\n")
    f.write_text(text, encoding="utf-8")
    with pytest.raises(
        TaskDataError,
        match=r"dev_matched\.tsv:3: unknown label 'contradicts'.*contradiction, entailment, neutral",
    ):
        glue.read_split(root, glue.get_spec("mnli"), "dev")


def test_non_numeric_stsb_score(tmp_path: Path) -> None:
    root = _copy_task(tmp_path, "STS-B")
    f = root / "STS-B" / "dev.tsv"
    f.write_text(f.read_text(encoding="utf-8").replace("\t2.400\n", "\thigh\n"), encoding="utf-8")
    with pytest.raises(TaskDataError, match=r"STS-B/dev\.tsv:5: score 'high' is not a number"):
        glue.read_split(root, glue.get_spec("stsb"), "dev")


def test_missing_file_and_missing_column(tmp_path: Path) -> None:
    with pytest.raises(FileNotFoundError, match="SST-2/train.tsv"):
        glue.read_split(tmp_path, glue.get_spec("sst2"), "train")
    (tmp_path / "SST-2").mkdir()
    (tmp_path / "SST-2" / "train.tsv").write_text("text\tlabel\nfine\t1\n", encoding="utf-8")
    with pytest.raises(TaskDataError, match="no column 'sentence'"):
        glue.read_split(tmp_path, glue.get_spec("sst2"), "train")


# ------------------------------------------------------------------------------------------- features
def test_truncate_longest_first_pops_the_longer_and_b_on_ties() -> None:
    a, b = [1, 2, 3, 4, 5], [6, 7]
    truncate_longest_first(a, b, 5)
    assert (a, b) == ([1, 2, 3], [6, 7])
    a, b = [1, 2, 3], [4, 5, 6]
    truncate_longest_first(a, b, 4)  # 3/3: pop b -> 3/2: pop a -> 2/2
    assert (a, b) == ([1, 2], [4, 5])


def test_pair_inputs_and_truncation_hand_computed() -> None:
    tok = WordTokenizer()
    ids, types = encode_text_pair(tok, "the cat sat on the mat", "a dog", 9)
    # 6 + 2 words > 9 - 3: pop from the longer side until 6: "the cat sat on" + "a dog"
    assert tok.convert_ids_to_tokens(ids) == [
        "[CLS]",
        "the",
        "cat",
        "sat",
        "on",
        "[SEP]",
        "a",
        "dog",
        "[SEP]",
    ]
    assert types == [0, 0, 0, 0, 0, 0, 1, 1, 1]
    single, types1 = encode_text_pair(tok, "the cat sat on the mat", None, 5)
    assert tok.convert_ids_to_tokens(single) == ["[CLS]", "the", "cat", "sat", "[SEP]"]
    assert types1 == [0] * 5


def test_glue_task_featurizes_labels_as_ids() -> None:
    task = glue.GlueTask(glue.get_spec("mnli"), GLUE_DIR)
    ex = task.read("dev")
    feats = task.featurize(ex, WordTokenizer(), 64)
    assert [f["labels"] for f in feats] == [2, 0, 1]  # neutral, contradiction, entailment
    assert [f["example_index"] for f in feats] == [0, 1, 2]
    stsb = glue.GlueTask(glue.get_spec("stsb"), GLUE_DIR)
    f = stsb.featurize(stsb.read("dev"), WordTokenizer(), 64)
    assert [x["labels"] for x in f] == [5.0, 4.75, 5.0, 2.4]
    assert stsb.kind == "regression" and stsb.num_labels == 1


# ------------------------------------------------------------------------------------------- metrics
def _fake_logits_predict_fn(label_per_length: dict[int, int], num_labels: int):
    """A predict function whose answer depends on the input only, so order mix-ups show."""

    def fn(batch):
        lengths = batch["attention_mask"].sum(-1).tolist()
        logits = torch.zeros(len(lengths), num_labels)
        for i, n in enumerate(lengths):
            logits[i, label_per_length.get(n, 0)] = 3.0
        return {"logits": logits}

    return fn


def test_evaluate_restores_order_and_matches_sklearn() -> None:
    task = glue.GlueTask(glue.get_spec("mrpc"), GLUE_DIR)
    tok = WordTokenizer()
    ex = task.read("train")
    feats = task.featurize(ex, tok, 128)
    lengths = [len(f["input_ids"]) for f in feats]
    assert len(set(lengths)) == len(lengths)
    # predict "1" for examples 0 and 3, "0" for the others
    want = {lengths[0]: 1, lengths[3]: 1}
    res = evaluate(task, ex, feats, _fake_logits_predict_fn(want, 2), batch_size=3)
    pred = [p["label"] for p in res.predictions]
    assert pred == ["1", "0", "0", "1"]
    gold = [e.label for e in ex]  # 1 0 1 0
    assert res.metrics["accuracy"] == pytest.approx(skm.accuracy_score(gold, pred))
    assert res.metrics["f1"] == pytest.approx(skm.f1_score(gold, pred, pos_label="1"))
    assert res.predictions[0]["probabilities"]["1"] == pytest.approx(np.exp(3) / (np.exp(3) + 1))
    assert task.score(res.metrics) == pytest.approx((res.metrics["f1"] + res.metrics["accuracy"]) / 2)


def test_cola_metric_is_matthews_and_stsb_pearson_spearman() -> None:
    from scipy import stats

    cola = glue.GlueTask(glue.get_spec("cola"), GLUE_DIR)
    ex = cola.read("train")  # 1 0 1 0 1 0
    preds = [{"label": x} for x in ["1", "1", "1", "0", "0", "0"]]
    m = cola.compute_metrics(preds, ex)
    assert m == {
        "matthews": pytest.approx(skm.matthews_corrcoef([e.label for e in ex], [p["label"] for p in preds]))
    }
    stsb = glue.GlueTask(glue.get_spec("stsb"), GLUE_DIR)
    ex = stsb.read("train")
    scores = [4.1, 3.0, 3.9, 1.0, 4.4]
    m = stsb.compute_metrics([{"score": s} for s in scores], ex)
    gold = [e.label for e in ex]
    assert m["pearson"] == pytest.approx(stats.pearsonr(scores, gold)[0])
    assert m["spearman"] == pytest.approx(stats.spearmanr(scores, gold)[0])


def test_submission_files(tmp_path: Path) -> None:
    mnli = glue.GlueTask(glue.get_spec("mnli"), GLUE_DIR)
    preds = [{"guid": "0", "label": "entailment"}, {"guid": "1", "label": "neutral"}]
    path = mnli.write_test_predictions("test_mismatched", preds, tmp_path)
    assert path.name == "MNLI-mm.tsv"
    assert path.read_text() == "index\tprediction\n0\tentailment\n1\tneutral\n"
    assert mnli.write_test_predictions("ax", preds, tmp_path).name == "AX.tsv"
    stsb = glue.GlueTask(glue.get_spec("stsb"), GLUE_DIR)
    p = stsb.write_test_predictions(
        "test", [{"guid": "0", "score": 5.31}, {"guid": "1", "score": 2.25}], tmp_path
    )
    assert p.name == "STS-B.tsv"
    assert p.read_text() == "index\tprediction\n0\t5.000\n1\t2.250\n"


def test_glue_report_average() -> None:
    out = glue.glue_report(
        {"mrpc": {"f1": 0.9, "accuracy": 0.8}, "mnli": {"accuracy": 0.8}, "mnli-mm": {"accuracy": 0.6}}
    )
    assert out["tasks"] == {"mrpc": pytest.approx(0.85), "mnli": pytest.approx(0.7)}
    assert out["score"] == pytest.approx(0.775)


def test_presets_are_the_originals() -> None:
    # google-research/albert run_glue.sh: run_task TASK warmup lr steps save batch
    expect = {
        "sst2": (1256, 1e-5, 20935, 32),
        "mnli": (1000, 3e-5, 10000, 128),
        "cola": (320, 1e-5, 5336, 16),
        "qnli": (1986, 1e-5, 33112, 32),
        "qqp": (1000, 5e-5, 14000, 128),
        "rte": (200, 3e-5, 800, 32),
        "stsb": (214, 2e-5, 3598, 16),
        "mrpc": (200, 2e-5, 800, 32),
    }
    for task, (warmup, lr, steps, batch) in expect.items():
        p = FinetuneConfig(**glue.SPECS[task].preset)
        assert (p.warmup_steps, p.learning_rate, p.train_steps, p.batch_size) == (warmup, lr, steps, batch)
        assert p.max_seq_length == 512 and p.classifier_dropout == 0.1


def test_glue_summary_of_run_directories(tmp_path: Path, capsys: pytest.CaptureFixture[str]) -> None:
    import json

    from albert_lm.cli.main import main

    def run(task: str, **best: float) -> None:
        (tmp_path / task).mkdir()
        report = {"checkpoints": {"best": {"step": 10, **best}, "last": {"step": 20}}}
        (tmp_path / task / "report.json").write_text(json.dumps(report))

    run("cola", matthews=0.5, score=0.5)
    run("mrpc", f1=0.9, accuracy=0.8, score=0.85)
    run("mnli", accuracy=0.8, dev_mismatched_accuracy=0.7, score=0.8)
    out = glue.glue_summary(tmp_path)
    assert out["dev_metrics"]["mnli-mm"] == {"accuracy": 0.7}
    assert out["tasks"] == {"cola": 0.5, "mrpc": pytest.approx(0.85), "mnli": pytest.approx(0.75)}
    assert out["score"] == pytest.approx(0.7) and "sst2" in out["missing"]
    assert main(["evaluate", "glue", "--task", "all", "--model", str(tmp_path)]) == 0
    assert json.loads(capsys.readouterr().out)["score"] == pytest.approx(0.7)
    assert main(["evaluate", "glue", "--task", "all", "--model", str(tmp_path / "cola")]) == 1
    assert capsys.readouterr().err.startswith("albert evaluate: error: ")
