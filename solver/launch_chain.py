"""Host tasks that continue the host kernel's launch instead of paying their own (ISA 1.6).

Every host task's first instruction (HOP, EPI or HMV) pays `host.dispatch_cycles`, a kernel
launch, unless it carries chain=1: then it continues the launch of the host instruction before
it on the host stream, which only SIG and WAIT may separate from it (hwmodel/host_costs.py,
`chain_error`). A WAIT keeps the launch: the kernel waits for the units' signal. From ISA 1.6 the
instruction before may be any of HOP, EPI and HMV, so a host task can chain whenever some host
task runs before it, whatever the schedule.

That holds for a task with a host task among its ancestors in every choice of modes: a host task
before it in its own mode (the mode's edges), or an input task of its mode (itself or one
before it) that waits for a producer job all of whose modes hand their results over from host
tasks (every job's results reach host memory through an EPI, HOP or HMV; `hands_over_on_host`
checks it per mode and range rather than assuming it). Such a task is `chained`: its duration
leaves out the launch, and decode (solver/decode.py) sets chain=1 on its first instruction. The
host stream's first task is never chained, so exactly the launches no program can avoid are
paid; a task that may be first in some schedule keeps its launch even where it comes later
(a small loss; no such task exists in a decoder layer after the first host op).

The hardware bound already counts one launch per program (HOST) and none on the critical path
(solver/hardware_bound.py), so it does not move. The naive lowering (the vendor-library
baseline) keeps one launch per host task.
"""

from __future__ import annotations

from dataclasses import replace

from hwmodel import Hardware
from hwmodel.host_costs import chains_across_kinds

from .problem import HOST, Job, Mode, SchedulingProblem


def hands_over_on_host(mode: Mode) -> bool:
    """Whether every task after which `mode` makes a result (or a range of one) ready runs on
    the host."""
    tasks = mode.task
    ready = {mode.output, *mode.outputs.values()}
    for op in {*mode.head_outputs, *mode.batch_outputs}:
        ready.update(t for _lo, _hi, t in mode.ranges_of(op))
    return all(tasks(t).resource == HOST for t in ready)


def _chained_tasks(mode: Mode, after_host_inputs: set[str]) -> set[str]:
    """The host tasks of `mode` that some host task precedes in every schedule."""
    succ: dict[str, list[str]] = {t.name: [] for t in mode.tasks}
    for e in mode.edges:
        succ[e.before].append(e.after)
    on_host = {t.name for t in mode.tasks if t.resource == HOST}
    # tasks reached from a host task (strictly after it) or from an input that waits for one
    after: set[str] = set()
    stack = [s for h in on_host for s in succ[h]] + list(after_host_inputs)
    while stack:
        t = stack.pop()
        if t not in after:
            after.add(t)
            stack.extend(succ[t])
    return after & on_host


def chain_launches(problem: SchedulingProblem, hw: Hardware) -> int:
    """Mark (in place) the host tasks of `problem` that always continue a launch, their durations
    without it; the number of host tasks marked. Nothing before ISA 1.6 or without a launch cost."""
    launch = hw.host.dispatch_cycles
    if not chains_across_kinds(hw) or launch == 0:
        return 0
    on_host = {j.name: all(hands_over_on_host(m) for m in j.modes) for j in problem.jobs}
    deps_into: dict[str, list] = {}
    for d in problem.dependencies:
        deps_into.setdefault(d.after, []).append(d)
    marked = 0
    jobs: list[Job] = []
    for job in problem.jobs:
        modes = []
        for m in job.modes:
            inputs = {u for d in deps_into.get(job.name, ()) if on_host[d.before] for _p, _c, u in problem.ports(d, m)}
            chained = {t.name for t in m.tasks if t.name in _chained_tasks(m, inputs) and t.duration > launch}
            if chained:
                tasks = tuple(
                    replace(t, duration=t.duration - launch, chained=True) if t.name in chained else t for t in m.tasks
                )
                marked += len(chained)
                m = replace(m, tasks=tasks)
            modes.append(m)
        jobs.append(replace(job, modes=tuple(modes)))
    problem.jobs[:] = jobs
    if hasattr(problem, "_by_name"):
        del problem._by_name
    return marked
