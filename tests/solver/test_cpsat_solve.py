"""Optima, bounds, determinism, hints, symmetry and the certificate of solve_cpsat."""

from __future__ import annotations

import pytest
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st
from solver_testkit import (
    HOST,
    Job,
    Refresh,
    brute_force_optimum,
    chain_mode,
    one_task_mode,
    pim_mode,
    problem,
    random_problem,
    single,
)

from solver.certificate import Certificate, busy_time, check_solution
from solver.cpsat import solution_makespan, solve_cpsat
from solver.cpsat.symmetry import canonical_hint, symmetric_classes
from solver.heuristics import solve_greedy, solve_naive
from solver.index import problem_index
from solver.problem import Solution

REF = Refresh(tREFI=400, tRFC=35, max_postponed=8)


def _tiny(seed: int, refresh: bool = False):
    """3-4 jobs, each mode a single task or a 2-task chain: brute-forceable."""
    import random

    rng = random.Random(seed)
    jobs = []
    res = [HOST, "g0", "g1"]
    for j in range(rng.randint(3, 4)):
        n = f"j{j}"
        modes = []
        for k in range(rng.randint(1, 2)):
            if rng.random() < 0.6:
                modes.append(
                    one_task_mode(n, f"m{k}", rng.choice(res), rng.randint(50, 400), {"g0": rng.randint(0, 60)})
                )
            else:
                modes.append(
                    chain_mode(
                        n,
                        f"m{k}",
                        [(rng.choice(res), rng.randint(30, 200)), (HOST, rng.randint(5, 40))],
                        {"g1": rng.randint(0, 60)},
                        lags=[rng.randint(0, 20)],
                    )
                )
        jobs.append(Job(n, (n,), tuple(modes)))
    deps = [(f"j{a}", f"j{b}") for b in range(len(jobs)) for a in range(b) if rng.random() < 0.4]
    return problem(
        f"tiny{seed}", jobs, deps, [("g0", 100), ("g1", 100)], refresh=REF if refresh else None, sync=rng.randint(0, 30)
    )


@pytest.mark.parametrize("seed", range(8))
def test_known_optimum_by_brute_force(seed):
    p = _tiny(seed, refresh=seed % 2 == 1)
    opt = brute_force_optimum(p)
    for auto in (False, True):
        s = solve_cpsat(p, time_limit=10, auto_hint=auto)
        assert s.status == "OPTIMAL", s.message
        assert s.objective == opt == s.bound
        assert check_solution(p, s) == []
        assert solution_makespan(p, s) == s.objective


def test_obvious_optimum_parallel_groups():
    # four identical PIM jobs, two groups: optimum puts two on each group
    jobs = [Job(n, (n,), (one_task_mode(n, "g0", "g0", 100), one_task_mode(n, "g1", "g1", 100))) for n in "abcd"]
    p = problem("par", jobs, groups=[("g0", 10), ("g1", 10)])
    s = solve_cpsat(p, time_limit=10, auto_hint=False)
    assert s.status == "OPTIMAL" and s.objective == 200 and s.bound == 200
    assert sorted(busy_time(p, s).values()) == [0, 200, 200]


@settings(max_examples=20, deadline=None, suppress_health_check=[HealthCheck.too_slow])
@given(seed=st.integers(0, 10_000), n_jobs=st.integers(2, 7), n_groups=st.integers(1, 3), refresh=st.booleans())
def test_cpsat_not_worse_than_greedy_not_worse_than_naive(seed, n_jobs, n_groups, refresh):
    p = random_problem(seed, n_jobs=n_jobs, n_groups=n_groups, refresh=refresh)
    nv, gr = solve_naive(p), solve_greedy(p)
    cp = solve_cpsat(p, time_limit=2.0)
    for s in (nv, gr, cp):
        assert check_solution(p, s) == []
    assert gr.objective <= nv.objective  # both: latest task end
    assert cp.status in ("OPTIMAL", "FEASIBLE")
    assert cp.bound <= cp.objective <= solution_makespan(p, gr)
    if not refresh:
        assert cp.objective <= gr.objective <= nv.objective


def _hard():
    return random_problem(2, n_jobs=8, n_groups=3, refresh=True)


def _key(s: Solution):
    return (s.status, s.modes, s.starts, s.objective, s.bound)


def test_deterministic_with_fixed_seed_and_workers():
    p = _hard()
    a = solve_cpsat(p, time_limit=20, workers=2, seed=3)
    b = solve_cpsat(p, time_limit=20, workers=2, seed=3)
    assert a.status == "OPTIMAL"
    assert _key(a) == _key(b)


