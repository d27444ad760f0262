"""Vectors per group is a timed tiling choice (solver/lower.py): on a data-bus global-buffer write
path every switch between buffer writes and MACs pays both read/write turnarounds, so at a large
batch fewer vectors per group (longer chunks, fewer switches) win; lowering keeps the grouping
only where it is faster, the naive baseline keeps the default, and the programs stay exact and
correct (functional simulation, bit-true model)."""

from __future__ import annotations

import pytest

import ir
from hwmodel import load_hardware
from pimsat.instance import Instance
from pimsat.pipeline import SolveOptions, run
from solver.emit_mv import MVEmitter
from solver.layout import Layout
from solver.lower import LowerOptions, _vector_group_candidates, lower
from solver.mvshape import mv_shape
from solver.symbols import Symbols
from solver.task_timing import time_task
from solver.tiling import make_tiling

HBM2 = ["organization.channels=2", "organization.rows=512"]


def _instance(path: str) -> Instance:
    return Instance.model_validate(
        {
            "name": f"gemv-256x1024-b16-hbm2-2ch-{path}",
            "tier": "fpga",
            "description": "vector groups",
            "program": {"kind": "gemv", "n": 256, "k": 1024, "batch": 16},
            "hardware": {"preset": "hbm2-pim", "set": HBM2 + [f"pim.gb_write_path={path}"]},
            "seed": 5,
        }
    )


def test_candidates_halve_down_to_one():
    assert _vector_group_candidates(8) == [8, 4, 2, 1]
    assert _vector_group_candidates(1) == [1]


def test_one_vector_per_group_pays_fewer_turnarounds_on_the_data_bus_path():
    hw = load_hardware("hbm2-pim", HBM2)
    program = ir.gemv_program(256, 1024, batch=16)
    shape = mv_shape(program, program.ops[0].name)
    channels = tuple(range(hw.organization.channels))
    default = make_tiling(hw, shape, channels)
    one = make_tiling(hw, shape, channels, max_vg=1)
    assert default.vg > 1 and one.vg == 1 and one.chunk_bursts > default.chunk_bursts
    durations = [
        time_task(hw, MVEmitter(hw, Layout(hw, t), Symbols(), "overlap").emit(0)).duration for t in (default, one)
    ]
    assert durations[1] < durations[0]


@pytest.mark.parametrize("path", ["data_bus", "dedicated"])
def test_lowering_keeps_the_faster_grouping_and_naive_the_default(path):
    inst = _instance(path)
    hw, program = inst.build_hardware([], None), inst.build_program()
    _, overlap = lower(hw, program, LowerOptions(groups=1))
    _, naive = lower(hw, program, LowerOptions(groups=1, style="naive"))
    shape = mv_shape(program, program.ops[0].name)
    channels = tuple(range(hw.organization.channels))
    default = make_tiling(hw, shape, channels).vg
    chosen = set(overlap.vector_groups.values())
    if path == "data_bus":
        assert chosen and max(chosen) < default
    # the vendor-style emission writes the whole buffer (no double buffering): its own default
    assert set(naive.vector_groups.values()) == {make_tiling(hw, shape, channels, double_buffer=False).vg}


def test_the_chosen_grouping_is_exact_and_bit_true():
    r = run(_instance("data_bus"), SolveOptions(method="greedy", functional=True))
    assert min(r.lowering.vector_groups.values()) < 8
    assert r.outputs_match is True and r.bit_exact is True
    assert int(r.sim.cycles) == r.compiled.predicted_cycles
