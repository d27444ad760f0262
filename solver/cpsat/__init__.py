"""CP-SAT scheduling of a `solver.problem.SchedulingProblem`, one module per constraint family.

modes.py       mode choice (one Bool per real choice) + one interval per task
precedence.py  internal edges, `ready` vars, dependencies with lags
resources.py   NoOverlap per resource (host, each group)
capacity.py    rows per bank per group; pre-check with a message in hardware terms
refresh.py     lumped refresh relaxation per group
objective.py   makespan
symmetry.py    ordering of interchangeable groups (only when provably valid)
hints.py       complete hints
index.py       validation, heads/tails, solver-free bounds (no OR-Tools)
solve.py       solve_cpsat: history, status mapping
watchdog.py    the wall-clock limit, kept out of the window where a stop aborts OR-Tools
"""

from solver.cpsat.solve import build_model, solve_cpsat
from solver.index import ProblemIndex, lumped_makespan, problem_index, solution_makespan

__all__ = ["solve_cpsat", "build_model", "ProblemIndex", "problem_index", "lumped_makespan", "solution_makespan"]
