"""Solver-independent analysis of a SchedulingProblem (no OR-Tools here).

`ProblemIndex` validates the problem once (the contract of `solver.problem` is trusted for
types, but cross references — task names, resources, edges, dependency jobs, topological
order — are checked here because a mistake there would silently produce a wrong schedule),
and precomputes what every solver needs:

- task lookup, topological order of each mode's internal DAG, dependencies into/from each job;
- heads: `head[t]` = a lower bound on the start of task t *if its mode is chosen*, from internal
  edges and, for an input task, from the cheapest possible end (min over the producer's modes)
  of each producer result it waits for (`SchedulingProblem.ports`: op granularity);
- tails: `tail[t]` = a lower bound on `makespan - end(t)` if t's mode is chosen (internal
  successors; for a task that makes some op's result ready, every consumer's cheapest mode:
  min over the consumer's modes of max over the input tasks that read that result);
- a solver-free lower bound on the makespan (critical path, resource work, lumped refresh);
- per-group minimum capacity need, and the human-readable capacity diagnostics.

Both bounds are valid for every feasible schedule (they only relax the mode choice), so start
domains `[head, H - duration - tail]` and the makespan domain `[lower_bound, H]` cut nothing
feasible.
"""

from __future__ import annotations

from collections.abc import Mapping
from dataclasses import dataclass

from solver.problem import HOST, Dependency, Job, Mode, Range, SchedulingProblem, Solution, Task


@dataclass(frozen=True)
class TaskRef:
    job: Job
    mode: Mode
    task: Task
    job_index: int
    mode_index: int
    task_index: int  # position in mode.tasks


def format_channels(channels: tuple[int, ...]) -> str:
    """(0,1,2,3,8,9) -> '0-3,8-9'."""
    if not channels:
        return "none"
    chans = sorted(set(channels))
    parts: list[str] = []
    lo = prev = chans[0]
    for c in chans[1:] + [None]:  # type: ignore[list-item]
        if c is not None and c == prev + 1:
            prev = c
            continue
        parts.append(f"{lo}" if lo == prev else f"{lo}-{prev}")
        if c is not None:
            lo = prev = c
    return ",".join(parts)


def lumped_makespan(problem: SchedulingProblem, max_end: int, work: dict[str, int]) -> int:
    """Smallest M >= max_end with M >= work[g] + tRFC * floor(M / tREFI) for every group g.

    This is the makespan the CP-SAT model assigns to a schedule whose last task ends at
    `max_end` (the lumped refresh relaxation: every REF owed within [0, M] occupies its group
    for tRFC cycles, and no task of that group runs meanwhile).
    """
    ref = problem.refresh
    if ref is None or not problem.groups:
        return max(0, max_end)
    return ref.stretch(max([work.get(g.name, 0) for g in problem.groups] + [0]), max(0, max_end))


def solution_makespan(problem: SchedulingProblem, solution: Solution) -> int:
    """The model makespan (lumped refresh included) of a solution's modes and starts."""
    idx = problem_index(problem)
    max_end = 0
    work: dict[str, int] = {}
    for job in problem.jobs:
        mode = idx.mode(job.name, solution.modes[job.name])
        for t in mode.tasks:
            max_end = max(max_end, solution.starts[t.name] + t.duration)
            if t.resource != HOST:
                work[t.resource] = work.get(t.resource, 0) + t.refresh_work
    return lumped_makespan(problem, max_end, work)


def problem_index(problem: SchedulingProblem) -> ProblemIndex:
    """Validate and index `problem` (cheap: linear in tasks + edges + dependencies)."""
    return ProblemIndex(problem)


