"""Exact per-group durations where lowering's differ.

Lowering times a tiling on its first channel and gives every group's task that duration (a KV
append: the slowest channel's). Where a tiling's channels are not all alike (padding: a channel
holds fewer rows, or other fused-part cuts), a group's task really takes as long as the slowest
of *its* channels, which the decoder measures. A lower bound must use those: a duration the
program can beat would not bound it.
"""

from __future__ import annotations

from .layout import Layout
from .lower import Lowering
from .problem import HOST, SchedulingProblem
from .symbols import Symbols
from .task_timing import StructureTimings
from .tiling import channel_signature, slot_rows


def _alike(lowering: Lowering, pl) -> bool:
    """Every channel of the payload's tiling runs the same commands (and the same appends)."""
    t = lowering.tiling(pl.shape, pl.channels, pl.style, pl.kind)
    if len({channel_signature(t, ci) for ci in range(len(pl.channels))}) > 1:
        return False
    if pl.append is not None:
        return len({slot_rows(t, ci) for ci in range(len(pl.channels))}) == 1
    return True


def exact_durations(problem: SchedulingProblem, lowering: Lowering) -> dict[int, int]:
    """id(task) -> the decoder's duration, for the group tasks of tilings whose channels differ
    (keyed by identity: both lowering styles name their all-group modes alike)."""
    from .decode import _task_commands  # the decoder's own timing of a task

    hw, program = lowering.hw, lowering.program
    groups = {g.name: g for g in problem.groups}
    op_index = {op.name: i for i, op in enumerate(program.ops)}
    timings = StructureTimings(hw, lowering.structures)
    out: dict[int, int] = {}
    for job in problem.jobs:
        for mode in job.modes:
            tilings = mode.payload.tilings
            differ = [i for i, pl in enumerate(tilings) if not _alike(lowering, pl)]
            if not differ:
                continue
            layouts = [Layout(hw, lowering.tiling(pl.shape, pl.channels, pl.style, pl.kind), 0) for pl in tilings]
            for task in mode.tasks:
                role = mode.payload.roles[task.name]
                if task.resource == HOST or role[1] not in differ:
                    continue
                _per, end, _comp, _refs = _task_commands(
                    hw, program, Symbols(), op_index, groups, task, role, tilings, layouts, timings
                )
                out[id(task)] = end
    return out
