"""The user's own CSV / TSV / JSONL data: reading, label sets, the held-out split and bad input."""

from __future__ import annotations

import json
from pathlib import Path

import pytest
from standin_tokenizer import WordTokenizer

from albert_lm.tasks.base import TaskDataError
from albert_lm.tasks.custom import CustomData, CustomTask, holdout_split, read_records


def _write(path: Path, text: str) -> Path:
    path.write_text(text, encoding="utf-8")
    return path


def test_csv_with_quotes_commas_newlines_and_bom(tmp_path: Path) -> None:
    f = _write(
        tmp_path / "train.csv",
        '\ufefftext,label\n"a film, ""funny"" and\nlong",pos\nplain,neg\n',
    )
    recs = read_records(f)
    assert recs == [
        (2, {"text": 'a film, "funny" and\nlong', "label": "pos"}),
        (4, {"text": "plain", "label": "neg"}),
    ]


def test_headerless_file_with_named_columns_like_the_polarity_set(tmp_path: Path) -> None:
    f = _write(tmp_path / "p.csv", '"1","a gorgeous film . \n"\n"-1","a mess"\n"1","fine"\n"-1","dull"\n')
    task = CustomTask(CustomData(train=f, columns=("label", "text"), dev_fraction=0.5, split_seed=1))
    assert task.labels == ["-1", "1"]
    train, dev = task.read("train"), task.read("dev")
    assert len(train) == len(dev) == 2
    assert {e.texts[0] for e in train + dev} == {"a gorgeous film . \n", "a mess", "fine", "dull"}
    info = task.info()
    assert info["holdout"] == {"from": str(f), "dev_fraction": 0.5, "seed": 1, "num_train": 2, "num_dev": 2}


def test_tsv_pairs_ids_and_jsonl_regression(tmp_path: Path) -> None:
    tsv = _write(tmp_path / "d.tsv", 'id\ts1\ts2\tlab\n7\ta "quoted" one\tb\tyes\n8\tc\td\tno\n')
    task = CustomTask(
        CustomData(
            train=tsv, dev=tsv, text_column="s1", text_pair_column="s2", label_column="lab", id_column="id"
        )
    )
    ex = task.read("dev")
    assert [(e.guid, e.texts, e.label) for e in ex] == [
        ("7", ('a "quoted" one', "b"), "yes"),
        ("8", ("c", "d"), "no"),
    ]
    assert task.info()["text_fields"] == 2
    lines = [{"q": "x y", "score": 1.5}, {"q": "z", "score": 4}]
    js = _write(tmp_path / "r.jsonl", "\n".join(json.dumps(x) for x in lines) + "\n\n")
    reg = CustomTask(CustomData(train=js, dev=js, text_column="q", label_column="score", regression=True))
    assert reg.kind == "regression" and reg.metric_names == ("pearson", "spearman")
    feats = reg.featurize(reg.read("train"), WordTokenizer(), 16)
    assert [f["labels"] for f in feats] == [1.5, 4.0]


def test_json_labels_are_compared_as_strings(tmp_path: Path) -> None:
    js = _write(
        tmp_path / "t.jsonl",
        '{"text": "a", "label": 1}\n{"text": "b", "label": 0}\n{"text": "c", "label": true}\n',
    )
    task = CustomTask(CustomData(train=js, dev=js))
    assert task.labels == ["0", "1", "true"]


def test_test_file_without_labels(tmp_path: Path) -> None:
    train = _write(tmp_path / "train.csv", "text,label\na,x\nb,y\n")
    test = _write(tmp_path / "test.csv", "text\nc\n")
    task = CustomTask(CustomData(train=train, dev=train, test=test))
    assert task.test_splits == ("test",)
    assert [(e.texts, e.label) for e in task.read("test")] == [(("c",), None)]


def test_holdout_split_is_fixed_disjoint_and_sized() -> None:
    tr, dv = holdout_split(4000, 0.2, 0)
    assert len(dv) == 800 and len(tr) == 3200
    assert not set(tr) & set(dv) and set(tr) | set(dv) == set(range(4000))
    assert holdout_split(4000, 0.2, 0) == (tr, dv)
    assert holdout_split(4000, 0.2, 1)[1] != dv
    # pinned: the documented polarity split must not drift with library versions
    assert dv[:5] == [4, 11, 12, 14, 21]
    with pytest.raises(ValueError):
        holdout_split(10, 1.0, 0)


# ------------------------------------------------------------------------------------------- bad input
def test_csv_wrong_field_count_names_the_record_start_line(tmp_path: Path) -> None:
    f = _write(tmp_path / "bad.csv", 'text,label\n"two\nlines",a\nthree,fields,here\n')
    with pytest.raises(TaskDataError, match=r"bad\.csv:4: 3 fields, expected 2"):
        read_records(f)


