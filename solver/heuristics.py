"""Heuristic schedulers: `solve_greedy` (list scheduling) and `solve_naive` (program order).

Both return a `Solution` with status HEURISTIC (bound None), or INFEASIBLE with a message in
hardware terms when the capacity cannot be met. Both are deterministic (no randomness, every
tie broken by problem order).

Objective of a heuristic = the latest task end (model time). Refresh is *not* added: the
decoder lays out REFs and computes the exact makespan. (`solver.index.solution_makespan`
gives the CP-SAT model's value for the same schedule, lumped refresh included, for a like-for-like
comparison with `solve_cpsat`.)

greedy
    Jobs in the given topological order. For each job, every mode is tried: its tasks are
    placed in the mode's internal topological order, each at the earliest cycle that satisfies
    its internal edges (with lags), its dependencies (producer's output end + lag between the
    producer's output resource and the task's resource) and fits in a gap of its resource's
    timeline (gaps allowed: a task can slip in before already placed ones). The mode with the
    earliest output end wins (ties: less total capacity usage, then earlier end of its last task,
    then problem order). Capacity: a mode is skipped if it would leave too little room for the
    *minimum* need of the jobs still to come (a lookahead that keeps the greedy out of dead ends
    the per-group check can see); if no mode passes, any mode that still fits is taken. If the
    pass still runs out of rows, a capacity-first choice (jobs by decreasing usage, each mode
    chosen to keep the fullest group emptiest) is list-scheduled instead; if that fails too the
    status is UNKNOWN (INFEASIBLE is only reported when proven: some group's least possible
    need exceeds its capacity).
    The same list scheduler is also run with the modes `solve_naive` would choose, and, for each
    head-group count G some job offers (solver/head_groups.py), a pass whose jobs choose among
    their modes pipelined by G head groups where they have some (a softmax by head groups pays
    off only when the scores and the context run so too: the earliest-output-end rule, one job
    at a time, would not see it). The best schedule is returned (ties: the earliest-output-end
    one, then the naive modes', then the head-group passes in G order). So greedy is never worse
    than naive on the same problem. In the overlap lowering, naive's own program (the naive
    lowering's) has vendor-style twins among the modes (`vendor_twin_modes`): their list
    schedule is one more candidate.

naive
    What vendor libraries do: the mode named with the given prefix (fallback: the job's first
    mode), and everything strictly in program order with no overlap at all: each task starts
    after the previous task (on any resource) ends, plus the lag between their resources (and
    never before its edges and dependencies allow). That is the schedule's objective; the
    decoder keeps the order but starts each task as soon as its resource and its inputs allow,
    so the channel groups of one op run side by side in the program (docs/architecture.md,
    Baselines).
"""

from __future__ import annotations

import bisect
import time

from solver.index import ProblemIndex, capacity_message, problem_index
from solver.problem import HOST, Job, Method, Mode, SchedulingProblem, Solution, Status


class Timeline:
    """Busy intervals [s, e) of one resource, sorted and disjoint."""

    __slots__ = ("starts", "ends")

    def __init__(self) -> None:
        self.starts: list[int] = []
        self.ends: list[int] = []

    def copy(self) -> Timeline:
        t = Timeline()
        t.starts = list(self.starts)
        t.ends = list(self.ends)
        return t

    def earliest(self, est: int, duration: int) -> int:
        """Earliest s >= est such that [s, s + duration) is free."""
        i = bisect.bisect_right(self.ends, est)  # first interval ending after est
        s = est
        while i < len(self.starts):
            if s + duration <= self.starts[i]:
                return s
            s = max(s, self.ends[i])
            i += 1
        return s

    def insert(self, s: int, e: int) -> None:
        i = bisect.bisect_left(self.starts, s)
        self.starts.insert(i, s)
        self.ends.insert(i, e)


def _infeasible(method: str, message: str, t0: float) -> Solution:
    return Solution(
        method=method,
        status=Status.INFEASIBLE,
        modes={},
        starts={},
        objective=None,
        bound=None,
        wall_seconds=time.perf_counter() - t0,
        message=message,
    )


