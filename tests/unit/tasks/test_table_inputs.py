"""Every fine-tuning kind reads CSV / TSV / JSONL / Parquet / Arrow / datasets directories through the one
row reader (`albert_lm._tables.iter_rows`): the same rows in every format give the same examples and the
same features, and a bad row is one error naming the file and the row."""

from __future__ import annotations

import re
import shutil
from pathlib import Path

import pytest
from standin_tokenizer import WordTokenizer
from table_support import datasets, every_format, write_dataset_dict, write_jsonl, write_parquet

from albert_lm._tables import TableError, iter_rows, read_rows
from albert_lm.tasks.base import TaskDataError
from albert_lm.tasks.custom import CustomData, CustomTask
from albert_lm.tasks.squad_rows import read_squad_file

FIXTURES = Path(__file__).resolve().parents[2] / "fixtures"


def _same(features_by_format: dict[str, list[dict]]) -> None:
    (first, reference), *rest = features_by_format.items()
    assert reference, "no features: the comparison would pass on nothing"
    for fmt, feats in rest:
        assert feats == reference, f"{fmt} differs from {first}"


# ----------------------------------------------------------------------------------------- the reader
def test_rows_and_numbers_in_every_format(tmp_path: Path) -> None:
    rows = [{"text": 'a, "quoted" b', "label": "x"}, {"text": "c", "label": "y"}]
    files = every_format(tmp_path, "t", rows)
    for fmt, path in files.items():
        got = read_rows(path)
        assert [r for _, r in got] == rows, fmt
        # CSV / TSV: the line (the header is line 1); JSONL: the line; the Arrow formats: the row
        assert [n for n, _ in got] == ([2, 3] if fmt in ("csv", "tsv") else [1, 2]), fmt


def test_datasetdict_split_by_name_and_the_dev_alias(tmp_path: Path) -> None:
    d = write_dataset_dict(tmp_path / "dd", {"train": [{"a": 1}], "validation": [{"a": 2}, {"a": 3}]})
    assert [r["a"] for _, r in iter_rows(d, split="train")] == [1]
    assert [r["a"] for _, r in iter_rows(d, split="dev")] == [2, 3]  # dev finds validation
    assert [r["a"] for _, r in iter_rows(d / "validation")] == [2, 3]  # the split's own folder
    with pytest.raises(TableError, match=r"dd: a DatasetDict with splits train, validation; name one"):
        read_rows(d)
    with pytest.raises(TableError, match=r"none is 'test'"):
        read_rows(d, split="test")


def test_shuffled_and_selected_datasets_read_their_rows_not_the_backing_table(tmp_path: Path) -> None:
    ds = datasets.Dataset.from_list([{"i": i} for i in range(10)]).select([7, 2, 5])
    ds.save_to_disk(str(tmp_path / "sel"))
    assert [r["i"] for _, r in iter_rows(tmp_path / "sel")] == [7, 2, 5]


def test_bad_files_are_errors_naming_the_file(tmp_path: Path) -> None:
    (tmp_path / "bad.parquet").write_bytes(b"PAR1 not really")
    with pytest.raises(TableError, match=r"bad\.parquet: not a parquet file"):
        read_rows(tmp_path / "bad.parquet")
    (tmp_path / "bad.arrow").write_bytes(b"\x00" * 64)
    with pytest.raises(TableError, match=r"bad\.arrow: not a arrow file"):
        read_rows(tmp_path / "bad.arrow")
    (tmp_path / "plain").mkdir()
    with pytest.raises(TableError, match=r"plain: a directory, but not one written by datasets"):
        read_rows(tmp_path / "plain")
    import pyarrow as pa
    import pyarrow.parquet as pq

    twice = pa.table([pa.array(["a"]), pa.array(["b"])], names=["text", "text"])
    with pa.OSFile(str(tmp_path / "twice.arrow"), "wb") as sink, pa.ipc.new_file(sink, twice.schema) as w:
        w.write_table(twice)
    with pytest.raises(TableError, match=r"twice\.arrow: the schema names column 'text' twice"):
        read_rows(tmp_path / "twice.arrow")
    pq.write_table(twice, tmp_path / "twice.parquet")  # pyarrow refuses it itself; still one line naming it
    with pytest.raises(TableError, match=r"twice\.parquet: not a parquet file \(Multiple matches"):
        read_rows(tmp_path / "twice.parquet")


# ---------------------------------------------------------------------------------------------- custom
CUSTOM_ROWS = [
    {"id": f"r{i}", "text": t, "label": lab}
    for i, (t, lab) in enumerate(
        [("good film", "pos"), ("bad plot, worse acting", "neg"), ("fine", "pos"), ("awful", "neg")]
    )
]


