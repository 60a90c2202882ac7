"""Tests in this folder use the helper modules of tests/unit (standin_tokenizer, ...)."""

import sys
from pathlib import Path

UNIT = str(Path(__file__).resolve().parent.parent)
if UNIT not in sys.path:
    sys.path.insert(0, UNIT)
