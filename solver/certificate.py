"""Certificate of a solve, and an independent checker of solutions.

`Certificate` is what every run reports about its solve: status, objective, proven bound, gap,
wall time, incumbent/bound history, and the settings that make it reproducible (workers, seed,
time limit). `check_solution` re-verifies a Solution against the problem's rules without any
solver code (used by the tests, and cheap enough to run on every solve).
"""

from __future__ import annotations

from dataclasses import asdict, dataclass, field

from solver.problem import HOST, SchedulingProblem, Solution


@dataclass
class Certificate:
    method: str
    status: str  # OPTIMAL | FEASIBLE | INFEASIBLE | UNKNOWN | HEURISTIC
    objective: int | None
    bound: int | None
    gap: float | None
    wall_seconds: float
    history: list[tuple[float, int | None, int | None]] = field(default_factory=list)
    workers: int | None = None
    seed: int | None = None
    time_limit: float | None = None
    message: str = ""

    @classmethod
    def from_solution(
        cls, solution: Solution, workers: int | None = None, seed: int | None = None, time_limit: float | None = None
    ) -> Certificate:
        return cls(
            method=solution.method,
            status=solution.status,
            objective=solution.objective,
            bound=solution.bound,
            gap=solution.gap,
            wall_seconds=solution.wall_seconds,
            history=[tuple(h) for h in solution.history],
            workers=workers,
            seed=seed,
            time_limit=time_limit,
            message=solution.message,
        )

    def to_dict(self) -> dict:
        d = asdict(self)
        d["history"] = [list(h) for h in self.history]
        return d


def check_solution(problem: SchedulingProblem, solution: Solution) -> list[str]:
    """Every violated rule of `solution` (empty list: the schedule is valid).

    Checks: one existing mode per job; a start >= 0 for every task of the chosen modes (a host
    task's >= the host's release, the end of the program's launch); internal
    edges with lags; dependencies with lags; one task at a time per resource; capacity per group;
    the objective is at least the latest task end.
    """
    errs: list[str] = []
    starts = solution.starts
    chosen = {}
    for job in problem.jobs:
        name = solution.modes.get(job.name)
        mode = next((m for m in job.modes if m.name == name), None)
        if mode is None:
            errs.append(f"job {job.name}: mode {name!r} is not one of its modes")
            continue
        chosen[job.name] = mode
        for t in mode.tasks:
            if t.name not in starts:
                errs.append(f"task {t.name}: no start")
            elif starts[t.name] < 0:
                errs.append(f"task {t.name}: negative start {starts[t.name]}")
            elif t.resource == HOST and starts[t.name] < problem.host_release:
                errs.append(
                    f"task {t.name}: starts {starts[t.name]} before the host's launch ends at {problem.host_release}"
                )
    if errs:
        return errs
    dur = {t.name: t.duration for m in chosen.values() for t in m.tasks}
    for job in problem.jobs:
        m = chosen[job.name]
        for e in m.edges:
            need = starts[e.before] + dur[e.before] + e.lag
            if starts[e.after] < need:
                errs.append(f"edge {e.before}->{e.after}: start {starts[e.after]} < {need}")
    for d in problem.dependencies:
        a, b = chosen[d.before], chosen[d.after]
        for o, i in problem.links(d, a, b):
            out, u = a.task(o), b.task(i)
            need = starts[out.name] + out.duration + problem.lag(out.resource, u.resource)
            if starts[u.name] < need:
                errs.append(f"dependency {d.before}->{d.after}: {u.name} starts {starts[u.name]} < {need}")
    per_res: dict[str, list[tuple[int, int, str]]] = {}
    for m in chosen.values():
        for t in m.tasks:
            per_res.setdefault(t.resource, []).append((starts[t.name], starts[t.name] + t.duration, t.name))
    for r, ivs in per_res.items():
        ivs.sort()
        for (s1, e1, n1), (s2, e2, n2) in zip(ivs, ivs[1:]):
            if s2 < e1:
                errs.append(f"resource {r}: {n1} [{s1},{e1}) overlaps {n2} [{s2},{e2})")
    for g in problem.groups:
        used = sum(m.usage.get(g.name, 0) for m in chosen.values()) * problem.repeat
        if used > g.capacity_rows:
            errs.append(f"group {g.name}: {used} rows per bank > capacity {g.capacity_rows}")
    max_end = max((s for ivs in per_res.values() for _, s, _ in ivs), default=0)
    if solution.objective is not None and solution.objective < max_end:
        errs.append(f"objective {solution.objective} < latest task end {max_end}")
    return errs


def busy_time(problem: SchedulingProblem, solution: Solution) -> dict[str, int]:
    """Total duration of the chosen tasks per resource."""
    work = {r: 0 for r in problem.resources()}
    for job in problem.jobs:
        mode = next(m for m in job.modes if m.name == solution.modes[job.name])
        for t in mode.tasks:
            work[t.resource] += t.duration
    return work


__all__ = ["Certificate", "check_solution", "busy_time", "HOST"]
