"""ONNX: export a task model (torch.onnx's dynamo exporter), run it with ONNX Runtime, and check both.

* `export_onnx`: the model's `albert_lm.infer.graph.InferenceGraph` through ``torch.onnx.export(...,
  dynamo=True)``: inputs ``input_ids`` / ``attention_mask`` / ``token_type_ids`` (+ ``p_mask``) with
  dynamic ``batch`` and ``sequence`` axes; each parameter becomes one initializer, so ALBERT's shared
  layers are stored once (the graph applies the same initializer at every layer).
* `initializer_stats`: what the file holds against the model's distinct parameters.
* `max_abs_diff`: ONNX Runtime against PyTorch on a padded batch, output by output.
* `load_session` / `run_session`: ONNX Runtime on the CPU with a given number of threads.

onnx, onnxruntime and onnxscript (the ``onnx`` extra) are imported inside the functions.
"""

from __future__ import annotations

import contextlib
import io
import logging
import warnings
from collections.abc import Iterator, Mapping
from pathlib import Path
from typing import Any

import numpy as np
import torch
from torch import nn

from albert_lm.infer.graph import InferenceGraph, config_of, dynamic_shapes, example_inputs

logger = logging.getLogger(__name__)

#: Largest |ONNX Runtime - PyTorch| accepted for an fp32 export (float32 reassociation in fused kernels
#: stays around 1e-6 for albert-base; a lost mask or a wrong weight is off by far more).
FP32_TOLERANCE = 1e-4


def export_onnx(model: nn.Module, path: str | Path, *, opset: int | None = None) -> InferenceGraph:
    """Write ``model`` as an ONNX file at ``path``; returns the traced `InferenceGraph` (its
    ``input_names`` / ``output_names`` are the graph's).

    Args:
        model: an albert model (any head of `albert_lm.model.HEADS`); put in eval mode.
        path: the ``.onnx`` file to write (a model over 2 GB gets its weights in a side file).
        opset: the ONNX opset; None: the exporter's default.
    """
    graph = InferenceGraph(model)
    example = example_inputs(model, batch=2, seq=min(16, config_of(model).max_position_embeddings))
    kwargs = {name: example[name] for name in graph.input_names}
    # the exporter reports its progress with print() and warns about optional torchvision ops; keep both
    # out of the command's output
    quiet = io.StringIO()
    with (
        warnings.catch_warnings(),  # e.g. that axes with equal constraints share one name
        contextlib.redirect_stdout(quiet),
        quiet_logging("torch.onnx", "onnxscript", "onnx_ir", level=logging.ERROR),
        torch.no_grad(),
    ):
        warnings.simplefilter("ignore")
        program = torch.onnx.export(
            graph,
            (),
            kwargs=kwargs,
            input_names=list(graph.input_names),
            output_names=list(graph.output_names),
            dynamic_shapes=dynamic_shapes(model, style="onnx"),
            opset_version=opset,
            dynamo=True,
        )
        assert program is not None
        _store_weights_once(program.model)
        program.save(str(path))
    logger.debug("torch.onnx: %s", quiet.getvalue().strip())
    return graph


@contextlib.contextmanager
def quiet_logging(*names: str, level: int = logging.WARNING) -> Iterator[None]:
    """Raise the named loggers (``""``: the root logger) to ``level`` for a while: the exporter and the
    quantizer log a line per pass or per tensor at INFO, which would bury the command's own output."""
    loggers = [logging.getLogger(name) for name in names]
    before = [lg.level for lg in loggers]
    for lg in loggers:
        lg.setLevel(max(lg.getEffectiveLevel(), level))
    try:
        yield
    finally:
        for lg, lvl in zip(loggers, before):
            lg.setLevel(lvl)


def _store_weights_once(model: Any) -> None:
    """Merge initializers with equal contents and drop the per-node stack traces, in place (an onnx_ir
    model).

    The exporter folds ``Transpose(W)`` of small weights into new initializers, one per use: a weight
    of a block shared by several layers is then stored once per layer (albert-tiny's file grew 5x). Its
    own merging pass stops at 1024 elements; here it runs without a limit (equal tensors are
    interchangeable in an inference graph). The stack traces are metadata only.
    """
    from onnx_ir.passes.common import ClearMetadataAndDocStringPass, DeduplicateInitializersPass

    DeduplicateInitializersPass(size_limit=2**62)(model)
    ClearMetadataAndDocStringPass()(model)


def opset_of(path: str | Path) -> int:
    """The default-domain opset version of an ONNX file."""
    import onnx

    model = onnx.load(str(path), load_external_data=False)
    return next(int(o.version) for o in model.opset_import if o.domain in ("", "ai.onnx"))


