"""Token classification (NER, BIO tags, CoNLL files): the reader, the entity-level metric against
hand-computed cases and seqeval's documented examples, first-piece featurization, and the task end to end
through the command line: finetune -> evaluate -> predict -> export onnx -> serve."""

from __future__ import annotations

import io
import json
from pathlib import Path

import pytest

from albert_lm.model.heads import IGNORE_INDEX
from albert_lm.tasks.base import Example, TaskDataError
from albert_lm.tasks.metrics import entity_scores, entity_spans
from albert_lm.tasks.ner import TokenClassificationTask, read_conll, split_words

# Sentences in the style of CoNLL-2003 (token, POS, chunk, NER tag), made for these tests.
SENTENCES = [
    "John/B-PER Smith/I-PER lives/O in/O London/B-LOC ./O",
    "Mary/B-PER works/O for/O Acme/B-ORG Corporation/I-ORG in/O Paris/B-LOC ./O",
    "The/O United/B-ORG Nations/I-ORG met/O in/O Geneva/B-LOC on/O Monday/O ./O",
    "Peter/B-PER visited/O Berlin/B-LOC with/O Anna/B-PER ./O",
    "Siemens/B-ORG opened/O an/O office/O in/O Madrid/B-LOC ./O",
    "David/B-PER Brown/I-PER joined/O Google/B-ORG last/O year/O ./O",
    "Rome/B-LOC is/O the/O capital/O of/O Italy/B-LOC ./O",
    "Laura/B-PER and/O Tom/B-PER flew/O to/O Tokyo/B-LOC ./O",
    "Reuters/B-ORG reported/O the/O news/O from/O Cairo/B-LOC ./O",
    "Sarah/B-PER Jones/I-PER leads/O the/O World/B-ORG Bank/I-ORG ./O",
]


def _conll(sentences: list[str], docstart: bool = True) -> str:
    lines = ["-DOCSTART- -X- -X- O", ""] if docstart else []
    for s in sentences:
        for item in s.split():
            word, tag = item.rsplit("/", 1)
            lines.append(f"{word} NNP I-NP {tag}")
        lines.append("")
    return "\n".join(lines) + "\n"


def _write(path: Path, text: str) -> Path:
    path.write_text(text, encoding="utf-8")
    return path


# ------------------------------------------------------------------------------------------------ reader
def test_reader_reads_sentences_and_skips_docstart(tmp_path: Path) -> None:
    f = _write(
        tmp_path / "train.conll",
        _conll(SENTENCES[:2]) + "-DOCSTART- -X- -X- O\n\n" + _conll(SENTENCES[2:3], False),
    )
    examples = read_conll(f)
    assert [ex.meta["words"] for ex in examples][0] == ["John", "Smith", "lives", "in", "London", "."]
    assert examples[0].label == ["B-PER", "I-PER", "O", "O", "B-LOC", "O"]
    assert [ex.meta["line"] for ex in examples] == [3, 10, 21]  # each sentence's first line
    assert len(examples) == 3 and examples[2].label[1:3] == ["B-ORG", "I-ORG"]


def test_reader_errors_name_file_and_line(tmp_path: Path) -> None:
    no_tag = _write(tmp_path / "a.conll", "John B-PER\nSmith\n")
    with pytest.raises(TaskDataError, match=r"a\.conll:2: no tag; .* got 'Smith'"):
        read_conll(no_tag)
    not_bio = _write(tmp_path / "b.conll", "John B-PER\n\nLondon LOC\n")
    with pytest.raises(TaskDataError, match=r"b\.conll:3: tag 'LOC' is not a BIO tag"):
        read_conll(not_bio)
    unknown = _write(tmp_path / "c.conll", "John B-PER\nat O\nAcme B-ORG\n")
    with pytest.raises(TaskDataError, match=r"c\.conll:3: tag 'B-ORG' is not one of the model's tags"):
        read_conll(unknown, ["O", "B-PER", "I-PER"])
    binary = tmp_path / "d.conll"
    binary.write_bytes(b"John B-PER\n\xff\xfe O\n")
    with pytest.raises(TaskDataError, match=r"d\.conll:2: not UTF-8"):
        read_conll(binary)
    # an I- tag after O starts an entity, as conlleval reads it: accepted, not an error
    loose = read_conll(_write(tmp_path / "e.conll", "in O\nLondon I-LOC\n"))
    assert loose[0].label == ["O", "I-LOC"] and entity_spans(loose[0].label) == [("LOC", 1, 2)]


