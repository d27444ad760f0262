"""One task at a time per resource: NoOverlap over the host's intervals and over each group's.

Intervals are optional exactly where the job has a mode choice (see modes.py); a resource with
fewer than two intervals needs no constraint.
"""

from __future__ import annotations

from solver.cpsat.context import ModelContext


def add_resources(ctx: ModelContext) -> None:
    for r in ctx.index.resources:
        names = ctx.by_resource.get(r, [])
        if len(names) >= 2:
            ctx.model.add_no_overlap([ctx.interval[n] for n in names])
