"""Stage 3 (pimsat.pipeline.select_program) keeps the fastest decoded program among the method's
solution and its alternatives: greedy's other candidate schedules, and for cpsat the greedy hint
and those."""

from __future__ import annotations

from dataclasses import replace

from pimsat import pipeline as P
from pimsat.instance import Instance
from pimsat.pipeline import SolveOptions, run
from solver.heuristics import greedy_schedules
from solver.problem import Method, Status

# refresh half of the time (tREFI 700, tRFC 350): the greedy model, which leaves refresh out,
# ranks its schedules unlike the decoder (found by bench/whatif_fuzz.py)
REFRESH_BOUND = Instance(
    name="refresh-bound-attention",
    program={"kind": "attention", "heads": 16, "kv_heads": 4, "head_dim": 64, "context": 210, "batch": 4},
    hardware={
        "preset": "hbm2-pim",
        "set": ["organization.channels=16", "pim.acc_registers=64", "timing.params.tREFI=700"],
    },
)


def test_greedy_keeps_the_fastest_of_its_schedules_as_decoded():
    """The best-ranked greedy schedule decodes to 9,735 cycles, slower than naive's 9,719;
    another of greedy's schedules decodes to 9,532, and that one is kept."""
    hw, program = REFRESH_BOUND.build_hardware(), REFRESH_BOUND.build_program()
    problem, lowering = P.DEFAULT_CACHE.lowered(REFRESH_BOUND, hw, program, 2, 1).for_method("greedy")
    schedules = greedy_schedules(problem)
    decoded = [P.decode(problem, lowering, s, placements=False, lazy=True).predicted_cycles for s in schedules]
    assert decoded[0] == 9_735 and min(decoded) == 9_532, decoded

    r = {
        m: run(REFRESH_BOUND, SolveOptions(method=m, groups=2, functional=False)) for m in ("naive", "greedy", "cpsat")
    }
    cycles = {m: int(x.sim.cycles) for m, x in r.items()}
    assert all(x.sim.cycles == x.compiled.predicted_cycles for x in r.values())
    assert cycles["cpsat"] <= cycles["greedy"] == 9_532 < cycles["naive"] == 9_719, cycles
    assert (
        "another greedy schedule decodes to 9,532 cycles, the greedy solution to 9,735" in r["greedy"].solution.message
    )


def _slow_and_fast():
    """The refresh-bound instance's problem and two of its greedy schedules as decoded: the
    slowest and the fastest (cycles)."""
    hw, program = REFRESH_BOUND.build_hardware(), REFRESH_BOUND.build_program()
    problem, lowering = P.DEFAULT_CACHE.lowered(REFRESH_BOUND, hw, program, 2, 1).for_method("cpsat")
    schedules = greedy_schedules(problem)
    decoded = [P.decode(problem, lowering, s, placements=False, lazy=True).predicted_cycles for s in schedules]
    slow, fast = schedules[decoded.index(max(decoded))], schedules[decoded.index(min(decoded))]
    return problem, lowering, (slow, max(decoded)), (fast, min(decoded))


def test_an_earlier_cpsat_solution_that_decodes_faster_is_kept():
    """CP-SAT's last solution (here a stand-in: the slowest greedy schedule, its model objective
    the least) decodes slower than an earlier one of its search: the earlier one is kept, the
    status FEASIBLE, the note names both."""
    problem, lowering, (slow, slow_cycles), (fast, fast_cycles) = _slow_and_fast()
    assert fast_cycles < slow_cycles
    end = P._model_ends(problem, [fast])[0]
    assert end < slow_cycles
    earlier = replace(fast, method=Method.CPSAT, status=Status.FEASIBLE, objective=end)
    last = replace(slow, method=Method.CPSAT, status=Status.OPTIMAL, objective=end - 1, bound=end - 1)
    picked = P.select_program(
        problem, lowering, P.Solved(replace(last, incumbents=[earlier]), [], 0.0), functional=False, lazy=True
    )
    assert picked.compiled.predicted_cycles == fast_cycles and picked.solution.modes == fast.modes
    assert picked.solution.status == Status.FEASIBLE and picked.solution.bound == end - 1
    assert f"an earlier CP-SAT solution (model {end:,}) decodes to {fast_cycles:,} cycles" in picked.solution.message

    # one whose model objective is not below the last solution's program is not timed
    late = replace(earlier, objective=slow_cycles)
    picked = P.select_program(
        problem, lowering, P.Solved(replace(last, incumbents=[late]), [], 0.0), functional=False, lazy=True
    )
    assert picked.compiled.predicted_cycles == slow_cycles and "earlier" not in picked.solution.message


def test_a_layer_templates_earlier_solutions_are_expanded_and_timed():
    """A model of several layers is solved as one layer's template; the template search's earlier
    solutions are expanded to the whole step like its last one (no objective of the whole step:
    their model ends lie above their programs), and selection times them without the cut."""
    inst = Instance(
        name="tiny-llama-2l",
        program={"kind": "model", "preset": "tiny-llama", "batch": 1, "context": 7, "layers": 2},
        hardware={"preset": "hbm2-pim", "set": ["organization.channels=4", "timing.params.tREFI=700"]},
    )
    hw, program = inst.build_hardware(), inst.build_program()
    problem, lowering = P.DEFAULT_CACHE.lowered(inst, hw, program, 2, 1).for_method("cpsat")
    solved = P.solve_program(problem, SolveOptions(method="cpsat", groups=2))
    last = solved.solution
    assert "layer template solved" in last.message and last.incumbents
    jobs = {j.name for j in problem.jobs}
    for inc in last.incumbents:
        assert inc.objective is None and set(inc.modes) == jobs
    decoded = [P.decode(problem, lowering, s, placements=False, lazy=True).predicted_cycles for s in last.incumbents]
    own = P.decode(problem, lowering, last, placements=False, lazy=True).predicted_cycles
    picked = P.select_program(problem, lowering, solved, functional=False, lazy=True)
    assert picked.compiled.predicted_cycles <= min([own, *decoded[-P.MAX_INCUMBENTS_DECODED :]])
