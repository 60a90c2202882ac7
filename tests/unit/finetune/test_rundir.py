"""Tasks rebuilt from their task.json (`Task.from_info`), the one sequence-length rule, and the dev
predictions a run writes for the trainer's best step."""

from __future__ import annotations

import json
from pathlib import Path
from types import SimpleNamespace

import pytest
import torch
from standin_tokenizer import WordTokenizer

from albert_lm.finetune.config import FinetuneConfig
from albert_lm.finetune.run import _DevEvaluation, _write_dev_predictions
from albert_lm.finetune.rundir import task_from_info, trained_max_seq_length
from albert_lm.tasks.base import Example, ModelDirError
from albert_lm.tasks.classification import ClassificationTask
from albert_lm.tasks.race import MultipleChoiceData, MultipleChoiceTask
from albert_lm.tasks.squad import SquadTask

EXAMPLES = [Example("a", ("good film",), "pos"), Example("b", ("bad film",), "neg")]


def _sst(labels=("neg", "pos")) -> ClassificationTask:
    return ClassificationTask("sst", lambda split: list(EXAMPLES), labels, ["accuracy"], text_fields=1)


def test_each_kind_rebuilds_itself_from_its_info() -> None:
    cls = task_from_info(_sst().info())
    assert isinstance(cls, ClassificationTask) and cls.kind == "classification"
    assert (cls.name, cls.labels, cls.text_fields) == ("sst", ["neg", "pos"], 1)
    reg = task_from_info(_sst(labels=None).info())
    assert reg.kind == "regression" and reg.info() == _sst(labels=None).info()
    mc = MultipleChoiceTask(MultipleChoiceData(files={"train": Path("x.jsonl")}, max_qa_length=7), name="mc")
    back = task_from_info(mc.info())
    assert isinstance(back, MultipleChoiceTask) and back.max_qa_length == 7 and back.name == "mc"
    squad = SquadTask("2.0", head="span", doc_stride=16, n_best_size=5)
    squad.calibrate({"null_threshold": -1.5})
    rebuilt = task_from_info(squad.info())
    assert isinstance(rebuilt, SquadTask)
    assert (rebuilt.version, rebuilt.head, rebuilt.doc_stride, rebuilt.n_best_size) == ("2.0", "span", 16, 5)
    assert rebuilt.null_threshold == -1.5  # chosen on dev, fixed for prediction
    with pytest.raises(FileNotFoundError, match="rebuilt from task.json"):
        cls.read("dev")
    with pytest.raises(ModelDirError, match="unknown task kind 'tagging'"):
        task_from_info({"task": "x", "kind": "tagging"})


def test_one_max_seq_length_rule() -> None:
    assert trained_max_seq_length({"max_seq_length": 48}) == 48
    assert trained_max_seq_length({"max_seq_length": 48}, 16) == 16  # the flag wins
    assert trained_max_seq_length({}) == FinetuneConfig().max_seq_length


class _Const(torch.nn.Module):
    """A 'model' whose logits favour one class for every input."""

    def __init__(self, favoured: int) -> None:
        super().__init__()
        self.logits = torch.nn.Parameter(torch.tensor([0.0, 0.0]))
        with torch.no_grad():
            self.logits[favoured] = 3.0

    def forward(self, input_ids, **_):
        return {"logits": self.logits.expand(input_ids.shape[0], 2)}


def test_best_dev_predictions_are_those_of_the_trainers_best_step(tmp_path: Path) -> None:
    task = _sst()
    feats = task.featurize(EXAMPLES, WordTokenizer(), 16)
    dev = _DevEvaluation(task, {"dev": (list(EXAMPLES), feats)}, FinetuneConfig(), pad_id=0)
    assert dev(_Const(1)) == {"accuracy": 0.5, "score": 0.5}  # step 2: says "pos"
    dev(_Const(0))  # step 4: says "neg"
    history = [{"step": 2, "eval_score": 0.5}, {"step": 4, "eval_score": 0.5}]

    def labels(name: str) -> list[str]:
        return [json.loads(x)["label"] for x in (tmp_path / name).read_text().splitlines()]

    loads: list[int] = []

    def load_best() -> torch.nn.Module:
        loads.append(1)
        return _Const(1)  # the weights of step 2, as saved in checkpoints/best

    result = SimpleNamespace(best_step=2, best_checkpoint="best", eval_history=history)
    _write_dev_predictions(dev, result, load_best, tmp_path)
    assert labels("dev_last.jsonl") == ["neg", "neg"] and labels("dev_best.jsonl") == ["pos", "pos"]
    assert loads == [1]  # an earlier best step: the best checkpoint evaluated again

    result = SimpleNamespace(best_step=4, best_checkpoint="best", eval_history=history)
    _write_dev_predictions(dev, result, load_best, tmp_path)
    assert labels("dev_best.jsonl") == ["neg", "neg"] and loads == [1]  # the last evaluation's records
