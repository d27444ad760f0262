"""DRAM capacity per channel group.

Per group g: sum over chosen modes of usage[g] * repeat <= capacity_rows (rows per bank left
after the KV cache and other fixed data). Jobs without a choice contribute constants.

`check_capacity` runs before any model is built: if even the least possible usage of a group
(sum over jobs of the minimum over their modes) exceeds its capacity, the problem is infeasible
and the message names the group, its channels, the need and the capacity in rows per bank
(the lowering knows the row size and turns it into bytes). Groups whose minima fit separately
can still be jointly infeasible (the minima come from different modes);
`capacity_only_feasible` answers that with a tiny CP-SAT model of the choices alone.
"""

from __future__ import annotations

from ortools.sat.python import cp_model

from solver.cpsat.context import ModelContext
from solver.index import ProblemIndex


def check_capacity(index: ProblemIndex) -> str | None:
    return index.capacity_problem()


def _usage_terms(ctx: ModelContext, group: str) -> tuple[int, list, list[int]]:
    rep = ctx.problem.repeat
    return ctx.mode_terms(lambda m: m.usage.get(group, 0) * rep)


def add_capacity(ctx: ModelContext) -> None:
    for g in ctx.problem.groups:
        const, lits, coefs = _usage_terms(ctx, g.name)
        if not lits:
            continue  # constants only: checked by check_capacity / the horizon analysis
        if const + sum(coefs) <= g.capacity_rows:
            continue  # can never bind
        ctx.model.add(cp_model.LinearExpr.weighted_sum(lits, coefs) <= g.capacity_rows - const)


def capacity_only_feasible(problem, time_limit: float = 5.0) -> bool | None:
    """Is there any mode choice that satisfies every group's capacity? (None: unknown)."""
    model = cp_model.CpModel()
    rep = problem.repeat
    x = {}
    for job in problem.jobs:
        lits = [model.new_bool_var(f"x[{job.name}|{m.name}]") for m in job.modes]
        model.add_exactly_one(lits)
        for m, lit in zip(job.modes, lits):
            x[(job.name, m.name)] = (m, lit)
    for g in problem.groups:
        terms = [(m.usage.get(g.name, 0) * rep, lit) for m, lit in x.values() if m.usage.get(g.name, 0)]
        if terms:
            model.add(
                cp_model.LinearExpr.weighted_sum([lin for _, lin in terms], [u for u, _ in terms]) <= g.capacity_rows
            )
    solver = cp_model.CpSolver()
    solver.parameters.max_time_in_seconds = time_limit
    solver.parameters.num_workers = 1
    solver.parameters.catch_sigint_signal = False  # pimsat handles Ctrl-C (pimsat/signals.py)
    st = solver.solve(model)
    if st in (cp_model.OPTIMAL, cp_model.FEASIBLE):
        return True
    if st == cp_model.INFEASIBLE:
        return False
    return None
