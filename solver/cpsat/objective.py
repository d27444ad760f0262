"""Makespan: M >= end of every present task; minimise M.

Only tasks without an internal successor at a non-negative lag need the constraint (such a
successor ends strictly later). M's domain is [solver-free lower bound, horizon]. The work of
the host (and of every group when there is no refresh constraint to say it more strongly) is
added as the redundant linear cut M >= busy time, which helps the LP relaxation.
"""

from __future__ import annotations

from solver.cpsat.context import ModelContext


def add_makespan(ctx: ModelContext, lower_bound: int) -> None:
    m = ctx.model
    idx = ctx.index
    lb = min(lower_bound, ctx.horizon)
    M = m.new_int_var(lb, ctx.horizon, "makespan")
    ctx.makespan = M
    for job in ctx.problem.jobs:
        for mode in ctx.live_modes(job):
            enf = ctx.enf(job.name, mode.name)
            for t in mode.tasks:
                if any(lag >= 0 for _, lag in idx.out_edges[t.name]):
                    continue
                c = m.add(M >= ctx.end(t.name))
                if enf:
                    c.only_enforce_if(enf)
    cut_resources = ["host"] if ctx.problem.refresh else idx.resources
    for r in cut_resources:
        if len(ctx.by_resource.get(r, [])) >= 2:
            m.add(M >= ctx.work_expr(r))


def set_objective(ctx: ModelContext) -> None:
    ctx.model.minimize(ctx.makespan)