def _custom_features(path: Path, **kw) -> list[dict]:
    task = CustomTask(CustomData(train=path, dev=path, **kw))
    return task.featurize(task.read("train"), WordTokenizer(), 16) + task.featurize(
        task.read("dev"), WordTokenizer(), 16
    )


def test_custom_same_features_from_every_format(tmp_path: Path) -> None:
    files = every_format(tmp_path, "train", CUSTOM_ROWS)
    files["datasetdict"] = write_dataset_dict(
        tmp_path / "dd", {"train": CUSTOM_ROWS, "validation": CUSTOM_ROWS}
    )
    _same({fmt: _custom_features(p, id_column="id") for fmt, p in files.items()})


def test_custom_integer_labels_in_parquet_match_the_csv_strings(tmp_path: Path) -> None:
    rows = [{"text": r["text"], "label": int(r["label"] == "pos")} for r in CUSTOM_ROWS]
    parquet = write_parquet(tmp_path / "t.parquet", rows)
    csv_rows = [{"text": r["text"], "label": str(r["label"])} for r in rows]
    _same(
        {
            "csv": _custom_features(every_format(tmp_path / "c", "t", csv_rows)["csv"]),
            "parquet": _custom_features(parquet),
        }
    )


def test_custom_bad_row_in_parquet_names_file_row_and_column(tmp_path: Path) -> None:
    rows = [dict(r) for r in CUSTOM_ROWS]
    rows[2]["label"] = None
    path = write_parquet(tmp_path / "t.parquet", rows)
    with pytest.raises(TaskDataError, match=r"t\.parquet:3: empty 'label'"):
        CustomTask(CustomData(train=path, dev=path))
    with pytest.raises(TaskDataError, match=r"t\.parquet:1: no field 'sentence'"):
        CustomTask(CustomData(train=path, dev=path, text_column="sentence"))


# ------------------------------------------------------------------------------------------------ GLUE
def _glue_features(data_dir: Path) -> list[dict]:
    from albert_lm.tasks.glue import SPECS, GlueTask

    task = GlueTask(SPECS["mrpc"], data_dir)
    ex = task.read("train") + task.read("test")
    return [(e.guid, e.texts, e.label) for e in ex] + task.featurize(ex, WordTokenizer(), 32)


def test_glue_same_features_from_tsv_parquet_arrow_jsonl_and_datasets(tmp_path: Path) -> None:
    tsv_dir = FIXTURES / "glue"
    rows = {s: [r for _, r in read_rows(tsv_dir / "MRPC" / f"{s}.tsv")] for s in ("train", "test")}
    layouts = {}
    for fmt in ("parquet", "arrow", "jsonl", "datasets", "datasetdict"):
        d = tmp_path / fmt / "MRPC"
        d.mkdir(parents=True)
        for split, split_rows in rows.items():
            if fmt == "datasets":
                datasets.Dataset.from_list(split_rows).save_to_disk(str(d / split))
            elif fmt == "parquet":
                write_parquet(d / f"{split}.parquet", split_rows)
            elif fmt == "jsonl":
                write_jsonl(d / f"{split}.jsonl", split_rows)
            elif fmt == "arrow":
                every_format(tmp_path / "tmp" / split, "x", split_rows, csv_too=False)["arrow"].rename(
                    d / f"{split}.arrow"
                )
        if fmt == "datasetdict":
            shutil.rmtree(d)
            write_dataset_dict(d, rows)
        layouts[fmt] = tmp_path / fmt
    features = {"tsv": _glue_features(tsv_dir), **{f: _glue_features(p) for f, p in layouts.items()}}
    assert len(features["tsv"]) > 4
    _same(features)


# ------------------------------------------------------------------------------------------------- NER
NER_SENTENCES = [
    (
        ["John", "Smith", "lives", "in", "New", "York", "City", "."],
        ["B-PER", "I-PER", "O", "O", "B-LOC", "I-LOC", "I-LOC", "O"],
    ),
    (["Acme", "Corp", "hired", "Mary", "."], ["B-ORG", "I-ORG", "O", "B-PER", "O"]),
    (["Paris", "Berlin", "and", "Rome"], ["B-LOC", "B-LOC", "O", "B-LOC"]),
]


def _ner_features(path: Path, **kw) -> tuple[list, str]:
    from albert_lm.tasks.ner import TokenClassificationTask

    task = TokenClassificationTask({"train": path, "dev": path}, **kw)
    ex = task.read("train")
    feats = task.featurize(ex, WordTokenizer(), 32)
    return [(e.meta["words"], e.label) for e in ex] + [task.labels] + feats, task.info()["tag_scheme"]


