"""Which device a command runs on: the one rule for every workflow (training, prediction, serving)."""

from __future__ import annotations

import torch


def pick_device(device: str | torch.device | None = None, local_rank: int = 0) -> torch.device:
    """``device`` if given (``"cuda"`` means ``cuda:LOCAL_RANK``), else the local GPU when there is one, else
    the CPU."""
    if device is None or str(device) == "auto":
        device = "cuda" if torch.cuda.is_available() else "cpu"
    dev = torch.device(device)
    if dev.type == "cuda" and dev.index is None:
        dev = torch.device("cuda", local_rank)
    return dev


def default_device(device: str | None, backend: str = "torch", int8: bool = False) -> str | None:
    """The one device default of predict and serve: a GPU when there is one, but the CPU for ONNX Runtime and
    dynamic int8 (which run there only); a device given is checked against the backend."""
    if backend == "onnx" and device not in (None, "cpu"):
        raise ValueError(f"--device {device}: the onnx backend runs on the CPU; use --backend torch")
    if device is None and backend in ("torch", "auto") and not int8:
        return str(pick_device())
    return device
