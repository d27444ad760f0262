"""One quantity, one answer: every group task lasts, in the problem CP-SAT schedules, exactly what
the decoder's emission of it takes (the slowest of the group's channels), in both lowering styles.

A bound or a schedule built on a shorter duration than the program's would be beaten by it; a
longer one would make the solver optimise a program that is not emitted."""

from __future__ import annotations

from pathlib import Path

import pytest

from pimsat.instance import load_instance
from solver.decode import _task_commands
from solver.layout import Layout
from solver.lower import LowerOptions, lower
from solver.payload import Style
from solver.problem import HOST
from solver.symbols import Symbols
from solver.task_timing import StructureTimings
from solver.tiling import channel_signature

ROOT = Path(__file__).resolve().parents[2] / "instances"
CASES = sorted((ROOT / "fpga").glob("*.yaml")) + [
    ROOT / "micro" / "gemv-4096-b4-hbm2-64ch.yaml",
    ROOT / "micro" / "attention-gqa-llama3-c2048-hbm2-64ch.yaml",
    ROOT / "small" / "tiny-llama-2l-hbm2-8ch.yaml",
    ROOT / "small" / "tiny-gpt2-2l-hbm2-8ch.yaml",
]


def _decoded_durations(problem, lowering):
    """(task, lowering's duration, the decoder's) for every channel-group task."""
    hw, program = lowering.hw, lowering.program
    groups = {g.name: g for g in problem.groups}
    op_index = {op.name: i for i, op in enumerate(program.ops)}
    timings = StructureTimings(hw, lowering.structures)
    for job in problem.jobs:
        for mode in job.modes:
            tilings = mode.payload.tilings
            layouts = [Layout(hw, lowering.tiling(pl.shape, pl.channels, pl.style, pl.kind), 0) for pl in tilings]
            for task in mode.tasks:
                if task.resource == HOST:
                    continue
                role = mode.payload.roles[task.name]
                _per, end, _comp, _refs = _task_commands(
                    hw, program, Symbols(), op_index, groups, task, role, tilings, layouts, timings
                )
                yield task, mode, end


@pytest.mark.parametrize("path", CASES, ids=lambda p: p.stem)
@pytest.mark.parametrize("style", list(Style))
def test_lowered_durations_are_the_decoded_ones(path, style):
    inst = load_instance(path)
    hw, program = inst.build_hardware(), inst.build_program()
    problem, lowering = lower(hw, program, LowerOptions(style=style))
    wrong = [(t.name, t.duration, end) for t, _m, end in _decoded_durations(problem, lowering) if t.duration != end]
    assert not wrong, f"{len(wrong)} tasks, first: {wrong[:3]}"


def test_the_cases_include_groups_whose_channels_differ():
    """The property is only tested where it could fail: some tiling's channels run different
    commands (padding), so the slowest channel is not the first."""
    seen = set()
    for path in CASES:
        inst = load_instance(path)
        problem, lowering = lower(inst.build_hardware(), inst.build_program(), LowerOptions())
        for job in problem.jobs:
            for mode in job.modes:
                for pl in mode.payload.tilings:
                    t = lowering.tiling(pl.shape, pl.channels, pl.style, pl.kind)
                    if len({channel_signature(t, ci) for ci in range(len(pl.channels))}) > 1:
                        seen.add(path.stem)
    assert seen, "no case has a tiling whose channels differ"
