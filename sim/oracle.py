"""The simulator as the compiler's timing oracle (hwmodel.oracle.TimingOracle): one command
sequence issued alone on channel 0 of a quiet device, timed by the same kernel that checks every
emitted program, so the task durations the solver schedules are exact."""

from __future__ import annotations

import numpy as np

from hwmodel.isa import ISA_VERSION, Instruction
from hwmodel.model import Hardware
from hwmodel.oracle import CommandTimes
from hwmodel.streams import StreamSet


def time_commands(hw: Hardware, instrs: list[Instruction], yield_to: np.ndarray | None = None) -> CommandTimes:
    """hwmodel.oracle.CommandTimes of `instrs` on channel 0 of `hw` (the other channels idle);
    yield_to: the bus occupancy of channel 0's partner on a shared bus (hwmodel/bus.py records,
    cycles from the same start), to which the commands yield their bus."""
    from . import simulate

    streams = StreamSet(
        hw.name, ISA_VERSION, [], [list(instrs)] + [[] for _ in range(hw.organization.channels - 1)], []
    )
    res = simulate(hw, streams, functional=False, record=True, yield_to=None if yield_to is None else {0: yield_to})
    times = res.channel_times[0]
    log = res.log
    empty = np.zeros(0, dtype=np.int64)
    return CommandTimes(
        np.asarray(times.issue, dtype=np.int64),
        np.asarray(times.last, dtype=np.int64),
        int(res.cycles),
        empty if log is None else np.asarray(log["cycle"], dtype=np.int64),
        empty if log is None else np.asarray(log["command"], dtype=np.int64),
        empty if log is None else np.asarray(log["instr"], dtype=np.int64),
    )
