"""Shared test fixtures: paths to the real data fetched by `make data` (scripts/fetch_data.py)."""

from __future__ import annotations

import os
import sys
from pathlib import Path

import pytest

# the tests' shared helpers (cli_parsers, data_support, standin_tokenizer, ...) live in tests/unit, beside the
# folders that mirror src/albert_lm
sys.path.insert(0, str(Path(__file__).resolve().parent / "unit"))

REPO = Path(__file__).resolve().parent.parent
# the helper modules of tests/unit (data_support, inference_support, ...) for the tests in its subfolders
# (a conftest.py there would be imported as `conftest` and hide this one's `data_path`)
sys.path.append(str(Path(__file__).resolve().parent / "unit"))
DATA = Path(os.environ.get("ALBERT_DATA_DIR", REPO / "data"))
FIXTURES = Path(__file__).resolve().parent / "fixtures"


def data_path(*parts: str) -> Path:
    """Path under data/; skips the test when it has not been fetched (run `make data`)."""
    p = DATA.joinpath(*parts)
    if not p.exists():
        why = DATA / parts[0] / "UNAVAILABLE"  # written by scripts/fetch_data.py for a withdrawn package
        if why.exists():
            pytest.skip(f"{p} unavailable: {why.read_text(encoding='utf-8').strip()}")
        pytest.skip(f"{p} not fetched (run `make data`)")
    return p


@pytest.fixture
def minilm_dir() -> Path:
    return data_path("minilm")


@pytest.fixture
def wiki_dump() -> Path:
    return data_path("wiki", "enwiki-shortened.xml.bz2")


@pytest.fixture(autouse=True)
def _deterministic_torch():
    import torch

    torch.manual_seed(0)
    yield


@pytest.fixture(autouse=True, scope="session")
def _private_cache_dir(tmp_path_factory: pytest.TempPathFactory):
    """`--backend auto` remembers its choices (and keeps ONNX exports) in the cache directory: in tests, a
    fresh one of their own, never the user's ``~/.cache/albert``."""
    from albert_lm.infer.backend import CACHE_ENV

    before = os.environ.get(CACHE_ENV)
    os.environ[CACHE_ENV] = str(tmp_path_factory.mktemp("albert-cache"))
    yield
    if before is None:
        os.environ.pop(CACHE_ENV, None)
    else:
        os.environ[CACHE_ENV] = before
