"""Property-based fuzz test of every input reader (issue 22): whatever bytes a file holds, reading it either
succeeds or raises an error that the CLI prints as one line naming the file (`albert_lm.cli.main.error_message`
accepts it: the library's own error classes, an OSError, a ValueError with a message), never another
exception, whose traceback would be the user's only clue.

The readers: custom CSV / TSV / JSONL data, GLUE TSV, SQuAD JSON, RACE JSON and multiple-choice JSONL, the
corpus formats of `albert prepare` (lines, text, JSONL, MediaWiki XML) and `albert tokenizer train`,
pretraining config files (``--config`` JSON and YAML), and a model directory's config.json, task.json and a
run directory's report.json.

Each reader gets raw bytes (mostly invalid UTF-8 and syntax) and format-shaped input (JSON built from the
format's own keys, delimited rows, XML tags), so that the structural checks behind the parser are reached
too. ``derandomize=True``: the same inputs on every run, so the test is deterministic and a failure
reproduces; ``database=None``: nothing is written. The inputs tried and the time are printed at the end
(``pytest -s``) and the whole file stays within about 10 s.
"""

from __future__ import annotations

import json
import time
from collections import Counter
from collections.abc import Callable, Iterator
from pathlib import Path
from typing import Any

import pytest
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st

from albert_lm.cli.main import error_message

EXAMPLES = 60
"""Inputs per reader and input shape."""
FUZZ = settings(
    max_examples=EXAMPLES,
    derandomize=True,
    database=None,
    deadline=None,
    suppress_health_check=[HealthCheck.too_slow, HealthCheck.data_too_large],
)
TRIED: Counter[str] = Counter()


@pytest.fixture(scope="module", autouse=True)
def _report() -> Iterator[None]:
    start, cpu = time.perf_counter(), time.process_time()
    yield
    seconds, cpu = time.perf_counter() - start, time.process_time() - cpu  # CPU: what a busy machine hides
    total = sum(TRIED.values())
    # every reader that ran got its inputs (hypothesis stops early only when a strategy runs dry)
    assert not TRIED or min(TRIED.values()) >= EXAMPLES // 2, dict(TRIED)
    print(
        f"\nfuzz: {total} inputs to {len(TRIED)} readers in {seconds:.1f} s ({cpu:.1f} s CPU): {dict(TRIED)}"
    )


@pytest.fixture(scope="module")
def work(tmp_path_factory: pytest.TempPathFactory) -> Path:
    return tmp_path_factory.mktemp("fuzz")


def _check(name: str, path: Path, read: Callable[[], Any]) -> None:
    """``read()`` parses, or fails with one clear line naming ``path`` (or its directory: a run directory
    whose report.json names no usable checkpoint)."""
    TRIED[name] += 1
    try:
        read()
    except Exception as e:
        message = error_message(e)
        if message is None or not (str(path) in message or str(path.parent) in message):
            raise AssertionError(
                f"{name}: {type(e).__name__} is not one clear line naming {path}: {e}"
            ) from e


# ------------------------------------------------------------------------------------------ input shapes
def _json_value(keys: list[str]) -> st.SearchStrategy[Any]:
    """JSON values whose objects use the format's own keys (and a few others), nested."""
    scalars = st.none() | st.booleans() | st.integers(-5, 5) | st.floats() | st.text(max_size=8)
    key = st.sampled_from(keys) | st.text(max_size=3)
    return st.recursive(
        scalars,
        lambda inner: st.lists(inner, max_size=4) | st.dictionaries(key, inner, max_size=len(keys) + 1),
        max_leaves=25,
    )


def _json_bytes(keys: list[str]) -> st.SearchStrategy[bytes]:
    return _json_value(keys).map(lambda v: json.dumps(v).encode())


def _jsonl_bytes(keys: list[str]) -> st.SearchStrategy[bytes]:
    return st.lists(_json_value(keys), max_size=6).map(
        lambda vs: b"".join(json.dumps(v).encode() + b"\n" for v in vs)
    )


def _rows_bytes(sep: str, cells: list[str]) -> st.SearchStrategy[bytes]:
    cell = st.sampled_from(cells) | st.text(max_size=6)
    row = st.lists(cell, min_size=1, max_size=4).map(sep.join)
    return st.lists(row, max_size=8).map(lambda rows: "\n".join(rows).encode())


RAW = st.binary(max_size=200)


