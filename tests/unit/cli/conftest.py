"""Tests in this folder import the helper modules of tests/unit (data_support, ...)."""

import sys
from pathlib import Path

sys.path.insert(0, str(Path(__file__).resolve().parent.parent))