# ------------------------------------------------------------------------------------------------ metric
def test_entity_spans_follow_conlleval() -> None:
    # seqeval's get_entities docstring: ['B-PER', 'I-PER', 'O', 'B-LOC'] -> PER 0..1, LOC 3..3 (inclusive)
    assert entity_spans(["B-PER", "I-PER", "O", "B-LOC"]) == [("PER", 0, 2), ("LOC", 3, 4)]
    assert entity_spans(["I-PER", "I-PER", "O", "I-LOC"]) == [("PER", 0, 2), ("LOC", 3, 4)]
    assert entity_spans(["B-PER", "B-PER"]) == [("PER", 0, 1), ("PER", 1, 2)]  # B always starts one
    assert entity_spans(["B-PER", "I-LOC", "I-LOC"]) == [("PER", 0, 1), ("LOC", 1, 3)]  # a type change
    assert entity_spans(["O", "O"]) == [] and entity_spans([]) == []


def test_entity_scores_against_hand_computed_and_seqeval_examples() -> None:
    # seqeval README: one MISC entity found one token early (wrong), PER right -> P = R = F1 = 0.5
    y_true = [["O", "O", "O", "B-MISC", "I-MISC", "I-MISC", "O"], ["B-PER", "I-PER", "O"]]
    y_pred = [["O", "O", "B-MISC", "I-MISC", "I-MISC", "I-MISC", "O"], ["B-PER", "I-PER", "O"]]
    assert entity_scores(y_pred, y_true) == pytest.approx({"precision": 0.5, "recall": 0.5, "f1": 0.5})
    # by hand: gold PER(0,2) LOC(3,4) ORG(5,6); predicted PER(0,2) right, LOC(3,5) a wrong end, ORG missed:
    # P = 1/2, R = 1/3, F1 = 2 * 1/6 / (5/6) = 0.4
    gold = [["B-PER", "I-PER", "O", "B-LOC", "O", "B-ORG"]]
    pred = [["B-PER", "I-PER", "O", "B-LOC", "I-LOC", "O"]]
    assert entity_scores(pred, gold) == pytest.approx({"precision": 1 / 2, "recall": 1 / 3, "f1": 0.4})
    # an I- tag after O counts as an entity on both sides: it matches a B- one of the same span
    assert entity_scores([["O", "I-LOC"]], [["O", "B-LOC"]])["f1"] == 1.0
    # nothing predicted, nothing found: 0, not a division by zero
    assert entity_scores([["O", "O"]], [["B-PER", "O"]]) == {"precision": 0.0, "recall": 0.0, "f1": 0.0}
    with pytest.raises(ValueError, match="sentence 0: 1 predicted tags for 2 words"):
        entity_scores([["O"]], [["O", "O"]])


# -------------------------------------------------------------------------------------- featurization
def test_first_piece_is_labelled_and_the_rest_ignored(tmp_path: Path) -> None:
    from albert_lm.tokenizer import load_tokenizer

    (tmp_path / "vocab.txt").write_text("[PAD]\n[UNK]\n[CLS]\n[SEP]\n[MASK]\njohn\nwash\n##ing\n##ton\nin\n")
    tokenizer = load_tokenizer(tmp_path)
    task = TokenClassificationTask({}, labels=["O", "B-LOC", "B-PER", "I-LOC"])
    ex = Example(
        "s", ("John in Washington",), ["B-PER", "O", "B-LOC"], {"words": ["John", "in", "Washington"]}
    )
    (feat,) = task.featurize([ex], tokenizer, 16)
    assert feat["input_ids"] == [2, 5, 9, 6, 7, 8, 3]  # [CLS] john in wash ##ing ##ton [SEP]
    assert feat["word_starts"] == [1, 2, 3]
    assert feat["labels"] == [IGNORE_INDEX, 2, 0, 1, IGNORE_INDEX, IGNORE_INDEX, IGNORE_INDEX]
    # a window of 5: [CLS] john in wash [SEP]: Washington's first piece fits, its others do not
    (short,) = task.featurize([ex], tokenizer, 5)
    assert short["input_ids"] == [2, 5, 9, 6, 3] and short["word_starts"] == [1, 2, 3]
    # a window of 4: Washington is cut off; predicted O (postprocess), its gold entity a miss
    (cut,) = task.featurize([ex], tokenizer, 4)
    assert cut["word_starts"] == [1, 2]
    import numpy as np

    logits = np.zeros((4, 4))
    logits[1, 2] = logits[2, 0] = 1.0
    (rec,) = task.postprocess([{"logits": logits}], [ex], [cut])
    assert rec["tags"] == ["B-PER", "O", "O"]
    batch = task.collate([feat, cut])
    assert batch["labels"].shape == (2, 7) and batch["labels"][1, 4:].eq(IGNORE_INDEX).all()


