"""`albert serve`: a fine-tuned model behind HTTP (FastAPI on uvicorn), with dynamic micro-batching.

Endpoints:

* ``POST /predict`` with ``{"texts": [...]}`` (single-text classification / regression),
  ``{"pairs": [[a, b], ...]}`` (sentence pairs; SQuAD: ``[question, context]``) or ``{"items": [{...}]}``
  (JSON objects as `albert predict` reads them, e.g. multiple choice ``{"context", "question",
  "options"}``) -> ``{"predictions": [row, ...]}``, one row per input in the request's order (the rows
  of `albert predict`);
* ``GET /health`` (``{"status": "ok", "pending": inputs in flight, "batches": model calls so far,
  "inputs": their inputs}``), ``GET /info`` (model, task, labels, sequence length, backend, batching,
  limits), ``GET /docs`` (OpenAPI).

Inputs of concurrent requests are batched together (`albert_lm.serve.batcher.MicroBatcher`: up to
``max_batch`` inputs, waiting at most ``max_wait_ms`` for them); the model runs in a worker thread, best the
one that loaded it (`model_thread`).
Limits answer with a 4xx that says which limit: 413 for a body over ``max_body_bytes``, more than
``max_inputs`` inputs or a text over ``max_text_chars`` characters; 408 for a body that takes longer
than ``body_timeout_s`` to arrive; 400 for a body that is not JSON; 422 for JSON of the wrong shape; 503
when more than ``max_pending`` inputs wait. On SIGTERM / SIGINT uvicorn stops accepting connections and
the requests in flight are computed for up to ``shutdown_timeout_s``; inputs still waiting then are
answered 503 (shutting down), and the process exits (`run_server`). A request whose client disconnects
before its answer is cancelled (`unless_disconnected`): its inputs still queued are dropped, not computed.

FastAPI, pydantic and uvicorn (the ``serve`` extra) are imported when the app is built.
"""

# No `from __future__ import annotations`: FastAPI reads the endpoints' annotations at run time, and
# the request model is imported inside `create_app`, where a string annotation could not be resolved.
import asyncio
import concurrent.futures
import contextlib
import importlib.util
import logging
from collections.abc import AsyncIterator, Awaitable, Iterable, Sequence
from dataclasses import asdict
from typing import Any, TypeVar

from albert_lm._io import first_non_finite_json
from albert_lm.infer.predictor import Predictor
from albert_lm.serve.batcher import BatcherClosed, MicroBatcher
from albert_lm.serve.config import ServeConfig

logger = logging.getLogger(__name__)
T = TypeVar("T")
CLIENT_CLOSED = 499
"""The status logged for a request whose client went before its answer (nginx's "client closed request")."""


class RequestError(Exception):
    """A request the server refuses; ``status`` is its HTTP status, the message says why."""

    def __init__(self, status: int, message: str) -> None:
        super().__init__(message)
        self.status = status


def finite_rows(rows: Any) -> Any:
    """``rows``, refused (500) when they hold NaN or infinity: JSON has neither, and an answer must never
    carry one with a 200."""
    bad = first_non_finite_json(rows)
    if bad is not None:
        raise RequestError(
            500, f"the model produced a non-finite value (NaN or infinity) at predictions{bad}"
        )
    return rows


def _strings(value: Any, where: str) -> Iterable[tuple[str, str]]:
    """(where, text) of every string inside ``value`` (lists and objects walked)."""
    if isinstance(value, str):
        yield where, value
    elif isinstance(value, list):
        for i, v in enumerate(value):
            yield from _strings(v, f"{where}[{i}]")
    elif isinstance(value, dict):
        for k, v in value.items():
            yield from _strings(v, f"{where}.{k}")


