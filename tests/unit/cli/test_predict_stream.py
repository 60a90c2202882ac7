"""`albert predict` streams (issue 16 item 5): each --batch-size chunk of lines is one tokenizer call and one
model call, written and flushed before the next chunk is read; output line N answers input line N, blank
lines included; --int8 / --threads / --backend; a reader that goes away ends it quietly (status 141)."""

from __future__ import annotations

import io
import json
import os
import queue
import subprocess
import sys
import threading
from pathlib import Path
from typing import Any

import pytest
import torch
from inference_support import TEXTS as SHARED_TEXTS
from inference_support import make_model_dir

from albert_lm.cli.main import main
from albert_lm.cli.predict import SIGPIPE_STATUS, InputLines, chunks
from albert_lm.tokenizer.wordpiece import WordPieceTokenizer

REPO = Path(__file__).resolve().parents[3]

TEXTS = [*SHARED_TEXTS, "gorgeous", "the plot was a mess", "great great great"]


@pytest.fixture(scope="module")
def model_dir(tmp_path_factory: pytest.TempPathFactory) -> Path:
    return make_model_dir(tmp_path_factory.mktemp("cls") / "model")


def _stdin(monkeypatch: pytest.MonkeyPatch, data: bytes) -> None:
    """stdin as the shell gives it: bytes underneath (``.buffer``), decoded as UTF-8 on top."""
    monkeypatch.setattr("sys.stdin", io.TextIOWrapper(io.BytesIO(data), encoding="utf-8"))


def _predict(
    monkeypatch: pytest.MonkeyPatch, capsys: pytest.CaptureFixture[str], data: bytes, *flags: str
) -> list:
    capsys.readouterr()
    _stdin(monkeypatch, data)
    assert main(["predict", *flags]) == 0
    return [json.loads(x) for x in capsys.readouterr().out.splitlines()]


@pytest.fixture
def encode_calls(monkeypatch: pytest.MonkeyPatch) -> list[tuple[int, int]]:
    """(texts, num_workers) of every call into the WordPiece encoder: `encode_ids` and `batch_encode`
    both end there, so per-line tokenizing shows as one call per line."""
    calls: list[tuple[int, int]] = []
    inner = WordPieceTokenizer._encode_ids_batch

    def counted(self: Any, texts: list[str], num_workers: int) -> Any:
        calls.append((len(texts), num_workers))
        return inner(self, texts, num_workers)

    monkeypatch.setattr(WordPieceTokenizer, "_encode_ids_batch", counted)
    return calls


@pytest.fixture
def model_batches(monkeypatch: pytest.MonkeyPatch) -> list[int]:
    """The number of inputs of every model call."""
    import albert_lm.infer.predictor

    sizes: list[int] = []
    make = albert_lm.infer.predictor.torch_predict_fn

    def counted_fn(*args: Any, **kwargs: Any) -> Any:
        inner = make(*args, **kwargs)

        def predict_fn(batch: Any) -> Any:
            sizes.append(len(batch["input_ids"]))
            return inner(batch)

        return predict_fn

    monkeypatch.setattr(albert_lm.infer.predictor, "torch_predict_fn", counted_fn)
    return sizes


# ------------------------------------------------------------------------- order, line count, one call
def test_one_tokenizer_call_per_chunk_and_every_line_in_place(
    model_dir: Path,
    monkeypatch: pytest.MonkeyPatch,
    capsys: pytest.CaptureFixture[str],
    encode_calls: list,
    model_batches: list,
) -> None:
    # blank lines at the start, in runs, all-whitespace, CRLF, a BOM, no final newline; 34 texts
    texts = [TEXTS[i % len(TEXTS)] + f" {i}" for i in range(34)]
    lines = ["", *texts[:10], "  ", "", *texts[10:31], "\t", texts[31], "", texts[32], texts[33]]
    data = b"\xef\xbb\xbf" + "\r\n".join(lines).encode("utf-8")
    out = _predict(
        monkeypatch, capsys, data, "--model", str(model_dir), "--batch-size", "2", "--threads", "1",
        "--backend", "torch",  # the model calls counted are torch's
    )  # fmt: skip
    assert len(out) == len(lines)
    for n, (line, row) in enumerate(zip(lines, out), start=1):
        if line.strip():
            assert row["text"] == line and row["label"] in ("neg", "pos")
        else:
            assert row == {"line": n, "error": "empty input"}
    # chunks of 16 batches of 2: 32 texts then 2, each one encoder call with the --threads workers (not
    # one call per line), and model calls of at most --batch-size inputs (a pair of very different lengths
    # may run as two calls: CALL_COST_TOKENS)
    assert encode_calls == [(32, 1), (2, 1)]
    assert sum(model_batches) == 34 and max(model_batches) == 2 and model_batches.count(2) >= 12
    first_run = len(model_batches)

    # the chunks change nothing: one chunk of everything predicts the same
    encode_calls.clear()
    whole = _predict(
        monkeypatch, capsys, data, "--model", str(model_dir), "--batch-size", "100", "--backend", "torch"
    )
    # one tokenizer call; model calls of up to 100, cut where padding costs more than a call (CALL_COST_TOKENS)
    assert [n for n, _ in encode_calls] == [34] and sum(model_batches[first_run:]) == 34
    assert len(model_batches[first_run:]) < first_run
    assert [r.get("label") for r in whole] == [r.get("label") for r in out]
    for a, b in zip(whole, out):
        if "probabilities" in a:
            assert a["probabilities"] == pytest.approx(b["probabilities"], abs=1e-5)