class _Scheduler:
    """Incremental list scheduler over the problem's resources."""

    def __init__(self, problem: SchedulingProblem, idx: ProblemIndex):
        self.p = problem
        self.idx = idx
        self.timelines = {r: Timeline() for r in idx.resources}
        if problem.host_release:  # the program's host kernel launch (solver/launch_chain.py)
            self.timelines[HOST].insert(0, problem.host_release)
        self.modes: dict[str, str] = {}
        self.starts: dict[str, int] = {}
        self.max_end = 0

    def place(self, job: Job, mode: Mode) -> tuple[dict[str, int], dict[str, Timeline]]:
        """Tentative placement of `mode`'s tasks; returns starts and the touched timelines."""
        idx = self.idx
        local: dict[str, Timeline] = {}
        starts: dict[str, int] = {}
        waits = idx.input_waits(job.name, mode, self.modes)
        for t in idx.topo[(job.name, mode.name)]:
            est = 0
            for b, lag in idx.in_edges[t.name]:
                est = max(est, starts[b] + idx.tasks[b].task.duration + lag)
            for o in waits.get(t.name, ()):
                src = idx.tasks[o].task
                est = max(est, self.starts[o] + src.duration + self.p.lag(src.resource, t.resource))
            tl = local.get(t.resource)
            if tl is None:
                tl = local[t.resource] = self.timelines[t.resource].copy()
            s = tl.earliest(est, t.duration)
            tl.insert(s, s + t.duration)
            starts[t.name] = s
        return starts, local

    def commit(self, job: Job, mode: Mode, starts: dict[str, int], local: dict[str, Timeline]) -> None:
        self.timelines.update(local)
        self.modes[job.name] = mode.name
        self.starts.update(starts)
        self.max_end = max(self.max_end, max(starts[t.name] + t.duration for t in mode.tasks))


def _capacity_excess(problem: SchedulingProblem, modes: dict[str, str], idx: ProblemIndex) -> str | None:
    used = {g.name: 0 for g in problem.groups}
    for job in problem.jobs:
        for g, u in idx.mode(job.name, modes[job.name]).usage.items():
            used[g] += u * problem.repeat
    msgs = [
        capacity_message(g.name, g.channels, used[g.name], g.capacity_rows)
        for g in problem.groups
        if used[g.name] > g.capacity_rows
    ]
    return "; ".join(msgs) if msgs else None


def schedule_with_modes(problem: SchedulingProblem, modes: dict[str, str], method: str = "greedy") -> Solution:
    """List-schedule fixed modes (jobs in problem order, tasks at their earliest fit)."""
    t0 = time.perf_counter()
    idx = problem_index(problem)
    msg = _capacity_excess(problem, modes, idx)
    if msg:
        return _infeasible(method, msg, t0)
    sch = _Scheduler(problem, idx)
    for job in problem.jobs:
        mode = idx.mode(job.name, modes[job.name])
        starts, local = sch.place(job, mode)
        sch.commit(job, mode, starts, local)
    wall = time.perf_counter() - t0
    return Solution(
        method=method,
        status=Status.HEURISTIC,
        modes=sch.modes,
        starts=sch.starts,
        objective=sch.max_end,
        bound=None,
        wall_seconds=wall,
        history=[(wall, sch.max_end, None)],
    )


def head_group_count(mode: Mode) -> int:
    """How many head groups a mode pipelines attention by (solver/head_groups.py; 0: none)."""
    return max((len(r) for r in mode.head_outputs.values()), default=0)


def micro_batch_count(mode: Mode) -> int:
    """How many micro-batches a mode runs its job as (solver/micro_batch.py; 0: none)."""
    return max((len(r) for r in mode.batch_outputs.values()), default=0)


def _greedy_pass(
    problem: SchedulingProblem, idx: ProblemIndex, heads: int = 0, micro_batches: int = 0, last_free: bool = False
) -> Solution | str:
    """One list-scheduling pass; `heads` > 0: jobs with modes pipelined by that many head groups
    choose among those only (a head group's softmax pays off only when its scores and context
    run by head groups too, which the earliest-output-end rule, job by job, cannot see);
    `micro_batches` > 0: likewise jobs with modes run as that many micro-batches. `last_free`:
    a job whose consumers offer no such modes (the last of a chain, e.g. attention's context
    before o_proj) chooses among all its modes: its pieces would feed no reader by pieces."""
    rep = problem.repeat
    groups = [g.name for g in problem.groups]
    cap = {g.name: g.capacity_rows for g in problem.groups}
    # remaining[j][g]: minimum need of jobs j+1.. in group g
    remaining: list[dict[str, int]] = [dict() for _ in problem.jobs]
    acc = {g: 0 for g in groups}
    for j in range(len(problem.jobs) - 1, -1, -1):
        remaining[j] = dict(acc)
        for g in groups:
            acc[g] += min(m.usage.get(g, 0) for m in problem.jobs[j].modes) * rep
    used = {g: 0 for g in groups}
    sch = _Scheduler(problem, idx)
    count = (lambda m: head_group_count(m) == heads) if heads else (lambda m: micro_batch_count(m) == micro_batches)
    feeds: set[str] = set()  # jobs a consumer of which offers such modes
    if last_free:
        offers = {j.name for j in problem.jobs if any(count(m) for m in j.modes)}
        feeds = {d.before for d in problem.dependencies if d.after in offers}
    for j, job in enumerate(problem.jobs):

        def fits(mode: Mode, lookahead: bool) -> bool:
            for g in groups:
                need = used[g] + mode.usage.get(g, 0) * rep + (remaining[j][g] if lookahead else 0)
                if need > cap[g]:
                    return False
            return True

        forced = (heads or micro_batches) and not (last_free and job.name not in feeds)
        modes = ([m for m in job.modes if count(m)] if forced else []) or list(job.modes)
        cands = [m for m in modes if fits(m, True)] or [m for m in job.modes if fits(m, False)]
        if not cands:
            return f"no mode of job {job.name} fits the capacity left by the jobs before it"
        best = None
        for mi, mode in enumerate(cands):
            starts, local = sch.place(job, mode)
            out = mode.task(mode.output)
            key = (
                starts[out.name] + out.duration,
                sum(mode.usage.values()),
                max(starts[t.name] + t.duration for t in mode.tasks),
                mi,
            )
            if best is None or key < best[0]:
                best = (key, mode, starts, local)
        _, mode, starts, local = best
        sch.commit(job, mode, starts, local)
        for g in groups:
            used[g] += mode.usage.get(g, 0) * rep
    return Solution(
        method=Method.GREEDY,
        status=Status.HEURISTIC,
        modes=sch.modes,
        starts=sch.starts,
        objective=sch.max_end,
        bound=None,
        wall_seconds=0.0,
    )