def test_invalid_json_and_missing_key(tmp_path: Path) -> None:
    f = _write(tmp_path / "bad.jsonl", '{"text": "a", "label": "x"}\n{"text": "b", "label": \n')
    with pytest.raises(TaskDataError, match=r"bad\.jsonl:2: not valid JSON"):
        read_records(f)
    g = _write(tmp_path / "nokey.jsonl", '{"text": "a", "label": "x"}\n{"txt": "b", "label": "y"}\n')
    with pytest.raises(TaskDataError, match=r"nokey\.jsonl:2: no field 'text' \(fields: txt, label\)"):
        CustomTask(CustomData(train=g, dev=g))


def test_unknown_dev_label_and_non_numeric_target(tmp_path: Path) -> None:
    train = _write(tmp_path / "train.csv", "text,label\na,pos\nb,neg\n")
    dev = _write(tmp_path / "dev.csv", "text,label\nc,pos\nd,neutral\n")
    task = CustomTask(CustomData(train=train, dev=dev))
    with pytest.raises(TaskDataError, match=r"dev\.csv:3: unknown label 'neutral'; labels are 'neg', 'pos'"):
        task.read("dev")
    with pytest.raises(TaskDataError, match=r"train\.csv:3: unknown label 'neg'; labels are 'pos', 'x'"):
        CustomTask(CustomData(train=train, dev=dev, labels=("pos", "x")))
    with pytest.raises(TaskDataError, match=r"train\.csv:2: label 'pos' is not a number"):
        CustomTask(CustomData(train=train, dev=dev, regression=True)).read("train")


def test_single_label_value_is_an_error(tmp_path: Path) -> None:
    train = _write(tmp_path / "train.csv", "text,label\na,pos\nb,pos\n")
    with pytest.raises(TaskDataError, match="only one label value"):
        CustomTask(CustomData(train=train, dev=train))


# ------------------------------------------------------------------------------ through the command line
def test_finetune_custom_regression_pairs_then_predict_tsv(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch, capsys: pytest.CaptureFixture[str]
) -> None:
    import io

    from standin_tokenizer import make_tiny_model_dir

    from albert_lm.cli.main import main

    rows = [
        ("a cat sits", "a cat is sitting", 4.5),
        ("dogs bark", "the sky is blue", 0.5),
        ("he runs", "he is running", 4.0),
    ]
    rows += [
        ("rain falls", "the sun shines", 1.0),
        ("she reads", "she is reading a book", 3.5),
        ("cars honk", "birds sing", 0.0),
    ]
    data = _write(
        tmp_path / "sts.jsonl", "\n".join(json.dumps({"s1": a, "s2": b, "y": y}) for a, b, y in rows) + "\n"
    )
    init = make_tiny_model_dir(tmp_path / "init", [f"{a} {b}" for a, b, _ in rows])
    run = tmp_path / "run"
    argv = ["finetune", "custom", "--train", str(data), "--dev", str(data), "--text-column", "s1"]
    argv += ["--text-pair-column", "s2", "--label-column", "y", "--regression", "--init", str(init)]
    argv += [
        "--output",
        str(run),
        "--train-steps",
        "2",
        "--batch-size",
        "3",
        "--max-seq-length",
        "16",
        "--no-progress",
        "--precision",
        "fp32",  # the dev predictions compared below with `albert predict`'s, which runs in fp32
    ]
    assert main(argv) == 0
    report = json.loads((run / "report.json").read_text())
    assert report["task"]["kind"] == "regression" and report["task"]["text_fields"] == 2
    assert set(report["checkpoints"]["best"]) >= {"pearson", "spearman", "score", "step", "dir"}
    capsys.readouterr()
    monkeypatch.setattr(
        "sys.stdin", io.StringIO("a cat sits\ta cat is sitting\ndogs bark\tthe sky is blue\n")
    )
    assert main(["predict", "--model", str(run), "--checkpoint", "last"]) == 0
    out = [json.loads(x) for x in capsys.readouterr().out.splitlines()]
    assert [(o["text"], o["text_pair"]) for o in out] == [
        ("a cat sits", "a cat is sitting"),
        ("dogs bark", "the sky is blue"),
    ]
    assert all(isinstance(o["score"], float) for o in out)
    dev = {
        json.loads(x)["guid"]: json.loads(x)["score"]
        for x in (run / "predictions" / "dev_last.jsonl").read_text().splitlines()
    }
    assert out[0]["score"] == pytest.approx(dev["dev-1"], abs=1e-5)
    # a pair model fed single texts is a clear error naming the line
    monkeypatch.setattr("sys.stdin", io.StringIO("only one text\n"))
    assert main(["predict", "--model", str(run)]) == 1
    err = capsys.readouterr().err
    assert err.startswith("albert predict: error: <stdin>:1: a sentence-pair model needs text<TAB>pair")
