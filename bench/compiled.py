"""The compiled program of an instance as `compare` streams it (timing-only, lazy, encoded parts),
for the bench tools that look inside it."""

from __future__ import annotations

from pimsat.instance import load_instance
from pimsat.pipeline import DEFAULT_CACHE, SolveOptions, solve
from solver.decode import decode


def compile_lazily(path: str, method: str):
    """(hardware, compiled program) of the instance at `path` solved by `method`."""
    inst = load_instance(path)
    program, hw = inst.build_program(), inst.build_hardware([], None)
    problem, lowering = DEFAULT_CACHE.lowered(inst, hw, program, SolveOptions().groups).for_method(method)
    solution, _ = solve(problem, SolveOptions(method=method))
    return hw, decode(problem, lowering, solution, placements=False, lazy=True)