def test_input_lines_of_a_pipe_say_when_the_next_one_is_not_there_yet() -> None:
    read_end, write_end = os.pipe()
    try:
        lines = InputLines(read_end)
        it = iter(lines)
        os.write(write_end, b"one\ntw")
        assert next(it) == b"one\n" and not lines.ready()  # half a line is not a line
        os.write(write_end, b"o\r\nthree\nfo")
        assert next(it) == b"two\r\n" and lines.ready()
        assert next(it) == b"three\n" and not lines.ready()
        os.close(write_end)
        write_end = -1
        assert lines.ready()  # the end is there: no wait
        assert list(it) == [b"fo"]  # the last line without its line end
    finally:
        os.close(read_end)
        if write_end >= 0:
            os.close(write_end)


def test_chunks_are_cut_at_the_size_and_where_the_input_pauses() -> None:
    items = [(1, {"a": 1}), (2, None), (3, {"a": 3}), (4, {"a": 4}), (5, None), (6, {"a": 6}), (7, None)]
    taken: list[int] = []

    def numbered() -> Any:
        for item in items:
            taken.append(item[0])
            yield item

    # the writer pauses after line 5: nothing more is there until the chunk holding it is done
    got = [[n for n, _ in c] for c in chunks(numbered(), 2, lambda: taken[-1] != 5)]
    assert got == [[1, 2, 3], [4, 5], [6, 7]]
    taken.clear()
    assert [[n for n, _ in c] for c in chunks(numbered(), 2, lambda: True)] == [[1, 2, 3], [4, 5, 6], [7]]


def test_jsonl_ids_come_first_and_auto_format_looks_past_blank_lines(
    model_dir: Path, monkeypatch: pytest.MonkeyPatch, capsys: pytest.CaptureFixture[str]
) -> None:
    recs = [{"text": TEXTS[0], "id": "a"}, {"text": TEXTS[1]}, {"id": 3, "text": TEXTS[3]}]
    data = ("\n\n" + "\n\n".join(json.dumps(r) for r in recs) + "\n").encode()
    out = _predict(monkeypatch, capsys, data, "--model", str(model_dir), "--batch-size", "2")
    assert [list(r)[0] for r in out] == ["line", "line", "id", "line", "text", "line", "id"]
    assert [r.get("id") for r in out] == [None, None, "a", None, None, None, 3]
    assert [r["line"] for r in out if "error" in r] == [1, 2, 4, 6]


def test_all_blank_input_is_error_records_and_no_input_is_an_error(
    model_dir: Path, monkeypatch: pytest.MonkeyPatch, capsys: pytest.CaptureFixture[str], encode_calls: list
) -> None:
    out = _predict(monkeypatch, capsys, b"\n \n", "--model", str(model_dir))
    assert out == [{"line": 1, "error": "empty input"}, {"line": 2, "error": "empty input"}]
    assert encode_calls == []
    _stdin(monkeypatch, b"")
    assert main(["predict", "--model", str(model_dir)]) == 1
    assert capsys.readouterr().err.strip() == "albert predict: error: <stdin>: no input"


