"""Test-suite wide settings: under CI (CI=true) hypothesis runs derandomized, so a green commit
stays green; locally every run explores new examples. The solver's tests lower and decode with the
simulator as the timing oracle, as pimsat's pipeline does."""

from __future__ import annotations

import os

from hypothesis import settings

from sim.oracle import time_commands
from solver.task_timing import use_oracle

use_oracle(time_commands)

settings.register_profile("ci", derandomize=True, print_blob=True)
if os.environ.get("CI"):
    settings.load_profile("ci")

# Many test files compile the same instances (bit-true, digests, instances, outputs): keep their
# lowerings for the whole session (per xdist worker) instead of only the last one.
from pimsat import pipeline  # noqa: E402

pipeline.DEFAULT_CACHE.size = 64
