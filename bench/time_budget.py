"""Where a compiled program's cycles go, per channel group: PIM task work, refresh, and the rest
(the channels wait for the host). Tells whether a schedule gain is left and of what kind.

    .venv/bin/python bench/time_budget.py INSTANCE... [--method cpsat] [--time-limit 20] [--timeline]

For every channel group of the emitted program: makespan = PIM task work + REF time + waiting.
PIM task work is the sum of the exact durations of the group's tasks (row changes included);
the bandwidth figure beside it is what the same bytes need at the units' peak rate.
"""

from __future__ import annotations

import argparse

from pimsat.instance import load_instance
from pimsat.pipeline import SolveOptions, run


def budget(path: str, method: str, time_limit: float, timeline: bool = False) -> list[str]:
    inst = load_instance(path)
    r = run(inst, SolveOptions(method=method, time_limit=time_limit, functional=False, record=False, workers=1))
    total = r.sim.cycles
    tasks = {t.name: t for j in r.problem.jobs for m in j.modes for t in m.tasks}
    tRFC = r.problem.refresh.tRFC if r.problem.refresh else 0
    lines = [
        f"{inst.name} ({method}): {total:,} cycles; solver-free bound {r.bounds.cycles:,} "
        f"(bandwidth alone {r.bounds.bandwidth_cycles:,})"
    ]
    for g in r.problem.groups:
        work = sum(tasks[n].duration for n in r.compiled.task_starts if tasks[n].resource == g.name)
        ref = len(r.compiled.refreshes.get(g.name, ())) * tRFC
        wait = total - work - ref
        lines.append(
            f"  {g.name}: PIM task work {work:,} ({work / total:.1%}), REF {ref:,} ({ref / total:.1%}), "
            f"waiting for the host {wait:,} ({wait / total:.1%})"
        )
    if timeline:  # the host and the first group: start, end, task
        first = r.problem.groups[0].name
        for name, start in sorted(r.compiled.task_starts.items(), key=lambda kv: (kv[1], kv[0])):
            t = tasks[name]
            if t.resource in ("host", first):
                lines.append(f"  {start:>12,} {start + t.duration:>12,}  {t.resource:<5} {name}")
    return lines


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("instances", nargs="+")
    ap.add_argument("--method", default="cpsat", choices=("naive", "greedy", "cpsat"))
    ap.add_argument("--time-limit", type=float, default=20.0)
    ap.add_argument("--timeline", action="store_true", help="also list the host's and group g0's tasks")
    a = ap.parse_args()
    for path in a.instances:
        print("\n".join(budget(path, a.method, a.time_limit, a.timeline)))


if __name__ == "__main__":
    main()
