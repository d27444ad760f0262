"""Greedy list scheduling and the naive program-order schedule."""

from __future__ import annotations

import pytest
from hypothesis import given, settings
from hypothesis import strategies as st
from solver_testkit import HOST, Job, chain_mode, one_task_mode, problem, random_problem, single

from solver.certificate import check_solution
from solver.cpsat import solve_cpsat
from solver.heuristics import Timeline, naive_modes, schedule_with_modes, solve_greedy, solve_naive


def _intervals(p, s):
    out = []
    for job in p.jobs:
        mode = next(m for m in job.modes if m.name == s.modes[job.name])
        out += [(s.starts[t.name], s.starts[t.name] + t.duration, t.resource) for t in mode.tasks]
    return sorted(out)


def test_timeline_fills_gaps():
    tl = Timeline()
    tl.insert(10, 20)
    tl.insert(30, 40)
    assert tl.earliest(0, 10) == 0
    assert tl.earliest(0, 11) == 40
    assert tl.earliest(15, 10) == 20
    assert tl.earliest(21, 10) == 40
    assert tl.earliest(45, 3) == 45


def test_naive_is_strictly_serial_with_lags():
    jobs = [single("a", HOST, 10), single("b", "g0", 20), single("c", HOST, 5), single("d", "g0", 7)]
    p = problem("n", jobs, [("a", "b")], sync=3)
    s = solve_naive(p)
    assert s.status == "HEURISTIC" and s.bound is None and check_solution(p, s) == []
    iv = _intervals(p, s)
    for (_s1, e1, r1), (s2, _e2, r2) in zip(iv, iv[1:]):
        assert s2 >= e1 + p.lag(r1, r2)
    assert s.objective == 10 + 3 + 20 + 3 + 5 + 3 + 7


def test_naive_mode_prefix_and_fallback():
    j1 = Job("a", ("a",), (one_task_mode("a", "host", HOST, 50), one_task_mode("a", "naive[all]", "g0", 10)))
    j2 = Job("b", ("b",), (one_task_mode("b", "first", HOST, 5), one_task_mode("b", "second", "g0", 1)))
    p = problem("n", [j1, j2])
    assert naive_modes(p) == {"a": "naive[all]", "b": "first"}
    assert solve_naive(p, mode_name_prefix="sec").modes == {"a": "host", "b": "second"}


def test_greedy_overlaps_independent_chains(two_chains):
    g, n = solve_greedy(two_chains), solve_naive(two_chains)
    assert check_solution(two_chains, g) == []
    assert g.objective == 53 < n.objective


def test_greedy_picks_earliest_output_end():
    j = Job("a", ("a",), (one_task_mode("a", "slow", HOST, 50), one_task_mode("a", "fast", "g0", 10)))
    p = problem("g", [single("x", "g0", 100), j])
    s = solve_greedy(p)
    assert s.modes["a"] == "slow" and s.objective == 100  # g0 busy until 100


def test_greedy_tie_breaks_on_capacity_usage():
    j = Job(
        "a", ("a",), (one_task_mode("a", "big", "g0", 10, {"g0": 50}), one_task_mode("a", "small", "g1", 10, {"g1": 5}))
    )
    p = problem("g", [j], groups=[("g0", 100), ("g1", 100)])
    assert solve_greedy(p).modes["a"] == "small"


def test_greedy_respects_capacity_with_lookahead():
    # a: fast mode uses all of g0; b has no other choice than 60 rows of g0
    a = Job("a", ("a",), (one_task_mode("a", "fast", "g0", 10, {"g0": 100}), one_task_mode("a", "slow", HOST, 90)))
    b = single("b", "g0", 10, {"g0": 60})
    p = problem("g", [a, b], groups=[("g0", 100)])
    s = solve_greedy(p)
    assert s.status == "HEURISTIC" and s.modes["a"] == "slow" and check_solution(p, s) == []


def test_heuristics_report_infeasible_capacity():
    p = problem("g", [single("a", "g0", 10, {"g0": 17_300})], groups=[("g0", 16_384)])
    for s in (solve_greedy(p), solve_naive(p)):
        assert s.status == "INFEASIBLE" and s.objective is None
        assert "group g0 (channels 0-3) needs" in s.message and "16,384 available" in s.message


def test_naive_infeasible_when_its_modes_do_not_fit():
    j = Job(
        "a", ("a",), (one_task_mode("a", "naive[all]", "g0", 10, {"g0": 200}), one_task_mode("a", "host", HOST, 90))
    )
    p = problem("g", [j], groups=[("g0", 100)])
    assert solve_naive(p).status == "INFEASIBLE"
    assert solve_greedy(p).modes["a"] == "host"


def test_internal_edges_with_lags_in_heuristics():
    m = chain_mode("a", "m", [(HOST, 5), ("g0", 5), (HOST, 5)], lags=[7, 11])
    p = problem("h", [Job("a", ("a",), (m,))])
    for s in (solve_greedy(p), solve_naive(p)):
        assert check_solution(p, s) == [] and s.objective == 33


