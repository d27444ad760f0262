"""Small hand-built scheduling problems for the solver tests (2-10 jobs, 1-3 groups + host).

The test modules import these helpers as `solver_testkit` (this module registers itself under
that name: pytest imports conftest files under path-dependent names, and tests/ir has its own).
"""

from __future__ import annotations

import itertools
import random
import sys
from contextlib import contextmanager
from pathlib import Path

import pytest

sys.modules.setdefault("solver_testkit", sys.modules[__name__])

ROOT = str(Path(__file__).resolve().parents[2])
if ROOT not in sys.path:
    sys.path.insert(0, ROOT)

import solver.task_timing as task_timing  # noqa: E402
from pimsat.instance import load_instance  # noqa: E402
from pimsat.pipeline import lower_program  # noqa: E402
from solver.problem import HOST, Dependency, Edge, Group, Job, Mode, Refresh, SchedulingProblem, Task  # noqa: E402
from solver.synthetic import pim_mode  # noqa: E402,F401


# ----------------------------------------------------------------------------- builders
def single(job: str, resource: str, duration: int, usage: dict | None = None, mode: str = "only") -> Job:
    """A job with one mode made of one task."""
    t = Task(f"{job}/{mode}", resource, duration)
    return Job(job, (job,), (Mode(mode, (t,), (), (t.name,), t.name, dict(usage or {})),))


def one_task_mode(job: str, mode: str, resource: str, duration: int, usage: dict | None = None) -> Mode:
    t = Task(f"{job}/{mode}", resource, duration)
    return Mode(mode, (t,), (), (t.name,), t.name, dict(usage or {}))


def chain_mode(
    job: str, mode: str, steps: list[tuple[str, int]], usage: dict | None = None, lags: list[int] | None = None
) -> Mode:
    """Tasks in a chain; input = first, output = last."""
    tasks = tuple(Task(f"{job}/{mode}/{i}", r, d) for i, (r, d) in enumerate(steps))
    lags = lags or [0] * (len(tasks) - 1)
    edges = tuple(Edge(a.name, b.name, lag) for a, b, lag in zip(tasks, tasks[1:], lags))
    return Mode(mode, tasks, edges, (tasks[0].name,), tasks[-1].name, dict(usage or {}))


def problem(
    name, jobs, deps=(), groups=(("g0", 1000),), refresh=None, sync=0, repeat=1, horizon=0
) -> SchedulingProblem:
    gs = [Group(g, tuple(range(4 * i, 4 * i + 4)), cap) for i, (g, cap) in enumerate(groups)]
    return SchedulingProblem(
        name=name,
        jobs=list(jobs),
        dependencies=[Dependency(a, b) for a, b in deps],
        groups=gs,
        refresh=refresh,
        sync_cycles=sync,
        repeat=repeat,
        horizon=horizon,
    )


def random_problem(
    seed: int,
    n_jobs: int = 5,
    n_groups: int = 2,
    refresh: bool = False,
    sync: int | None = None,
    capacity: int = 10_000,
) -> SchedulingProblem:
    """Layered GEMV-like jobs (host ops and PIM ops with placement choices)."""
    rng = random.Random(seed)
    groups = [f"g{i}" for i in range(n_groups)]
    jobs, deps = [], []
    for j in range(n_jobs):
        name = f"j{j}"
        if rng.random() < 0.3:
            jobs.append(single(name, HOST, rng.randint(5, 60)))
        else:
            mac, rows = rng.randint(20, 200), rng.randint(10, 400)
            bc, rd, ga = rng.randint(2, 20), rng.randint(5, 40), rng.randint(1, 10)
            modes = [pim_mode(name, groups, bc, mac, rd, ga, rows, name="naive[all]")]
            for k in range(1, n_groups + 1):
                for sub in itertools.combinations(groups, k):
                    if k == n_groups:
                        continue
                    modes.append(pim_mode(name, list(sub), bc, mac, rd, ga, rows))
            if rng.random() < 0.5:
                modes.append(one_task_mode(name, "host", HOST, mac * rng.randint(2, 4)))
            jobs.append(Job(name, (name,), tuple(modes)))
        for i in range(j):
            if rng.random() < 0.4:
                deps.append((f"j{i}", name))
    ref = Refresh(tREFI=400, tRFC=35, max_postponed=8) if refresh else None
    return problem(
        f"rand{seed}",
        jobs,
        deps,
        [(g, capacity) for g in groups],
        refresh=ref,
        sync=rng.randint(0, 8) if sync is None else sync,
    )


