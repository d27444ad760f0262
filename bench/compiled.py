"""The compiled program of an instance as `compare` streams it (timing-only, lazy, encoded parts),
for the bench tools that look inside it."""

from __future__ import annotations

from pimsat.instance import load_instance
from pimsat.pipeline import DEFAULT_CACHE, SolveOptions, solve
from solver.decode import decode


def solved(path: str, method: str):
    """(hardware, program, a function that decodes the solution afresh) of the instance at
    `path` solved by `method`. A decoded program's streams keep state while they are read (a
    task's tables, until its last channel has read them): a second run of the same streams
    rebuilds tables the first one let go, so runs to compare each get a fresh decode."""
    inst = load_instance(path)
    program, hw = inst.build_program(), inst.build_hardware([], None)
    problem, lowering = DEFAULT_CACHE.lowered(inst, hw, program, SolveOptions().groups).for_method(method)
    solution, _ = solve(problem, SolveOptions(method=method))
    return hw, program, lambda: decode(problem, lowering, solution, placements=False, lazy=True)


def compile_lazily(path: str, method: str):
    """(hardware, compiled program) of the instance at `path` solved by `method`."""
    hw, _program, decoded = solved(path, method)
    return hw, decoded()
