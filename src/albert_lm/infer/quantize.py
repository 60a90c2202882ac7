"""int8: dynamic quantization of the weight matrix products, in ONNX Runtime and in PyTorch.

Dynamic quantization stores each weight matrix as int8 with one scale and quantizes the activations
per batch at run time, so it needs no calibration data; the attention products (activation x
activation) stay in float.

ONNX Runtime: ``quantize_dynamic`` alone quantizes only the MatMuls whose weight is an initializer.
The dynamo exporter feeds most of them a ``Transpose`` of the initializer (``nn.Linear`` computes
``x W^T``), so plain ``quantize_dynamic`` converts 6 of albert-base's 50 weight MatMuls and the file
stays ~34 MB. ``quant_pre_process`` first folds those constant transposes (``skip_symbolic_shape``:
its symbolic shape inference does not follow the exporter's dynamic axes); then every weight MatMul
is quantized and albert-base is ~12 MB. `weight_matmul_coverage` counts both kinds of node, so a
partial quantization is seen, not assumed away.

PyTorch: `quantize_torch_int8` swaps every ``nn.Linear`` for torch.ao's dynamic int8 Linear. ALBERT's
shared blocks are single modules that the encoder applies at several depths (by index), so each is
quantized once and stays shared.
"""

from __future__ import annotations

import logging
import tempfile
import warnings
from dataclasses import dataclass
from pathlib import Path

from torch import nn

from albert_lm.infer.onnx import quiet_logging

#: ONNX ops that multiply by a quantized weight (dynamic and static quantization, com.microsoft too).
QUANTIZED_MATMULS = frozenset(
    {"MatMulInteger", "DynamicQuantizeMatMul", "MatMulIntegerToFloat", "QLinearMatMul", "QGemm"}
)
FLOAT_MATMULS = frozenset({"MatMul", "Gemm"})


@dataclass(frozen=True)
class MatmulCoverage:
    """Weight matrix products of an ONNX graph: how many run on int8 weights."""

    quantized: int
    """Nodes of `QUANTIZED_MATMULS`."""
    float_weight: int
    """Float MatMul / Gemm nodes with a constant operand (a weight left in float)."""

    @property
    def total(self) -> int:
        return self.quantized + self.float_weight

    @property
    def fraction(self) -> float:
        return self.quantized / self.total if self.total else 0.0


def weight_matmul_coverage(path: str | Path) -> MatmulCoverage:
    """Count the weight MatMuls of an ONNX file and how many of them are quantized.

    An operand is constant when it is an initializer, a ``Constant`` output, or computed from constants
    only (the exporter's ``Transpose`` of a weight); a float MatMul / Gemm with a constant operand is a
    weight product left in float. Activation x activation products (attention scores) count as neither.
    """
    import onnx

    graph = onnx.load(str(path), load_external_data=False).graph
    constant = {t.name for t in graph.initializer}
    quantized = float_weight = 0
    for node in graph.node:  # ONNX graphs are topologically sorted
        inputs = [i for i in node.input if i]
        if node.op_type == "Constant" or (inputs and all(i in constant for i in inputs)):
            constant.update(node.output)
        elif node.op_type in QUANTIZED_MATMULS:
            quantized += 1
        elif node.op_type in FLOAT_MATMULS and any(i in constant for i in inputs):
            float_weight += 1
    return MatmulCoverage(quantized, float_weight)


def quantize_onnx_int8(src: str | Path, dst: str | Path) -> MatmulCoverage:
    """Write ``dst``: ``src`` with int8 weights (``quant_pre_process`` then ``quantize_dynamic``, signed
    int8 weights); returns the coverage of ``dst``."""
    from onnxruntime.quantization import QuantType, quantize_dynamic
    from onnxruntime.quantization.shape_inference import quant_pre_process

    with tempfile.TemporaryDirectory() as tmp, quiet_logging("", level=logging.WARNING):
        pre = Path(tmp) / "preprocessed.onnx"
        quant_pre_process(str(src), str(pre), skip_symbolic_shape=True)
        quantize_dynamic(str(pre), str(dst), weight_type=QuantType.QInt8)
    return weight_matmul_coverage(dst)


def quantize_torch_int8(model: nn.Module) -> nn.Module:
    """``model`` (in eval mode, changed in place) with every ``nn.Linear`` replaced by torch.ao's dynamic
    int8 Linear; returns it. The MLM decoder, tied to the word embeddings (``F.linear``), stays float."""
    from torch.ao.quantization import quantize_dynamic

    model.eval()
    with warnings.catch_warnings():  # torch.ao's eager-mode quantization warns that it is deprecated
        warnings.simplefilter("ignore")
        quantize_dynamic(model, {nn.Linear}, inplace=True)
    return model


def int8_linear_count(model: nn.Module) -> tuple[int, int]:
    """(distinct dynamic int8 Linear modules, distinct float ``nn.Linear`` modules left) of ``model``."""
    from torch.ao.nn.quantized.dynamic import Linear as DynamicLinear

    modules = {id(m): m for m in model.modules()}.values()
    int8 = sum(isinstance(m, DynamicLinear) for m in modules)
    left = sum(type(m) is nn.Linear for m in modules)
    return int8, left