def _conll(path: Path, sentences: list[tuple[list[str], list[str]]]) -> Path:
    path.write_text("\n\n".join("\n".join(f"{w} X X {t}" for w, t in zip(*s)) for s in sentences) + "\n")
    return path


def test_ner_same_features_from_conll_jsonl_parquet_arrow_and_datasets(tmp_path: Path) -> None:
    rows = [{"tokens": w, "tags": t} for w, t in NER_SENTENCES]
    files = {
        "conll": _conll(tmp_path / "t.conll", NER_SENTENCES),
        **every_format(tmp_path, "t", rows, csv_too=False),
    }
    names = ["O", "B-PER", "I-PER", "B-LOC", "I-LOC", "B-ORG", "I-ORG"]
    int_rows = [{"tokens": w, "ner_tags": [names.index(x) for x in t]} for w, t in NER_SENTENCES]
    files["datasets-int"] = every_format(tmp_path / "int", "t", int_rows, csv_too=False)["datasets"]
    out = {}
    for fmt, path in files.items():
        kw = {"tags_column": "ner_tags", "tag_names": names} if fmt == "datasets-int" else {}
        out[fmt], scheme = _ner_features(path, **kw)
        assert scheme == "iob2", fmt
    _same(out)


@pytest.mark.parametrize(
    "scheme, convert",
    [
        (
            "iob1",
            lambda tags: [
                re.sub(r"^B-", "I-", t) if i == 0 or tags[i - 1][2:] != t[2:] else t
                for i, t in enumerate(tags)
            ],
        ),
        ("bioes", None),
        ("bmes", None),
    ],
)
def test_ner_tag_schemes_are_detected_and_read_as_iob2(tmp_path: Path, scheme: str, convert) -> None:
    def bioes(tags: list[str], middle: str) -> list[str]:
        out = []
        for i, t in enumerate(tags):
            nxt = tags[i + 1] if i + 1 < len(tags) else "O"
            ends = not nxt.startswith("I-")
            if t.startswith("B-"):
                out.append(("S-" if ends else "B-") + t[2:])
            elif t.startswith("I-"):
                out.append(("E-" if ends else middle) + t[2:])
            else:
                out.append(t)
        return out

    if convert is None:
        convert = lambda tags: bioes(tags, "M-" if scheme == "bmes" else "I-")  # noqa: E731
    converted = [(w, convert(t)) for w, t in NER_SENTENCES]
    assert converted != NER_SENTENCES
    reference, _ = _ner_features(_conll(tmp_path / "ref.conll", NER_SENTENCES))
    path = write_jsonl(tmp_path / f"{scheme}.jsonl", [{"tokens": w, "tags": t} for w, t in converted])
    got, detected = _ner_features(path)
    assert detected == scheme and got == reference
    named, _ = _ner_features(path, tag_scheme=scheme)
    assert named == reference


def test_ner_row_errors_name_file_and_row(tmp_path: Path) -> None:
    from albert_lm.tasks.ner import TokenClassificationTask

    path = write_jsonl(tmp_path / "t.jsonl", [{"tokens": ["a", "b"], "tags": ["O"]}])
    with pytest.raises(
        TaskDataError, match=r"t\.jsonl:1: 'tags' must be a list of one tag per token \(2 tokens, got 1\)"
    ):
        TokenClassificationTask({"train": path})
    path = write_parquet(
        tmp_path / "i.parquet", [{"tokens": ["a"], "tags": [0]}, {"tokens": ["b"], "tags": [3]}]
    )
    with pytest.raises(TaskDataError, match=r"i\.parquet:1: tags: integer tag 0; give the tag names"):
        TokenClassificationTask({"train": path})
    with pytest.raises(TaskDataError, match=r"i\.parquet:2: tags: tag id 3 is outside --tag-names"):
        TokenClassificationTask({"train": path}, tag_names=["O", "B-X"])
    bad = write_jsonl(tmp_path / "s.jsonl", [{"tokens": ["a", "b"], "tags": ["B-X", "Q-X"]}])
    with pytest.raises(TaskDataError, match=r"s\.jsonl:1: tag 'Q-X' is not a BIOES tag"):
        TokenClassificationTask({"train": bad}, tag_scheme="bioes")


# ----------------------------------------------------------------------------------------------- SQuAD
class _OffsetTokenizer(WordTokenizer):
    def encode_with_offsets(self, text: str) -> tuple[list[int], list[tuple[int, int]]]:
        spans = [m.span() for m in re.finditer(r"\w+|[^\w\s]", text)]
        return [self.vocab.setdefault(text[a:b].lower(), len(self.vocab)) for a, b in spans], spans


