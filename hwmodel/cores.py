"""The cores this process may run on (what `--sim-jobs 0`, `--lower-jobs 0` and `--jobs 0` use)."""

from __future__ import annotations

import os


def available_cores() -> int:
    try:
        return max(1, len(os.sched_getaffinity(0)))
    except AttributeError:  # pragma: no cover - not Linux
        return max(1, os.cpu_count() or 1)
