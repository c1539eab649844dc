"""``make demo`` (``python -m mininet_scenarios.demo``): the story in :mod:`.main`, the
steps in :mod:`.story`, :mod:`.jobs` and :mod:`.attack`, the figures in :mod:`.plots`."""