def test_an_error_mid_stream_keeps_the_lines_before_it_and_no_half_output_file(
    model_dir: Path, tmp_path: Path, monkeypatch: pytest.MonkeyPatch, capsys: pytest.CaptureFixture[str]
) -> None:
    texts = TEXTS * 2  # 20 lines: one chunk of 16 (--batch-size 1), then the bad line in the next
    data = "\n".join(texts).encode() + b"\n\x89PNG\n" + TEXTS[4].encode() + b"\n"
    _stdin(monkeypatch, data)
    assert main(["predict", "--model", str(model_dir), "--batch-size", "1"]) == 1
    captured = capsys.readouterr()
    assert [json.loads(x)["text"] for x in captured.out.splitlines()] == texts[:16]  # the chunk before it
    assert captured.err.strip().startswith("albert predict: error: <stdin>:21: not UTF-8 text")
    # --output: all or nothing, the old file whole
    src, dst = tmp_path / "in.txt", tmp_path / "out.jsonl"
    src.write_bytes(data)
    dst.write_text("old\n")
    argv = ["predict", "--model", str(model_dir), "--batch-size", "1", "--input", str(src)]
    assert main([*argv, "--output", str(dst)]) == 1
    assert dst.read_text() == "old\n" and sorted(p.name for p in tmp_path.iterdir()) == [
        "in.txt",
        "out.jsonl",
    ]
    src.write_bytes(data.replace(b"\x89PNG", b""))
    assert main(["predict", "--model", str(model_dir), "--input", str(src), "--output", str(dst)]) == 0
    rows = [json.loads(x) for x in dst.read_text().splitlines()]
    assert [r.get("text") for r in rows] == [*texts, None, TEXTS[4]]


# ----------------------------------------------------------------------------------- int8, threads, flags
def test_int8_gives_the_fp32_labels_with_close_probabilities(
    model_dir: Path, monkeypatch: pytest.MonkeyPatch, capsys: pytest.CaptureFixture[str]
) -> None:
    threads = torch.get_num_threads()
    data = "\n".join(TEXTS).encode()
    try:
        fp32 = _predict(monkeypatch, capsys, data, "--model", str(model_dir), "--device", "cpu")
        int8 = _predict(monkeypatch, capsys, data, "--model", str(model_dir), "--int8", "--threads", "1")
        assert torch.get_num_threads() == 1  # --threads reached torch
    finally:
        torch.set_num_threads(threads)
    assert [r["label"] for r in int8] == [r["label"] for r in fp32]
    p32 = [r["probabilities"]["pos"] for r in fp32]
    p8 = [r["probabilities"]["pos"] for r in int8]
    # a random tiny model's probabilities barely depend on the text (0.60 +- 0.001 here), so the labels
    # alone would say little: the int8 probabilities are close, and not the fp32 ones (int8 really ran)
    assert p8 == pytest.approx(p32, abs=0.02) and p8 != pytest.approx(p32, abs=1e-7)


@pytest.mark.parametrize(
    ("flags", "message"),
    [
        (["--threads", "0"], "--threads: must be at least 1, got 0"),
        (["--eval-batch-size", "0"], "--eval-batch-size: must be at least 1, got 0"),
        (["--batch-size", "0"], "--eval-batch-size: must be at least 1, got 0"),  # the old spelling
        (["--backend", "onnx", "--device", "cuda"], "--device cuda: the onnx backend runs on the CPU"),
        (["--int8", "--device", "cuda"], "int8 runs on the CPU only, not on cuda"),
    ],
)
def test_bad_flags_are_one_line(
    model_dir: Path,
    monkeypatch: pytest.MonkeyPatch,
    capsys: pytest.CaptureFixture[str],
    flags: list,
    message: str,
) -> None:
    _stdin(monkeypatch, b"dull\n")
    assert main(["predict", "--model", str(model_dir), *flags]) == 1
    err = capsys.readouterr().err.strip()
    assert err.startswith(f"albert predict: error: {message}") and "\n" not in err


