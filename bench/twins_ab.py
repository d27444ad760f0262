"""Twin channels on and off, side by side: the streamed timing run `compare --timing-only` makes,
with `PIMSAT_TWINS=0` and with twins (sim/twins.py), on the same solution, runs alternating,
each on a fresh decode of it (outside the timed call); the results must be equal.

    .venv/bin/python bench/twins_ab.py INSTANCE [--methods naive,greedy] [--jobs 2] [--repeat 3]

Per method: busy channels, channels the kernel ran with twins, the median simulate wall of each
(seconds, the whole `sim.simulate` call), their ratio, and whether every figure of the two
results is the same (cycles, per-channel counters, stalls, signals, host events).
"""

from __future__ import annotations

import argparse
import os
import statistics
import time

import numpy as np
from compiled import solved

import sim

FIELDS = ("counts", "bank_bursts", "pu_macs", "row_hits", "row_misses", "refreshes", "host_events")


def figures(res) -> tuple:
    """Everything a streamed SimResult holds but wall-clock times and `channels_run`."""
    arrays = tuple(np.asarray(getattr(res, f)).tobytes() for f in FIELDS)
    host = tuple(a.tobytes() for a in (res.host_times.issue, res.host_times.last, res.host_times.done))
    return (int(res.cycles), arrays, host, tuple(res.stalls.items()), tuple(res.signals.items()))


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("instance")
    ap.add_argument("--methods", default="naive,greedy")
    ap.add_argument("--jobs", type=int, default=2)
    ap.add_argument("--repeat", type=int, default=3)
    a = ap.parse_args()
    print(f"{'method':8} {'busy':>5} {'run':>5} {'plain s':>9} {'twins s':>9} {'ratio':>7}  same")
    for method in a.methods.split(","):
        hw, program, decoded = solved(a.instance, method)
        walls: dict[str, list[float]] = {"0": [], "1": []}
        seen: dict[str, tuple] = {}
        run = None
        for _ in range(a.repeat):
            for mode in ("0", "1"):
                os.environ["PIMSAT_TWINS"] = mode
                ss = decoded().streams
                t0 = time.perf_counter()
                res = sim.simulate(hw, ss, program, functional=False, record=False, jobs=a.jobs)
                walls[mode].append(time.perf_counter() - t0)
                seen.setdefault(mode, figures(res))
                if mode == "1":
                    run = res.channels_run
        busy = sum(1 for s in ss.channels if len(s))
        plain, twins = statistics.median(walls["0"]), statistics.median(walls["1"])
        same = "yes" if seen["0"] == seen["1"] else "NO"
        print(f"{method:8} {busy:>5} {run:>5} {plain:>9.2f} {twins:>9.2f} {plain / twins:>6.1f}x  {same}")
    os.environ.pop("PIMSAT_TWINS", None)


if __name__ == "__main__":
    main()