def _packing_modes(problem: SchedulingProblem, idx: ProblemIndex) -> dict[str, str] | None:
    """Capacity-first mode choice (fallback when the time-greedy pass runs out of rows).

    Jobs by decreasing least usage; each takes the mode that keeps the fullest group emptiest
    (ties: shortest total duration, problem order), with the same lookahead as the greedy pass.
    """
    rep = problem.repeat
    cap = {g.name: g.capacity_rows for g in problem.groups}
    groups = list(cap)

    def least(job: Job) -> int:
        return min(sum(m.usage.values()) for m in job.modes)

    order = sorted(range(len(problem.jobs)), key=lambda j: (-least(problem.jobs[j]), j))
    remaining = {g: sum(min(m.usage.get(g, 0) for m in j.modes) * rep for j in problem.jobs) for g in groups}
    used = {g: 0 for g in groups}
    modes: dict[str, str] = {}
    for j in order:
        job = problem.jobs[j]
        for g in groups:
            remaining[g] -= min(m.usage.get(g, 0) for m in job.modes) * rep
        best = None
        for mi, m in enumerate(job.modes):
            after = {g: used[g] + m.usage.get(g, 0) * rep for g in groups}
            if any(after[g] + remaining[g] > cap[g] for g in groups):
                continue
            fill = max((after[g] / cap[g] if cap[g] else 0.0) for g in groups) if groups else 0.0
            key = (fill, sum(t.duration for t in m.tasks), mi)
            if best is None or key < best[0]:
                best = (key, m)
        if best is None:
            return None
        modes[job.name] = best[1].name
        for g in groups:
            used[g] += best[1].usage.get(g, 0) * rep
    return modes


def naive_modes(problem: SchedulingProblem, prefix: str = "naive") -> dict[str, str]:
    modes = {}
    for job in problem.jobs:
        pick = next((m for m in job.modes if m.name.startswith(prefix)), job.modes[0])
        modes[job.name] = pick.name
    return modes


# the modes naive runs, as the overlap lowering also offers them (solver/lower.py: the vendor-style
# emission as an alternative): a fused group's ops one after another, any other PIM job whole
VENDOR_TWINS = ("unfused-closed[all]", "pim-closed[all]")


def vendor_twin_modes(problem: SchedulingProblem) -> dict[str, str] | None:
    """The modes of naive's program in this problem: each job's vendor-style twin (VENDOR_TWINS)
    where it has one, else what `naive_modes` picks; None where no job has a twin (the naive
    problem itself). Greedy list-schedules them as one more candidate: the same tasks as naive's
    program but its epilogues' launches (one launch per program here), so its program is rarely
    slower than naive's (a naive OPT-6.7B layer on 16 hbm3-pim channels with a 2-byte link ran
    561 cycles faster than every other greedy schedule: bench/whatif_fuzz.py --size llm case 141)."""
    modes, found = naive_modes(problem), False
    for job in problem.jobs:
        names = {m.name for m in job.modes}
        twin = next((n for n in VENDOR_TWINS if n in names), None)
        if twin is not None:
            modes[job.name], found = twin, True
    return modes if found else None


def solve_greedy(problem: SchedulingProblem, naive_prefix: str = "naive") -> Solution:
    """The best of the greedy schedules by model objective (`greedy_schedules`)."""
    return greedy_schedules(problem, naive_prefix)[0]


