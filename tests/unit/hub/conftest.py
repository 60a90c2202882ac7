"""The helper modules of tests/unit (inference_support, ...) for the tests in this folder."""

import sys
from pathlib import Path

sys.path.insert(0, str(Path(__file__).resolve().parents[1]))