class ProblemIndex:
    def __init__(self, problem: SchedulingProblem):
        self.problem = problem
        self.n_jobs = len(problem.jobs)
        self.group_names = [g.name for g in problem.groups]
        self.resources = problem.resources()
        self.lag = problem.lag
        self._validate_and_index()
        self._compute_heads()
        self._compute_tails()

    # ----------------------------------------------------------------- indexing
    def _validate_and_index(self) -> None:
        p = self.problem
        if len(set(self.resources)) != len(self.resources):
            raise ValueError(f"duplicate resource names: {self.resources}")
        resources = set(self.resources)
        groups = set(self.group_names)
        if p.refresh is not None and p.refresh.tRFC >= p.refresh.tREFI:
            raise ValueError(f"refresh tRFC {p.refresh.tRFC} >= tREFI {p.refresh.tREFI}")
        if p.sync_cycles < 0:
            raise ValueError("sync_cycles must be >= 0")
        self.tasks: dict[str, TaskRef] = {}
        self.modes: dict[tuple[str, str], Mode] = {}
        self.mode_pos: dict[tuple[str, str], int] = {}
        self.topo: dict[tuple[str, str], list[Task]] = {}
        self.in_edges: dict[str, list[tuple[str, int]]] = {}  # task -> [(before, lag)]
        self.out_edges: dict[str, list[tuple[str, int]]] = {}  # task -> [(after, lag)]
        self.jobs_pos: dict[str, int] = {}
        self.jobs: dict[str, Job] = {}
        for ji, job in enumerate(p.jobs):
            if job.name in self.jobs_pos:
                raise ValueError(f"duplicate job name {job.name!r}")
            if not job.modes:
                raise ValueError(f"job {job.name!r} has no mode")
            self.jobs_pos[job.name] = ji
            self.jobs[job.name] = job
            for mi, mode in enumerate(job.modes):
                key = (job.name, mode.name)
                if key in self.modes:
                    raise ValueError(f"job {job.name!r}: duplicate mode name {mode.name!r}")
                self.modes[key] = mode
                self.mode_pos[key] = mi
                if not mode.tasks:
                    raise ValueError(f"job {job.name!r} mode {mode.name!r} has no task")
                names = set()
                for ti, t in enumerate(mode.tasks):
                    if t.name in self.tasks or t.name in names:
                        raise ValueError(f"duplicate task name {t.name!r}")
                    if t.resource not in resources:
                        raise ValueError(f"task {t.name!r}: unknown resource {t.resource!r}")
                    if t.duration < 1:
                        raise ValueError(f"task {t.name!r}: duration {t.duration} < 1")
                    names.add(t.name)
                    self.tasks[t.name] = TaskRef(job, mode, t, ji, mi, ti)
                    self.in_edges[t.name] = []
                    self.out_edges[t.name] = []
                for e in mode.edges:
                    if e.before not in names or e.after not in names:
                        raise ValueError(
                            f"job {job.name!r} mode {mode.name!r}: edge {e.before}->{e.after} "
                            "names a task outside the mode"
                        )
                    self.in_edges[e.after].append((e.before, e.lag))
                    self.out_edges[e.before].append((e.after, e.lag))
                if mode.output not in names:
                    raise ValueError(
                        f"job {job.name!r} mode {mode.name!r}: output {mode.output!r} is not a task of the mode"
                    )
                for i in mode.inputs:
                    if i not in names:
                        raise ValueError(f"job {job.name!r} mode {mode.name!r}: input {i!r} is not a task of the mode")
                for g, rows in mode.usage.items():
                    if g not in groups:
                        raise ValueError(f"job {job.name!r} mode {mode.name!r}: usage of unknown group {g!r}")
                    if rows < 0:
                        raise ValueError(f"job {job.name!r} mode {mode.name!r}: negative usage")
                self.topo[key] = self._topo_order(job, mode)
        self.deps_into: dict[str, list[Dependency]] = {j.name: [] for j in p.jobs}
        self.deps_from: dict[str, list[Dependency]] = {j.name: [] for j in p.jobs}
        seen = set()
        for d in p.dependencies:
            if d.before not in self.jobs_pos or d.after not in self.jobs_pos:
                raise ValueError(f"dependency {d.before}->{d.after} names an unknown job")
            if (d.before, d.after) in seen:
                continue
            seen.add((d.before, d.after))
            if self.jobs_pos[d.before] >= self.jobs_pos[d.after]:
                raise ValueError(f"jobs are not in topological order: {d.before} -> {d.after}")
            self._check_ops(d)
            self.deps_into[d.after].append(d)
            self.deps_from[d.before].append(d)

    @staticmethod
    def _topo_order(job: Job, mode: Mode) -> list[Task]:
        """Kahn's algorithm, ties broken by position in mode.tasks (deterministic)."""
        pos = {t.name: i for i, t in enumerate(mode.tasks)}
        indeg = {t.name: 0 for t in mode.tasks}
        succ: dict[str, list[str]] = {t.name: [] for t in mode.tasks}
        for e in mode.edges:
            indeg[e.after] += 1
            succ[e.before].append(e.after)
        import heapq

        ready = [pos[n] for n, d in indeg.items() if d == 0]
        heapq.heapify(ready)
        order: list[Task] = []
        while ready:
            i = heapq.heappop(ready)
            t = mode.tasks[i]
            order.append(t)
            for s in succ[t.name]:
                indeg[s] -= 1
                if indeg[s] == 0:
                    heapq.heappush(ready, pos[s])
        if len(order) != len(mode.tasks):
            raise ValueError(f"job {job.name!r} mode {mode.name!r}: internal edges form a cycle")
        return order

    # ----------------------------------------------------------------- bounds
    def _compute_heads(self) -> None:
        self.head: dict[str, int] = {}
        self.min_ready: dict[str, int] = {}  # job -> min over modes of earliest output end
        for job in self.problem.jobs:
            best = None
            for mode in job.modes:
                # input task -> (producer job, op, part it reads)
                waits: dict[str, list[tuple[str, str | None, Range | None]]] = {}
                for d in self.deps_into[job.name]:
                    for pop, _cop, u in self.problem.ports(d, mode):
                        waits.setdefault(u, []).append((d.before, pop, mode.reads_range(u)))
                for t in self.topo[(job.name, mode.name)]:
                    h = self.problem.host_release if t.resource == HOST else 0
                    for b, lag in self.in_edges[t.name]:
                        h = max(h, self.head[b] + self.tasks[b].task.duration + lag)
                    for producer, pop, part in waits.get(t.name, ()):
                        h = max(h, self.earliest_available(producer, t.resource, pop, part))
                    self.head[t.name] = h
                out = mode.task(mode.output)
                end = self.head[out.name] + out.duration
                best = end if best is None else min(best, end)
            self.min_ready[job.name] = best  # type: ignore[assignment]

    def earliest_available(self, producer: str, resource: str, op: str | None = None, part: Range | None = None) -> int:
        """Lower bound on when a consumer task on `resource` may start after `producer` (after
        its op `op`'s result, None: after its output; for a reader of `part`, None: all)."""
        job = self.jobs[producer]
        best = None
        for mode in job.modes:
            out = mode.task(mode.output_for(op, part))
            v = self.head[out.name] + out.duration + self.lag(out.resource, resource)
            best = v if best is None else min(best, v)
        return best  # type: ignore[return-value]

    def _compute_tails(self) -> None:
        self.tail: dict[str, int] = {}
        for job in reversed(self.problem.jobs):
            for mode in job.modes:
                for t in reversed(self.topo[(job.name, mode.name)]):
                    q = 0
                    for a, lag in self.out_edges[t.name]:
                        q = max(q, lag + self.tasks[a].task.duration + self.tail[a])
                    for d in self.deps_from[job.name]:
                        for pop, cop in d.ops or ((None, None),):
                            if t.name == mode.output_for(pop) or any(
                                t.name == h[2] for h in (mode.ranges_of(pop) if pop else ())
                            ):
                                q = max(q, self._consumer_tail(d.after, t, mode, pop, cop))
                    self.tail[t.name] = q

    def _consumer_tail(self, consumer: str, task: Task, producer: Mode, pop: str | None, op: str | None) -> int:
        """Least time after producer task `task` (of mode `producer`) until the end, over
        `consumer`'s modes: only the input tasks that read op `op` (None: every input task) and
        wait for this task (`Mode.output_for` of producer op `pop`, by the part they read)."""
        job = self.jobs[consumer]
        from_resource = task.resource
        best = None
        for mode in job.modes:
            v = 0
            for i in mode.inputs:
                if op is not None and not mode.reads_op(i, op):
                    continue
                if producer.output_for(pop, mode.reads_range(i) if pop is not None else None) != task.name:
                    continue
                u = mode.task(i)
                v = max(v, self.lag(from_resource, u.resource) + u.duration + self.tail[u.name])
            best = v if best is None else min(best, v)
        return best or 0

    def mode_span(self, job: str, mode: str) -> int:
        """Lower bound on the makespan if `mode` is chosen for `job`."""
        m = self.modes[(job, mode)]
        return max(self.head[t.name] + t.duration + self.tail[t.name] for t in m.tasks)

    def min_work(self) -> dict[str, int]:
        """Per resource: the least total busy time over all mode choices (less the tasks' own
        REFs, Task.refresh_credit: what lumped refresh stretches)."""
        work = {r: 0 for r in self.resources}
        for job in self.problem.jobs:
            per_mode = []
            for mode in job.modes:
                w = {r: 0 for r in self.resources}
                for t in mode.tasks:
                    w[t.resource] += t.refresh_work
                per_mode.append(w)
            for r in self.resources:
                work[r] += min(w[r] for w in per_mode)
        return work

    def lower_bound(self, horizon: int | None = None) -> int:
        """Solver-free lower bound on the model makespan (valid for every feasible schedule)."""
        modes_ok = []
        cp = 0
        for job in self.problem.jobs:
            spans = [self.mode_span(job.name, m.name) for m in job.modes]
            if horizon is not None:
                ok = [s for s in spans if s <= horizon]
                spans = ok or spans
            cp = max(cp, min(spans))
            modes_ok.append(spans)
        work = self.min_work()
        host = work.get(HOST, 0)
        groups = {g: work[g] for g in self.group_names}
        return lumped_makespan(self.problem, max(cp, host), groups)

    def serial_horizon(self) -> int:
        """An upper bound on the makespan of a fully serial schedule of the longest modes."""
        sync = self.problem.sync_cycles
        total = 0
        for job in self.problem.jobs:
            worst = 0
            for mode in job.modes:
                s = 0
                for t in mode.tasks:
                    s += t.duration + sync + sum(max(0, lag) for _, lag in self.in_edges[t.name])
                worst = max(worst, s)
            total += worst
        return lumped_makespan(self.problem, total, {g: total for g in self.group_names})

    # ----------------------------------------------------------------- capacity
    def min_usage(self) -> dict[str, int]:
        rep = self.problem.repeat
        need = {g: 0 for g in self.group_names}
        for job in self.problem.jobs:
            for g in self.group_names:
                need[g] += min(m.usage.get(g, 0) for m in job.modes) * rep
        return need

    def capacity_problem(self) -> str | None:
        """A message naming every group whose minimum need exceeds its capacity, else None."""
        need = self.min_usage()
        msgs = []
        for g in self.problem.groups:
            if need[g.name] > g.capacity_rows:
                msgs.append(capacity_message(g.name, g.channels, need[g.name], g.capacity_rows, at_least=True))
        return "; ".join(msgs) if msgs else None

    def _check_ops(self, d: Dependency) -> None:
        """Op-level dependency pairs name covered ops, and every mode of the consumer has an
        input task that reads each consumer op (else the dependency would silently vanish)."""
        before, after = self.jobs[d.before], self.jobs[d.after]
        for pop, cop in d.ops:
            if pop not in before.ops or cop not in after.ops:
                raise ValueError(f"dependency {d.before}->{d.after}: ops ({pop}, {cop}) are not covered by the jobs")
            for mode in after.modes:
                if not any(mode.reads_op(u, cop) for u in mode.inputs):
                    raise ValueError(
                        f"dependency {d.before}->{d.after}: no input task of mode {mode.name!r} reads op {cop}"
                    )

    def input_waits(self, job: str, mode: Mode, chosen: Mapping[str, str]) -> dict[str, list[str]]:
        """Input task of `mode` -> the output tasks (of the producers' `chosen` modes) it waits for."""
        waits: dict[str, list[str]] = {}
        for d in self.deps_into[job]:
            for o, u in self.problem.links(d, self.mode(d.before, chosen[d.before]), mode):
                waits.setdefault(u, []).append(o)
        return waits

    def mode(self, job: str, mode: str) -> Mode:
        try:
            return self.modes[(job, mode)]
        except KeyError:
            raise KeyError(f"job {job!r} has no mode {mode!r}") from None


def capacity_message(group: str, channels: tuple[int, ...], need: int, cap: int, at_least: bool = False) -> str:
    qual = "at least " if at_least else ""
    return f"group {group} (channels {format_channels(channels)}) needs {qual}{need:,} rows per bank, {cap:,} available"
