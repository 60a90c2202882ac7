"""`albert serve` under a shutdown it cannot finish in time, and a client that never finishes its upload
(issue 22 item 7): clear 503 / 408 answers and a bounded exit, never a 500 with a server traceback."""

from __future__ import annotations

import asyncio
import signal
import socket
import time
from pathlib import Path
from typing import Any

import pytest
from inference_support import make_model_dir
from test_http import TEXTS, Server

httpx = pytest.importorskip("httpx")


@pytest.fixture(scope="module")
def model_dir(tmp_path_factory: pytest.TempPathFactory) -> Path:
    return make_model_dir(tmp_path_factory.mktemp("serve") / "model")


def test_a_shutdown_longer_than_its_timeout_answers_503_and_exits_on_time(
    model_dir: Path, tmp_path: Path
) -> None:
    """More work in flight than --shutdown-timeout-s allows (4096 inputs, one per model call, 0.25 s: a quiet
    AMX machine computed all of 1024 inputs within 1 s): what is
    computed by the deadline is answered 200, the rest 503 saying why, and the server exits soon after
    the deadline. It used to cancel the waiting requests (500 and a traceback each) and then compute them
    all anyway, exiting seconds later."""
    timeout_s = 0.25
    srv = Server(model_dir, tmp_path / "serve.log", "--max-batch", "1", "--max-wait-ms", "0",
                 "--shutdown-timeout-s", str(timeout_s))  # fmt: skip
    requests = [[TEXTS[(i + j) % len(TEXTS)] for j in range(64)] for i in range(64)]
    try:
        srv.wait_ready()

        async def scenario() -> tuple[list[Any], float]:
            limits = httpx.Limits(max_connections=len(requests) + 1)
            async with httpx.AsyncClient(base_url=srv.url, timeout=120.0, limits=limits) as client:
                tasks = [asyncio.create_task(client.post("/predict", json={"texts": t})) for t in requests]
                for _ in range(600):  # until the server holds most of the inputs
                    if (await client.get("/health")).json()["pending"] >= 3000:
                        break
                    await asyncio.sleep(0.02)
                else:
                    pytest.fail("the requests never piled up in the server")
                srv.proc.send_signal(signal.SIGTERM)
                sent = time.monotonic()
                return await asyncio.gather(*tasks), sent

        responses, sent = asyncio.run(scenario())
        srv.proc.wait(timeout=60)
        exited_after = time.monotonic() - sent
        codes = [r.status_code for r in responses]
        assert set(codes) <= {200, 503}, codes
        assert 503 in codes  # the work did not fit the timeout
        refused = next(r for r in responses if r.status_code == 503).json()["detail"]
        assert "shutting down" in refused and "shutdown_timeout_s" in refused
        log = srv.log.read_text()
        assert "Traceback" not in log and "Cancel" not in log, log[-3000:]
        # the deadline, the grace for the running batch and the 503s (2 s), and slack for a loaded machine
        assert exited_after < timeout_s + 2.0 + 3.0, f"exited {exited_after:.1f} s after SIGTERM"
    finally:
        srv.stop()


def test_a_body_that_never_finishes_arriving_gets_408(model_dir: Path, tmp_path: Path) -> None:
    srv = Server(model_dir, tmp_path / "serve.log", "--body-timeout-s", "1")
    try:
        srv.wait_ready()
        with socket.create_connection(("127.0.0.1", srv.port), timeout=30) as sock:
            head = b"POST /predict HTTP/1.1\r\nHost: x\r\nContent-Type: application/json\r\nContent-Length: 100\r\n\r\n"
            sock.sendall(head + b'{"texts": ["a wi')  # 16 of the 100 bytes, then nothing
            started = time.monotonic()
            answer, waited = "", None
            while "body_timeout_s" not in answer:  # the head and the body may come in two packets
                chunk = sock.recv(4096).decode()
                waited = waited if waited is not None else time.monotonic() - started
                if not chunk:
                    break
                answer += chunk
        assert answer.startswith("HTTP/1.1 408"), answer
        # 1 s asked; without the timeout the recv would wait for the socket's 30 s and raise. The bound is
        # loose on purpose: on a loaded machine (load 13 on 2 cores) the server answered late, not wrongly
        assert "body_timeout_s" in answer and waited is not None and waited < 25
        assert httpx.get(f"{srv.url}/health", timeout=5).json()["status"] == "ok"  # still serving
    finally:
        srv.stop()
