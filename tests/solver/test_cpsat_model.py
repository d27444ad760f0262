"""Constraint families of the CP-SAT model, each on tiny fixed cases."""

from __future__ import annotations

import pytest
from solver_testkit import HOST, Edge, Job, Mode, Refresh, Task, chain_mode, one_task_mode, pim_mode, problem, single

from solver.certificate import busy_time, check_solution
from solver.cpsat import build_model, lumped_makespan, problem_index, solve_cpsat
from solver.index import format_channels


def solve(p, **kw):
    kw.setdefault("time_limit", 10)
    s = solve_cpsat(p, **kw)
    if s.modes:
        assert check_solution(p, s) == []
    return s


# ------------------------------------------------------------------------------------- modes
def test_single_mode_jobs_have_no_choice_literal():
    p = problem("m", [single("a", HOST, 5), single("b", "g0", 7)], [("a", "b")])
    ctx = build_model(p, horizon=100, lower_bound=0)
    assert all(lit is None for lit in ctx.lit.values())
    protos = [ctx.model.proto.constraints[iv.index] for iv in ctx.interval.values()]
    assert len(protos) == 2 and not any(c.enforcement_literal for c in protos)


def test_choice_gives_optional_intervals_and_exactly_one_mode():
    j = Job("a", ("a",), (one_task_mode("a", "host", HOST, 50), one_task_mode("a", "pim", "g0", 10)))
    p = problem("m", [j])
    ctx = build_model(p, horizon=100, lower_bound=0)
    assert all(lit is not None for lit in ctx.lit.values())
    protos = [ctx.model.proto.constraints[iv.index] for iv in ctx.interval.values()]
    assert all(len(c.enforcement_literal) == 1 for c in protos)
    s = solve(p, auto_hint=False)
    assert s.status == "OPTIMAL" and s.modes == {"a": "pim"} and s.objective == 10


def test_mode_beyond_the_horizon_is_dropped():
    j = Job("a", ("a",), (one_task_mode("a", "slow", HOST, 500), one_task_mode("a", "fast", "g0", 10)))
    ctx = build_model(problem("m", [j]), horizon=100, lower_bound=0)
    assert ctx.dead == [("a", "slow")] and ctx.lit[("a", "fast")] is None


def test_horizon_too_small_is_infeasible():
    p = problem("m", [single("a", HOST, 50)], horizon=20)
    s = solve(p, auto_hint=False)
    assert s.status == "INFEASIBLE" and "horizon" in s.message


# -------------------------------------------------------------------------------- precedence
def test_dependency_lag_between_resources(two_chains):
    s = solve(two_chains, auto_hint=False)
    assert s.status == "OPTIMAL"
    st = s.starts
    assert st["b/only"] >= st["a/only"] + 10 + 3
    assert st["d/only"] >= st["c/only"] + 10 + 3
    # host: a, c back to back; g0: b, d -> 10 + 3 + 20 + 20
    assert s.objective == 53


def test_internal_edge_lags():
    m = chain_mode("a", "m", [(HOST, 5), ("g0", 5), (HOST, 5)], lags=[7, 11])
    p = problem("m", [Job("a", ("a",), (m,))])
    s = solve(p, auto_hint=False)
    assert s.objective == 5 + 7 + 5 + 11 + 5


def test_lag_depends_on_the_producers_chosen_output_resource():
    # producer: output on host (fast) or on g0 (slower); consumer reads on g0, sync 100
    prod = Job("p", ("p",), (one_task_mode("p", "host", HOST, 10), one_task_mode("p", "pim", "g0", 30)))
    p = problem("m", [prod, single("c", "g0", 5)], [("p", "c")], sync=100)
    s = solve(p, auto_hint=False)
    assert s.modes["p"] == "pim" and s.objective == 35
    p2 = problem("m", [prod, single("c", "g0", 5)], [("p", "c")], sync=10)
    s2 = solve(p2, auto_hint=False)
    assert s2.modes["p"] == "host" and s2.objective == 25


def test_non_input_tasks_do_not_wait_for_producers():
    pre = Task("c/pre", "g0", 20)
    rd = Task("c/in", "g0", 5)
    cm = Mode("m", (pre, rd), (Edge(pre.name, rd.name),), (rd.name,), rd.name)
    p = problem("m", [single("a", HOST, 20), Job("c", ("c",), (cm,))], [("a", "c")], sync=2)
    s = solve(p, auto_hint=False)
    assert s.starts["c/pre"] == 0 and s.objective == 27


# --------------------------------------------------------------------------------- resources
def test_no_overlap_on_each_resource():
    jobs = [single(f"h{i}", HOST, 10 + i) for i in range(3)] + [single(f"g{i}", "g0", 7) for i in range(3)]
    s = solve(problem("m", jobs), auto_hint=False)
    assert s.status == "OPTIMAL" and s.objective == 33
    for prefix in ("h", "g"):
        iv = sorted((s.starts[f"{prefix}{i}/only"], i) for i in range(3))
        assert len({a for a, _ in iv}) == 3


