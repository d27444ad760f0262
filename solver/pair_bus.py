"""Lockstep pseudo-channel pairs on a shared command bus (organization.command_bus = shared_pair).

Channels 2k and 2k+1 share a row and a column command bus. A channel group runs one command
sequence on all its channels in lockstep, and groups are whole pairs (solver.lower.make_groups),
so two tasks of one pair always start together and, timed alone, would put the same command on
the same bus in the same cycle (or, where the two channels' commands differ, collide anywhere).
So the odd channel of a pair is timed *with* its partner: the timing oracle issues its commands
each at the first cycle at or after its earliest legal one where the even channel's commands
(their occupancy as the oracle measured them alone, `TaskTiming.bus`) leave its bus free
(`StructureTimings.paired`, `append_timings`; sim/channel.py's `yield_to`). The even channel
keeps its own timing: it has priority. The group's task lasts until both are quiet, the same
number for lowering (the durations CP-SAT schedules) and the decoder (the stamps); tasks of a
group follow each other at that quiet end, so commands of two tasks never meet. A refresh round
between tasks is staggered by `round_shift`.
"""

from __future__ import annotations

import numpy as np

from hwmodel import Hardware, bus
from hwmodel.model import COMMANDS

from .refresh_points import refresh_round


def round_shift(hw: Hardware) -> int:
    """The odd channel's delay of a refresh round between tasks (0 without a shared bus): the
    smallest at which its refresh commands meet none of the even channel's on the row bus (0 on
    one channel: no pair)."""
    if not hw.organization.shared_bus or hw.organization.channels < 2:
        return 0
    rec = round_records(hw)
    return bus.smallest_shift(rec, rec, bus.act_bus_cycles(hw))


def round_records(hw: Hardware) -> np.ndarray:
    """The bus records (hwmodel/bus.py) of a refresh round between tasks issued at cycle 0."""
    seq = refresh_round(hw, 0)
    cycles = np.array([ins.cycle for ins in seq], dtype=np.int64)
    cmds = np.array([COMMANDS.index(ins.op) for ins in seq], dtype=np.int64)
    return bus.records_from_commands(cycles, cmds, np.arange(len(seq), dtype=np.int64))