def request_records(body: dict[str, Any], predictor: Predictor, config: ServeConfig) -> list[dict[str, Any]]:
    """`albert predict` records of a request body (exactly one of texts / pairs / items), limits checked.

    Raises:
        RequestError: 422 for a body of the wrong shape for this model, 413 over a limit.
    """
    given = [k for k in ("texts", "pairs", "items") if body.get(k) is not None]
    if len(given) != 1:
        raise RequestError(422, 'give exactly one of "texts", "pairs" or "items"')
    field = given[0]
    inputs = body[field]
    if not inputs:
        raise RequestError(422, f'"{field}" is empty')
    if len(inputs) > config.max_inputs:
        raise RequestError(
            413, f"{len(inputs)} {field}, more than the limit of {config.max_inputs} per request (max_inputs)"
        )
    for where, text in _strings(inputs, field):
        if len(text) > config.max_text_chars:
            raise RequestError(
                413, f"{where} has {len(text)} characters, more than the limit of {config.max_text_chars} "
                "(max_text_chars)",
            )  # fmt: skip
    accepted = predictor.task.request_fields()  # the task says what it takes
    if field not in accepted:
        what = {"texts": "single texts", "pairs": "pairs"}.get(field, field)
        wanted = " or ".join(f'"{f}"' for f in accepted)
        raise RequestError(422, f"this model ({predictor.task.kind}) does not take {what}; send {wanted}")
    if field == "items":
        return [dict(item) for item in inputs]
    return [{"_texts": [t] if field == "texts" else list(t)} for t in inputs]


class BodyLimit:
    """ASGI middleware: answers 413 (JSON, saying the limit) to a request body over ``limit`` bytes, from
    its Content-Length, or while a chunked body streams in, and 408 to a body that has not arrived within
    ``timeout_s`` (a client trickling its upload would hold the connection forever); both as an
    HTTPException, which FastAPI's body parsing passes through to its handler."""

    def __init__(self, app: Any, limit: int, timeout_s: float = float("inf")) -> None:
        self.app = app
        self.limit = limit
        self.timeout_s = timeout_s

    def _message(self, size: int) -> str:
        return f"the request body has {size}+ bytes, more than the limit of {self.limit} (max_body_bytes)"

    async def __call__(self, scope: dict[str, Any], receive: Any, send: Any) -> None:
        if scope["type"] != "http":
            await self.app(scope, receive, send)
            return
        import asyncio

        from starlette.exceptions import HTTPException
        from starlette.responses import JSONResponse

        length = dict(scope.get("headers") or []).get(b"content-length", b"")
        if self.limit and length.isdigit() and int(length) > self.limit:
            response = JSONResponse({"detail": self._message(int(length))}, status_code=413)
            await response(scope, receive, send)
            return
        received = 0
        complete = False
        deadline = asyncio.get_running_loop().time() + self.timeout_s

        async def limited_receive() -> dict[str, Any]:
            nonlocal received, complete
            if complete:  # after the body: waiting for a disconnect is not the upload's time
                return dict(await receive())
            try:
                remaining = max(0.0, deadline - asyncio.get_running_loop().time())
                message: dict[str, Any] = await asyncio.wait_for(receive(), remaining)
            except asyncio.TimeoutError:
                raise HTTPException(
                    408, f"the request body did not arrive within {self.timeout_s:g} s (body_timeout_s)"
                ) from None
            if message["type"] == "http.request":
                received += len(message.get("body", b""))
                complete = not message.get("more_body", False)
                if self.limit and received > self.limit:
                    raise HTTPException(413, self._message(received))
            return message

        await self.app(scope, limited_receive, send)


class ClientGone(RequestError):
    """The client of a request disconnected before its answer (the answer, `CLIENT_CLOSED`, reaches no one)."""


