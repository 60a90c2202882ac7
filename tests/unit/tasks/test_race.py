"""RACE / multiple choice: input building against hand-computed cases, readers, metrics, bad input."""

from __future__ import annotations

import json
import shutil
from pathlib import Path

import pytest
import torch
from standin_tokenizer import WordTokenizer

from albert_lm.tasks.base import TaskDataError
from albert_lm.tasks.evaluate import evaluate
from albert_lm.tasks.race import (
    MultipleChoiceData,
    MultipleChoiceTask,
    build_choice,
    build_qa,
    read_mc_jsonl,
    read_race,
)
from conftest import FIXTURES

RACE_DIR = FIXTURES / "race"


# ------------------------------------------------------------------------------------- input building
def test_qa_fills_the_blank_or_appends_the_option() -> None:
    assert (
        build_qa("Tom rides to the park with _ .", "his sister") == "Tom rides to the park with his sister ."
    )
    assert build_qa("What color is the bike?", "Red.") == "What color is the bike? Red."
    # every blank is filled, as str.replace in the original
    assert build_qa("_ and _", "x") == "x and x"


def _tokens(tok: WordTokenizer, ids: list[int]) -> list[str]:
    return tok.convert_ids_to_tokens(ids)


def test_choice_without_truncation() -> None:
    tok = WordTokenizer()
    ctx = tok.encode_ids("tom has a red bike")
    qa = tok.encode_ids(build_qa("what color is it ?", "red"))
    ids, types = build_choice(tok, ctx, qa, max_length=64, max_qa_length=128)
    assert _tokens(tok, ids) == [
        "[CLS]",
        "tom",
        "has",
        "a",
        "red",
        "bike",
        "[SEP]",
        "what",
        "color",
        "is",
        "it",
        "?",
        "red",
        "[SEP]",
    ]
    assert types == [0] * 7 + [1] * 7


def test_qa_keeps_its_last_max_qa_length_tokens() -> None:
    tok = WordTokenizer()
    ctx = tok.encode_ids("a b c")
    qa = tok.encode_ids("one two three four five")
    ids, types = build_choice(tok, ctx, qa, max_length=64, max_qa_length=3)
    assert _tokens(tok, ids) == ["[CLS]", "a", "b", "c", "[SEP]", "three", "four", "five", "[SEP]"]
    assert types == [0, 0, 0, 0, 0, 1, 1, 1, 1]


def test_article_is_cut_to_what_qa_leaves() -> None:
    tok = WordTokenizer()
    ctx = tok.encode_ids("w1 w2 w3 w4 w5 w6 w7 w8 w9 w10")
    qa = tok.encode_ids("q1 q2 q3")
    # 12 - 3 special - 3 qa = 6 article tokens
    ids, types = build_choice(tok, ctx, qa, max_length=12, max_qa_length=128)
    assert _tokens(tok, ids) == [
        "[CLS]",
        "w1",
        "w2",
        "w3",
        "w4",
        "w5",
        "w6",
        "[SEP]",
        "q1",
        "q2",
        "q3",
        "[SEP]",
    ]
    assert len(ids) == 12 and types == [0] * 8 + [1] * 4


def test_qa_longer_than_the_sequence_is_cut_too() -> None:
    # the original would slice the article with a negative bound here and overflow max_seq_length
    tok = WordTokenizer()
    ctx = tok.encode_ids("a b c d e f")
    qa = tok.encode_ids("q1 q2 q3 q4 q5 q6 q7 q8")
    ids, _ = build_choice(tok, ctx, qa, max_length=8, max_qa_length=128)
    assert _tokens(tok, ids) == ["[CLS]", "[SEP]", "q4", "q5", "q6", "q7", "q8", "[SEP]"]


def test_task_features_per_option_with_the_original_layout() -> None:
    tok = WordTokenizer()
    task = MultipleChoiceTask(MultipleChoiceData(data_dir=RACE_DIR, max_qa_length=128))
    ex = task.read("train")
    feats = task.featurize(ex, tok, max_length=20)
    assert len(feats) == 3 and all(len(f["input_ids"]) == 4 for f in feats)
    assert [f["labels"] for f in feats] == [0, 1, 2]  # middle/1.txt: A, B; high/1.txt: C
    # middle/1.txt question 2, option B: the blank is filled; 20 - 3 - 11 qa tokens leave 6 article tokens
    toks = _tokens(tok, feats[1]["input_ids"][1])
    qa = ["tom", "rides", "his", "bike", "to", "the", "park", "with", "his", "sister", "."]
    assert toks == ["[CLS]", "tom", "has", "a", "red", "bike", ".", "[SEP]", *qa, "[SEP]"]
    assert feats[1]["token_type_ids"][1] == [0] * 8 + [1] * 12
    # question 1 has no blank: question + " " + option
    q1 = ["what", "color", "is", "tom", "'", "s", "bike", "?", "black", "."]
    assert _tokens(tok, feats[0]["input_ids"][3]) == [
        "[CLS]",
        "tom",
        "has",
        "a",
        "red",
        "bike",
        ".",
        "he",
        "[SEP]",
        *q1,
        "[SEP]",
    ]


