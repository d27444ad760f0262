"""Dependencies at op granularity (`Dependency.ops`, `Mode.outputs`, `Mode.reads`): the same two
tiny problems through every consumer of the rule - CP-SAT, greedy, naive, the certificate, the
solver-free critical path, brute force - and the index's validation.

unfused: job p computes ops q and v on g0 (10 each), each followed by its own host epilogue (2);
         job c (host, 5) reads only q. c may run after q's epilogue (ends 12), not p's last one.
reads:   job a = a KV append (g0, 4, reads op ap) then an attention sweep (g0, 6, reads op at);
         ap's producer k is short (host 3), at's producer s long (host 20): the append runs while
         the host is still busy with s.
"""

from __future__ import annotations

import dataclasses

import pytest
from solver_testkit import HOST, Dependency, Edge, Job, Mode, Task, brute_force_optimum, problem, single

from solver.bounds import critical_path
from solver.certificate import check_solution
from solver.cpsat import problem_index, solve_cpsat
from solver.heuristics import solve_greedy, solve_naive


def _unfused(op_level: bool):
    t = {n: Task(f"p/{n}", r, d) for n, r, d in (("q", "g0", 10), ("v", "g0", 10), ("eq", HOST, 2), ("ev", HOST, 2))}
    mode = Mode(
        "unfused",
        tuple(t.values()),
        (Edge("p/q", "p/eq"), Edge("p/v", "p/ev"), Edge("p/eq", "p/ev")),
        ("p/q", "p/v"),
        "p/ev",
        outputs={"q": "p/eq", "v": "p/ev"},
    )
    p = problem("unfused", [Job("p", ("q", "v"), (mode,)), single("c", HOST, 5)])
    p.dependencies = [Dependency("p", "c", (("q", "c"),) if op_level else ())]
    return p


def _reads(op_level: bool):
    ap, at = Task("a/append", "g0", 4), Task("a/mv", "g0", 6)
    mode = Mode(
        "pim",
        (ap, at),
        (Edge(ap.name, at.name),),
        (ap.name, at.name),
        at.name,
        reads={ap.name: ("ap",), at.name: ("at",)},
    )
    p = problem("reads", [single("k", HOST, 3), single("s", HOST, 20), Job("a", ("ap", "at"), (mode,))])
    p.dependencies = [
        Dependency("k", "a", (("k", "ap"),) if op_level else ()),
        Dependency("s", "a", (("s", "at"),) if op_level else ()),
    ]
    return p


CASES = [(_unfused, 22, 27), (_reads, 29, 33)]  # (problem, optimum at op level, optimum whole-job)


@pytest.mark.parametrize("build,op_opt,job_opt", CASES)
def test_every_solver_uses_op_level_dependencies(build, op_opt, job_opt):
    for op_level, opt in ((True, op_opt), (False, job_opt)):
        p = build(op_level)
        assert brute_force_optimum(p) == opt
        s = solve_cpsat(p, time_limit=10, auto_hint=False)
        assert s.status == "OPTIMAL" and s.objective == opt and check_solution(p, s) == []
        g = solve_greedy(p)
        assert g.objective == opt and check_solution(p, g) == []
        n = solve_naive(p)
        assert n.objective >= opt and check_solution(p, n) == []
        assert critical_path(p) <= opt


def test_critical_path_counts_the_early_output():
    # a path bound (q and v in parallel, no resource sharing): p ends at 10 + 2 + 2 = 14
    assert critical_path(_unfused(True)) == 17  # c after q's epilogue: 10 + 2 + 5
    assert critical_path(_unfused(False)) == 19  # c after p: 14 + 5


@pytest.mark.parametrize("build,op_opt,job_opt", CASES)
def test_certificate_legal_at_the_boundary_illegal_one_cycle_before(build, op_opt, job_opt):
    p = build(True)
    s = solve_cpsat(p, time_limit=10, auto_hint=False)
    waiter, producer_end = (
        ("c/only", s.starts["p/eq"] + 2) if build is _unfused else ("a/append", s.starts["k/only"] + 3)
    )
    assert s.starts[waiter] == producer_end  # starts exactly when its own producer is done
    early = dataclasses.replace(s, starts={**s.starts, waiter: producer_end - 1})
    errs = check_solution(p, early)
    assert any("dependency" in e and waiter in e for e in errs)


def test_index_refuses_a_dependency_no_input_reads():
    p = _reads(True)
    p.dependencies = [Dependency("k", "a", (("k", "nope"),))]
    with pytest.raises(ValueError, match="not covered"):
        problem_index(p)
    p = _reads(True)
    mode = p.jobs[2].modes[0]
    p.jobs[2] = Job("a", ("ap", "at"), (dataclasses.replace(mode, reads={"a/append": ("at",), "a/mv": ("at",)}),))
    with pytest.raises(ValueError, match="reads op ap"):
        problem_index(p)
