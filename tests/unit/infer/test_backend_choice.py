"""`--backend auto` (`albert_lm.infer.backend`): the fastest agreeing backend with injected timings (no test
here asserts a measured time), the refusal of one whose answers differ, the cache, and the real thing on a
tiny fine-tuned model."""

from __future__ import annotations

import json
import os
from collections.abc import Mapping
from pathlib import Path
from typing import Any

import numpy as np
import pytest
from inference_support import TEXTS, make_model_dir

from albert_lm.infer import backend as B
from albert_lm.infer.predictor import Predictor
from albert_lm.tasks.base import ModelDirError

BATCH: dict[str, Any] = {"input_ids": np.zeros((1, 8), np.int64)}
REFERENCE = {"logits": np.array([[0.5, -1.25]], np.float32)}


def _fn(logits: Any) -> Any:
    return lambda batch: {"logits": np.asarray(logits, np.float32)}


def _timer(ms: Mapping[str, float]) -> Any:
    calls: list[list[str]] = []

    def timer(fns: Mapping[str, Any], batch: Any) -> dict[str, float]:
        calls.append(sorted(fns))
        return {name: ms[name] for name in fns}

    timer.calls = calls  # type: ignore[attr-defined]
    return timer


def test_pick_is_the_fastest_usable_and_keeps_the_first_of_a_tie() -> None:
    trials = [B.Trial("torch", 142.0, 0.0), B.Trial("onnx", 75.0, 1e-7)]
    assert B.pick(trials).backend == "onnx"
    assert B.pick([B.Trial("torch", 80.0, 0.0), B.Trial("onnx", 80.0, 0.0)]).backend == "torch"
    refused = [B.Trial("torch", 142.0, 0.0), B.Trial("onnx", None, 0.5, "its outputs differ")]
    assert B.pick(refused).backend == "torch"
    with pytest.raises(ModelDirError, match="torch: broken; onnx: onnxruntime is not installed"):
        B.pick([B.Trial("torch", refused="broken"), B.Trial("onnx", refused="onnxruntime is not installed")])


def test_summary_names_the_winner_the_others_and_the_shape() -> None:
    trials = [B.Trial("torch", 142.4, 0.0), B.Trial("onnx", 75.2, 1e-7)]
    assert B.summary("onnx", trials, False, (1, 128)) == (
        "backend: onnx fp32 (75 ms) over torch fp32 (142 ms) for 1x128"
    )
    trials = [B.Trial("torch", 28.6, 0.0), B.Trial("onnx", None, None, "no model.int8.onnx")]
    assert B.summary("torch", trials, True, (1, 48)) == (
        "backend: torch int8 (29 ms) for 1x48; onnx int8 refused: no model.int8.onnx"
    )


def test_probe_refuses_a_backend_whose_answers_differ_and_times_only_the_others() -> None:
    timer = _timer({"torch": 142.0, "onnx": 75.0})
    off = REFERENCE["logits"] + 2e-3  # beyond the export's fp32 tolerance (1e-4)
    trials, fns = B.probe({"torch": lambda: _fn(REFERENCE["logits"]), "onnx": lambda: _fn(off)}, BATCH,
                          REFERENCE, int8=False, timer=timer)  # fmt: skip
    assert list(fns) == ["torch"] and timer.calls == [["torch"]]
    assert trials[0] == B.Trial("torch", 142.0, 0.0, None)
    assert trials[1].ms is None and "differ from PyTorch fp32 by 0.002 (tolerance 0.0001)" in str(
        trials[1].refused
    )
    assert B.pick(trials).backend == "torch"  # the faster one gives other answers: not chosen


def test_probe_int8_tolerance_is_relative_and_refuses_nan_and_missing_outputs() -> None:
    ref = {"logits": np.array([[4.0, -8.0]], np.float32)}
    near = _fn([[4.5, -8.5]])  # 0.5 <= 0.1 x 8
    far = _fn([[4.0, 0.0]])  # 8 > 0.8
    trials, fns = B.probe({"torch": lambda: near, "onnx": lambda: far}, BATCH, ref, int8=True,
                          timer=_timer({"torch": 1.0, "onnx": 1.0}))  # fmt: skip
    assert list(fns) == ["torch"] and "tolerance 0.8" in str(trials[1].refused)
    nan = _fn([[float("nan"), 0.0]])
    other = lambda: lambda batch: {"start_logits": np.zeros((1, 2))}  # noqa: E731
    trials, fns = B.probe({"torch": lambda: nan, "onnx": other}, BATCH, ref, int8=True, timer=_timer({}))
    assert not fns and all(t.refused for t in trials)


def test_probe_a_backend_that_cannot_be_built_is_refused_with_why() -> None:
    def missing() -> Any:
        raise ModuleNotFoundError("No module named 'onnxruntime'", name="onnxruntime")

    trials, fns = B.probe({"torch": lambda: _fn(REFERENCE["logits"]), "onnx": missing}, BATCH, REFERENCE,
                          int8=False, refused={}, timer=_timer({"torch": 3.0}))  # fmt: skip
    assert list(fns) == ["torch"] and trials[1].refused == "onnxruntime is not installed"


def _weights(tmp_path: Path) -> Path:
    model_dir = tmp_path / "model"
    model_dir.mkdir()
    (model_dir / "model.safetensors").write_bytes(b"weights")
    return model_dir