@pytest.fixture
def two_chains():
    """Two independent host->g0 chains: optimum overlaps them."""
    jobs = [single("a", HOST, 10), single("b", "g0", 20), single("c", HOST, 10), single("d", "g0", 20)]
    return problem("two_chains", jobs, [("a", "b"), ("c", "d")], sync=3)


# ----------------------------------------------------------------------------- brute force
def brute_force_optimum(p: SchedulingProblem) -> int:
    """Exact optimum of the model makespan (lumped refresh) by enumeration.

    Every mode combination (within capacity) x every order of the tasks on each resource; for a
    fixed order the earliest schedule is a longest path (a makespan-optimal schedule is
    semi-active, so this is exact). Only for tiny problems.
    """
    from solver.index import lumped_makespan

    best = None
    for combo in itertools.product(*[j.modes for j in p.jobs]):
        used = {g.name: 0 for g in p.groups}
        for m in combo:
            for g, u in m.usage.items():
                used[g] += u * p.repeat
        if any(used[g.name] > g.capacity_rows for g in p.groups):
            continue
        chosen = {j.name: m for j, m in zip(p.jobs, combo)}
        tasks = {t.name: t for m in combo for t in m.tasks}
        arcs = []  # (a, b, lag): b.start >= a.end + lag
        for m in combo:
            arcs += [(e.before, e.after, e.lag) for e in m.edges]
        for d in p.dependencies:
            a, b = chosen[d.before], chosen[d.after]
            for o, i in p.links(d, a, b):
                arcs.append((o, i, p.lag(a.task(o).resource, b.task(i).resource)))
        by_res: dict[str, list[str]] = {}
        for t in tasks.values():
            by_res.setdefault(t.resource, []).append(t.name)
        work = {r: sum(tasks[n].duration for n in ns) for r, ns in by_res.items() if r != HOST}
        res_lists = list(by_res.values())
        for orders in itertools.product(*[itertools.permutations(ns) for ns in res_lists]):
            seq = [(o[k], o[k + 1], 0) for o in orders for k in range(len(o) - 1)]
            start = _longest_path(tasks, arcs + seq)
            if start is None:
                continue
            end = max(start[n] + tasks[n].duration for n in tasks)
            val = lumped_makespan(p, end, work)
            best = val if best is None else min(best, val)
    return best


def _longest_path(tasks, arcs):
    succ = {n: [] for n in tasks}
    indeg = {n: 0 for n in tasks}
    for a, b, lag in arcs:
        succ[a].append((b, lag))
        indeg[b] += 1
    start = {n: 0 for n in tasks}
    stack = [n for n in tasks if indeg[n] == 0]
    seen = 0
    while stack:
        n = stack.pop()
        seen += 1
        for b, lag in succ[n]:
            start[b] = max(start[b], start[n] + tasks[n].duration + lag)
            indeg[b] -= 1
            if indeg[b] == 0:
                stack.append(b)
    return start if seen == len(tasks) else None


# ----------------------------------------------------------------------------- lowering
@contextmanager
def counted_oracle():
    """The number of command sequences the timing oracle is asked to time (a list of one int)."""
    inner = task_timing.timing_oracle()
    calls = [0]

    def oracle(hw, instrs, **kw):
        calls[0] += 1
        return inner(hw, instrs, **kw)

    task_timing.use_oracle(oracle)
    try:
        yield calls
    finally:
        task_timing.use_oracle(inner)


def lowered_at(path, sets=(), timings=None):
    inst = load_instance(path)
    hw, program = inst.build_hardware(list(sets)), inst.build_program()
    return hw, lower_program(hw, program, 4, timings)


def lowering_summary(lowered):
    """Everything lowering decides: per style every job's modes, tasks and durations, the timings
    by structure, the timed choices, and the bounds."""
    out = {}
    for style, (problem, lowering) in lowered.by_style.items():
        jobs = [(j.name, [(m.name, m.tasks, m.edges) for m in j.modes]) for j in problem.jobs]
        structures = {
            k: (t.duration, t.completion, t.refreshes, t.issue.tobytes()) for k, t in lowering.structures.items()
        }
        out[style] = (jobs, structures, lowering.split_macs, lowering.vector_groups,
                      lowering.double_buffers, lowering.max_tail)  # fmt: skip
    return out, lowered.bounds.hardware.as_dict(), lowered.bounds.cycles
