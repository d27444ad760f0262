"""Complete solution hints.

CP-SAT only profits reliably from a hint that assigns every variable. From a Solution (mode per
job, start per task of the chosen modes) this derives the value of every model variable: each
mode literal, the start of every task (tasks of unchosen modes get the lowest value of their
domain: they are unconstrained), every `ready` var, every output-resource literal, `n_ref` and
the makespan (lumped refresh included, see refresh.py).
"""

from __future__ import annotations

from solver.cpsat.context import ModelContext
from solver.index import lumped_makespan
from solver.problem import HOST, Solution


class _Values:
    """Variable -> value, keyed by the variable's index (IntVar equality is symbolic)."""

    def __init__(self) -> None:
        self.items: dict[int, tuple[object, int]] = {}

    def __setitem__(self, var, value: int) -> None:
        self.items[var.index] = (var, int(value))

    def __getitem__(self, var) -> int:
        return self.items[var.index][1]


def hint_values(ctx: ModelContext, hint: Solution) -> _Values:
    """A value for every variable of the model."""
    idx = ctx.index
    values = _Values()
    max_end = 0
    work: dict[str, int] = {}
    for job in ctx.problem.jobs:
        chosen = hint.modes[job.name]
        for mode in ctx.live_modes(job):
            lit = ctx.lit[(job.name, mode.name)]
            present = mode.name == chosen
            if lit is not None:
                values[lit] = int(present)
            for t in mode.tasks:
                s = ctx.start[t.name]
                if present:
                    v = hint.starts[t.name]
                    max_end = max(max_end, v + t.duration)
                    if t.resource != HOST:
                        work[t.resource] = work.get(t.resource, 0) + t.refresh_work
                else:
                    v = s.proto.domain[0]
                values[s] = v
        mode = idx.mode(job.name, chosen)
        for (j, op, part), var in ctx.ready_var.items():
            if j == job.name:
                out = mode.task(mode.output_for(op, part))
                values[var] = hint.starts[out.name] + out.duration
        for (j, op, part, r), y in ctx.out_lit.items():
            if j == job.name:
                values[y] = int(mode.task(mode.output_for(op, part)).resource == r)
    M = lumped_makespan(ctx.problem, max_end, work)
    values[ctx.makespan] = M
    if ctx.n_ref is not None:
        values[ctx.n_ref] = M // ctx.problem.refresh.tREFI
    return values


def add_hint(ctx: ModelContext, hint: Solution) -> int:
    """Add the complete hint; returns its makespan."""
    values = hint_values(ctx, hint)
    for var, v in values.items.values():
        ctx.model.add_hint(var, v)
    return values[ctx.makespan]
