"""Global-buffer loads spread over MAC bursts: the split emission is a timed alternative that is
exact and correct (functional simulation against the reference) and never slower."""

from __future__ import annotations

from dataclasses import replace

import ir
from hwmodel import load_hardware
from pimsat.instance import Instance
from pimsat.pipeline import SolveOptions, run
from solver.emit_mv import MVEmitter
from solver.layout import Layout
from solver.mvshape import mv_shape
from solver.symbols import Symbols
from solver.task_timing import time_task
from solver.tiling import make_tiling

GDDR6 = ["organization.channels=2", "organization.rows=512"]


def _emissions(hw, program):
    shape = mv_shape(program, program.ops[0].name)
    t = make_tiling(hw, shape, tuple(range(hw.organization.channels)))
    out = {}
    for split in (True, False):
        seq = MVEmitter(hw, Layout(hw, replace(t, split_macs=split)), Symbols(), "overlap").emit(0)
        out[split] = seq
    return t, out


def test_split_carries_loads_between_mac_runs_and_is_faster_on_gddr6():
    hw = load_hardware("gddr6-aim", GDDR6)
    t, seqs = _emissions(hw, ir.gemv_program(512, 2048, batch=4))
    assert t.vg * t.chunk_bursts > t.vg * t.rows_per_pass  # more loads per chunk than MAC instructions
    ops = [i.op for i in seqs[True]]
    # MAC runs are split so that loads sit between them
    assert ops.count("MAC") > [i.op for i in seqs[False]].count("MAC")
    assert any(a == "MAC" and b == "WRGB" and c == "MAC" for a, b, c in zip(ops, ops[1:], ops[2:]))
    fast, slow = time_task(hw, seqs[True]), time_task(hw, seqs[False])
    assert fast.duration < slow.duration


def test_split_emission_is_exact_and_correct_end_to_end():
    inst = Instance.model_validate(
        {
            "name": "gemv-512x2048-gddr6-2ch",
            "tier": "fpga",
            "description": "split loads",
            "program": {"kind": "gemv", "n": 512, "k": 2048, "batch": 4},
            "hardware": {"preset": "gddr6-aim", "set": GDDR6},
            "seed": 3,
        }
    )
    r = run(inst, SolveOptions(method="greedy", functional=True))
    assert True in r.lowering.split_macs.values()
    assert r.outputs_match is True
    assert int(r.sim.cycles) == r.compiled.predicted_cycles


def test_an_emission_that_split_no_mac_run_is_the_unsplit_emission():
    """Lowering times split_macs=False only when the split emission did split a run
    (MVEmitter.split_used): otherwise both emit the same commands."""
    cases = [
        (load_hardware("gddr6-aim", GDDR6), ir.gemv_program(512, 2048, batch=4)),
        (load_hardware("gddr6-aim", GDDR6), ir.gemv_program(256, 512, batch=1)),
        (load_hardware("hbm2-pim", ["organization.channels=2"]), ir.gemv_program(256, 1024, batch=16)),
        (load_hardware("hbm2-pim", ["organization.channels=2"]), ir.gemv_program(256, 1024, batch=1)),
        (load_hardware("fpga-proto"), ir.gemv_program(100, 80, batch=3)),
    ]
    used = []
    for hw, program in cases:
        t = make_tiling(hw, mv_shape(program, program.ops[0].name), tuple(range(hw.organization.channels)))
        for ci in range(len(t.channels)):
            split = MVEmitter(hw, Layout(hw, replace(t, split_macs=True)), Symbols(), "overlap")
            seq = split._emit(ci)
            unsplit = MVEmitter(hw, Layout(hw, replace(t, split_macs=False)), Symbols(), "overlap")._emit(ci)
            used.append(split.split_used)
            assert split.split_used == (seq != unsplit)
    assert True in used and False in used
