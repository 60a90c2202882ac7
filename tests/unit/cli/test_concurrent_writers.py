"""Two writers of one output at once, through the real entry point (`albert_lm.cli.main.main` in two
threads started together), 20 pairs per command: the second fails at once naming the holder of the
output's lock (or, after the first has finished, refuses its output); never do both succeed while running
at the same time (one of them lost its output), and the output is always one successful writer's, complete."""

from __future__ import annotations

import json
import threading
import time
from collections.abc import Callable
from pathlib import Path

import pytest
from data_support import WIKI_SAMPLE, train_spm
from inference_support import make_model_dir

PAIRS = 20
LOCKED = "in use by another process"
REFUSED = (LOCKED, "exists and is not empty")


def _race(argvs: tuple[list[str], list[str]], capsys) -> tuple[list[int], list[tuple[float, float]], str]:
    """Both argvs through `main` at once; their exit codes, (start, end) times and stderr."""
    from albert_lm.cli.main import main

    barrier = threading.Barrier(2)
    codes = [-1, -1]
    spans = [(0.0, 0.0), (0.0, 0.0)]

    def one(i: int) -> None:
        barrier.wait()
        start = time.monotonic()
        codes[i] = main(argvs[i])
        spans[i] = (start, time.monotonic())

    threads = [threading.Thread(target=one, args=(i,)) for i in range(2)]
    for t in threads:
        t.start()
    for t in threads:
        t.join()
    return codes, spans, capsys.readouterr().err


def _check_pairs(
    capsys, make_argvs: Callable[[int], tuple[list[str], list[str]]], whose: Callable[[int], int | None]
) -> None:
    """``whose(pair)``: which writer's output the pair's output is (0 or 1), read back from it."""
    for pair in range(PAIRS):
        codes, spans, err = _race(make_argvs(pair), capsys)
        assert set(codes) <= {0, 1} and 0 in codes, (pair, codes, err)
        assert sum(err.count(r) for r in REFUSED) == codes.count(1), (pair, err)  # refused, nothing else
        if codes == [0, 0]:  # both wrote: only one after the other
            (a0, a1), (b0, b1) = spans
            assert a1 <= b0 or b1 <= a0, f"pair {pair}: both writers succeeded at the same time"
        winner = whose(pair)  # None: the two outputs are alike, and it is complete
        assert winner is None or codes[winner] == 0, (pair, codes)  # the output is a writer's that succeeded


@pytest.fixture(scope="module")
def spm(tmp_path_factory) -> Path:
    return train_spm(tmp_path_factory.mktemp("race") / "spiece.model", vocab_size=400)


@pytest.mark.slow
def test_prepare(tmp_path, spm, capsys):
    from albert_lm.data.shards import verify_shards

    def argvs(pair: int) -> tuple[list[str], list[str]]:
        out = tmp_path / f"d{pair}"
        return tuple(  # type: ignore[return-value]
            [
                "prepare",
                "--input",
                str(WIKI_SAMPLE),
                "--tokenizer",
                str(spm),
                "--output",
                str(out),
                "--format",
                "lines",
                "--max-seq-length",
                "32",
                "--dupe-factor",
                "1",
                "--seed",
                str(seed),
                "--overwrite",
            ]  # fmt: skip
            for seed in (1, 2)
        )

    def whose(pair: int) -> int:
        out = tmp_path / f"d{pair}"
        verify_shards(out)  # every listed shard there, whole, and this run's
        assert not [p.name for p in out.iterdir() if p.name.startswith(".")], list(out.iterdir())
        return json.loads((out / "manifest.json").read_text())["config"]["seed"] - 1

    _check_pairs(capsys, argvs, whose)


@pytest.mark.slow
def test_tokenizer_train(tmp_path, capsys):
    from albert_lm.tokenizer import load_tokenizer

    def argvs(pair: int) -> tuple[list[str], list[str]]:
        out = tmp_path / f"t{pair}"
        return tuple(  # type: ignore[return-value]
            [
                "tokenizer",
                "train",
                "--input",
                str(WIKI_SAMPLE),
                "--vocab-size",
                str(size),
                "--output",
                str(out),
                "--overwrite",
            ]  # fmt: skip
            for size in (300, 320)
        )

    def whose(pair: int) -> int:
        return [300, 320].index(load_tokenizer(tmp_path / f"t{pair}").vocab_size)

    _check_pairs(capsys, argvs, whose)


@pytest.mark.slow
def test_export_onnx(tmp_path, capsys):
    pytest.importorskip("onnx")
    models = [make_model_dir(tmp_path / f"m{i}", seed=i) for i in range(2)]

    def argvs(pair: int) -> tuple[list[str], list[str]]:
        out = tmp_path / f"x{pair}"
        return tuple(  # type: ignore[return-value]
            ["export", "onnx", "--model", str(m), "--output", str(out)]
            for m in models  # cheap: one export
        )

    def whose(pair: int) -> int:
        out = tmp_path / f"x{pair}"
        assert (out / "model.onnx").stat().st_size > 0
        source = json.loads((out / "export_report.json").read_text())["source"]
        return [str(m) for m in models].index(source)

    _check_pairs(capsys, argvs, whose)


@pytest.mark.slow
def test_predict_output_file(tmp_path, capsys):
    model = make_model_dir(tmp_path / "m")
    inputs = []
    for i, n in enumerate((3, 5)):
        f = tmp_path / f"in{i}.txt"
        f.write_text("".join(f"text {j}\n" for j in range(n)), encoding="utf-8")
        inputs.append(f)

    def argvs(pair: int) -> tuple[list[str], list[str]]:
        out = tmp_path / f"p{pair}.jsonl"
        return tuple(  # type: ignore[return-value]
            ["predict", "--model", str(model), "--input", str(f), "--output", str(out), "--backend", "torch"]
            for f in inputs
        )

    def whose(pair: int) -> int:
        return [3, 5].index(len((tmp_path / f"p{pair}.jsonl").read_text().splitlines()))

    _check_pairs(capsys, argvs, whose)


@pytest.mark.slow
def test_convert_tf(tmp_path, capsys):
    import shutil

    from albert_lm.model import AlbertForPreTraining

    src = tmp_path / "albert_base"
    shutil.copytree(Path(__file__).resolve().parents[2] / "fixtures" / "tf" / "google", src)

    def argvs(pair: int) -> tuple[list[str], list[str]]:
        argv = ["convert", "tf", str(src), "--output", str(tmp_path / f"c{pair}"), "--overwrite"]
        return argv, list(argv)

    def whose(pair: int) -> None:
        out = tmp_path / f"c{pair}"
        assert isinstance(AlbertForPreTraining.from_pretrained(out), AlbertForPreTraining)  # complete
        assert not [p.name for p in tmp_path.iterdir() if p.name.startswith(".")], list(tmp_path.iterdir())

    _check_pairs(capsys, argvs, whose)


@pytest.mark.slow
def test_export_sentence_transformers(tmp_path, capsys):
    models = [make_model_dir(tmp_path / f"m{i}", seed=i) for i in range(2)]

    def argvs(pair: int) -> tuple[list[str], list[str]]:
        out = tmp_path / f"s{pair}"
        return tuple(  # type: ignore[return-value]
            ["export", "sentence-transformers", "--model", str(m), "--output", str(out), "--overwrite"]
            for m in models
        )

    def whose(pair: int) -> int:
        source = json.loads((tmp_path / f"s{pair}" / "export_report.json").read_text())["source"]
        return [str(m) for m in models].index(source)

    _check_pairs(capsys, argvs, whose)
