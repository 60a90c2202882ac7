"""`albert serve` as a real process on 127.0.0.1: a bounded load test (200 concurrent requests, every answer
right and in order), 4xx answers that say which limit, and SIGTERM with requests in flight losing none."""

from __future__ import annotations

import asyncio
import os
import random
import signal
import socket
import subprocess
import sys
import time
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import pytest
from inference_support import make_model_dir

from albert_lm.infer.predictor import Predictor

httpx = pytest.importorskip("httpx")
pytest.importorskip("fastapi")
pytest.importorskip("uvicorn")

TEXTS = [
    "a witty , charming film .",
    "dull",
    "the cast is great and the story is funny but too long",
    "not funny !",
    "a very good movie , quite charming",
    "awful",
    "who did the film ?",
    "gorgeous , great , witty",
    "the plot was slow and boring",
    "so bad",
]


def _free_port() -> int:
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        return int(s.getsockname()[1])


class Server:
    """``python -m albert_lm serve MODEL_DIR`` on a free loopback port, its output in a log file."""

    def __init__(self, model_dir: Path, log: Path, *flags: str) -> None:
        self.port = _free_port()
        self.url = f"http://127.0.0.1:{self.port}"
        self.log = log
        argv = [
            sys.executable,
            "-m",
            "albert_lm",
            "serve",
            "--model",
            str(model_dir),
            "--port",
            str(self.port),
            "--threads",
            "1",
        ]
        with open(log, "w") as out:
            self.proc = subprocess.Popen([*argv, *flags], stdout=out, stderr=subprocess.STDOUT)

    def wait_ready(self, timeout: float = 120.0) -> None:
        deadline = time.monotonic() + timeout
        while time.monotonic() < deadline:
            if self.proc.poll() is not None:
                pytest.fail(f"the server exited ({self.proc.returncode}):\n{self.log.read_text()}")
            try:
                if httpx.get(f"{self.url}/health", timeout=1.0).status_code == 200:
                    return
            except httpx.TransportError:
                pass
            time.sleep(0.2)
        pytest.fail(f"the server did not start in {timeout:.0f}s:\n{self.log.read_text()}")

    def stop(self) -> None:
        if self.proc.poll() is None:
            self.proc.send_signal(signal.SIGTERM)
            try:
                self.proc.wait(timeout=30)
            except subprocess.TimeoutExpired:
                self.proc.kill()
                self.proc.wait(timeout=10)


@pytest.fixture(scope="module")
def model_dir(tmp_path_factory: pytest.TempPathFactory) -> Path:
    return make_model_dir(tmp_path_factory.mktemp("serve") / "model")


@pytest.fixture(scope="module")
def expected(model_dir: Path) -> dict[str, dict[str, Any]]:
    """Each text's row, predicted here without the server."""
    predictor = Predictor.load(model_dir)
    rows = predictor.rows(predictor.examples([{"_texts": [t]} for t in TEXTS]))
    return dict(zip(TEXTS, rows))


@pytest.fixture(scope="module")
def server(model_dir: Path, tmp_path_factory: pytest.TempPathFactory) -> Iterator[Server]:
    log = tmp_path_factory.mktemp("log") / "serve.log"
    srv = Server(model_dir, log, "--max-wait-ms", "20", "--max-inputs", "8", "--max-text-chars", "500",
                 "--max-body-bytes", "20000")  # fmt: skip
    try:
        srv.wait_ready()
        yield srv
    finally:
        srv.stop()


def _same_rows(got: list[dict[str, Any]], texts: list[str], expected: dict[str, dict[str, Any]]) -> None:
    assert [r["text"] for r in got] == texts
    for row, text in zip(got, texts):
        want = expected[text]
        assert row["label"] == want["label"]
        assert row["probabilities"] == pytest.approx(want["probabilities"], abs=1e-5)


def test_200_concurrent_requests_all_answered_in_order(server: Server, expected: dict) -> None:
    rng = random.Random(0)
    requests = [rng.sample(TEXTS, rng.randint(1, 4)) for _ in range(200)]

    async def load() -> list[Any]:
        limits = httpx.Limits(max_connections=200, max_keepalive_connections=200)
        async with httpx.AsyncClient(base_url=server.url, timeout=120.0, limits=limits) as client:
            before = (await client.get("/health")).json()
            responses = await asyncio.gather(*(client.post("/predict", json={"texts": t}) for t in requests))
            after = (await client.get("/health")).json()
            return [responses, after, before]

    responses, health, before = asyncio.run(load())
    assert [r.status_code for r in responses] == [200] * 200
    for response, texts in zip(responses, requests):
        _same_rows(response.json()["predictions"], texts, expected)
    assert health["pending"] == 0
    # concurrent requests shared model calls, and /health counts their inputs
    assert 0 < health["batches"] - before["batches"] < len(requests)
    assert health["inputs"] - before["inputs"] == sum(len(t) for t in requests)


