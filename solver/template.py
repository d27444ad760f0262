"""Layer templates: solve one decoder layer, replicate the decision over every layer.

A full decode step repeats the same layer L times, and the layers run one after another (each
layer's first op needs the previous layer's last). Solving all L copies at once would multiply
the model size by L for no new decision, so:

1. the ops outside the layers (embedding, final norm, LM head, argmax) take their greedy modes;
   their rows are taken off every group's capacity;
2. layer 0's jobs form the template problem, with `repeat = L` (every layer needs its own rows);
3. the template is solved (CP-SAT or a heuristic), and every layer i gets the same modes and
   the same start offsets, shifted by i times the template's span; non-layer jobs keep their
   greedy starts, shifted around the layers. The decoder then lays out the exact timeline in
   that order (its list scheduling removes the slack of the shifted starts).
The model size grows with the ops of one layer, not with the number of layers or weight bytes.
"""
from __future__ import annotations

import re
from dataclasses import replace

from .problem import Dependency, Group, SchedulingProblem, Solution

_LAYER = re.compile(r"^layers\.(\d+)\.")


def layer_of(job: str) -> int | None:
    m = _LAYER.match(job)
    return int(m.group(1)) if m else None


def layer_count(problem: SchedulingProblem) -> int:
    layers = {layer_of(j.name) for j in problem.jobs} - {None}
    return len(layers)


def template_problem(problem: SchedulingProblem, outside: Solution) -> SchedulingProblem:
    """Layer 0's jobs, with capacity reduced by the rows the non-layer jobs' modes use."""
    layers = layer_count(problem)
    used: dict[str, int] = {g.name: 0 for g in problem.groups}
    for job in problem.jobs:
        if layer_of(job.name) is None:
            mode = next(m for m in job.modes if m.name == outside.modes[job.name])
            for g, rows in mode.usage.items():
                used[g] += rows
    jobs = [j for j in problem.jobs if layer_of(j.name) == 0]
    names = {j.name for j in jobs}
    deps = [d for d in problem.dependencies if d.before in names and d.after in names]
    groups = [Group(g.name, g.channels, max(0, g.capacity_rows - used[g.name])) for g in problem.groups]
    sub = SchedulingProblem(f"{problem.name}/layer-template", jobs, deps, groups, problem.refresh,
                            problem.sync_cycles, repeat=layers)
    sub.horizon = sub.trivial_horizon()
    return sub


def expand(problem: SchedulingProblem, template: Solution, outside: Solution) -> Solution:
    """Modes and start offsets of layer 0 applied to every layer, in sequence."""
    layers = layer_count(problem)
    starts_t = template.starts
    span = max((s for s in starts_t.values()), default=0) + 1
    before = [j for j in problem.jobs if layer_of(j.name) is None and _before_layers(problem, j.name)]
    pre_span = max((outside.starts[t.name] for j in before for m in j.modes if m.name == outside.modes[j.name]
                    for t in m.tasks), default=-1) + 1
    modes: dict[str, str] = {}
    starts: dict[str, int] = {}
    for job in problem.jobs:
        k = layer_of(job.name)
        if k is None:
            modes[job.name] = outside.modes[job.name]
            mode = next(m for m in job.modes if m.name == modes[job.name])
            shift = 0 if job in before else pre_span + layers * span
            for t in mode.tasks:
                starts[t.name] = outside.starts[t.name] + shift
            continue
        proto = job.name.replace(f"layers.{k}.", "layers.0.")
        modes[job.name] = template.modes[proto]
        mode = next(m for m in job.modes if m.name == modes[job.name])
        for t in mode.tasks:
            starts[t.name] = starts_t[t.name.replace(f"layers.{k}.", "layers.0.")] + pre_span + k * span
    return replace(template, modes=modes, starts=starts, objective=None)


def _before_layers(problem: SchedulingProblem, job: str) -> bool:
    """A non-layer job that some layer-0 job depends on (the embedding), as opposed to the head."""
    seen, stack = set(), [job]
    succ: dict[str, list[str]] = {}
    for d in problem.dependencies:
        succ.setdefault(d.before, []).append(d.after)
    while stack:
        j = stack.pop()
        for n in succ.get(j, []):
            if layer_of(n) == 0:
                return True
            if n not in seen and layer_of(n) is None:
                seen.add(n)
                stack.append(n)
    return False


__all__ = ["Dependency", "expand", "layer_count", "layer_of", "template_problem"]