def test_deterministic_across_worker_counts_when_proven():
    p = random_problem(9, n_jobs=9, n_groups=3, refresh=True)
    a = solve_cpsat(p, time_limit=20, workers=1, seed=0)
    b = solve_cpsat(p, time_limit=20, workers=2, seed=0)
    assert a.status == b.status == "OPTIMAL" and _key(a) == _key(b)


def test_deterministic_time_makes_time_limited_runs_reproducible():
    import sys
    from pathlib import Path

    sys.path.insert(0, str(Path(__file__).resolve().parents[2] / "bench"))
    from solver_bench import layered_problem

    p = layered_problem(300, seed=1, n_groups=2)
    a = solve_cpsat(p, time_limit=30, workers=2, deterministic_time=0.3)
    b = solve_cpsat(p, time_limit=30, workers=2, deterministic_time=0.3)
    assert a.status in ("OPTIMAL", "FEASIBLE") and _key(a) == _key(b)


def test_hint_with_tiny_time_limit_is_never_worse():
    p = random_problem(7, n_jobs=9, n_groups=3, refresh=True)
    for hint in (solve_naive(p), solve_greedy(p)):
        s = solve_cpsat(p, time_limit=0.05, hint=hint, auto_hint=False)
        assert s.status in ("OPTIMAL", "FEASIBLE")
        assert check_solution(p, s) == []
        assert s.objective <= solution_makespan(p, hint)
        assert s.history[0][1] == solution_makespan(p, hint)


def test_hint_returned_when_the_solver_finds_nothing():
    p = _hard()
    hint = solve_naive(p)
    s = solve_cpsat(p, time_limit=5, hint=hint, params={"max_time_in_seconds": 0.0})
    assert s.status == "FEASIBLE" and "returning the hint" in s.message
    assert s.objective == solution_makespan(p, hint) and s.bound <= s.objective
    assert check_solution(p, s) == []


def test_no_hint_no_time_gives_unknown_with_a_bound():
    p = _hard()
    s = solve_cpsat(p, time_limit=5, auto_hint=False, params={"max_time_in_seconds": 0.0})
    assert s.status == "UNKNOWN" and s.objective is None and s.modes == {}
    assert s.bound is not None  # the solver-free lower bound is still reported


def test_broken_hint_is_re_timed():
    p = random_problem(3, n_jobs=6, n_groups=2)
    g = solve_greedy(p)
    bad = Solution("greedy", "HEURISTIC", dict(g.modes), {k: 0 for k in g.starts}, 0, None, 0.0)
    assert check_solution(p, bad)
    s = solve_cpsat(p, time_limit=5, hint=bad)
    assert s.status == "OPTIMAL" and "re-timed" in s.message
    assert check_solution(p, s) == []


def test_hint_is_complete():
    from solver.cpsat.hints import hint_values
    from solver.cpsat.solve import build_model

    p = random_problem(11, n_jobs=7, n_groups=3, refresh=True, sync=5)
    idx = problem_index(p)
    g = solve_greedy(p)
    H = solution_makespan(p, g)
    ctx = build_model(p, H, idx.lower_bound(H), idx)
    h = canonical_hint(p, idx, g, ctx.symmetry_classes)
    values = hint_values(ctx, h)
    assert len(values.items) == len(ctx.model.proto.variables)
    # the hint satisfies the model: fix every variable to it and the model stays feasible
    from ortools.sat.python import cp_model

    for var, v in values.items.values():
        ctx.model.add(var == v)
    solver = cp_model.CpSolver()
    solver.parameters.num_workers = 1
    assert solver.solve(ctx.model) == cp_model.OPTIMAL


def test_watchdog_bounds_wall_time():
    import sys
    from pathlib import Path

    sys.path.insert(0, str(Path(__file__).resolve().parents[2] / "bench"))
    from solver_bench import layered_problem

    p = layered_problem(400, seed=1, n_groups=4)
    s = solve_cpsat(p, time_limit=1.0, workers=2, guard_margin=0.5)
    assert s.wall_seconds < 1.0 + 0.5 + 1.0
    assert s.status in ("OPTIMAL", "FEASIBLE")
    assert check_solution(p, s) == []


def test_progress_and_history():
    p = _hard()
    seen = []
    s = solve_cpsat(p, time_limit=10, auto_hint=False, progress=lambda *a: seen.append(a))
    assert seen and s.history
    incs = [h[1] for h in s.history if h[1] is not None]
    bounds = [h[2] for h in s.history if h[2] is not None]
    assert incs == sorted(incs, reverse=True) and bounds == sorted(bounds)
    assert s.history[-1][1:] == (s.objective, s.bound)
    assert all(b <= s.objective for b in bounds)