def test_limits_and_bad_requests_get_4xx_saying_why(server: Server) -> None:
    post = lambda **kw: httpx.post(f"{server.url}/predict", timeout=30.0, **kw)  # noqa: E731
    r = post(content=b'{"texts": ["a film"', headers={"content-type": "application/json"})
    assert r.status_code == 400 and "not valid JSON" in r.json()["detail"]
    r = post(json={"texts": ["a " * 300]})
    assert r.status_code == 413 and "texts[0] has 600 characters" in r.json()["detail"]
    r = post(json={"texts": ["film"] * 9})
    assert r.status_code == 413 and "max_inputs" in r.json()["detail"]
    r = post(content=b'{"texts": ["' + b"a" * 30000 + b'"]}', headers={"content-type": "application/json"})
    assert r.status_code == 413 and "max_body_bytes" in r.json()["detail"]

    def chunks() -> Iterator[bytes]:  # no Content-Length: the limit counts the streamed bytes
        yield b'{"texts": ["'
        for _ in range(30):
            yield b"a" * 1000
        yield b'"]}'

    r = post(content=chunks(), headers={"content-type": "application/json"})
    assert r.status_code == 413 and "max_body_bytes" in r.json()["detail"]
    r = post(json={"texts": [3]})
    assert r.status_code == 422 and r.json()["detail"].startswith("texts.0:")
    r = post(json={"pairs": [["a", "b"]]})
    assert r.status_code == 422 and "does not take pairs" in r.json()["detail"]
    r = post(json={"texts": []})
    assert r.status_code == 422 and "empty" in r.json()["detail"]
    r = post(json={"items": [{"txt": "a"}]})
    assert r.status_code == 422 and "no field 'text'" in r.json()["detail"]
    assert post(json={"items": [{"text": "dull"}]}).status_code == 200


def test_info_health_and_openapi(server: Server) -> None:
    info = httpx.get(f"{server.url}/info").json()
    assert info["kind"] == "classification" and info["labels"] == ["neg", "pos"]
    assert info["max_seq_length"] == 48 and info["backend"] in (
        "torch",
        "onnx",
    )  # what auto chose, not "auto"
    assert info["serve"]["max_wait_ms"] == 20 and info["serve"]["max_inputs"] == 8
    assert httpx.get(f"{server.url}/health").json()["status"] == "ok"
    schema = httpx.get(f"{server.url}/openapi.json").json()
    assert "/predict" in schema["paths"] and "PredictRequest" in schema["components"]["schemas"]


def test_sigterm_finishes_the_requests_in_flight(model_dir: Path, expected: dict, tmp_path: Path) -> None:
    """Requests wait in the batcher (2 s window) when SIGTERM arrives; every one is still answered."""
    srv = Server(model_dir, tmp_path / "serve.log", "--max-wait-ms", "2000", "--max-batch", "64")
    try:
        srv.wait_ready()
        requests = [[TEXTS[i % len(TEXTS)], TEXTS[(3 * i) % len(TEXTS)]] for i in range(20)]

        async def scenario() -> list[Any]:
            async with httpx.AsyncClient(base_url=srv.url, timeout=60.0) as client:
                tasks = [asyncio.create_task(client.post("/predict", json={"texts": t})) for t in requests]
                for _ in range(400):  # until the server holds all 40 inputs (at most 20 s)
                    if (await client.get("/health")).json()["pending"] == 40:
                        break
                    await asyncio.sleep(0.05)
                else:
                    pytest.fail("the requests never reached the server")
                srv.proc.send_signal(signal.SIGTERM)
                return await asyncio.gather(*tasks)

        responses = asyncio.run(scenario())
        assert [r.status_code for r in responses] == [200] * len(requests)
        for response, texts in zip(responses, requests):
            _same_rows(response.json()["predictions"], texts, expected)
        # uvicorn re-raises the signal after its graceful shutdown: killed by SIGTERM, or exit 0
        assert srv.proc.wait(timeout=30) in (0, -signal.SIGTERM)
        log = srv.log.read_text()
        assert "Application shutdown complete" in log and "shut down after 1 batches" in log
        with pytest.raises(httpx.TransportError):
            httpx.get(f"{srv.url}/health", timeout=2.0)
    finally:
        srv.stop()
        if os.environ.get("ALBERT_SHOW_SERVE_LOG"):
            print(srv.log.read_text())