def _shapes(shaped: st.SearchStrategy[bytes]) -> st.SearchStrategy[bytes]:
    """Raw bytes, the format's shape, and the shape with a byte flipped or cut short."""
    damaged = st.tuples(shaped, st.integers(0, 400), st.integers(0, 255)).map(
        lambda t: t[0][: t[1]] + bytes([t[2]]) + t[0][t[1] + 1 :]
    )
    return RAW | shaped | damaged


def _write(work: Path, name: str, data: bytes) -> Path:
    path = work / name
    path.write_bytes(data)
    return path


# ----------------------------------------------------------------------------------------------- readers
CUSTOM_CELLS = ["text", "label", "pos", "neg", "1", "1.0", "", '"', '"a,b"', "\x00", "\ufeff"]


@pytest.mark.parametrize(("name", "sep"), [("data.csv", ","), ("data.tsv", "\t")])
@FUZZ
@given(data=st.data())
def test_custom_csv_tsv(work: Path, name: str, sep: str, data: st.DataObject) -> None:
    from albert_lm.tasks.custom import CustomData, CustomTask

    path = _write(work, name, data.draw(_shapes(_rows_bytes(sep, CUSTOM_CELLS))))

    def read() -> None:
        task = CustomTask(CustomData(train=path, dev=path))
        task.read("train")
        task.read("dev")

    _check(f"custom {name}", path, read)


@FUZZ
@given(data=_shapes(_jsonl_bytes(["text", "label", "text_pair", "id"])))
def test_custom_jsonl(work: Path, data: bytes) -> None:
    from albert_lm.tasks.custom import CustomData, CustomTask

    path = _write(work, "data.jsonl", data)
    _check("custom jsonl", path, lambda: CustomTask(CustomData(train=path, dev=path)).read("dev"))


@FUZZ
@given(data=_shapes(_rows_bytes("\t", ["sentence", "label", "0", "1", "index", ""])))
def test_glue_tsv(work: Path, data: bytes) -> None:
    from albert_lm.tasks.glue import SPECS, read_split

    (work / "SST-2").mkdir(exist_ok=True)
    path = _write(work / "SST-2", "train.tsv", data)
    _check("glue tsv", path, lambda: read_split(work, SPECS["sst2"], "train"))


SQUAD_KEYS = ["version", "data", "title", "paragraphs", "context", "qas", "id", "question", "answers", "text"]
SQUAD_KEYS += ["answer_start", "is_impossible", "plausible_answers"]


@FUZZ
@given(data=_shapes(_json_bytes(SQUAD_KEYS)))
def test_squad_json(work: Path, data: bytes) -> None:
    from albert_lm.tasks.squad_data import read_squad

    path = _write(work, "train-v2.0.json", data)
    _check("squad json", path, lambda: read_squad(path))


RACE_KEYS = ["article", "questions", "options", "answers", "id", "question", "answer", "context"]


@FUZZ
@given(data=_shapes(_json_bytes(RACE_KEYS)), jsonl=_shapes(_jsonl_bytes(RACE_KEYS)))
def test_race_json_and_jsonl(work: Path, data: bytes, jsonl: bytes) -> None:
    from albert_lm.tasks.race import read_mc_jsonl, read_race_file

    path = _write(work, "1.txt", data)
    _check("race json", path, lambda: read_race_file(path, "middle"))
    path = _write(work, "mc.jsonl", jsonl)
    _check("multiple-choice jsonl", path, lambda: read_mc_jsonl(path))


CORPUS_TAGS = ["<page>", "</page>", "<title>", "</title>", "<text>", "</text>", "<mediawiki>", "</mediawiki>"]
CORPUS_TAGS += ["<ns>0</ns>", "<redirect/>", "[[a|b]]", "{{x}}", "\n\n", "text", '{"text": "a"}']


@pytest.mark.parametrize("fmt", ["lines", "text", "jsonl", "wiki"])
@FUZZ
@given(data=st.data())
def test_prepare_corpus_formats(work: Path, fmt: str, data: st.DataObject) -> None:
    from albert_lm.data.documents import ReadReport, read_documents

    shaped = _rows_bytes("", CORPUS_TAGS) if fmt != "jsonl" else _jsonl_bytes(["text", "title"])
    path = _write(work, f"corpus-{fmt}.txt", data.draw(_shapes(shaped)))
    _check(f"prepare {fmt}", path, lambda: list(read_documents([path], ReadReport(), fmt)))


