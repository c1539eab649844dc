"""``python -m mininet_scenarios SPEC ...`` is ``loom-scenario SPEC ...``."""

import sys

from mininet_scenarios.cli import main

sys.exit(main())