# --------------------------------------------------------------------------------- other tasks, chunked
@pytest.mark.parametrize("kind", ["multiple_choice", "squad_v2", "regression"])
def test_other_heads_chunked_equal_one_chunk(
    kind: str, tmp_path: Path, monkeypatch: pytest.MonkeyPatch, capsys: pytest.CaptureFixture[str]
) -> None:
    model = make_model_dir(tmp_path / kind, kind)
    if kind == "multiple_choice":
        recs: list[Any] = [
            {
                "id": "q1",
                "context": "the film is funny",
                "question": "is it ?",
                "options": ["good", "bad", "dull"],
            },
            {
                "context": "a long and slow story " * 4,
                "question": "what ?",
                "options": ["the cast", "the plot"],
            },
            {"context": "paris", "question": "where ?", "options": ["france", "city", "river", "a"]},
        ]
        lines = [json.dumps(r) for r in recs]
    elif kind == "squad_v2":
        lines = [
            "what is the capital of france ?\tparis is the capital of france .",
            "who was funny ?\t" + "the cast was funny and the plot was good . " * 5,
            "where is the river ?\tthe river is in the city .",
        ]
    else:
        lines = TEXTS[:3]
    data = (lines[0] + "\n\n" + "\n".join(lines[1:]) + "\n").encode()
    chunked = _predict(monkeypatch, capsys, data, "--model", str(model), "--batch-size", "1")
    whole = _predict(monkeypatch, capsys, data, "--model", str(model), "--batch-size", "64")
    assert len(chunked) == len(whole) == 4 and chunked[1] == whole[1] == {"line": 2, "error": "empty input"}
    for a, b in zip(chunked, whole):
        assert a.keys() == b.keys()
        for k in a:
            if isinstance(a[k], (float, list)):
                assert a[k] == pytest.approx(b[k], abs=1e-5), k
            else:
                assert a[k] == b[k], k
    if kind == "multiple_choice":
        assert chunked[0]["id"] == "q1" and [
            len(r["probabilities"]) for r in chunked if "error" not in r
        ] == [3, 2, 4]
    elif kind == "squad_v2":
        assert all("answer" in r and "null_odds" in r for r in chunked if "error" not in r)
    else:
        assert all(isinstance(r["score"], float) for r in chunked if "error" not in r)


# ------------------------------------------------------------------------------ streaming, as a process
class _Lines:
    """The first ``limit`` lines a process writes to a pipe, read by a thread so that each wait has a
    deadline; then the thread closes the pipe, as a reader like ``head`` does."""

    def __init__(self, stream: Any, limit: int) -> None:
        self.queue: queue.Queue[str] = queue.Queue()
        self.thread = threading.Thread(target=self._pump, args=(stream, limit), daemon=True)
        self.thread.start()

    def _pump(self, stream: Any, limit: int) -> None:
        with stream:
            for _, line in zip(range(limit), stream):
                self.queue.put(line)

    def take(self, n: int, timeout: float) -> list[str]:
        return [self.queue.get(timeout=timeout) for _ in range(n)]


def test_output_streams_before_the_input_ends_and_a_closed_reader_ends_it_quietly(model_dir: Path) -> None:
    """Input written through a pipe three lines at a time, far fewer than a batch: each three lines'
    answers arrive while stdin is still open (the pause cuts the chunk). Then the reader closes the
    output: exit 141, no traceback."""
    env = {**os.environ, "PYTHONPATH": str(REPO / "src")}
    argv = [sys.executable, "-m", "albert_lm", "predict", "--model", str(model_dir)]  # batches of 64
    proc = subprocess.Popen(
        [*argv, "--threads", "1", "--device", "cpu"],
        stdin=subprocess.PIPE,
        stdout=subprocess.PIPE,
        stderr=subprocess.PIPE,
        env=env,
    )
    assert proc.stdin is not None and proc.stdout is not None and proc.stderr is not None
    try:
        out = _Lines(proc.stdout, limit=6)
        for first in (0, 3):
            proc.stdin.write("".join(t + "\n" for t in TEXTS[first : first + 3]).encode())
            proc.stdin.flush()
            # the process starting (torch import, model load) takes most of the first wait
            got = [json.loads(x) for x in out.take(3, timeout=120 if first == 0 else 30)]
            assert [g["text"] for g in got] == TEXTS[first : first + 3]
            assert proc.poll() is None  # stdin is still open: these lines were streamed, not flushed at exit
        out.thread.join(timeout=30)  # the reader has closed the pipe (`| head -6`)
        assert not out.thread.is_alive()
        proc.stdin.write("".join(t + "\n" for t in TEXTS[6:9]).encode())
        proc.stdin.close()
        assert proc.wait(timeout=60) == SIGPIPE_STATUS
        assert "Traceback" not in proc.stderr.read().decode()
    finally:
        if proc.poll() is None:
            proc.kill()
            proc.wait(timeout=30)
