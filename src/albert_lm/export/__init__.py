"""Deployable forms of a model: export-safe graphs, ONNX files, int8 weights, batch prediction backends.

* `albert_lm.export.graph`: task models as fixed-signature graphs for torch.export / torch.compile / ONNX;
* `albert_lm.export.onnx`: the ONNX export, ONNX Runtime sessions, parity and initializer checks;
* `albert_lm.export.quantize`: int8 dynamic quantization (ONNX Runtime and torch.ao) and its coverage;
* `albert_lm.export.runtime`: batch featurization and predict functions (torch fp32 / int8, ONNX Runtime);
* `albert_lm.export.labelled`: a task's labelled file and the task metric of a predict function on it;
* `albert_lm.export.pipeline`: ``albert export onnx``, model directory -> checked ONNX directory.

The heavy optional libraries (onnx, onnxruntime, onnxscript: the ``onnx`` extra) are imported inside the
functions that use them.
"""
