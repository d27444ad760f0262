"""Mode choice and task intervals.

- One Bool per (job, mode) with `ExactlyOne` per job — only for jobs with a real choice: a job
  whose only mode (or only mode that fits the horizon) is fixed gets no Bool, and its tasks get
  fixed-presence intervals.
- One interval per task of each live mode: optional (presence = the mode's Bool) when the job
  has a choice, fixed presence otherwise. Sizes are the exact durations (fixed-size intervals:
  no end or size variables).
- Start domains are `[head, H - duration - tail]` (see `index.py`: valid for every schedule of
  makespan <= H). A mode whose domain is empty for some task cannot appear in any schedule of
  makespan <= H and is left out of the model ("dead"); if every mode of a job is dead the
  horizon is infeasible (`HorizonInfeasible`).
"""

from __future__ import annotations

from solver.cpsat.context import ModelContext


class HorizonInfeasible(Exception):
    pass


def add_modes(ctx: ModelContext) -> None:
    m = ctx.model
    idx = ctx.index
    H = ctx.horizon
    for r in idx.resources:
        ctx.by_resource[r] = []
    for job in ctx.problem.jobs:
        live = []
        for mode in job.modes:
            if all(idx.head[t.name] <= H - t.duration - idx.tail[t.name] for t in mode.tasks):
                live.append(mode)
            else:
                ctx.dead.append((job.name, mode.name))
        if not live:
            raise HorizonInfeasible(f"job {job.name}: no mode fits the horizon of {H:,} cycles")
        ctx.live[job.name] = live
        if len(live) == 1:
            ctx.lit[(job.name, live[0].name)] = None
        else:
            lits = []
            for mode in live:
                lit = m.new_bool_var(f"x[{job.name}|{mode.name}]")
                ctx.lit[(job.name, mode.name)] = lit
                lits.append(lit)
            m.add_exactly_one(lits)
        for mode in live:
            lit = ctx.lit[(job.name, mode.name)]
            for t in mode.tasks:
                lo = idx.head[t.name]
                hi = H - t.duration - idx.tail[t.name]
                s = m.new_int_var(lo, hi, f"s[{t.name}]")
                ctx.start[t.name] = s
                if lit is None:
                    iv = m.new_fixed_size_interval_var(s, t.duration, f"i[{t.name}]")
                else:
                    iv = m.new_optional_fixed_size_interval_var(s, t.duration, lit, f"i[{t.name}]")
                ctx.interval[t.name] = iv
                ctx.by_resource[t.resource].append(t.name)
