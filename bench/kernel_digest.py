"""The channel kernel alone on the channels of a compiled instance: speed, and a digest of every
state array after the run (a kernel change that keeps the digest computes the same state).

    .venv/bin/python bench/kernel_digest.py INSTANCE [--method greedy] [--channels 8] [--reps 3]

The program is compiled as `compare` does (timing-only, encoded parts); `--channels` of its
channel streams, spread over all, are encoded whole. WAIT rows are dropped (each channel runs on
its own here: the stamps already hold what the waits imposed), SIG rows kept. The rate is the
best of `--reps` runs; the digest covers the per-instruction times, bank and unit state,
counters and stalls (not the per-unit last-issue table, whose unread entries are free to differ).
"""

from __future__ import annotations

import argparse
import hashlib
import time

import numpy as np
from compiled import compile_lazily

from sim import channel as K
from sim.encode import SignalMap
from sim.timing import compile_tables

DIGESTED = (
    "counts",
    "bbursts",
    "pumacs",
    "hits",
    "misses",
    "stall",
    "issue",
    "lastc",
    "done",
    "openrow",
    "gbready",
    "ring",
)


def channel_tables(path: str, method: str, channels: int):
    """(hardware, encoded tables of `channels` channel streams of the compiled program)."""
    hw, compiled = compile_lazily(path, method)
    streams = compiled.streams.channels
    step = max(1, len(streams) // channels)
    tables = []
    for s in streams[::step][:channels]:
        if len(s):
            t = s.rows(0, len(s))
            tables.append(t[t[:, K.C_OP] != K.OP_WAIT])
    return hw, tables


def run(hw, tables, reps: int) -> tuple[float, int, str]:
    """(best seconds over reps, instructions, state digest)."""
    tab = compile_tables(hw)
    progs = []
    for t in tables:
        signals = SignalMap()
        signals.densify(t)
        progs.append((np.ascontiguousarray(t.reshape(-1)), len(t), len(signals.index)))
    digest, best = hashlib.sha1(), float("inf")
    for rep in range(reps):
        spent = 0.0
        for prog, n, nsig in progs:
            s = K.new_state(tab, n, None)
            sig = np.full(max(1, nsig), -1, dtype=np.int64)
            t0 = time.perf_counter()
            status = K.call(tab, prog, s, sig)
            spent += time.perf_counter() - t0
            if status != K.DONE:
                raise SystemExit(f"kernel stopped with status {status}, error {s['err'].tolist()}")
            if rep == 0:
                digest.update(s["st"][: K.ST_BASE + 1].tobytes())
                for k in DIGESTED:
                    digest.update(s[k].tobytes())
        best = min(best, spent)
    return best, sum(n for _, n, _ in progs), digest.hexdigest()[:12]


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("instance")
    ap.add_argument("--method", default="greedy")
    ap.add_argument("--channels", type=int, default=8)
    ap.add_argument("--reps", type=int, default=3)
    a = ap.parse_args()
    hw, tables = channel_tables(a.instance, a.method, a.channels)
    run(hw, [t[:64].copy() for t in tables[:1]], 1)  # compile / load the kernel first
    seconds, n, digest = run(hw, tables, a.reps)
    print(
        f"{a.instance} ({a.method}): {len(tables)} channels, {n:,} instructions, kernel {seconds:.2f} s = "
        f"{n / seconds / 1e6:.2f} M instructions/s, state digest {digest}"
    )


if __name__ == "__main__":
    main()
