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

    hw = _alone(hw)
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


def _alone(hw: Hardware) -> Hardware:
    """`hw` with only the channels the timing of channel 0 involves: itself, and its partner on a
    shared command bus (idle, or the `yield_to` records). The other channels run nothing and meet
    channel 0 nowhere (no host stream); on a 128-channel device building them took most of a
    short sequence's timing (2.89 ms, 0.45 ms with one channel)."""
    org = hw.organization
    n = min(org.channels, 2 if org.shared_bus else 1)
    return hw if n == org.channels else hw.model_copy(update={"organization": org.model_copy(update={"channels": n})})
