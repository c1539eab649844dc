"""``python -m mininet_scenarios SPEC ...`` is ``loom-scenario SPEC ...``."""

import sys

from mininet_scenarios.run import main

sys.exit(main())
