"""Serving a fine-tuned model: batch prediction and the HTTP server.

* `albert_lm.serve.predictor`: `Predictor`, a fine-tuned model (torch fp32 / int8 or ONNX Runtime) that
  labels a batch of inputs in one go, for `albert serve` and `albert predict`;
* `albert_lm.serve.batcher`: dynamic micro-batching of concurrent requests;
* `albert_lm.serve.app`: the FastAPI application and its uvicorn runner (the ``serve`` extra);
* `albert_lm.serve.schema`: the request and response bodies.
"""
