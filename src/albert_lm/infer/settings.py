"""`InferenceSettings`: how `albert evaluate`, `albert predict` and `albert serve` run a fine-tuned model (their
fields are the commands' flags, declared once; this module imports nothing heavy, so that ``--help`` starts
fast)."""

from __future__ import annotations

from dataclasses import dataclass

from albert_lm.train.settings import RunSettings

BACKENDS = ("auto", "torch", "onnx")
"""The inference backends: ``auto`` (measured, `albert_lm.infer.backend`), PyTorch, ONNX Runtime."""


@dataclass(frozen=True)
class InferenceSettings:
    """The model-running settings every inference command shares."""

    eval_batch_size: int = RunSettings.eval_batch_size
    """examples per forward pass, length-sorted (the same setting as fine-tuning's dev evaluation)"""
    max_seq_length: int | None = None
    """tokens per sequence (default: the value the model was fine-tuned with)"""
    device: str | None = None
    """torch backend: cpu | cuda | cuda:N (default: a GPU when there is one; the CPU for ONNX Runtime and int8)"""
    backend: str = "auto"
    """auto: on the CPU, the faster of PyTorch and ONNX Runtime for this model and machine that gives
    PyTorch's answers, measured once on a probe batch and cached (elsewhere PyTorch); torch: PyTorch; onnx:
    ONNX Runtime (a model directory without an export is exported first)"""
    int8: bool = False
    """int8 weights: torch.ao dynamic quantization (CPU) / model.int8.onnx; with backend auto the faster of
    the two here"""
    threads: int | None = None
    """intra-op threads of the backend (and of predict's tokenizer; default: the libraries' own)"""

    def __post_init__(self) -> None:
        """Checked once, at the boundary: one line naming the flag (``max_seq_length`` is checked against the
        model's position table when it loads: `albert_lm.finetune.rundir.load_finetuned`)."""
        if self.eval_batch_size < 1:
            raise ValueError(f"--eval-batch-size: must be at least 1, got {self.eval_batch_size}")
        if self.threads is not None and self.threads < 1:
            raise ValueError(f"--threads: must be at least 1, got {self.threads}")
        if self.backend not in BACKENDS:
            raise ValueError(f"--backend: one of {', '.join(BACKENDS)}, got {self.backend!r}")
