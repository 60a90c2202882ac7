"""`albert serve` drops the inputs of clients that have gone: requests whose connection closes before their
answer are not computed (the batcher's inputs counter, read from /health), and the server keeps answering."""

from __future__ import annotations

import json
import socket
import time
from pathlib import Path

import pytest
from inference_support import make_model_dir
from test_http import TEXTS, Server

httpx = pytest.importorskip("httpx")

CLIENTS, INPUTS = 32, 64  # 2,048 inputs, one per model call


@pytest.fixture(scope="module")
def model_dir(tmp_path_factory: pytest.TempPathFactory) -> Path:
    return make_model_dir(tmp_path_factory.mktemp("serve_abandoned") / "model")


@pytest.mark.slow
def test_inputs_of_clients_that_went_are_not_computed(model_dir: Path, tmp_path: Path) -> None:
    srv = Server(model_dir, tmp_path / "serve.log", "--max-batch", "1", "--max-wait-ms", "0")
    try:
        srv.wait_ready()
        body = json.dumps({"texts": [TEXTS[i % len(TEXTS)] for i in range(INPUTS)]}).encode()
        head = (f"POST /predict HTTP/1.1\r\nHost: x\r\nContent-Type: application/json\r\n"
                f"Content-Length: {len(body)}\r\n\r\n").encode()  # fmt: skip
        socks = [socket.create_connection(("127.0.0.1", srv.port), timeout=30) for _ in range(CLIENTS)]
        for sock in socks:
            sock.sendall(head + body)
        deadline = time.monotonic() + 10
        while httpx.get(f"{srv.url}/health").json()["pending"] < INPUTS and time.monotonic() < deadline:
            time.sleep(0.01)  # the server holds the requests
        for sock in socks:  # every client goes
            sock.close()
        deadline = time.monotonic() + 120
        while (health := httpx.get(f"{srv.url}/health").json())["pending"] and time.monotonic() < deadline:
            time.sleep(0.05)
        assert health["pending"] == 0
        computed = health["inputs"]
        # what the model was running when the clients went, not the 2,048 they had sent
        assert computed < CLIENTS * INPUTS // 4, f"{computed} of {CLIENTS * INPUTS} abandoned inputs computed"

        answer = httpx.post(f"{srv.url}/predict", json={"texts": TEXTS[:2]}, timeout=60)  # still serving
        assert answer.status_code == 200 and len(answer.json()["predictions"]) == 2
        log = srv.log.read_text()
        assert "Traceback" not in log, log[-3000:]
    finally:
        srv.stop()