# ---------------------------------------------------------------------------------- capacity
def _two_mode_job(name, rows_fast, rows_slow, cap_group="g0"):
    return Job(
        name,
        (name,),
        (
            one_task_mode(name, "fast", cap_group, 10, {cap_group: rows_fast}),
            one_task_mode(name, "slow", HOST, 100, {cap_group: rows_slow}),
        ),
    )


def test_mode_exceeding_capacity_is_never_chosen():
    p = problem("c", [_two_mode_job("a", 2000, 10)], groups=[("g0", 1000)])
    s = solve(p, auto_hint=False)
    assert s.status == "OPTIMAL" and s.modes["a"] == "slow"


def test_capacity_shared_between_jobs():
    jobs = [_two_mode_job(n, 600, 0) for n in ("a", "b", "c")]
    s = solve(problem("c", jobs, groups=[("g0", 1300)]), auto_hint=False)
    assert sorted(s.modes.values()) == ["fast", "fast", "slow"]


def test_repeat_multiplies_usage():
    jobs = [_two_mode_job(n, 600, 0) for n in ("a", "b")]
    s = solve(problem("c", jobs, groups=[("g0", 1300)], repeat=2), auto_hint=False)
    assert sorted(s.modes.values()) == ["fast", "slow"]


def test_infeasible_capacity_names_group_need_and_capacity():
    jobs = [
        single("a", "g0", 5, {"g0": 17_000}),
        single("b", "g1", 5, {"g1": 300}),
        _two_mode_job("c", 17_000, 17_000, cap_group="g1"),
    ]
    p = problem("c", jobs, groups=[("g0", 1000), ("g1", 16_384), ("g2", 10)])
    for s in (solve(p), solve(p, auto_hint=False)):
        assert s.status == "INFEASIBLE" and s.objective is None
        assert "group g0 (channels 0-3) needs at least 17,000 rows per bank, 1,000 available" in s.message
        assert "group g1 (channels 4-7) needs at least 17,300 rows per bank, 16,384 available" in s.message
        assert "g2" not in s.message


def test_jointly_infeasible_capacity():
    # each job either uses 600 rows of g0 or 600 rows of g1; three jobs, 1000 rows each
    def j(n):
        return Job(n, (n,), (one_task_mode(n, "a", "g0", 5, {"g0": 600}), one_task_mode(n, "b", "g1", 5, {"g1": 600})))

    p = problem("c", [j("x"), j("y"), j("z")], groups=[("g0", 1000), ("g1", 1000)])
    s = solve(p, auto_hint=False)
    assert s.status == "INFEASIBLE" and "capacity" in s.message


def test_format_channels():
    assert format_channels((0, 1, 2, 3)) == "0-3"
    assert format_channels((5, 0, 1, 7, 8)) == "0-1,5,7-8"


# ----------------------------------------------------------------------------------- refresh
REF = Refresh(tREFI=400, tRFC=35, max_postponed=8)


def test_refresh_lumped_value():
    p = problem("r", [single("a", "g0", 1000)], refresh=REF)
    s = solve(p, auto_hint=False)
    # smallest M >= 1000 with M >= 1000 + 35 * floor(M / 400)  -> 1070
    assert s.status == "OPTIMAL" and s.objective == 1070 == s.bound
    assert lumped_makespan(p, 1000, {"g0": 1000}) == 1070


def test_refresh_relaxation_bound_on_every_group(two_chains):
    p = two_chains
    p.refresh = REF
    p.jobs.append(single("e", "g0", 900))
    s = solve(p, auto_hint=False)
    work = busy_time(p, s)
    for g in p.groups:
        assert s.objective >= work[g.name] + REF.tRFC * (s.objective // REF.tREFI)
    assert s.objective >= max(s.starts[t] + d for t, d in [("a/only", 10), ("b/only", 20), ("e/only", 900)])


def test_refresh_only_charges_groups_not_the_host():
    p = problem("r", [single("a", HOST, 1000)], refresh=REF)
    assert solve(p, auto_hint=False).objective == 1000


# ----------------------------------------------------------------------------- validation
def test_malformed_problems_are_rejected():
    t = Task("a/x", "g9", 5)
    bad = Job("a", ("a",), (Mode("m", (t,), (), (t.name,), t.name),))
    with pytest.raises(ValueError, match="unknown resource"):
        problem_index(problem("v", [bad]))
    with pytest.raises(ValueError, match="topological"):
        problem_index(problem("v", [single("a", HOST, 1), single("b", HOST, 1)], [("b", "a")]))
    with pytest.raises(ValueError, match="duplicate task"):
        problem_index(
            problem(
                "v",
                [
                    single("a", HOST, 1),
                    Job("b", ("b",), (Mode("m", (Task("a/only", HOST, 1),), (), ("a/only",), "a/only"),)),
                ],
            )
        )


def test_pim_modes_fixture_is_valid():
    m = pim_mode("j", ["g0", "g1"], 2, 10, 4, 1, 100)
    p = problem("v", [Job("j", ("j",), (m,))], groups=[("g0", 100), ("g1", 100)])
    s = solve(p, auto_hint=False)
    assert s.status == "OPTIMAL" and s.objective == 2 + 5 + 2 + 1
