"""`albert serve`: a fine-tuned model behind HTTP with dynamic micro-batching (see `albert_lm.serve.app`)."""

from __future__ import annotations

import argparse

HELP = "serve a fine-tuned model over HTTP (FastAPI + uvicorn) with dynamic micro-batching"
DESCRIPTION = """Serve a fine-tuned model (run directory, model directory or `albert export onnx` directory).

  albert serve --model RUN_DIR                            # the fastest backend here, on 127.0.0.1:8000
  albert serve --model RUN_DIR --int8 --threads 2         # the faster int8: torch dynamic or ONNX Runtime
  albert serve --model ONNX_DIR --backend onnx --int8     # ONNX Runtime on model.int8.onnx
  curl -s localhost:8000/predict -H 'content-type: application/json' -d '{"texts": ["a gorgeous film"]}'

POST /predict takes {"texts": [...]}, {"pairs": [[a, b], ...]} (sentence pairs; SQuAD question, context) or
{"items": [{...}]} (multiple choice: context, question, options) and answers {"predictions": [...]} in the
request's order. GET /health, GET /info, GET /docs (OpenAPI). Concurrent requests share model calls of up to
--max-batch inputs, waiting at most --max-wait-ms for them. SIGTERM finishes the requests in flight."""


def add_arguments(parser: argparse.ArgumentParser) -> None:
    from albert_lm.cli.options import add_dataclass_flags, add_inference_flags, add_model_flag
    from albert_lm.serve.config import ServeConfig

    add_model_flag(parser, "run directory, model directory or ONNX directory", positional=True)
    parser.add_argument(
        "--checkpoint", choices=("best", "last"), default="best", help="which checkpoint of a run"
    )
    add_inference_flags(parser, exclude=("eval_batch_size",))  # the forward batch is --max-batch
    add_dataclass_flags(parser.add_argument_group("server"), ServeConfig)


def run(args: argparse.Namespace) -> int:
    from albert_lm.cli.options import MissingExtra, from_positional, given_values, inference_settings
    from albert_lm.infer.predictor import Predictor
    from albert_lm.runtime.device import default_device
    from albert_lm.serve.app import model_thread, run_server
    from albert_lm.serve.config import ServeConfig

    # errors are raised: `albert_lm.cli.main` prints them as one line and exits 1
    from_positional(args, "model", "--model", "MODEL_DIR")
    config = ServeConfig(**given_values(args, ServeConfig))
    run = inference_settings(args)
    executor = model_thread()  # loads the model and runs it (see there why one thread)
    try:
        predictor = executor.submit(
            Predictor.load,
            args.model,
            backend=run.backend,
            int8=run.int8,
            checkpoint=args.checkpoint,
            threads=run.threads,
            max_seq_length=run.max_seq_length,
            batch_size=config.max_batch,
            device=default_device(run.device, run.backend, run.int8),
        ).result()
    except ImportError as e:
        extra = "onnx" if run.backend == "onnx" else "serve"
        raise MissingExtra(f"{e.name or e} is missing; pip install 'albert-lm[{extra}]'") from e
    try:
        run_server(predictor, config, executor)
    except ImportError as e:
        raise MissingExtra(f"{e.name or e} is missing; pip install 'albert-lm[serve]'") from e
    return 0