async def unless_disconnected(receive: Any, work: Awaitable[T]) -> T:
    """``await work``, cancelled as soon as the client disconnects (the ASGI ``receive`` gives
    ``http.disconnect``): its inputs still queued in the batcher are then dropped, not computed (a
    request's handler is not cancelled by the server when its client goes).

    Raises:
        ClientGone: the client went first.
    """
    task = asyncio.ensure_future(work)

    async def disconnected() -> None:
        while (await receive()).get("type") != "http.disconnect":
            pass

    watch = asyncio.ensure_future(disconnected())
    try:
        await asyncio.wait({task, watch}, return_when=asyncio.FIRST_COMPLETED)
    except BaseException:  # this request cancelled (shutdown): its work too
        task.cancel()
        raise
    finally:
        watch.cancel()
    if not task.done():
        task.cancel()  # its inputs still queued are dropped by the batcher
        raise ClientGone(CLIENT_CLOSED, "the client disconnected")
    return task.result()


def model_thread() -> concurrent.futures.ThreadPoolExecutor:
    """One thread for all of the model's work: load the `Predictor` in it, then serve with it
    (``create_app(..., executor=)``).

    Why: torch's OpenMP (libgomp) gives each thread that runs a parallel op a team of its own. A model
    loaded in the main thread and run in the batcher's thread leaves two teams, more libgomp threads than
    cores on a small machine, and libgomp then waits at each op's barrier with 100 spins instead of 300,000
    before it sleeps (its ``gomp_throttled_spin_count_var``). Measured under `benchmarks/bench_serve.py`
    at 32 clients (albert-base fp32, 2 threads, 2 cores; /proc/PID/task/*/status over 10 s): the two
    compute threads slept 320-610 times a second each and had 89% of the cores; loaded and run in one
    thread, 1-3 times a second and 100% (two runs each).
    """
    return concurrent.futures.ThreadPoolExecutor(1, thread_name_prefix="albert-model")


def validation_error(errors: Sequence[Any]) -> tuple[str, int]:
    """The answer to a body FastAPI could not validate: 400 for JSON that does not parse, else 422 naming
    the first wrong field."""
    if any(e.get("type") == "json_invalid" for e in errors):
        reason = next((e.get("ctx", {}).get("error") for e in errors if e.get("ctx")), "JSON decode error")
        return f"the body is not valid JSON: {reason}", 400
    first = errors[0]
    where = ".".join(str(p) for p in first.get("loc", ())[1:]) or "body"
    return f"{where}: {first.get('msg')}", 422


def create_app(
    predictor: Predictor,
    config: ServeConfig | None = None,
    executor: concurrent.futures.ThreadPoolExecutor | None = None,
) -> Any:
    """The FastAPI application serving ``predictor`` (see the module docstring); the model runs in
    ``executor`` (one thread, the one that loaded ``predictor``: `model_thread`) or a new thread."""
    from fastapi import FastAPI, Request
    from fastapi.exceptions import RequestValidationError
    from fastapi.responses import JSONResponse

    from albert_lm.serve import schema

    config = config or ServeConfig()
    batcher: MicroBatcher[Any, dict[str, Any]] = MicroBatcher(
        lambda examples: predictor.rows(examples), config.max_batch, config.max_wait_ms / 1000, executor
    )

    @contextlib.asynccontextmanager
    async def lifespan(app: Any) -> AsyncIterator[None]:
        batcher.start()
        yield
        await batcher.close()  # uvicorn has let the requests in flight finish; nothing is queued
        logger.info("shut down after %d batches", batcher.batches)

    app = FastAPI(
        title="albert serve",
        description=f"{predictor.describe().get('task')} ({predictor.task.kind}) predictions",
        lifespan=lifespan,
    )

    @app.exception_handler(RequestValidationError)
    async def invalid(request: Request, exc: RequestValidationError) -> JSONResponse:
        detail, status = validation_error(exc.errors())
        return JSONResponse({"detail": detail}, status_code=status)

    @app.exception_handler(RequestError)
    async def refused(request: Request, exc: RequestError) -> JSONResponse:
        return JSONResponse({"detail": str(exc)}, status_code=exc.status)

    @app.post("/predict", response_model=schema.PredictResponse)
    async def predict(req: schema.PredictRequest, request: Request) -> dict[str, Any]:
        """Predictions for the texts, pairs or items of the request, in its order."""
        from albert_lm.tasks.base import TaskDataError

        records = request_records(req.model_dump(), predictor, config)
        if batcher.pending + len(records) > config.max_pending:
            raise RequestError(
                503, f"{batcher.pending} inputs are waiting (max_pending {config.max_pending})"
            )
        try:
            examples = predictor.examples(records, source="request")
            rows = await unless_disconnected(request.receive, batcher.submit(examples))
        except (TaskDataError, ValueError) as e:
            raise RequestError(422, str(e)) from None
        except BatcherClosed as e:
            raise RequestError(503, str(e)) from None
        return {"predictions": finite_rows(rows)}

    @app.get("/health")
    async def health() -> dict[str, Any]:
        """Liveness, how many inputs are in flight, and the model calls (batches) and their inputs so far."""
        return {
            "status": "ok",
            "pending": batcher.pending,
            "batches": batcher.batches,
            "inputs": batcher.inputs,
        }

    @app.get("/info")
    async def info() -> dict[str, Any]:
        """The model, its task and labels, the backend, batching and the request limits."""
        return {**predictor.describe(), "serve": asdict(config)}

    app.add_middleware(BodyLimit, limit=config.max_body_bytes, timeout_s=config.body_timeout_s)
    app.state.batcher = batcher
    return app


