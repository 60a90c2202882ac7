"""Prediction over any backend: torch eager or torch int8 (`runners`), ONNX Runtime (`onnx`, `onnx_files`,
`quantize`, `graph`), the automatic choice between them (`backend`), the `Predictor` that `albert predict`,
`albert evaluate` and `albert serve` share (`predictor`) and the task metric of a labelled file (`labelled`).
Every backend runs through the tasks' evaluator (`albert_lm.tasks.evaluate`).
"""