# ------------------------------------------------------------------------------------------------- readers
def test_race_reader_levels_sorted_files_and_guids() -> None:
    ex = read_race(RACE_DIR, "dev")
    assert [e.guid for e in ex] == [
        "middle/middle2.txt#1",
        "middle/middle2.txt#2",
        "high/high1.txt#1",
        "high/high2.txt#1",
    ]
    assert [e.label for e in ex] == [1, 2, 2, 1]
    assert [e.meta["level"] for e in ex] == ["middle", "middle", "high", "high"]
    assert read_race(RACE_DIR / "RACE", "dev", levels=("high",))[0].guid == "high/high1.txt#1"


def test_generic_jsonl_any_number_of_options() -> None:
    ex = read_mc_jsonl(RACE_DIR / "mc.jsonl")
    assert [len(e.meta["options"]) for e in ex] == [3, 2, 5]
    assert [e.label for e in ex] == [0, 1, 2]
    assert ex[2].texts == ("The sun rises in the east.",)


# -------------------------------------------------------------------------------------- metrics and eval
def test_accuracy_overall_and_per_level_with_a_predict_fn() -> None:
    tok = WordTokenizer()
    task = MultipleChoiceTask(MultipleChoiceData(data_dir=RACE_DIR))
    ex = task.read("dev")
    feats = task.featurize(ex, tok, 64)

    def always_c(batch: dict) -> dict:
        b, c, _ = batch["input_ids"].shape
        logits = torch.zeros(b, c)
        logits[:, 2] = 1.0
        return {"logits": logits}

    res = evaluate(task, ex, feats, always_c, batch_size=3)
    # answers: middle B, C; high C, B  -> C right on one middle and one high question
    assert res.metrics == {
        "accuracy": 0.5,
        "accuracy_middle": 0.5,
        "num_middle": 2.0,
        "accuracy_high": 0.5,
        "num_high": 2.0,
    }
    assert [p["prediction"] for p in res.predictions] == ["C"] * 4
    assert res.predictions[0]["answer"] == "B" and res.predictions[0]["correct"] is False
    assert res.predictions[0]["probabilities"][2] > res.predictions[0]["probabilities"][0]


def test_mixed_option_counts_are_evaluated_in_separate_batches() -> None:
    tok = WordTokenizer()
    task = MultipleChoiceTask(MultipleChoiceData(files={"dev": RACE_DIR / "mc.jsonl"}), name="mc")
    ex = task.read("dev")
    feats = task.featurize(ex, tok, 32)

    def last_option(batch: dict) -> torch.Tensor:
        b, c, _ = batch["input_ids"].shape
        return torch.arange(c, dtype=torch.float32).expand(b, c)

    res = evaluate(task, ex, feats, last_option, batch_size=8)
    assert [p["prediction"] for p in res.predictions] == ["C", "B", "E"]
    assert res.metrics["accuracy"] == pytest.approx(1 / 3)


# ------------------------------------------------------------------------------------------------ bad input
def _race_copy(tmp_path: Path) -> Path:
    shutil.copytree(RACE_DIR / "RACE", tmp_path / "RACE")
    return tmp_path


def _edit(path: Path, **changes: object) -> None:
    data = json.loads(path.read_text())
    data.update(changes)
    path.write_text(json.dumps(data))


def test_wrong_number_of_answers_names_the_file(tmp_path: Path) -> None:
    root = _race_copy(tmp_path)
    f = root / "RACE" / "dev" / "middle" / "2.txt"
    _edit(f, answers=["B"])
    with pytest.raises(TaskDataError, match=r"middle/2\.txt: 2 questions, 2 option lists and 1 answers"):
        read_race(root, "dev")


def test_answer_letter_outside_the_options_names_file_and_question(tmp_path: Path) -> None:
    root = _race_copy(tmp_path)
    f = root / "RACE" / "dev" / "middle" / "2.txt"
    _edit(f, answers=["B", "E"])
    with pytest.raises(
        TaskDataError, match=r"middle/2\.txt question 2: answer 'E' is not one of the 4 options \(A-D\)"
    ):
        read_race(root, "dev")
    _edit(f, answers=["B", "7"])
    with pytest.raises(
        TaskDataError, match=r"question 2: answer '7' is neither a letter nor an option index"
    ):
        read_race(root, "dev")


def test_wrong_option_count_and_bad_jsonl(tmp_path: Path) -> None:
    root = _race_copy(tmp_path)
    f = root / "RACE" / "dev" / "high" / "2.txt"
    _edit(f, options=[["By bridge.", "By boat.", "By train."]])
    with pytest.raises(TaskDataError, match=r"high/2\.txt question 1: 3 options, expected 4"):
        read_race(root, "dev")
    j = tmp_path / "bad.jsonl"
    j.write_text('{"context": "c", "question": "q", "options": ["a", "b"], "answer": "C"}\n')
    with pytest.raises(TaskDataError, match=r"bad\.jsonl:1: answer 'C' is not one of the 2 options \(A-B\)"):
        read_mc_jsonl(j)


def test_missing_split_directory() -> None:
    with pytest.raises(FileNotFoundError, match="RACE/nosuch"):
        read_race(RACE_DIR, "nosuch")