def test_predict_inputs_text_and_tokens() -> None:
    task = TokenClassificationTask({}, labels=["O", "B-LOC", "B-PER", "I-PER"])
    assert split_words("John lives in Saint-Denis, France.") == (
        ["John", "lives", "in", "Saint-Denis", ",", "France", "."],
        [(0, 4), (5, 10), (11, 13), (14, 25), (25, 26), (27, 33), (33, 34)],
    )
    text, tokens = task.predict_examples(
        [{"_texts": ["Ann met Bob Lee in Oslo"]}, {"tokens": ["Ann", "met", "Bob"], "id": "x"}], [1, 2], "in"
    )
    row = task.output_row(text, {"tags": ["B-PER", "O", "B-PER", "I-PER", "O", "B-LOC"]})
    assert row["entities"] == [
        {"type": "PER", "text": "Ann", "start": 0, "end": 1, "char_start": 0, "char_end": 3},
        {"type": "PER", "text": "Bob Lee", "start": 2, "end": 4, "char_start": 8, "char_end": 15},
        {"type": "LOC", "text": "Oslo", "start": 5, "end": 6, "char_start": 19, "char_end": 23},
    ]
    assert tokens.guid == "x" and task.output_row(tokens, {"tags": ["O", "O", "B-PER"]})["entities"] == [
        {"type": "PER", "text": "Bob", "start": 2, "end": 3}
    ]
    with pytest.raises(TaskDataError, match=r"in:3: 'tokens' must be a list of non-blank strings"):
        task.predict_examples([{"tokens": "Ann met Bob"}], [3], "in")
    with pytest.raises(TaskDataError, match=r"in:4: no field 'tokens' \(a list of words\) or 'text'"):
        task.predict_examples([{"words": []}], [4], "in")


# ------------------------------------------------------------------------------------ end to end (CLI)
@pytest.fixture(scope="module")
def ner_run(tmp_path_factory: pytest.TempPathFactory) -> dict[str, Path]:
    """A tiny model fine-tuned on the CoNLL file through `albert finetune ner` (dev = train: it learns)."""
    from standin_tokenizer import make_tiny_model_dir

    from albert_lm.cli.main import main

    root = tmp_path_factory.mktemp("ner")
    train = _write(root / "train.conll", _conll(SENTENCES))
    dev = _write(root / "dev.conll", _conll(SENTENCES[:4]))
    words = [item.rsplit("/", 1)[0] for s in SENTENCES for item in s.split()]
    init = make_tiny_model_dir(root / "init", [" ".join(words)])
    run = root / "run"
    argv = ["finetune", "ner", "--train", str(train), "--dev", str(dev), "--model", str(init)]
    argv += ["--output", str(run), "--train-steps", "30", "--batch-size", "5", "--learning-rate", "2e-3"]
    argv += [
        "--eval-every",
        "15",
        "--no-progress",
        "--precision",
        "fp32",
        "--seed",
        "0",
        "--max-seq-length",
        "32",
    ]
    assert main(argv) == 0
    return {"run": run, "train": train, "dev": dev, "root": root}


