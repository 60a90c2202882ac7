"""Loading a file of scripts/ as a module for its tests (scripts/ is not a package)."""

from __future__ import annotations

import contextlib
import importlib.util
import sys
from collections.abc import Iterator
from pathlib import Path
from types import ModuleType

SCRIPTS = Path(__file__).resolve().parents[2] / "scripts"


@contextlib.contextmanager
def script_module(filename: str, name: str) -> Iterator[ModuleType]:
    """scripts/FILENAME executed as module NAME, registered in sys.modules while in use (dataclasses look
    their module up there) and removed after."""
    spec = importlib.util.spec_from_file_location(name, SCRIPTS / filename)
    assert spec is not None and spec.loader is not None
    module = importlib.util.module_from_spec(spec)
    sys.modules[name] = module
    try:
        spec.loader.exec_module(module)
        yield module
    finally:
        sys.modules.pop(name, None)