def test_earlier_incumbents_are_valid_and_worse():
    """The search's earlier improving solutions (for the decoder to time): each a valid schedule,
    with its own model objective above the last one's, at most KEPT_INCUMBENTS, best last."""
    from solver.cpsat.solve import KEPT_INCUMBENTS

    p = _hard()
    s = solve_cpsat(p, time_limit=10, auto_hint=False)
    objs = [i.objective for i in s.incumbents]
    assert objs and len(objs) <= KEPT_INCUMBENTS and objs == sorted(objs, reverse=True)
    assert all(o > s.objective for o in objs)
    for i in s.incumbents:
        assert check_solution(p, i) == [] and solution_makespan(p, i) <= i.objective
    incs = [h[1] for h in s.history if h[1] is not None]
    assert set(objs) <= set(incs)


def test_progress_errors_do_not_kill_the_solve():
    def boom(*a):
        raise RuntimeError("display gone")

    s = solve_cpsat(_hard(), time_limit=10, auto_hint=False, progress=boom)
    assert s.status == "OPTIMAL" and "progress callback disabled" in s.message


# ---------------------------------------------------------------------------------- symmetry
def _sym_problem():
    jobs = []
    for n in "abcde":
        jobs.append(
            Job(
                n,
                (n,),
                (
                    pim_mode(n, ["g0"], 3, 90, 9, 2, 10),
                    pim_mode(n, ["g1"], 3, 90, 9, 2, 10),
                    pim_mode(n, ["g0", "g1"], 3, 90, 9, 2, 10),
                    one_task_mode(n, "host", HOST, 300),
                ),
            )
        )
    deps = [("a", "c"), ("b", "d")]
    return problem("sym", jobs, deps, [("g0", 100), ("g1", 100)], refresh=REF, sync=4)


def test_symmetric_groups_detected():
    p = _sym_problem()
    assert symmetric_classes(p) == [["g0", "g1"]]
    p.groups[1] = type(p.groups[1])("g1", p.groups[1].channels, 99)
    assert symmetric_classes(p) == []


def test_asymmetric_durations_not_detected():
    p = _sym_problem()
    j = p.jobs[0]
    p.jobs[0] = Job(j.name, j.ops, (pim_mode("a", ["g0"], 3, 91, 9, 2, 10),) + j.modes[1:])
    assert symmetric_classes(p) == []


def test_symmetry_breaking_keeps_the_optimum():
    for seed in range(3):
        p = random_problem(seed, n_jobs=6, n_groups=3, refresh=True)
        assert symmetric_classes(p) == [["g0", "g1", "g2"]]
        a = solve_cpsat(p, time_limit=10, auto_hint=False, symmetry_breaking=True)
        b = solve_cpsat(p, time_limit=10, auto_hint=False, symmetry_breaking=False)
        assert a.status == b.status == "OPTIMAL" and a.objective == b.objective


def test_canonical_hint_sorts_groups_by_busy_time():
    p = _sym_problem()
    idx = problem_index(p)
    modes = {n: "pim[g1]" for n in "abcde"}
    modes["e"] = "pim[g0]"
    from solver.heuristics import schedule_with_modes

    h = schedule_with_modes(p, modes)
    c = canonical_hint(p, idx, h, [["g0", "g1"]])
    assert check_solution(p, c) == []
    w = busy_time(p, c)
    assert w["g0"] >= w["g1"] and w["g0"] == busy_time(p, h)["g1"]
    assert solution_makespan(p, c) == solution_makespan(p, h)
    s = solve_cpsat(p, time_limit=10, hint=h)
    assert s.status == "OPTIMAL" and s.objective <= solution_makespan(p, h)


# ------------------------------------------------------------------------------- certificate
def test_certificate_round_trip():
    p = _hard()
    s = solve_cpsat(p, time_limit=10, workers=2, seed=1)
    c = Certificate.from_solution(s, workers=2, seed=1, time_limit=10)
    d = c.to_dict()
    assert d["status"] == "OPTIMAL" and d["gap"] == 0.0 and d["objective"] == s.objective
    assert d["workers"] == 2 and d["seed"] == 1 and isinstance(d["history"], list)
    import json

    json.dumps(d)


def test_solver_free_bound_shortcut():
    # a single chain: greedy is optimal and meets the critical-path bound: no model needed
    p = problem("chain", [single("a", HOST, 10), single("b", "g0", 20)], [("a", "b")], sync=5)
    s = solve_cpsat(p, time_limit=10)
    assert s.status == "OPTIMAL" and s.objective == 35 == s.bound
