"""Training state (optimizer, scheduler, GradScaler, RNG, data position) stored without pickle.

What a checkpoint must keep besides the model is a tree of dicts, lists, tuples, numbers, strings, tensors
and numpy arrays (numpy's RNG state). `save_state` writes the tensors to ``NAME.safetensors`` and the rest
to ``NAME.json``, where a tensor appears as ``{"$tensor": "t12"}``; `load_state` reads the two back.
Neither file can make the reader run code, unlike a pickle: a crafted ``trainer.pt`` unpickled in full
(``torch.load`` with weights_only off) runs whatever its ``__reduce__`` asks for.

JSON has no tuples, no non-string keys and no NaN, so these are tagged objects: ``{"$tuple": [...]}``,
``{"$dict": [[key, value], ...]}`` (the optimizer's per-parameter state is keyed by index),
``{"$float": "nan"}``; a numpy array is its bytes as a uint8 tensor with ``dtype`` and ``shape``.
"""

from __future__ import annotations

import json
import math
from pathlib import Path
from typing import Any

import numpy as np
import torch
from torch import Tensor

__all__ = ["StateFileError", "load_state", "save_state", "state_paths"]

_FLOATS = {"nan": math.nan, "inf": math.inf, "-inf": -math.inf}


class StateFileError(ValueError):
    """A state file that cannot be read back; the message names the file and the entry."""


def state_paths(directory: Path, name: str) -> tuple[Path, Path]:
    """The (JSON, safetensors) pair of the state ``name`` in ``directory``."""
    return directory / f"{name}.json", directory / f"{name}.safetensors"


def save_state(state: Any, directory: Path, name: str) -> None:
    """Write ``state`` as ``directory/name.json`` + ``directory/name.safetensors``.

    Raises:
        TypeError: a value that is none of the types above, naming where it sits (``optimizer.state.3``).
    """
    from safetensors.torch import save_file

    encoder = _Encoder()
    tree = encoder.encode(state, name)
    json_path, tensors_path = state_paths(directory, name)
    save_file(encoder.tensors, str(tensors_path))
    json_path.write_text(json.dumps(tree, allow_nan=False) + "\n", encoding="utf-8")


def load_state(directory: Path, name: str) -> Any:
    """Read what `save_state` wrote (tensors on the CPU).

    Raises:
        StateFileError: a missing, truncated or malformed file, naming it.
    """
    from safetensors import SafetensorError
    from safetensors.torch import load_file

    json_path, tensors_path = state_paths(directory, name)
    try:
        tree = json.loads(json_path.read_text(encoding="utf-8"))
        tensors = load_file(str(tensors_path))
    except FileNotFoundError as e:
        raise StateFileError(f"{e.filename}: missing (the checkpoint is incomplete)") from None
    except (json.JSONDecodeError, UnicodeDecodeError) as e:
        raise StateFileError(f"{json_path}: not valid JSON ({e})") from None
    except SafetensorError as e:
        raise StateFileError(f"{tensors_path}: cannot read tensors ({e})") from None
    return _Decoder(tensors, json_path).decode(tree, name)


class _Encoder:
    def __init__(self) -> None:
        self.tensors: dict[str, Tensor] = {}
        self._storages: set[int] = set()

    def tensor(self, t: Tensor) -> str:
        key = f"t{len(self.tensors)}"
        t = t.detach().to("cpu").contiguous()
        ptr = t.untyped_storage().data_ptr()
        if ptr in self._storages:  # safetensors refuses tensors sharing memory
            t = t.clone()
        self._storages.add(t.untyped_storage().data_ptr())
        self.tensors[key] = t
        return key

    def encode(self, obj: Any, where: str) -> Any:
        if obj is None or isinstance(obj, (bool, int, str)):
            return obj
        if isinstance(obj, float):
            return obj if math.isfinite(obj) else {"$float": str(obj)}
        if isinstance(obj, Tensor):
            return {"$tensor": self.tensor(obj)}
        if isinstance(obj, np.ndarray) and not obj.dtype.hasobject:
            raw = torch.from_numpy(np.ascontiguousarray(obj).reshape(-1).view(np.uint8).copy())
            return {"$ndarray": self.tensor(raw), "dtype": obj.dtype.str, "shape": list(obj.shape)}
        if isinstance(obj, np.generic):  # numpy scalars as Python numbers
            return self.encode(obj.item(), where)
        if isinstance(obj, (list, tuple)):
            items = [self.encode(v, f"{where}.{i}") for i, v in enumerate(obj)]
            return {"$tuple": items} if isinstance(obj, tuple) else items
        if isinstance(obj, dict):
            if all(isinstance(k, str) and not k.startswith("$") for k in obj):
                return {k: self.encode(v, f"{where}.{k}") for k, v in obj.items()}
            return {
                "$dict": [[self.encode(k, where), self.encode(v, f"{where}.{k}")] for k, v in obj.items()]
            }
        raise TypeError(f"{where}: a {type(obj).__name__} cannot be stored in a checkpoint's state files")


class _Decoder:
    def __init__(self, tensors: dict[str, Tensor], source: Path) -> None:
        self.tensors, self.source = tensors, source

    def fail(self, where: str, what: str) -> StateFileError:
        return StateFileError(f"{self.source}: {where}: {what}")

    def tensor(self, key: Any, where: str) -> Tensor:
        if not isinstance(key, str) or key not in self.tensors:
            raise self.fail(where, f"refers to tensor {key!r}, which the .safetensors file does not hold")
        return self.tensors[key]

    def decode(self, obj: Any, where: str) -> Any:
        if isinstance(obj, list):
            return [self.decode(v, f"{where}.{i}") for i, v in enumerate(obj)]
        if not isinstance(obj, dict):
            return obj
        tags = [k for k in obj if k.startswith("$")]
        if not tags:
            return {k: self.decode(v, f"{where}.{k}") for k, v in obj.items()}
        tag = tags[0]
        value = obj[tag]
        if tag == "$tensor":
            return self.tensor(value, where)
        if tag == "$ndarray":
            return self.ndarray(obj, where)
        if tag == "$tuple" and isinstance(value, list):
            return tuple(self.decode(v, f"{where}.{i}") for i, v in enumerate(value))
        if (
            tag == "$dict"
            and isinstance(value, list)
            and all(isinstance(p, list) and len(p) == 2 for p in value)
        ):
            try:
                return {self.decode(k, where): self.decode(v, f"{where}.{k}") for k, v in value}
            except TypeError as e:  # an unhashable key
                raise self.fail(where, f"bad key ({e})") from None
        if tag == "$float" and value in _FLOATS:
            return _FLOATS[value]
        raise self.fail(where, f"unknown or malformed entry {tag!r}")

    def ndarray(self, obj: dict[str, Any], where: str) -> np.ndarray:
        raw = self.tensor(obj["$ndarray"], where)
        try:
            dtype = np.dtype(obj["dtype"])
            if dtype.hasobject:
                raise TypeError("object arrays are not state")
            return np.frombuffer(raw.numpy().tobytes(), dtype=dtype).reshape(obj["shape"]).copy()
        except (KeyError, TypeError, ValueError) as e:
            raise self.fail(where, f"bad array ({e})") from None
