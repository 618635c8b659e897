"""Property tests draw the same examples on every run, so the test command cannot go red by
luck; ``FUZZ_EXAMPLES=N`` (see test_fuzz_parsers.py) draws fresh random ones for a hunt."""

import os

from hypothesis import settings

settings.register_profile("fixed", derandomize=True)
settings.register_profile("hunt", derandomize=False)
settings.load_profile("hunt" if "FUZZ_EXAMPLES" in os.environ else "fixed")
