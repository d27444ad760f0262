"""One host kernel launch per program (ISA 1.6): every host task continues it.

A host task's first instruction (HOP, EPI or HMV) pays `host.dispatch_cycles`, a kernel launch,
unless it carries chain=1: then it continues the launch of the host instruction before it on the
host stream, which only SIG and WAIT may separate from it (hwmodel/host_costs.py, `chain_error`;
a WAIT keeps the launch: the kernel waits for the units' signal). From ISA 1.6 that instruction
may be a LAUNCH, HOP, EPI or HMV, and a LAUNCH launches the kernel without work.

So a program pays one launch: decode puts a LAUNCH at cycle 0 of the host stream, while the units
start, and every host task continues it. Lowering marks each host task `chained` (its duration
without the launch) and holds the host busy until the LAUNCH ends (`host_release`), which the
index, CP-SAT, the list schedulers and decode all respect. A host task that would have been the
first loses nothing (it started at the launch's end before too); one that comes later, such as a
lone gemv's epilogue, wins the whole launch.

The hardware bound already counts one launch per program (HOST) and none on the critical path
(solver/hardware_bound.py), so it does not move. The naive lowering (the vendor-library
baseline) keeps one launch per host task, and so does every lowering for a host that cannot keep
a kernel launched across a WAIT (`host.persistent_kernel = false`; the simulator refuses a chain
across a WAIT there). For such a host the bound counts the launch each epilogue then pays after
its WAIT (solver/hardware_bound.py, `relaunch`).
"""

from __future__ import annotations

from dataclasses import replace

from hwmodel import Hardware
from hwmodel.host_costs import chains_across_kinds

from .problem import HOST, SchedulingProblem


def chain_launches(problem: SchedulingProblem, hw: Hardware) -> int:
    """Mark (in place) every host task of `problem` as continuing the program's one launch, its
    duration without it, and hold the host until the launch ends; the number of tasks marked.
    Nothing before ISA 1.6, on a host that keeps no kernel across a wait (`persistent_kernel`
    false: every host task launches its own) or without a launch cost."""
    launch = hw.host.dispatch_cycles
    if not chains_across_kinds(hw) or not hw.host.persistent_kernel or launch == 0:
        return 0
    marked = 0
    for j, job in enumerate(problem.jobs):
        modes = []
        for m in job.modes:
            if any(t.resource == HOST and t.duration > launch for t in m.tasks):
                tasks = tuple(
                    replace(t, duration=t.duration - launch, chained=True)
                    if t.resource == HOST and t.duration > launch
                    else t
                    for t in m.tasks
                )
                marked += sum(t.chained for t in tasks)
                m = replace(m, tasks=tasks)
            modes.append(m)
        problem.jobs[j] = replace(job, modes=tuple(modes))
    if hasattr(problem, "_by_name"):
        del problem._by_name
    problem.host_release = launch
    return marked
