"""Serving a fine-tuned model over HTTP: the FastAPI application and its uvicorn runner (`albert_lm.serve.app`,
the ``serve`` extra), dynamic micro-batching of concurrent requests (`albert_lm.serve.batcher`) and the request
and response bodies (`albert_lm.serve.schema`). The model behind it is `albert_lm.infer.predictor.Predictor`.
"""
