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

from dataclasses import replace

from .problem import Dependency, Group, Job, SchedulingProblem, Solution

# Layers are the IR's: a job's `layer` is the `layer` attribute of its ops (solver/lower.py), never
# read from op names. Layer k's i-th job corresponds to layer 0's i-th job, its modes' tasks by
# position; `templatable` checks that every layer is structurally layer 0 (same modes, same task
# resources and durations, same dependencies) before a template stands for them.


def layers_of(problem: SchedulingProblem) -> dict[int, list[Job]]:
    """The jobs of each decoder layer, in problem order."""
    out: dict[int, list[Job]] = {}
    for j in problem.jobs:
        if j.layer is not None:
            out.setdefault(j.layer, []).append(j)
    return dict(sorted(out.items()))


def layer_count(problem: SchedulingProblem) -> int:
    return len(layers_of(problem))


def _shape(job: Job) -> tuple:
    return tuple(
        (m.name, tuple((t.resource, t.duration, t.refresh_credit) for t in m.tasks), len(m.edges)) for m in job.modes
    )


def _local_deps(problem: SchedulingProblem, jobs: list[Job]) -> set[tuple[int, int, int]]:
    pos = {j.name: i for i, j in enumerate(jobs)}
    return {
        (pos[d.before], pos[d.after], len(d.ops)) for d in problem.dependencies if d.before in pos and d.after in pos
    }


def templatable(problem: SchedulingProblem) -> str | None:
    """None when the program has several decoder layers that are structurally identical (the
    template may stand for them), else why not."""
    layers = layers_of(problem)
    if len(layers) < 2:
        return "fewer than two decoder layers"
    first_layer, first = next(iter(layers.items()))
    if first_layer != 0 or list(layers) != list(range(len(layers))):
        return f"layers are {list(layers)[:4]}..., not 0..{len(layers) - 1}"
    shape0, deps0 = [_shape(j) for j in first], _local_deps(problem, first)
    for k, jobs in layers.items():
        if [_shape(j) for j in jobs] != shape0:
            return f"layer {k}'s jobs, modes or task durations differ from layer 0's"
        if _local_deps(problem, jobs) != deps0:
            return f"layer {k}'s dependencies differ from layer 0's"
    return None


def template_problem(problem: SchedulingProblem, outside: Solution) -> SchedulingProblem:
    """Layer 0's jobs, with capacity reduced by the rows the non-layer jobs' modes use."""
    layers = layers_of(problem)
    used: dict[str, int] = {g.name: 0 for g in problem.groups}
    for job in problem.jobs:
        if job.layer is None:
            mode = next(m for m in job.modes if m.name == outside.modes[job.name])
            for g, rows in mode.usage.items():
                used[g] += rows
    jobs = layers[0]
    names = {j.name for j in jobs}
    deps = [d for d in problem.dependencies if d.before in names and d.after in names]
    groups = [Group(g.name, g.channels, max(0, g.capacity_rows - used[g.name])) for g in problem.groups]
    sub = SchedulingProblem(
        f"{problem.name}/layer-template",
        jobs,
        deps,
        groups,
        problem.refresh,
        problem.sync_cycles,
        repeat=len(layers),
        host_release=problem.host_release,
    )
    sub.horizon = sub.trivial_horizon()
    return sub


def expand(problem: SchedulingProblem, template: Solution, outside: Solution) -> Solution:
    """Modes and start offsets of layer 0 applied to every layer, in sequence."""
    layers = layers_of(problem)
    starts_t = template.starts
    span = max((s for s in starts_t.values()), default=0) + 1
    before = {j.name for j in problem.jobs if j.layer is None and _before_layers(problem, j.name)}
    pre_span = (
        max(
            (
                outside.starts[t.name]
                for j in problem.jobs
                if j.name in before
                for m in j.modes
                if m.name == outside.modes[j.name]
                for t in m.tasks
            ),
            default=-1,
        )
        + 1
    )
    modes: dict[str, str] = {}
    starts: dict[str, int] = {}
    for job in problem.jobs:
        if job.layer is None:
            modes[job.name] = outside.modes[job.name]
            mode = next(m for m in job.modes if m.name == modes[job.name])
            shift = 0 if job.name in before else pre_span + len(layers) * span
            for t in mode.tasks:
                starts[t.name] = outside.starts[t.name] + shift
    for k, jobs in layers.items():
        for job, proto in zip(jobs, layers[0]):
            modes[job.name] = template.modes[proto.name]
            mode = next(m for m in job.modes if m.name == modes[job.name])
            pmode = next(m for m in proto.modes if m.name == modes[job.name])
            for t, pt in zip(mode.tasks, pmode.tasks):
                starts[t.name] = starts_t[pt.name] + pre_span + k * span
    return replace(template, modes=modes, starts=starts, objective=None)


def _before_layers(problem: SchedulingProblem, job: str) -> bool:
    """A non-layer job that some layer-0 job depends on (the embedding), as opposed to the head."""
    layer = {j.name: j.layer for j in problem.jobs}
    seen, stack = set(), [job]
    succ: dict[str, list[str]] = {}
    for d in problem.dependencies:
        succ.setdefault(d.before, []).append(d.after)
    while stack:
        j = stack.pop()
        for n in succ.get(j, []):
            if layer[n] == 0:
                return True
            if n not in seen and layer[n] is None:
                seen.add(n)
                stack.append(n)
    return False


__all__ = ["Dependency", "expand", "layer_count", "layers_of", "templatable", "template_problem"]
