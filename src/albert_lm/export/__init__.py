"""Formats a model is taken away in: an ONNX model directory with its checks and report
(`albert_lm.export.pipeline`, ``albert export onnx``) and a sentence-transformers directory
(`albert_lm.export.sentence_transformers`). The ONNX graph itself, its int8 quantization and the sessions that
run it are the inference backend's (`albert_lm.infer.onnx`, `albert_lm.infer.onnx_files`).
"""
