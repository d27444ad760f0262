"""Solver-free lower bounds on the makespan of a decode step.

- Bandwidth: every burst of a resident matrix must pass through a PIM unit once per input
  vector (one MAC each), or over the link once and through the host matrix unit (host
  dispatch of a GEMV). Spread perfectly over all units and channels, and with refresh taking
  tRFC of every tREFI cycles on every channel: T >= W + tRFC * floor(T / tREFI) with W the
  channel work, and T >= the host's GEMM cycles; the split between the two is relaxed to
  fractions of ops (a fractional knapsack), which keeps the bound valid. With one bank per
  unit, every DRAM row change also costs tRTP + tRP + tRCD that no MAC can hide.
- Critical path: the longest chain of jobs, each at the shortest duration any of its modes
  allows (including the sync between streams), from the lowered problem's exact durations.
"""

from __future__ import annotations

from dataclasses import dataclass
from math import ceil

from hwmodel import Hardware
from hwmodel.host_costs import host_op_cycles
from ir import Program

from .mvshape import mv_shape
from .problem import HOST, Refresh, SchedulingProblem


@dataclass(frozen=True)
class Bounds:
    bandwidth_cycles: int  # streaming work alone, no refresh
    bandwidth_refresh_cycles: int  # with refresh
    critical_path_cycles: int

    @property
    def cycles(self) -> int:
        return max(self.bandwidth_refresh_cycles, self.critical_path_cycles)


def row_switch_cycles(hw: Hardware) -> int:
    """Extra cycles a unit with ONE bank loses at every DRAM row change: after its last MAC in a
    row, PRE (tRTP), ACT (tRP) and the first MAC of the next row (tRCDRD) cannot overlap with
    MACs (with two or more banks per unit the next row can be opened in the other bank)."""
    t = hw.timing
    return max(0, t.p("tRTP") + t.p("tRP") + t.p("tRCDRD") - hw.mac_interval)


@dataclass(frozen=True)
class OpWork:
    """Cycles one op costs: on every channel if it runs in memory (`pim`, row changes included),
    or on every channel's link plus the host matrix unit if the host runs it (`link`, `host`;
    `host` is None when the op has no host alternative)."""

    pim: float
    link: float
    host: float | None


def op_work(hw: Hardware, program: Program) -> list[OpWork]:
    pus, chans = hw.total_pus, hw.organization.channels
    switch = row_switch_cycles(hw) if hw.pim.banks_per_pu == 1 else 0
    # reads to the host: one burst per tLINK on a channel, and per tCCD_S within one rank
    read_spacing = max(hw.link_cycles, hw.timing.p("tCCD_S") if hw.organization.ranks == 1 else 0)
    out = []
    for i, op in enumerate(program.ops):
        if not op.pim_capable:
            continue
        sh = mv_shape(program, op.name)
        bursts = sh.matrices * sh.rows * ceil(sh.k / hw.elements_per_burst)
        rows_per_unit = bursts / pus / hw.organization.columns
        pim = bursts * sh.vectors / pus * hw.mac_interval + max(0.0, rows_per_unit - 1) * switch
        if op.kind.value == "gemv":
            out.append(OpWork(pim, bursts / chans * read_spacing, float(host_op_cycles(hw, program, i))))
        else:
            out.append(OpWork(pim, pim, None))
    return out


def channel_work_after_offload(work: list[OpWork], host_budget: float) -> float:
    """Least channel work when ops (or fractions of them) move to the host within `host_budget`
    host cycles: the fractional knapsack, best channel cycles saved per host cycle first."""
    total = sum(w.pim for w in work)
    movable = sorted(
        (w for w in work if w.host is not None and w.link < w.pim),
        key=lambda w: (w.pim - w.link) / max(w.host, 1e-9),
        reverse=True,
    )
    for w in movable:
        if host_budget <= 0:
            break
        share = min(1.0, host_budget / max(w.host, 1e-9))
        total -= share * (w.pim - w.link)
        host_budget -= share * w.host
    return total


def streaming_cycles(hw: Hardware, program: Program) -> tuple[int, int]:
    """(channel work, makespan bound with refresh) at the best split of the GEMVs between the
    units and the host (fractional, so a valid relaxation): T >= refresh-stretched channel work
    and T >= the host matrix unit's share."""
    work = op_work(hw, program)
    all_pim = ceil(sum(w.pim for w in work))
    lo, hi = 0, with_refresh(hw, all_pim)
    while lo < hi:  # smallest T such that the channel work left with a host budget of T fits in T
        mid = (lo + hi) // 2
        if with_refresh(hw, ceil(channel_work_after_offload(work, mid) - 1e-6)) <= mid:
            hi = mid
        else:
            lo = mid + 1
    return ceil(channel_work_after_offload(work, lo) - 1e-6), lo


def with_refresh(hw: Hardware, work: int) -> int:
    t = hw.timing
    return Refresh(t.p("tREFI"), t.p("tRFC"), t.max_postponed_refresh).stretch(work)


def critical_path(problem: SchedulingProblem, *others: SchedulingProblem) -> int:
    """Longest path over jobs; each job at its fastest mode among its modes in `problem` and in
    the same jobs lowered in other styles (`others`), each mode started as early as its own input
    tasks' producers allow. Dependencies count at op granularity (`SchedulingProblem.ports`): an
    input task waits for the earliest time, over the producer's modes, the producer op's result
    is ready (plus the sync when the input task is not on the host)."""
    finish = _finish_times(problem, *others)
    return max((v for (j, op), v in finish.items() if op is None), default=0)


def _finish_times(problem: SchedulingProblem, *others: SchedulingProblem) -> dict[tuple[str, str | None], int]:
    """(job, op) -> earliest time the op's result can be ready; (job, None) -> the job's end."""
    alt: dict[str, list] = {}  # job -> its modes in the other styles (same job: same name and ops)
    for other in others:
        for job in other.jobs:
            alt.setdefault(job.name, []).append(job)
    finish: dict[tuple[str, str | None], int] = {}
    into: dict[str, list] = {}
    for d in problem.dependencies:
        into.setdefault(d.after, []).append(d)
    for job in problem.jobs:
        modes = list(job.modes) + [m for j in alt.get(job.name, ()) if j.ops == job.ops for m in j.modes]
        fastest = None
        ready_ops: dict[str, int | None] = {op: None for op in job.ops}
        for mode in modes:
            end = _mode_end(problem, mode, into.get(job.name, []), finish)
            out = end[mode.output]
            fastest = out if fastest is None else min(fastest, out)
            for op in job.ops:
                e = end[mode.output_of(op)]
                ready_ops[op] = e if ready_ops[op] is None else min(ready_ops[op], e)
        finish[(job.name, None)] = fastest or 0
        for op, v in ready_ops.items():
            finish[(job.name, op)] = v or 0
    return finish


def _mode_end(problem: SchedulingProblem, mode, deps: list, finish: dict) -> dict[str, int]:
    """Earliest end of every task of `mode` (its internal edges; its input tasks after the
    producers' results and the sync between streams), with no resource contention."""
    tasks = {t.name: t for t in mode.tasks}
    inner_preds: dict[str, list[tuple[str, int]]] = {}
    for e in mode.edges:
        inner_preds.setdefault(e.after, []).append((e.before, e.lag))
    wait: dict[str, int] = {}
    for d in deps:
        for pop, _cop, u in problem.ports(d, mode):
            wait[u] = max(wait.get(u, 0), finish[(d.before, pop)])
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
    return Bounds(work, stretched, cp)
