"""``python -m albert``: the same command as ``albert``."""

import sys

from albert.cli.main import main

sys.exit(main())