def greedy_schedules(problem: SchedulingProblem, naive_prefix: str = "naive") -> list[Solution]:
    """Every greedy candidate schedule, best model objective first (ties in the order the module
    docstring gives). The model leaves refresh out, so the first need not decode fastest: the
    pipeline decodes the others too and keeps the fastest program (pimsat.pipeline.select_program).
    One Solution (INFEASIBLE or UNKNOWN) where no candidate exists."""
    t0 = time.perf_counter()
    idx = problem_index(problem)
    msg = idx.capacity_problem()
    if msg:
        return [_infeasible("greedy", msg, t0)]
    candidates: list[Solution] = []
    a = _greedy_pass(problem, idx)
    if isinstance(a, Solution):
        candidates.append(a)
    b = schedule_with_modes(problem, naive_modes(problem, naive_prefix), method=Method.GREEDY)
    if b.status == Status.HEURISTIC:
        candidates.append(b)
    twins = vendor_twin_modes(problem)
    if twins is not None:
        v = schedule_with_modes(problem, twins, method=Method.GREEDY)
        if v.status == Status.HEURISTIC:
            v.message = "list schedule of naive's modes (their vendor-style twins)"
            candidates.append(v)
    for g in sorted({head_group_count(m) for j in problem.jobs for m in j.modes} - {0}):
        for last_free in (False, True):
            h = _greedy_pass(problem, idx, g, last_free=last_free)
            if isinstance(h, Solution):
                h.message = f"attention pipelined by {g} head groups where a job offers it" + (
                    " and a consumer reads its pieces" if last_free else ""
                )
                candidates.append(h)
    for g in sorted({micro_batch_count(m) for j in problem.jobs for m in j.modes} - {0}):
        h = _greedy_pass(problem, idx, micro_batches=g)
        if isinstance(h, Solution):
            h.message = f"the batch run as {g} micro-batches where a job offers it"
            candidates.append(h)
    if not candidates:
        packed = _packing_modes(problem, idx)
        if packed is not None:
            c = schedule_with_modes(problem, packed, method=Method.GREEDY)
            if c.status == Status.HEURISTIC:
                c.message = "capacity-first mode choice (the time-greedy pass ran out of rows)"
                candidates.append(c)
    if not candidates:
        # not a proof of infeasibility (the per-group check passed): say so
        return [
            Solution(
                method=Method.GREEDY,
                status=Status.UNKNOWN,
                modes={},
                starts={},
                objective=None,
                bound=None,
                wall_seconds=time.perf_counter() - t0,
                message=f"greedy found no mode choice within capacity ({a}); the "
                "problem may still be feasible (solve_cpsat decides)",
            )
        ]
    ranked = sorted(candidates, key=lambda s: s.objective)  # stable: ties keep the order above
    if ranked[0] is b:
        b.message = "list schedule of the naive modes (better than earliest-output-end modes)"
    elif any(c is b for c in ranked):
        b.message = "list schedule of the naive modes"
    wall = time.perf_counter() - t0
    for c in ranked:
        c.wall_seconds = wall
        c.history = [(wall, c.objective, None)]
    return ranked


def solve_naive(problem: SchedulingProblem, mode_name_prefix: str = "naive") -> Solution:
    t0 = time.perf_counter()
    idx = problem_index(problem)
    modes = naive_modes(problem, mode_name_prefix)
    msg = _capacity_excess(problem, modes, idx)
    if msg:
        return _infeasible(Method.NAIVE, msg, t0)
    starts: dict[str, int] = {}
    prev_end, prev_res = 0, None
    max_end = 0
    for job in problem.jobs:
        mode = idx.mode(job.name, modes[job.name])
        waits = idx.input_waits(job.name, mode, modes)
        for t in idx.topo[(job.name, mode.name)]:
            est = 0 if prev_res is None else prev_end + problem.lag(prev_res, t.resource)
            if t.resource == HOST:
                est = max(est, problem.host_release)
            for b, lag in idx.in_edges[t.name]:
                est = max(est, starts[b] + idx.tasks[b].task.duration + lag)
            for o in waits.get(t.name, ()):
                src = idx.tasks[o].task
                est = max(est, starts[o] + src.duration + problem.lag(src.resource, t.resource))
            starts[t.name] = est
            prev_end, prev_res = est + t.duration, t.resource
            max_end = max(max_end, prev_end)
    wall = time.perf_counter() - t0
    return Solution(
        method=Method.NAIVE,
        status=Status.HEURISTIC,
        modes=modes,
        starts=starts,
        objective=max_end,
        bound=None,
        wall_seconds=wall,
        history=[(wall, max_end, None)],
    )


__all__ = [
    "solve_greedy",
    "greedy_schedules",
    "solve_naive",
    "schedule_with_modes",
    "naive_modes",
    "vendor_twin_modes",
    "Timeline",
    "HOST",
]