@pytest.mark.slow
def test_finetune_evaluate_predict_agree(
    ner_run: dict[str, Path], capsys: pytest.CaptureFixture[str], monkeypatch: pytest.MonkeyPatch
) -> None:
    from albert_lm.cli.main import main

    run = ner_run["run"]
    report = json.loads((run / "report.json").read_text())
    assert report["task"]["kind"] == "token_classification"
    assert report["task"]["labels"] == ["O", "B-LOC", "B-ORG", "B-PER", "I-ORG", "I-PER"]
    last = report["checkpoints"]["last"]
    assert last["f1"] >= 0.8, last  # 30 steps on its own 10 sentences: the tagger has learned them
    config = json.loads((run / "checkpoints" / "best" / "config.json").read_text())
    assert config["architectures"] == ["AlbertForTokenClassification"] and config["id2label"]["3"] == "B-PER"

    capsys.readouterr()
    argv = ["evaluate", "ner", "--model", str(run), "--checkpoint", "last", "--dev", str(ner_run["dev"])]
    assert main(argv) == 0
    summary = json.loads(capsys.readouterr().out)
    assert summary["f1"] == pytest.approx(last["f1"]) and summary["num_examples"] == 4
    dev_tags = [
        json.loads(x)["tags"] for x in (run / "predictions" / "dev_last.jsonl").read_text().splitlines()
    ]
    assert entity_scores(dev_tags, [ex.label for ex in read_conll(ner_run["dev"])])["f1"] == summary["f1"]

    # predict: a text line (split into words) and a JSON line of tokens give the dev predictions' tags
    first, second = (SENTENCES[i].replace("/", " ").split()[::2] for i in range(2))
    out = []
    for line in (" ".join(first), json.dumps({"tokens": second, "id": "s2"})):
        monkeypatch.setattr("sys.stdin", io.StringIO(line + "\n"))
        assert main(["predict", "--model", str(run), "--checkpoint", "last"]) == 0
        out += [json.loads(x) for x in capsys.readouterr().out.splitlines()]
    assert out[0]["tokens"] == first and out[0]["tags"] == dev_tags[0]
    assert out[1]["tags"] == dev_tags[1] and out[1]["id"] == "s2" and "text" not in out[1]
    assert {"type": "PER", "text": "John Smith", "start": 0, "end": 2, "char_start": 0, "char_end": 10} in (
        out[0]["entities"]
    )


@pytest.mark.slow
def test_export_onnx_and_serve(ner_run: dict[str, Path], capsys: pytest.CaptureFixture[str]) -> None:
    pytest.importorskip("onnxruntime")
    testclient = pytest.importorskip("fastapi.testclient")
    from albert_lm.cli.main import main
    from albert_lm.infer.predictor import Predictor
    from albert_lm.serve.app import create_app

    run, onnx_dir = ner_run["run"], ner_run["root"] / "onnx"
    argv = ["export", "onnx", str(run), "--output", str(onnx_dir), "--checkpoint", "last"]
    assert main([*argv, "--calibrate-on", str(ner_run["dev"]), "--json"]) == 0
    report = json.loads((onnx_dir / "export_report.json").read_text())
    assert report["outputs"] == ["logits"] and report["parity"]["ok"]
    dev_f1 = json.loads((run / "report.json").read_text())["checkpoints"]["last"]["f1"]
    assert report["metrics"]["fp32"]["f1"] == pytest.approx(dev_f1)  # the ONNX file tags as PyTorch does
    capsys.readouterr()

    dev_tags = [
        json.loads(x)["tags"] for x in (run / "predictions" / "dev_last.jsonl").read_text().splitlines()
    ]
    words = [SENTENCES[i].replace("/", " ").split()[::2] for i in range(2)]
    for predictor in (Predictor.load(onnx_dir, backend="onnx"), Predictor.load(run, checkpoint="last")):
        with testclient.TestClient(create_app(predictor)) as client:
            r = client.post("/predict", json={"texts": [" ".join(words[0])]})
            assert r.status_code == 200, r.text
            (row,) = r.json()["predictions"]
            assert row["tags"] == dev_tags[0] and row["text"] == " ".join(words[0])
            r = client.post("/predict", json={"items": [{"tokens": words[1]}]})
            assert r.status_code == 200 and r.json()["predictions"][0]["tags"] == dev_tags[1]
            r = client.post("/predict", json={"pairs": [["a", "b"]]})
            assert (
                r.status_code == 422 and 'does not take pairs; send "texts" or "items"' in r.json()["detail"]
            )
            assert client.get("/info").json()["kind"] == "token_classification"


def test_cli_errors_are_one_line(tmp_path: Path, capsys: pytest.CaptureFixture[str]) -> None:
    from standin_tokenizer import make_tiny_model_dir

    from albert_lm.cli.main import main

    init = make_tiny_model_dir(tmp_path / "init", ["john smith"])
    bad = _write(tmp_path / "bad.conll", "John B-PER\nSmith PERSON\n")
    argv = ["finetune", "ner", "--train", str(bad), "--dev", str(bad), "--model", str(init)]
    assert main([*argv, "--output", str(tmp_path / "run"), "--max-seq-length", "32"]) == 1
    err = capsys.readouterr().err.strip()
    assert err == f"albert finetune: error: {bad}:2: tag 'PERSON' is not a BIO tag (O, B-TYPE or I-TYPE)"