@pytest.mark.parametrize("name", ["corpus.txt", "dump.xml"])
@FUZZ
@given(data=_shapes(_rows_bytes("", CORPUS_TAGS)))
def test_tokenizer_corpus(work: Path, name: str, data: bytes) -> None:
    from albert_lm.tokenizer.corpus import iter_corpus_lines

    path = _write(work, name, data)
    _check(f"tokenizer {name}", path, lambda: list(iter_corpus_lines([path])))


CONFIG_KEYS = ["model", "data", "optim", "schedule", "run", "preset", "lr", "batch_size", "overrides"]
CONFIG_CELLS = ["model:", "optim:", "  lr: 1e-3", "  lr: inf", "  batch_size: x", "run:", "  steps: 3", "#"]


@FUZZ
@given(js=_shapes(_json_bytes(CONFIG_KEYS)), yaml=_shapes(_rows_bytes("", CONFIG_CELLS)))
def test_pretrain_config_files(work: Path, js: bytes, yaml: bytes) -> None:
    from albert_lm.pretrain.config import PretrainConfig, apply_dict
    from albert_lm.train.settings import load_config_file

    for path in (_write(work, "cfg.json", js), _write(work, "cfg.yaml", yaml)):
        _check(
            f"config {path.suffix}",
            path,
            lambda path=path: apply_dict(PretrainConfig(), load_config_file(path), str(path)).validate(),
        )


MODEL_KEYS = ["vocab_size", "hidden_size", "num_hidden_layers", "num_attention_heads", "embedding_size"]
MODEL_KEYS += ["intermediate_size", "model_type", "architectures", "max_position_embeddings"]
TASK_KEYS = ["task", "kind", "labels", "metric_names", "text_fields", "columns", "version", "max_seq_length"]
TASK_KEYS += ["classification", "regression", "span", "multiple_choice", "tokenizer", "fingerprint"]
REPORT_KEYS = ["checkpoints", "best", "last", "dir", "step"]


@FUZZ
@given(
    config=_shapes(_json_bytes(MODEL_KEYS)),
    task=_shapes(_json_bytes(TASK_KEYS)),
    report=_shapes(_json_bytes(REPORT_KEYS)),
)
def test_model_and_run_directory_json(work: Path, config: bytes, task: bytes, report: bytes) -> None:
    from albert_lm.config import AlbertConfig
    from albert_lm.finetune.rundir import read_task_info, resolve_model_dir, task_from_info

    model_dir, run_dir = work / "model", work / "run"
    model_dir.mkdir(exist_ok=True)
    run_dir.mkdir(exist_ok=True)
    path = _write(model_dir, "config.json", config)
    _check("config.json", path, lambda: AlbertConfig.from_json(path))
    path = _write(model_dir, "task.json", task)
    _check("task.json", path, lambda: task_from_info(read_task_info(model_dir), path))
    path = _write(run_dir, "report.json", report)
    _check("report.json", path, lambda: resolve_model_dir(run_dir))


# ------------------------------------------------------------------------ what the fuzzing found, pinned
def test_a_file_that_is_not_utf8_is_named_with_its_line_and_byte(tmp_path: Path) -> None:
    from albert_lm.finetune.rundir import ModelDirError, read_task_info
    from albert_lm.tasks.base import TaskDataError
    from albert_lm.tasks.custom import CustomData, CustomTask

    latin1 = "text,label\nfine,pos\ncaf\u00e9,neg\n".encode("latin-1")
    f = _write(tmp_path, "data.csv", latin1)
    with pytest.raises(TaskDataError) as e:
        CustomTask(CustomData(train=f, dev=f))
    assert str(e.value) == f"{f}:3: not UTF-8 text (byte 0xe9 at byte 4 of the line); is it a binary file?"
    j = _write(tmp_path, "data.jsonl", b'{"text": "a", "label": "x"}\n{"text": "\xff"}\n')
    with pytest.raises(TaskDataError, match=rf"^{j}:2: not UTF-8 text \(byte 0xff at byte 11 of the line\)"):
        CustomTask(CustomData(train=j, dev=j))
    _write(tmp_path, "task.json", b'{"task": "x", "kind": "classification"}\n\x89PNG')
    with pytest.raises(
        ModelDirError, match=r"task.json:2: not UTF-8 text \(byte 0x89 at byte 1 of the line\)"
    ):
        read_task_info(tmp_path)
