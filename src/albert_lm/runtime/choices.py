"""The runtime's choice lists, free of torch so that the settings (`albert_lm.train.settings`) and the command
line can offer them without importing it. Each list is declared here once; the modules that act on a choice
import it from here."""

from __future__ import annotations

# "auto": bf16 where the device runs it natively (albert_lm.runtime.precision.resolve_precision), else fp32
PRECISIONS = ("auto", "fp32", "bf16", "fp16")
# the fp32 linear libraries (albert_lm.runtime.fp32_linear); "auto" measures them once per process
FP32_LINEAR_BACKENDS = ("torch", "onednn")
FP32_LINEARS = ("auto", *FP32_LINEAR_BACKENDS)
# attention of bf16 / fp16 CPU tensors (albert_lm.runtime.attention.cpu_attention); "auto" by the CPU, "sdpa"
# torch's SDPA as it is
CPU_ATTENTION_MODES = ("gemms", "fp32")
CPU_ATTENTIONS = ("auto", *CPU_ATTENTION_MODES, "sdpa")
