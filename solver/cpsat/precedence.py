"""Internal mode edges and job dependencies.

- Internal edge (a -> b, lag) of mode m: start(b) >= end(a) + lag, enforced by m's literal.
- `ready[j]`: for a job with a choice, an integer var equal to the end of the chosen mode's
  output task (`ready == end(out_m)` enforced by each mode's literal); for a job without a
  choice, simply the expression end(out).
- Dependency a -> b: every input task u of b's chosen mode starts at or after
  ready[a] + lag(resource of a's output task, resource of u). When a's live modes put their
  output on different resources, the lag depends on a's choice: the constraint with the smallest
  possible lag holds whenever b's mode is chosen, and each larger lag is added under the extra
  literal "a's output is on resource r" (`out_lit`, the sum of a's literals with that output
  resource; reused across consumers).
"""
from __future__ import annotations

from solver.cpsat.context import ModelContext


def add_internal_edges(ctx: ModelContext) -> None:
    m = ctx.model
    for job in ctx.problem.jobs:
        for mode in ctx.live_modes(job):
            enf = ctx.enf(job.name, mode.name)
            for e in mode.edges:
                c = m.add(ctx.start[e.after] >= ctx.end(e.before) + e.lag)
                if enf:
                    c.only_enforce_if(enf)


def add_ready(ctx: ModelContext) -> None:
    m = ctx.model
    idx = ctx.index
    for job in ctx.problem.jobs:
        live = ctx.live_modes(job)
        if len(live) == 1:
            ctx.ready[job.name] = ctx.end(live[0].output)
            continue
        lo = min(idx.head[md.output] + md.task(md.output).duration for md in live)
        hi = max(ctx.horizon - idx.tail[md.output] for md in live)
        r = m.new_int_var(lo, hi, f"ready[{job.name}]")
        for md in live:
            m.add(r == ctx.end(md.output)).only_enforce_if(ctx.lit[(job.name, md.name)])
        ctx.ready[job.name] = r
        ctx.ready_var[job.name] = r


def _out_resources(ctx: ModelContext, job: str) -> list[str]:
    res: list[str] = []
    for md in ctx.live_modes(job):
        r = md.task(md.output).resource
        if r not in res:
            res.append(r)
    return res


def out_literal(ctx: ModelContext, job: str, resource: str):
    """Literal 'job's chosen mode has its output task on `resource`' (created once)."""
    key = (job, resource)
    if key in ctx.out_lit:
        return ctx.out_lit[key]
    lits = [ctx.lit[(job, md.name)] for md in ctx.live_modes(job)
            if md.task(md.output).resource == resource]
    if len(lits) == 1:
        y = lits[0]
    else:
        y = ctx.model.new_bool_var(f"out[{job}|{resource}]")
        ctx.model.add(y == sum(lits))
    ctx.out_lit[key] = y
    return y


def add_dependencies(ctx: ModelContext) -> None:
    m = ctx.model
    lag = ctx.problem.lag
    for job in ctx.problem.jobs:
        for a in ctx.index.producers[job.name]:
            out_res = _out_resources(ctx, a)
            for mode in ctx.live_modes(job):
                enf = ctx.enf(job.name, mode.name)
                for u in mode.inputs:
                    ures = mode.task(u).resource
                    lags = {r: lag(r, ures) for r in out_res}
                    base = min(lags.values())
                    c = m.add(ctx.start[u] >= ctx.ready[a] + base)
                    if enf:
                        c.only_enforce_if(enf)
                    for r in out_res:
                        if lags[r] > base:
                            y = out_literal(ctx, a, r)
                            m.add(ctx.start[u] >= ctx.ready[a] + lags[r]).only_enforce_if(enf + [y])


def add_precedence(ctx: ModelContext) -> None:
    add_internal_edges(ctx)
    add_ready(ctx)
    add_dependencies(ctx)
