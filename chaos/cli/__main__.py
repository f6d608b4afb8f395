"""``python -m chaos.cli``: the same as ``raychaos``."""

import sys

from chaos.cli import main

sys.exit(main())
