"""Refresh, lumped (a relaxation, so the solver's bound stays a valid lower bound).

Every group owes one REF (tRFC cycles during which none of its tasks can run) every tREFI
cycles. Instead of placing REFs, the model requires, per group g,

    M >= sum of durations of the present tasks on g + tRFC * n_ref
    n_ref * tREFI >= M - tREFI + 1          (i.e. n_ref >= floor(M / tREFI))

so M >= work_g + tRFC * floor(M / tREFI). A long task's own REFs (Task.refresh_credit) are left
out of work_g: every channel c of g issues at least floor(M* / tREFI) REFs, those of its tasks and
the group's, so the group's REFs number at least floor(M* / tREFI) - (its first channel's task
REFs), and M* >= sum of durations - credits + tRFC * floor(M* / tREFI) still holds. n_ref is the
same integer for every group (its least value floor(M / tREFI) depends on M only), so one variable
serves all groups.

Validity: the exact schedule (the decoder's, with REFs placed) has makespan M* and issues at
least floor(M* / tREFI) REFs per group inside [0, M*], each disjoint from the group's tasks; so
M* satisfies both inequalities and the model optimum is <= M*. This assumes the decoder does not
carry postponed REFs past the end of the step (JEDEC allows postponing up to `max_postponed`);
if it does, the bound would have to use n_ref >= floor(M / tREFI) - max_postponed.
"""

from __future__ import annotations

from solver.cpsat.context import ModelContext
from solver.index import lumped_makespan  # re-export: the formula the model encodes

__all__ = ["add_refresh", "lumped_makespan"]


def add_refresh(ctx: ModelContext) -> None:
    ref = ctx.problem.refresh
    if ref is None or not ctx.problem.groups:
        return
    m = ctx.model
    M = ctx.makespan
    n = m.new_int_var(0, ctx.horizon // ref.tREFI, "n_ref")
    ctx.n_ref = n
    m.add(n * ref.tREFI >= M - ref.tREFI + 1)
    for g in ctx.problem.groups:
        if not ctx.by_resource.get(g.name):
            continue  # M >= tRFC * floor(M / tREFI) holds for every M when tRFC < tREFI
        m.add(M >= ctx.work_expr(g.name, refresh=True) + ref.tRFC * n)
