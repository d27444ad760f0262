"""Benchmark the compiler on instance tiers: every method, every instance; figures and ratios.

    python bench/run_bench.py --tier fpga --tier micro [--time-limit 30] [--json out.json] [--record]

The same as `pimsat bench` (pimsat/benchmark.py), kept for scripts that call it by path.
"""

from __future__ import annotations

import sys
from pathlib import Path

sys.path.insert(0, str(Path(__file__).resolve().parent.parent))

from pimsat.cli import main  # noqa: E402

if __name__ == "__main__":
    main(["bench", *sys.argv[1:]], prog_name="pimsat")
