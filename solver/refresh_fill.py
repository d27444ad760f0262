"""Refresh rounds for the channels of a long group task that carry fewer than the others.

A long task carries REFs of its own (solver/refresh_points.py), placed in each channel's command
sequence, and the decoder counts a round of the group only when every channel has issued it. A
channel whose own commands end early, or that has none (a host GEMV reads its one matrix row from
one channel of the group; the other idles through a task of 10 tREFI), carries fewer rounds than
the channel that sets the task's length, and the group would go that long without refresh
(bench/whatif_fuzz.py --size large case 629: GEMV 1 x 4096 b4 on 4 hbm2-pim channels, tREFI 700,
a DecodeError). Such a channel gets the missing rounds after its own commands end, each at the
earliest of the other channels' matching round where it can, a round apart at least, and only
where the round ends before the task does (its banks are all precharged there: a task ends with
its rows closed). On a shared command bus a round goes at the first cycle from there where its
commands meet none of the partner channel's (hwmodel/bus.py).
"""

from __future__ import annotations

import numpy as np

from hwmodel import Hardware, bus
from hwmodel.isa import Instruction

from .pair_bus import round_records
from .refresh_points import refresh_round, round_cycles
from .task_timing import TaskTiming


def fill_rounds(hw: Hardware, timings: dict[int, TaskTiming], end: int) -> dict[int, tuple[int, ...]]:
    """Channel -> the relative start cycles of the refresh rounds it is given (refresh_round at
    each), for the channels of one task (`timings`, by channel) that carry fewer rounds of their
    own than another; `end` is the task's duration. A channel whose bus partner's occupancy is not
    known (an odd channel timed yielding to its partner keeps none) is given none."""
    counts = {c: len(tt.refreshes) for c, tt in timings.items()}
    n = max(counts.values(), default=0)
    if n == 0 or min(counts.values()) == n:
        return {}
    target = [min(tt.refreshes_early[k] for c, tt in timings.items() if counts[c] > k) for k in range(n)]
    length = round_cycles(hw)
    shared = hw.organization.shared_bus
    act_w = bus.act_bus_cycles(hw)
    one = round_records(hw)
    fills: dict[int, tuple[int, ...]] = {}
    for c in sorted(timings):
        if counts[c] == n:
            continue
        tt = timings[c]
        partner = None
        if shared and bus.partner(c) in timings:
            p = bus.partner(c)
            own = timings[p].bus
            if own is None and len(timings[p].issue):
                continue
            partner = [bus.expand(own)] if own is not None and len(own) else []
            partner += [_shifted(one, s) for s in fills.get(p, ())]
            partner = np.concatenate(partner) if partner else None
            if partner is not None:
                partner = partner[np.argsort(partner[:, bus.O_T0], kind="stable")]
        starts: list[int] = []
        earliest = tt.duration
        for k in range(counts[c], n):
            s = max(target[k], earliest)
            if partner is not None:
                s = bus.smallest_shift(partner, one, act_w, s)  # a round meeting none of its commands
            if s + length > end:
                break
            starts.append(s)
            earliest = s + length
        if starts:
            fills[c] = tuple(starts)
    return fills


def filled(hw: Hardware, starts: tuple[int, ...]) -> tuple[list[Instruction], list[int]]:
    """The refresh rounds at `starts` and the relative issue cycle of each of their commands."""
    seq = [ins for s in starts for ins in refresh_round(hw, s)]
    return seq, [ins.cycle for ins in seq]


def _shifted(records: np.ndarray, s: int) -> np.ndarray:
    out = records.copy()
    out[:, bus.O_T0] += s
    return out
