"""``python -m mininet_scenarios.demo``: ``make demo``."""

import sys

from mininet_scenarios.demo.main import main

sys.exit(main())