def initializer_stats(path: str | Path, model: nn.Module) -> dict[str, Any]:
    """Float weight initializers of the ONNX file against the distinct parameters of ``model``.

    Tensors of one element are left out on both sides (the exporter's scalar constants, such as the
    split attention scale). ``stored_once`` holds when the file's float weights take no more bytes than
    the model's distinct parameters (1% slack): a copy of the shared layers per layer would multiply
    them. The exporter may store fewer tensors than there are parameters: it merges equal ones (such as
    freshly initialized zero biases).
    """
    import onnx
    from onnx import numpy_helper

    onnx_model = onnx.load(str(path))
    floats = [
        numpy_helper.to_array(t)
        for t in onnx_model.graph.initializer
        if t.data_type == onnx.TensorProto.FLOAT and int(np.prod(t.dims)) > 1
    ]
    params = {p.data_ptr(): p for p in model.parameters() if p.numel() > 1}  # tied / shared tensors once
    init_bytes = int(sum(a.nbytes for a in floats))
    param_bytes = int(sum(p.numel() * p.element_size() for p in params.values()))
    return {
        "float_initializers": len(floats),
        "model_parameters": len(params),
        "initializer_bytes": init_bytes,
        "parameter_bytes": param_bytes,
        "stored_once": init_bytes <= 1.01 * param_bytes,
    }


class OnnxFileError(ValueError):
    """An ONNX file that ONNX Runtime cannot load (truncated, garbage); the message names the file."""


def load_session(path: str | Path, threads: int | None = None) -> Any:
    """An ONNX Runtime CPU session (all graph optimizations); ``threads``: intra-op threads (None: ORT's
    default, one per physical core). Its threads sleep between operators instead of spinning (ORT's
    ``session.intra_op.allow_spinning``): spinning threads took the CPU that `albert serve`'s event loop
    needed between batches, and on 2 shared cores (benchmarks/bench_serve.py's model, albert-small) they
    cost ~1.6x the CPU per sentence offline at the same sentences/s."""
    import onnxruntime as ort

    options = ort.SessionOptions()
    options.graph_optimization_level = ort.GraphOptimizationLevel.ORT_ENABLE_ALL
    if threads:
        options.intra_op_num_threads = int(threads)
        options.inter_op_num_threads = 1
    options.log_severity_level = 3  # errors only
    options.add_session_config_entry("session.intra_op.allow_spinning", "0")
    try:
        return ort.InferenceSession(str(path), options, providers=["CPUExecutionProvider"])
    except Exception as e:  # noqa: BLE001 - ORT's errors (InvalidProtobuf, Fail, ...) derive from Exception only
        reason = " ".join(str(e).split())[:300] or type(e).__name__
        raise OnnxFileError(
            f"{path}: not a loadable ONNX model ({reason}); export it again with `albert export onnx`"
        ) from None


def run_session(session: Any, batch: Mapping[str, Any]) -> dict[str, np.ndarray]:
    """Run ``session`` on the graph inputs found in ``batch`` (tensors or arrays; other keys, such as
    labels, are ignored); returns output name -> array."""
    feed = {}
    for node in session.get_inputs():
        value = batch[node.name]
        array = value.numpy() if torch.is_tensor(value) else np.asarray(value)
        feed[node.name] = array.astype(np.int64, copy=False)
    names = [o.name for o in session.get_outputs()]
    return dict(zip(names, session.run(names, feed)))


def max_abs_diff(
    model: nn.Module, session: Any, batch: Mapping[str, torch.Tensor] | None = None
) -> dict[str, float]:
    """Per output, the largest |ONNX Runtime - PyTorch| on ``batch`` (default: a padded 3 x 37 batch,
    `albert_lm.infer.graph.example_inputs`); index outputs (the SQuAD 2.0 beam) count mismatches."""
    graph = InferenceGraph(model)
    if batch is None:
        seq = min(37, config_of(model).max_position_embeddings)
        batch = example_inputs(model, batch=3, seq=seq, choices=4, seed=1)
    with torch.no_grad():
        want = graph(**{name: batch[name] for name in graph.input_names})
    got = run_session(session, batch)
    diffs = {}
    for name, expected in zip(graph.output_names, want):
        ours = got[name]
        if expected.dtype in (torch.int64, torch.int32):
            diffs[name] = float((ours != expected.numpy()).sum())
        else:
            diffs[name] = float(np.abs(ours.astype(np.float64) - expected.double().numpy()).max())
    return diffs