def run_server(
    predictor: Predictor,
    config: ServeConfig,
    executor: concurrent.futures.ThreadPoolExecutor | None = None,
) -> None:
    """Serve until SIGTERM / SIGINT (uvicorn, one process; the model runs in ``executor``, the thread that
    loaded it: `model_thread`).

    The shutdown is bounded: at the signal the batcher stops taking inputs, and ``shutdown_timeout_s``
    later fails those still queued (503, `MicroBatcher.expire_after`); uvicorn waits that long plus
    `SHUTDOWN_GRACE_S` (the batch running at the deadline, the 503s sent) before it cancels what is left.
    Before, uvicorn cancelled the waiting requests (500 and a traceback each) and the lifespan's drain then
    computed them all anyway, long after the timeout.
    """
    import asyncio

    import uvicorn

    app = create_app(predictor, config, executor)
    batcher = app.state.batcher
    # uvicorn's "auto" takes these when installed (the serve extra): the pure-Python h11 parser cost the event
    # loop ~0.6 ms of CPU per request (cProfile of this server at 32 clients), CPU the model's threads lack
    http = (
        "httptools" if importlib.util.find_spec("httptools") else "h11 (pure Python: pip install httptools)"
    )
    event_loop = "uvloop" if importlib.util.find_spec("uvloop") else "asyncio (pip install uvloop)"
    logger.info("HTTP parser: %s; event loop: %s", http, event_loop)
    loop: list[asyncio.AbstractEventLoop] = []

    class Server(uvicorn.Server):
        def handle_exit(self, sig: int, frame: Any) -> None:
            if not self.should_exit and loop:  # the first signal starts the clock
                loop[0].call_soon_threadsafe(batcher.expire_after, config.shutdown_timeout_s)
            super().handle_exit(sig, frame)

        async def startup(self, sockets: Any = None) -> None:
            loop.append(asyncio.get_running_loop())
            await super().startup(sockets)

    server = Server(
        uvicorn.Config(
            app,
            host=config.host,
            port=config.port,
            log_level="info",
            access_log=False,
            timeout_graceful_shutdown=config.shutdown_timeout_s + SHUTDOWN_GRACE_S,  # type: ignore[arg-type]
        )
    )
    server.run()


SHUTDOWN_GRACE_S = 2.0
"""After ``shutdown_timeout_s``, how long uvicorn still waits: the batch running at the deadline finishes
and the 503 answers of the expired inputs go out."""