def test_choose_backend_measures_once_then_builds_only_the_cached_choice(tmp_path: Path) -> None:
    model_dir, cache = _weights(tmp_path), B.ChoiceCache(tmp_path / "cache")
    built: list[str] = []

    def builder(name: str) -> Any:
        def build() -> Any:
            built.append(name)
            return _fn(REFERENCE["logits"])

        return build

    builders = {"torch": builder("torch"), "onnx": builder("onnx")}
    timer = _timer({"torch": 142.0, "onnx": 75.0})
    name, fn = B.choose_backend(model_dir, builders, lambda: (BATCH, REFERENCE), int8=False, threads=2,
                                cache=cache, timer=timer)  # fmt: skip
    assert name == "onnx" and built == ["torch", "onnx"] and len(timer.calls) == 1
    entry = next(iter(json.loads(cache.path.read_text()).values()))
    assert entry["backend"] == "onnx" and entry["summary"].startswith("backend: onnx fp32 (75 ms) over torch")

    built.clear()

    def no_reference() -> Any:
        raise AssertionError("a cached choice is not measured again")

    name, _ = B.choose_backend(
        model_dir, builders, no_reference, int8=False, threads=2, cache=cache, timer=timer
    )
    assert name == "onnx" and built == ["onnx"] and len(timer.calls) == 1
    # int8, other threads, or new weights: another key, measured again
    for kwargs in ({"int8": True, "threads": 2}, {"int8": False, "threads": 1}):
        B.choose_backend(model_dir, builders, lambda: (BATCH, REFERENCE), cache=cache, timer=timer, **kwargs)
    (model_dir / "model.safetensors").write_bytes(b"other weights")  # new content (the key is its sha256)
    B.choose_backend(model_dir, builders, lambda: (BATCH, REFERENCE), int8=False, threads=2, cache=cache,
                     timer=timer)  # fmt: skip
    assert len(timer.calls) == 4 and len(json.loads(cache.path.read_text())) == 4


def test_a_cache_that_cannot_be_read_or_written_costs_a_measurement_not_a_failure(tmp_path: Path) -> None:
    model_dir = _weights(tmp_path)
    (tmp_path / "cache").mkdir()
    (tmp_path / "cache" / B.CACHE_FILE).write_text("{not json")
    blocked = tmp_path / "file"
    blocked.write_text("")
    builders = {"torch": lambda: _fn(REFERENCE["logits"])}
    for cache in (B.ChoiceCache(tmp_path / "cache"), B.ChoiceCache(blocked / "sub")):
        timer = _timer({"torch": 1.0})
        name, _ = B.choose_backend(model_dir, builders, lambda: (BATCH, REFERENCE), int8=False, threads=1,
                                   cache=cache, timer=timer)  # fmt: skip
        assert name == "torch" and len(timer.calls) == 1
    assert B.ChoiceCache(tmp_path / "cache").get("anything") is None


def test_int8_score_refusal_reads_the_exports_labelled_file_check(tmp_path: Path) -> None:
    assert B.int8_score_refusal(tmp_path) is None  # no report: nothing to refuse on
    report = {"metrics": {"file": "dev.tsv", "score_change": -0.03}}
    (tmp_path / "export_report.json").write_text(json.dumps(report))
    assert "0.030 below fp32 on dev.tsv" in str(B.int8_score_refusal(tmp_path))
    report["metrics"]["score_change"] = -0.004  # type: ignore[index]
    (tmp_path / "export_report.json").write_text(json.dumps(report))
    assert B.int8_score_refusal(tmp_path) is None


@pytest.mark.parametrize("int8", [False, True])
def test_auto_on_a_real_model_picks_an_agreeing_backend_and_caches_it(
    tmp_path: Path, int8: bool, caplog: pytest.LogCaptureFixture
) -> None:
    model_dir = make_model_dir(tmp_path / "model")
    torch_rows = Predictor.load(model_dir, backend="torch", int8=int8).rows
    caplog.set_level("INFO", logger="albert_lm.infer.backend")
    auto = Predictor.load(model_dir, backend="auto", int8=int8, threads=1)
    assert auto.backend in ("torch", "onnx") and auto.describe()["backend"] == auto.backend
    line = next(r.message for r in caplog.records if r.message.startswith("backend: "))
    assert f"{auto.backend} {'int8' if int8 else 'fp32'} (" in line and "for 1x48" in line
    got, want = (rows(auto.examples([{"_texts": [t]} for t in TEXTS])) for rows in (auto.rows, torch_rows))
    assert [r["label"] for r in got] == [r["label"] for r in want] or int8
    # both measured, neither refused: ONNX Runtime ran on the export auto made (kept in the cache dir)
    cache = json.loads((Path(os.environ[B.CACHE_ENV]) / B.CACHE_FILE).read_text())
    entry = next(e for e in cache.values() if e["model_dir"] == str(model_dir))
    assert [(t["backend"], t["refused"]) for t in entry["trials"]] == [("torch", None), ("onnx", None)]
    assert all(t["ms"] > 0 for t in entry["trials"])
    assert (B.export_cache_dir(model_dir) / ("model.int8.onnx" if int8 else "model.onnx")).is_file()
    caplog.clear()
    again = Predictor.load(model_dir, backend="auto", int8=int8, threads=1)
    assert again.backend == auto.backend
    assert any("(cached in" in r.message for r in caplog.records)
