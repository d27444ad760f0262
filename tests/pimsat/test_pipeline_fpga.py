"""End to end on the fpga tier: every method's program is simulated, exact and correct."""

from __future__ import annotations

from pathlib import Path

import pytest

from pimsat.instance import instance_files, load_instance
from pimsat.pipeline import SolveOptions, run
from pimsat.report import report_dict

ROOT = Path(__file__).resolve().parents[2]
FPGA = instance_files(ROOT / "instances" / "fpga")


@pytest.fixture(scope="module")
def reports():
    out = {}
    for path in FPGA:
        inst = load_instance(path)
        out[inst.name] = {
            m: report_dict(run(inst, SolveOptions(method=m, time_limit=10.0))) for m in ("naive", "greedy", "cpsat")
        }
    return out


def test_tier_is_not_empty():
    assert len(FPGA) >= 5


@pytest.mark.parametrize("path", FPGA, ids=lambda p: p.stem)
def test_every_method_exact_and_correct(reports, path):
    for method, rep in reports[load_instance(path).name].items():
        assert rep["violations"] == 0
        assert rep["outputs_match"] is True, (method, rep["max_abs_error"])
        assert rep["simulated_cycles"] == rep["objective_cycles"], method  # prediction is exact


@pytest.mark.parametrize("path", FPGA, ids=lambda p: p.stem)
def test_cpsat_optimal_and_no_worse_than_heuristics(reports, path):
    r = reports[load_instance(path).name]
    assert r["cpsat"]["status"] == "OPTIMAL"
    assert r["cpsat"]["solve_seconds"] < 10
    assert r["cpsat"]["simulated_cycles"] <= r["greedy"]["simulated_cycles"] <= r["naive"]["simulated_cycles"]
    # bounds are bounds
    assert r["cpsat"]["bound_cycles"] <= r["cpsat"]["simulated_cycles"]
    assert r["cpsat"]["lower_bound_cycles"] <= r["cpsat"]["simulated_cycles"]
    assert r["naive"]["lower_bound_cycles"] == r["cpsat"]["lower_bound_cycles"]


@pytest.mark.parametrize("path", FPGA, ids=lambda p: p.stem)
def test_each_gap_is_against_bounds_of_its_own_space(reports, path):
    """model_gap: CP-SAT's objective against its bound (task-level model); gap: the program
    against the hardware or mode bound (valid for every program of the task space), never below
    zero; the decoded program's difference from the model's objective reported."""
    for method, rep in reports[load_instance(path).name].items():
        assert rep["gap"] is not None and rep["gap"] >= 0, method
        assert rep["decode_minus_model_cycles"] == rep["objective_cycles"] - rep["model_objective_cycles"]
        if method == "cpsat":
            obj, bound = rep["model_objective_cycles"], rep["model_bound_cycles"]
            assert rep["status"] == "OPTIMAL" and bound == obj and rep["model_gap"] == 0.0
        else:
            assert rep["model_bound_cycles"] is None and rep["model_gap"] is None


def test_deterministic_bytes(tmp_path):
    from hwmodel.isa_codec import encode_stream

    inst = load_instance(FPGA[0])
    a = run(inst, SolveOptions(method="cpsat", time_limit=5.0, seed=3))
    b = run(inst, SolveOptions(method="cpsat", time_limit=5.0, seed=3))
    sa, sb = a.compiled.streams, b.compiled.streams
    assert sa.symbols == sb.symbols
    assert encode_stream(sa.host) == encode_stream(sb.host)
    for x, y in zip(sa.channels, sb.channels):
        assert encode_stream(x) == encode_stream(y)


def test_no_regression_against_best_known(reports):
    """bench/best_known.json records the best makespans found so far (`bench/run_bench.py --record`)."""
    import json

    best = json.loads((ROOT / "bench" / "best_known.json").read_text())
    for name, r in reports.items():
        if name in best:
            assert r["cpsat"]["simulated_cycles"] <= best[name], name


def test_narrow_link_what_if_is_slower_and_still_exact():
    """host.link_bytes_per_cycle is live: a link 8x narrower spaces every transfer (input
    broadcast, read-out) by tLINK, and the program stays exact and correct."""
    inst = load_instance(ROOT / "instances" / "fpga" / "gemv-64x128-b2-fpga.yaml")
    base = report_dict(run(inst, SolveOptions(method="cpsat", time_limit=10.0)))
    narrow = report_dict(run(inst, SolveOptions(method="cpsat", time_limit=10.0), ["host.link_bytes_per_cycle=2"]))
    assert narrow["violations"] == 0 and narrow["outputs_match"] is True
    assert narrow["simulated_cycles"] == narrow["objective_cycles"]
    assert narrow["simulated_cycles"] > base["simulated_cycles"]


def test_lowering_collects_young_objects_only_and_restores_the_collector(monkeypatch):
    """lower_program relaxes the cyclic collector while it runs (pipeline.young_gc_only) and
    gives the caller's thresholds back, also when lowering fails."""
    import gc

    from pimsat import pipeline

    seen = []
    monkeypatch.setattr(pipeline, "warm", lambda *a: seen.append(gc.get_threshold()))
    before = gc.get_threshold()
    inst = load_instance(Path("instances/fpga/gemv-64x128-fpga.yaml"))
    pipeline.lower_program(inst.build_hardware([]), inst.build_program(), 1)
    assert seen and seen[0][2] > 10 * before[2] and gc.get_threshold() == before
    monkeypatch.setattr(pipeline, "lower", lambda *a: 1 / 0)
    with pytest.raises(ZeroDivisionError):
        pipeline.lower_program(inst.build_hardware([]), inst.build_program(), 1)
    assert gc.get_threshold() == before


@pytest.mark.parametrize("path", FPGA, ids=lambda p: p.stem)
def test_a_lazy_programs_command_log_is_the_eager_ones(path):
    """`solve --out` keeps the command log of a small timing-only program decoded lazily (as
    LazyStreams: pipeline.run with record=None): the log and the written streams are those of
    the program decoded whole."""
    import numpy as np

    from hwmodel.streams import program_digest
    from pimsat import pipeline as P

    inst = load_instance(path)
    hw, program = inst.build_hardware([]), inst.build_program()
    problem, lowering = P.DEFAULT_CACHE.lowered(inst, hw, program, 4, 1).for_method("greedy")
    solved = P.solve_program(problem, SolveOptions(method="greedy"))
    runs = []
    for lazy in (False, True):
        compiled = P.select_program(problem, lowering, solved, functional=False, lazy=lazy).compiled
        res, _, _ = P.simulate_program(hw, program, compiled, functional=False, record=True, values=inst.values)
        runs.append((res.log, program_digest(compiled.streams), type(compiled.streams.channels[0]).__name__))
    (eager_log, eager_digest, eager_kind), (lazy_log, lazy_digest, lazy_kind) = runs
    assert (eager_kind, lazy_kind) == ("list", "LazyStream")
    assert np.array_equal(eager_log, lazy_log) and eager_digest == lazy_digest
    r = run(inst, SolveOptions(method="greedy", functional=False, record=None))
    assert r.sim.log is not None and np.array_equal(r.sim.log, eager_log)
