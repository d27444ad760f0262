"""Solver-free lower bounds on the makespan of a decode step.

- Hardware bound (solver/hardware_bound.py): from the hardware and the op graph only; the unit
  view of its streaming term with host_busy 0 (no load/read-out boundaries,
  solver/turnaround_bound.py) is the `bandwidth_refresh_cycles` reports carry.
- Mode bound (critical path over modes): the longest chain of jobs, each at the shortest
  duration any of its lowered modes allows (including the sync between streams). Its durations
  are the emitter's, so it bounds the programs pimsat's lowering can express, not the hardware;
  the bound that no emitter can move is solver/hardware_bound.py.
"""

from __future__ import annotations

from dataclasses import dataclass

from hwmodel import Hardware
from ir import Program

from .hardware_bound import HardwareBound, hardware_bound, streaming_cycles
from .problem import HOST, SchedulingProblem


@dataclass(frozen=True)
class Bounds:
    bandwidth_cycles: int  # streaming work alone, no refresh
    bandwidth_refresh_cycles: int  # with refresh
    mode_bound_cycles: int  # critical path over the lowered modes (pimsat's emitter's durations)
    hardware: HardwareBound  # from the hardware and the op graph only (solver/hardware_bound.py)

    @property
    def cycles(self) -> int:
        """The best solver-free bound: the hardware bound, or the mode bound, which holds for the
        programs pimsat's lowering can express (every one it emits)."""
        return max(self.mode_bound_cycles, self.hardware.cycles)  # hardware >= bandwidth_refresh


def critical_path(problem: SchedulingProblem, *others: SchedulingProblem) -> int:
    """Longest path over jobs; each job at its fastest mode among its modes in `problem` and in
    the same jobs lowered in other styles (`others`), each mode started as early as its own input
    tasks' producers allow. Dependencies count at op granularity (`SchedulingProblem.ports`): an
    input task waits for the earliest time, over the producer's modes, the producer op's result
    is ready (for the heads it reads, `Mode.output_for`; plus the sync when the input task is not
    on the host)."""
    ends = _mode_ends(problem, *others)
    return max((min(end[m.output] for m, end in modes) for modes in ends.values()), default=0)


def _finish_times(problem: SchedulingProblem, *others: SchedulingProblem) -> dict[tuple[str, str | None], int]:
    """(job, op) -> earliest time all of the op's result can be ready; (job, None) -> the job's end."""
    finish: dict[tuple[str, str | None], int] = {}
    for job, modes in _mode_ends(problem, *others).items():
        finish[(job, None)] = min(end[m.output] for m, end in modes)
        for op in problem.job(job).ops:
            finish[(job, op)] = min(end[m.output_of(op)] for m, end in modes)
    return finish


def _mode_ends(problem: SchedulingProblem, *others: SchedulingProblem) -> dict[str, list[tuple[object, dict]]]:
    """job -> (mode, earliest end of each of its tasks) over its modes here and in `others`."""
    alt: dict[str, list] = {}  # job -> its modes in the other styles (same job: same name and ops)
    for other in others:
        for job in other.jobs:
            alt.setdefault(job.name, []).append(job)
    into: dict[str, list] = {}
    for d in problem.dependencies:
        into.setdefault(d.after, []).append(d)
    ends: dict[str, list[tuple[object, dict]]] = {}
    for job in problem.jobs:
        modes = list(job.modes) + [m for j in alt.get(job.name, ()) if j.ops == job.ops for m in j.modes]
        ends[job.name] = [(mode, _mode_end(problem, mode, into.get(job.name, []), ends)) for mode in modes]
    return ends


def _mode_end(problem: SchedulingProblem, mode, deps: list, ends: dict) -> dict[str, int]:
    """Earliest end of every task of `mode` (its internal edges; its input tasks after the
    producers' results and the sync between streams), with no resource contention."""
    tasks = {t.name: t for t in mode.tasks}
    inner_preds: dict[str, list[tuple[str, int]]] = {}
    for e in mode.edges:
        inner_preds.setdefault(e.after, []).append((e.before, e.lag))
    wait: dict[str, int] = {}
    for d in deps:
        for pop, _cop, u in problem.ports(d, mode):
            part = mode.reads_range(u) if pop is not None else None
            ready = min(end[m.output_for(pop, part)] for m, end in ends[d.before])
            wait[u] = max(wait.get(u, 0), ready)
    end: dict[str, int] = {}
    for _ in range(len(tasks)):
        for name, t in tasks.items():
            if name in end:
                continue
            ps = inner_preds.get(name, [])
            if any(p not in end for p, _ in ps):
                continue
            s = max((end[p] + lag for p, lag in ps), default=0)
            if name in wait:
                s = max(s, wait[name] + (0 if t.resource == HOST else problem.sync_cycles))
            end[name] = s + t.duration
    return end


def lower_bounds(
    hw: Hardware,
    program: Program,
    problem: SchedulingProblem | None = None,
    *others: SchedulingProblem,
) -> Bounds:
    """The streaming bound of the program and the critical path over `problem` and `others`
    (the same jobs in other lowering styles); task durations are the decoder's
    (tests/solver/test_durations.py)."""
    work, stretched = streaming_cycles(hw, program)
    cp = critical_path(problem, *others) if problem is not None else 0
    return Bounds(work, stretched, cp, hardware_bound(hw, program))