def _flat_squad_rows(nested: dict) -> list[dict]:
    rows = []
    for article in nested["data"]:
        for paragraph in article["paragraphs"]:
            for qa in paragraph["qas"]:
                answers = {
                    "text": [a["text"] for a in qa["answers"]],
                    "answer_start": [a["answer_start"] for a in qa["answers"]],
                }
                rows.append({"id": qa["id"], "title": article["title"], "context": paragraph["context"],
                             "question": qa["question"], "answers": answers})  # fmt: skip
    return rows


def test_squad_flat_rows_give_the_nested_files_examples_and_features(tmp_path: Path) -> None:
    import json

    from albert_lm.tasks import squad_data as S

    nested = FIXTURES / "squad" / "tiny-v1.1.json"
    rows = _flat_squad_rows(json.loads(nested.read_text()))
    files = {"json": nested, **every_format(tmp_path, "squad", rows, csv_too=False)}
    out = {}
    for fmt, path in files.items():
        data = read_squad_file(path)
        assert data.version == "1.1", fmt
        feats, _ = S.featurize(
            data.examples, _OffsetTokenizer(), max_seq_length=48, doc_stride=16, max_query_length=12
        )
        out[fmt] = [vars(e) for e in data.examples] + [vars(f) for f in feats]
    assert len(out["json"]) > 2 * len(rows)
    _same(out)


def test_squad_flat_row_errors_name_file_and_row(tmp_path: Path) -> None:
    from albert_lm.tasks import squad_data as S

    row = {
        "id": "q",
        "title": "t",
        "context": "abc",
        "question": "?",
        "answers": {"text": ["a"], "answer_start": [0]},
    }
    bad = dict(row, id="q2", answers={"text": ["a", "b"], "answer_start": [0]})
    with pytest.raises(
        S.SquadFormatError,
        match=r"s\.jsonl:2: answers.text and answers.answer_start must be lists of one length",
    ):
        read_squad_file(write_jsonl(tmp_path / "s.jsonl", [row, bad]))
    with pytest.raises(S.SquadFormatError, match=r"n\.parquet:1: no column 'question'"):
        read_squad_file(
            write_parquet(tmp_path / "n.parquet", [{k: v for k, v in row.items() if k != "question"}])
        )


# ------------------------------------------------------------------------------------------------ RACE
def test_multiple_choice_same_features_from_jsonl_parquet_arrow_and_datasets(tmp_path: Path) -> None:
    from albert_lm.tasks.race import MultipleChoiceData, MultipleChoiceTask

    rows = [
        {"example_id": "e1", "article": "Paris is the capital of France.", "question": "The capital is _ .",
         "options": ["Paris", "Rome", "Oslo", "Bern"], "answer": "A"},
        {"example_id": "e2", "article": "Water boils at 100 degrees.", "question": "Water boils at",
         "options": ["50", "100", "0", "7"], "answer": "B"},
    ]  # fmt: skip
    out = {}
    for fmt, path in every_format(tmp_path, "mc", rows, csv_too=False).items():
        task = MultipleChoiceTask(MultipleChoiceData(files={"train": path}))
        ex = task.read("train")
        out[fmt] = [(e.guid, e.label) for e in ex] + task.featurize(ex, WordTokenizer(), 24)
    assert out["jsonl"][:2] == [("e1", 0), ("e2", 1)]
    _same(out)


def test_ner_conll_named_tsv_is_still_conll(tmp_path: Path) -> None:
    from albert_lm.tasks.ner import read_conll

    path = tmp_path / "train.tsv"
    path.write_text("John\tB-PER\nSmith\tI-PER\n\nParis\tB-LOC\n", encoding="utf-8")
    assert [ex.label for ex in read_conll(path)] == [["B-PER", "I-PER"], ["B-LOC"]]


def test_ner_auto_scheme_says_what_it_detected(tmp_path: Path, caplog: pytest.LogCaptureFixture) -> None:
    from albert_lm.tasks.ner import TokenClassificationTask

    rows = [
        {"tokens": ["New", "York", "City"], "tags": ["B-LOC", "I-LOC", "E-LOC"]},
        {"tokens": ["Ann"], "tags": ["S-PER"]},
    ]
    path = write_jsonl(tmp_path / "bioes.jsonl", rows)
    with caplog.at_level("INFO", logger="albert_lm.tasks.ner"):
        task = TokenClassificationTask({"train": path})
    assert f"{path}: tag scheme BIOES (detected" in caplog.text
    assert task.info()["tag_scheme"] == "bioes" and task.labels == ["O", "B-LOC", "B-PER", "I-LOC"]
    again = TokenClassificationTask.from_info(task.info())  # a fine-tuned model reads its files the same way
    assert again.tag_scheme == "bioes"
