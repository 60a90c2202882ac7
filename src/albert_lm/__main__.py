"""``python -m albert_lm``: the same command as ``albert``."""

import sys

from albert_lm.cli.main import main

sys.exit(main())
