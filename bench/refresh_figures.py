"""Refresh figures of a compiled program, from its simulated command log, per channel: the
longest interval between two REFs (from cycle 0 to the end of the program) in tREFI, the most
REFs pulled in (issued ahead of the one due by then) and the most owed (JEDEC allows 9 x tREFI,
8 and 8; the simulator refuses more, sim.stdcheck checks them independently).

    python bench/refresh_figures.py INSTANCE [--method greedy] [--set k=v ...]

The test of the decoder's refresh (tests/solver/test_refresh_decode.py) uses `refresh_figures`.
"""

from __future__ import annotations

import argparse
import time

import numpy as np

from hwmodel.model import COMMANDS

REF = COMMANDS.index("REF")


def refresh_figures(log: np.ndarray, cycles: int, trefi: int) -> tuple[float, int, int]:
    """(longest REF interval in tREFI, most pulled in, most owed) over the channels of a log."""
    gap, pulled, owed = 0.0, 0, 0
    for ch in np.unique(log["channel"]):
        c = np.sort(log[(log["channel"] == ch) & (log["command"] == REF)]["cycle"].astype(np.int64))
        j = np.arange(1, len(c) + 1)
        gap = max(gap, float(np.diff(np.concatenate([[0], c, [cycles]])).max()) / trefi)
        if len(c):
            pulled = max(pulled, int((j - c // trefi).max()))
            owed = max(owed, int((c // trefi - (j - 1)).max()))
    return gap, pulled, owed


def main() -> None:
    from pimsat.instance import load_instance
    from pimsat.pipeline import SolveOptions, run

    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("instance")
    ap.add_argument("--method", default="greedy", choices=["naive", "greedy", "cpsat"])
    ap.add_argument("--set", action="append", default=[], metavar="K=V")
    ap.add_argument("--time-limit", type=float, default=20.0)
    a = ap.parse_args()
    t0 = time.perf_counter()
    r = run(
        load_instance(a.instance),
        SolveOptions(method=a.method, functional=False, record=True, time_limit=a.time_limit),
        a.set,
    )
    gap, pulled, owed = refresh_figures(r.sim.log, int(r.sim.cycles), r.hardware.timing.p("tREFI"))
    print(
        f"{r.instance.name} {a.method}: {int(r.sim.cycles):,} cycles; longest REF interval {gap:.2f} tREFI, "
        f"at most {pulled} pulled in, at most {owed} owed ({time.perf_counter() - t0:.0f} s)"
    )


if __name__ == "__main__":
    main()
