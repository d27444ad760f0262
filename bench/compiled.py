"""The compiled program of an instance as `compare` streams it (timing-only, lazy, encoded parts),
for the bench tools that look inside it."""
from __future__ import annotations

from pimsat.instance import load_instance
from pimsat.pipeline import SolveOptions, _lower_both_styles, solve
from solver.decode import decode


def compile_lazily(path: str, method: str):
    """(hardware, compiled program) of the instance at `path` solved by `method`."""
    inst = load_instance(path)
    program, hw = inst.build_program(), inst.build_hardware([], None)
    lowered, _ = _lower_both_styles(inst, hw, program, 4)
    problem, lowering = lowered["naive" if method == "naive" else "overlap"]
    solution, _ = solve(problem, SolveOptions(method=method))
    return hw, decode(problem, lowering, solution, placements=False, lazy=True)
