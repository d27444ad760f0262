"""Internal mode edges and job dependencies.

- Internal edge (a -> b, lag) of mode m: start(b) >= end(a) + lag, enforced by m's literal.
- `ready[(j, op, part)]`: for a job with a choice, an integer var equal to the end of the
  chosen mode's task that makes op's result ready for a reader of `part` (`Mode.output_for`:
  a head group's or micro-batch's task where the mode pipelines so; op None: the output task),
  enforced by each mode's literal; when all modes agree on that task, simply its end.
- Dependency a -> b (`SchedulingProblem.ports`): each input task u of b's chosen mode that reads
  a consumer op starts at or after ready[(a, producer op)] + lag(resource of that task,
  resource of u). When a's live modes put that task on different resources, the lag depends on
  a's choice: the constraint with the smallest possible lag holds whenever b's mode is chosen,
  and each larger lag is added under the extra literal "a's task is on resource r" (`out_lit`,
  the sum of a's literals with that resource; reused across consumers).
"""

from __future__ import annotations

from solver.cpsat.context import ModelContext
from solver.problem import Range


def add_internal_edges(ctx: ModelContext) -> None:
    m = ctx.model
    for job in ctx.problem.jobs:
        for mode in ctx.live_modes(job):
            enf = ctx.enf(job.name, mode.name)
            for e in mode.edges:
                c = m.add(ctx.start[e.after] >= ctx.end(e.before) + e.lag)
                if enf:
                    c.only_enforce_if(enf)


def _out_task(mode, op: str | None, part: Range | None = None) -> str:
    return mode.output_for(op, part)


def _name(job: str, op: str | None, part: Range | None) -> str:
    cut = [] if part is None else [f"{part.axis.value[0]}{part.lo}-{part.hi}"]
    parts = [job] + ([] if op is None else [op]) + cut
    return "|".join(parts)


def ready(ctx: ModelContext, job: str, op: str | None = None, part: Range | None = None):
    """End of the chosen mode's task that makes `op`'s result ready (None: the job's output)
    for a reader of `part` (None: all of it): an expression when every live mode agrees on the
    task, else an integer var tied to each mode's task by its literal (created once, reused
    across consumers)."""
    key = (job, op, part)
    if key in ctx.ready:
        return ctx.ready[key]
    m, idx = ctx.model, ctx.index
    live = ctx.live_modes(ctx.index.jobs[job])
    outs = [md.task(_out_task(md, op, part)) for md in live]
    if len(live) == 1 or len({t.name for t in outs}) == 1:
        r = ctx.end(outs[0].name)
    else:
        lo = min(idx.head[t.name] + t.duration for t in outs)
        hi = max(ctx.horizon - idx.tail[t.name] for t in outs)
        r = m.new_int_var(lo, hi, f"ready[{_name(job, op, part)}]")
        for md, t in zip(live, outs):
            m.add(r == ctx.end(t.name)).only_enforce_if(ctx.lit[(job, md.name)])
        ctx.ready_var[key] = r
    ctx.ready[key] = r
    return r


def _out_resources(ctx: ModelContext, job: str, op: str | None, part: Range | None = None) -> list[str]:
    res: list[str] = []
    for md in ctx.live_modes(ctx.index.jobs[job]):
        r = md.task(_out_task(md, op, part)).resource
        if r not in res:
            res.append(r)
    return res


def out_literal(ctx: ModelContext, job: str, op: str | None, resource: str, part: Range | None = None):
    """Literal 'job's chosen mode makes op's result (for a reader of `heads`) ready on
    `resource`' (created once)."""
    key = (job, op, part, resource)
    if key in ctx.out_lit:
        return ctx.out_lit[key]
    lits = [
        ctx.lit[(job, md.name)]
        for md in ctx.live_modes(ctx.index.jobs[job])
        if md.task(_out_task(md, op, part)).resource == resource
    ]
    if len(lits) == 1:
        y = lits[0]
    else:
        y = ctx.model.new_bool_var(f"out[{_name(job, op, part)}|{resource}]")
        ctx.model.add(y == sum(lits))
    ctx.out_lit[key] = y
    return y


def add_dependencies(ctx: ModelContext) -> None:
    m = ctx.model
    lag = ctx.problem.lag
    for job in ctx.problem.jobs:
        for d in ctx.index.deps_into[job.name]:
            a = d.before
            for mode in ctx.live_modes(job):
                enf = ctx.enf(job.name, mode.name)
                seen = set()
                for pop, _cop, u in ctx.problem.ports(d, mode):
                    if (pop, u) in seen:
                        continue
                    seen.add((pop, u))
                    part = mode.reads_range(u) if pop is not None else None
                    out_res = _out_resources(ctx, a, pop, part)
                    ures = mode.task(u).resource
                    lags = {r: lag(r, ures) for r in out_res}
                    base = min(lags.values())
                    r_a = ready(ctx, a, pop, part)
                    c = m.add(ctx.start[u] >= r_a + base)
                    if enf:
                        c.only_enforce_if(enf)
                    for r in out_res:
                        if lags[r] > base:
                            y = out_literal(ctx, a, pop, r, part)
                            m.add(ctx.start[u] >= r_a + lags[r]).only_enforce_if(enf + [y])


def add_precedence(ctx: ModelContext) -> None:
    add_internal_edges(ctx)
    for job in ctx.problem.jobs:
        ready(ctx, job.name)  # every job's output end, consumed or not (keeps the model of earlier versions)
    add_dependencies(ctx)
