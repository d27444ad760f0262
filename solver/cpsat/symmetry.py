"""Symmetry between interchangeable channel groups (applied only when provably valid).

Two groups g, h are *interchangeable* when swapping their names maps the problem onto itself:
equal capacity, and for every job the multiset of its modes' signatures is unchanged by the
swap. A signature is the mode with task names replaced by positions: per task (resource,
duration, refresh credit), edges (positions, lag), input positions, output position and non-zero usage per
group. Refresh and the lag rule (0 on the same resource, sync otherwise) treat all groups alike.
Payloads are opaque and ignored (the decoder handles whichever mode is chosen).

Transpositions that are automorphisms generate the full symmetric group on each class of
pairwise-interchangeable groups, so any solution can be permuted, without changing its makespan,
into one where the groups of each class are sorted by busy time (classes are disjoint, so sorting
one class does not change the busy times of another). The model therefore adds
W(c0) >= W(c1) >= ... per class (W = total duration of the present tasks on the group), which
removes up to k! equivalent copies of every schedule. The detection is conservative: equal signatures
prove an isomorphism; an isomorphism the canonical order misses (ties between tasks that are
not automorphic) only loses the constraint.

`canonical_hint` applies the same permutation to a hint so that it satisfies the constraint.
"""

from __future__ import annotations

from collections import Counter

from solver.cpsat.context import ModelContext
from solver.index import ProblemIndex
from solver.problem import HOST, Mode, SchedulingProblem, Solution


def canonical_order(mode: Mode, rename: dict[str, str] | None = None) -> list[int]:
    """Task positions of `mode` in a name-independent order (colour refinement).

    Initial colour: (renamed resource, duration, is input, is output); each round adds the
    sorted colours (and lags) of predecessors and successors; colours are compressed to their
    rank within the mode, which is consistent between isomorphic modes. Ties (automorphic
    tasks, or a refinement that stalls) keep the modes' own order.
    """
    rn = rename or {}
    n = len(mode.tasks)
    pos = {t.name: i for i, t in enumerate(mode.tasks)}
    preds: list[list[tuple[int, int]]] = [[] for _ in range(n)]
    succs: list[list[tuple[int, int]]] = [[] for _ in range(n)]
    for e in mode.edges:
        preds[pos[e.after]].append((pos[e.before], e.lag))
        succs[pos[e.before]].append((pos[e.after], e.lag))
    inputs = set(mode.inputs)
    labels: list = [
        (rn.get(t.resource, t.resource), t.duration, t.refresh_credit, t.name in inputs, t.name == mode.output)
        for t in mode.tasks
    ]
    ranks = _ranks(labels)
    for _ in range(n):
        labels = [
            (
                ranks[i],
                tuple(sorted((ranks[p], lag) for p, lag in preds[i])),
                tuple(sorted((ranks[s], lag) for s, lag in succs[i])),
            )
            for i in range(n)
        ]
        new = _ranks(labels)
        if len(set(new)) == len(set(ranks)):
            break
        ranks = new
    return sorted(range(n), key=lambda i: (ranks[i], i))


def _ranks(labels: list) -> list[int]:
    distinct = sorted(set(labels))
    r = {lab: k for k, lab in enumerate(distinct)}
    return [r[lab] for lab in labels]


def mode_signature(mode: Mode, rename: dict[str, str] | None = None) -> tuple:
    """The mode up to task names (in canonical order), with groups renamed by `rename`.

    Equal signatures mean the canonical-order bijection is an isomorphism (the signature lists
    every attribute the solvers use), so the test never claims a false symmetry.
    """
    rn = rename or {}
    order = canonical_order(mode, rn)
    pos = {mode.tasks[i].name: k for k, i in enumerate(order)}
    tasks = [mode.tasks[i] for i in order]
    return (
        tuple((rn.get(t.resource, t.resource), t.duration, t.refresh_credit) for t in tasks),
        tuple(sorted((pos[e.before], pos[e.after], e.lag) for e in mode.edges)),
        tuple(sorted(pos[i] for i in mode.inputs)),
        pos[mode.output],
        tuple(sorted((rn.get(g, g), u) for g, u in mode.usage.items() if u)),
    )


def _interchangeable(problem: SchedulingProblem, g: str, h: str) -> bool:
    rn = {g: h, h: g}
    for job in problem.jobs:
        if Counter(mode_signature(m) for m in job.modes) != Counter(mode_signature(m, rn) for m in job.modes):
            return False
    return True


def symmetric_classes(problem: SchedulingProblem) -> list[list[str]]:
    """Classes (size >= 2, problem order) of pairwise interchangeable groups."""
    groups = problem.groups
    parent = {g.name: g.name for g in groups}

    def find(x: str) -> str:
        while parent[x] != x:
            x = parent[x]
        return x

    for i, g in enumerate(groups):
        for h in groups[i + 1 :]:
            if find(g.name) == find(h.name) or g.capacity_rows != h.capacity_rows:
                continue
            if _interchangeable(problem, g.name, h.name):
                parent[find(h.name)] = find(g.name)
    classes: dict[str, list[str]] = {}
    for g in groups:
        classes.setdefault(find(g.name), []).append(g.name)
    return [c for c in classes.values() if len(c) >= 2]


def add_symmetry_breaking(ctx: ModelContext) -> None:
    classes = symmetric_classes(ctx.problem)
    used = []
    for cls in classes:
        works = [ctx.work_expr(g) for g in cls]
        if all(ctx.max_work(g) == 0 for g in cls):
            continue
        for a, b in zip(works, works[1:]):
            ctx.model.add(a >= b)
        used.append(cls)
    ctx.symmetry_classes = used
    if used:
        ctx.notes.append(
            "symmetry: groups ordered by busy time within " + "; ".join("{" + ",".join(c) + "}" for c in used)
        )


def canonical_hint(
    problem: SchedulingProblem, index: ProblemIndex, hint: Solution, classes: list[list[str]]
) -> Solution:
    """Permute the groups of each class in `hint` so that busy times are non-increasing."""
    if not classes:
        return hint
    work: dict[str, int] = {}
    for job in problem.jobs:
        for t in index.mode(job.name, hint.modes[job.name]).tasks:
            if t.resource != HOST:
                work[t.resource] = work.get(t.resource, 0) + t.duration
    rename: dict[str, str] = {}
    for cls in classes:
        order = sorted(range(len(cls)), key=lambda i: (-work.get(cls[i], 0), i))
        for k, i in enumerate(order):
            rename[cls[i]] = cls[k]  # the k-th busiest group becomes cls[k]
    if all(a == b for a, b in rename.items()):
        return hint
    modes: dict[str, str] = {}
    starts: dict[str, int] = {}
    for job in problem.jobs:
        old = index.mode(job.name, hint.modes[job.name])
        want = mode_signature(old, rename)
        new = next((m for m in job.modes if mode_signature(m) == want), None)
        if new is None:  # cannot happen for a verified automorphism
            raise AssertionError(f"symmetry: no image of mode {old.name} in job {job.name}")
        modes[job.name] = new.name
        for i_old, i_new in zip(canonical_order(old, rename), canonical_order(new)):
            starts[new.tasks[i_new].name] = hint.starts[old.tasks[i_old].name]
    return Solution(
        method=hint.method,
        status=hint.status,
        modes=modes,
        starts=starts,
        objective=hint.objective,
        bound=hint.bound,
        wall_seconds=hint.wall_seconds,
        history=list(hint.history),
        message=hint.message,
    )
