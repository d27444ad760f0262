"""The interface between the compiler and whatever times its command sequences.

The solver measures every task's duration by issuing its commands on a quiet device
(solver/task_timing.py). Who does the issuing is a `TimingOracle`, handed to the solver by the code
that composes the pipeline: pimsat's pipeline and the test suite hand in the simulator
(sim.oracle.time_commands), so the durations the solver schedules are the simulator's, exactly.
"""

from __future__ import annotations

from collections.abc import Callable
from dataclasses import dataclass

import numpy as np


@dataclass(frozen=True)
class CommandTimes:
    """What a timing oracle reports for one command sequence issued alone on channel 0 of a quiet
    device (every bank precharged, no timing history)."""

    issue: np.ndarray  # per instruction: the cycle of its first command
    last: np.ndarray  # per instruction: the cycle of its last command
    cycles: int  # when the last data has landed
    command_cycles: np.ndarray  # per DRAM command issued: its cycle
    commands: np.ndarray  # per DRAM command issued: its index in hwmodel.model.COMMANDS
    command_instrs: np.ndarray | None = None  # per DRAM command issued: its instruction's index


TimingOracle = Callable[..., CommandTimes]
"""oracle(hw, instrs, yield_to=None): `instrs` issued alone on channel 0 of a quiet device; with
`yield_to` (shared command buses: the occupancy records of hwmodel/bus.py of the other
pseudo-channel's commands, from the same start) each command yields its bus to those."""
