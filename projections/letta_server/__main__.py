"""``python -m projections.letta_server up|down|status [--home DIR] [--json]``."""

import sys

from .cli import main

sys.exit(main())
