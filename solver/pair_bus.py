"""Lockstep pseudo-channel pairs on a shared command bus (organization.command_bus = shared_pair).

Channels 2k and 2k+1 share a row and a column command bus. A channel group runs one command
sequence on all its channels in lockstep, and groups are whole pairs (solver.lower.make_groups),
so without care the two channels of a pair put the same command on the same bus in the same
cycle. The decoder therefore starts the odd channel's copy of every task later by the smallest
shift at which none of its commands meets one of the even channel's on a bus (their occupancy as
the timing oracle measured it: `TaskTiming.bus`, hwmodel/bus.py). The group's task then lasts
until the later of the two copies is quiet: `span` gives each channel's shift and the group's
duration and completion, the same numbers for lowering (the durations CP-SAT schedules) and for
the decoder (the stamps). Tasks of one group follow each other at the group's quiet end, so the
copies of two tasks never meet; a refresh round between tasks is staggered the same way
(`round_shift`).
"""

from __future__ import annotations

from collections.abc import Callable, Iterable

import numpy as np

from hwmodel import Hardware, bus
from hwmodel.model import COMMANDS

from .refresh_points import refresh_round
from .task_timing import TaskTiming


class PairShifts:
    """The smallest shift of one timing's copy against another's, computed once per pair of
    timing objects (held here, so their ids stay theirs)."""

    def __init__(self, hw: Hardware):
        self.hw = hw
        self.act_w = bus.act_bus_cycles(hw)
        self._seen: dict[tuple[int, int], tuple[TaskTiming, TaskTiming, int]] = {}

    def shift(self, even: TaskTiming | None, odd: TaskTiming | None) -> int:
        if even is None or odd is None or even.bus is None or odd.bus is None:
            return 0
        key = (id(even), id(odd))
        hit = self._seen.get(key)
        if hit is None:
            hit = self._seen[key] = (even, odd, bus.smallest_shift(even.bus, odd.bus, self.act_w))
        return hit[2]

    def span(
        self, channels: Iterable[int], timing_of: Callable[[int], TaskTiming | None]
    ) -> tuple[dict[int, int], int, int]:
        """({channel: shift of its copy}, duration, completion) of one task on `channels` (a
        group, or a tiling's channels: whole pairs on a shared-bus device), each channel's
        timing given by `timing_of` (None: no commands there). Without a shared bus every shift
        is 0 and the group lasts as long as its slowest channel."""
        chans = list(channels)
        shifts = {c: 0 for c in chans}
        if self.hw.organization.shared_bus:
            present = set(chans)
            for c in chans:
                if c % 2 and c - 1 in present:
                    shifts[c] = self.shift(timing_of(c - 1), timing_of(c))
        dur = comp = 0
        for c in chans:
            tt = timing_of(c)
            if tt is not None:
                dur = max(dur, shifts[c] + tt.duration)
                comp = max(comp, shifts[c] + tt.completion)
        return shifts, dur, comp


def round_shift(hw: Hardware) -> int:
    """The odd channel's delay of a refresh round between tasks (0 without a shared bus): the
    smallest at which its refresh commands meet none of the even channel's on the row bus."""
    if not hw.organization.shared_bus:
        return 0
    seq = refresh_round(hw, 0)
    cycles = np.array([ins.cycle for ins in seq], dtype=np.int64)
    cmds = np.array([COMMANDS.index(ins.op) for ins in seq], dtype=np.int64)
    rec = bus.records_from_commands(cycles, cmds, np.arange(len(seq), dtype=np.int64))
    return bus.smallest_shift(rec, rec, bus.act_bus_cycles(hw))