def test_schedule_with_modes_is_valid():
    p = random_problem(5, n_jobs=8, n_groups=3)
    s = schedule_with_modes(p, naive_modes(p))
    assert s.status == "HEURISTIC" and check_solution(p, s) == []


@settings(max_examples=40, deadline=None)
@given(seed=st.integers(0, 100_000), n_jobs=st.integers(2, 10), n_groups=st.integers(1, 3), sync=st.integers(0, 50))
def test_heuristics_valid_deterministic_and_ordered(seed, n_jobs, n_groups, sync):
    p = random_problem(seed, n_jobs=n_jobs, n_groups=n_groups, sync=sync)
    g1, g2, n = solve_greedy(p), solve_greedy(p), solve_naive(p)
    assert check_solution(p, g1) == [] and check_solution(p, n) == []
    assert (g1.modes, g1.starts, g1.objective) == (g2.modes, g2.starts, g2.objective)
    assert g1.objective <= n.objective
    assert g1.objective == max(e for _, e, _ in _intervals(p, g1))


@pytest.mark.parametrize("cap", [300, 700, 2000])
def test_greedy_capacity_never_exceeded(cap):
    for seed in range(5):
        p = random_problem(seed, n_jobs=8, n_groups=2, capacity=cap)
        s = solve_greedy(p)
        if s.status == "HEURISTIC":
            assert check_solution(p, s) == []
        elif s.status == "INFEASIBLE":
            assert "group" in s.message
            assert solve_cpsat(p, time_limit=5).status == "INFEASIBLE"
        else:
            assert s.status == "UNKNOWN" and "may still be feasible" in s.message


def test_the_head_group_pass_lets_the_last_job_of_a_chain_choose():
    """attention-gqa-llama3-c2048 on hbm2-pim: greedy's head-group pass forced every job that
    offers head groups into them, the context too, which feeds o_proj, no reader by heads (18,418
    cycles in the list schedule); with the last job free the context runs whole after the scores'
    and softmax's head groups (15,392), and greedy returns that program."""
    from pathlib import Path

    from pimsat.instance import load_instance
    from pimsat.pipeline import lower_program
    from solver.heuristics import _greedy_pass
    from solver.index import problem_index

    inst = load_instance(
        Path(__file__).resolve().parents[2] / "instances/micro/attention-gqa-llama3-c2048-hbm2-64ch.yaml"
    )
    problem, _ = lower_program(inst.build_hardware(), inst.build_program(), 2).by_style["overlap"]
    idx = problem_index(problem)
    forced, free = _greedy_pass(problem, idx, 2), _greedy_pass(problem, idx, 2, last_free=True)
    assert forced.modes["context"] == "heads2[all]" and free.modes["context"] == "pim[all]"
    assert free.modes["scores"] == "heads2[all]" and free.modes["softmax"] == "heads2"
    assert (forced.objective, free.objective) == (18418, 15392)
    assert solve_greedy(problem).objective == 15392


def test_greedy_also_schedules_naives_modes_as_their_vendor_style_twins():
    """The overlap lowering offers naive's emission as alternatives ("pim-closed[all]",
    "unfused-closed[all]"); greedy list-schedules them as one candidate, so its program is not
    slower than naive's for want of them (bench/whatif_fuzz.py --size llm case 141: an OPT-6.7B
    layer on 16 hbm3-pim channels with a 2-byte link, greedy 688,100 against naive's 687,539)."""
    from pimsat.instance import Instance
    from pimsat.pipeline import DEFAULT_CACHE
    from solver.heuristics import VENDOR_TWINS, greedy_schedules, vendor_twin_modes

    inst = Instance(
        name="twins",
        program={"kind": "model", "preset": "tiny-llama", "batch": 1, "context": 5, "layers": 1},
        hardware={"preset": "hbm2-pim", "set": ["organization.channels=2"]},
    )
    lowered = DEFAULT_CACHE.lowered(inst, inst.build_hardware(), inst.build_program(), 2, 1)
    overlap, naive = lowered.for_method("greedy")[0], lowered.for_method("naive")[0]
    twins = vendor_twin_modes(overlap)
    assert twins is not None and vendor_twin_modes(naive) is None
    runs = {j.name: j.modes[0].name for j in naive.jobs}  # naive_modes: each job's first mode
    first = {j.name: j.modes[0].name for j in overlap.jobs}
    assert any(t in VENDOR_TWINS for t in twins.values())
    for job in overlap.jobs:
        if twins[job.name] in VENDOR_TWINS:  # naive's mode, its twin: "pim[all]" -> "pim-closed[all]"
            assert twins[job.name] == runs[job.name].replace("[all]", "-closed[all]")
        else:  # host ops: the overlap lowering's first mode (a host chain as one launch)
            assert twins[job.name] == first[job.name]
    assert any(s.modes == twins for s in greedy_schedules(overlap))
