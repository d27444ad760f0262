"""Lowering on several processes (solver/lower_parallel.py): the distinct PIM shapes timed in
forked workers give the same lowering as one process, the workers really do the timing (the
parent times fewer sequences), and where forking is refused lowering stays serial."""

from __future__ import annotations

import multiprocessing
from pathlib import Path

import pytest
from solver_testkit import counted_oracle, lowered_at, lowering_summary

import solver.lower_parallel as lower_parallel
from pimsat.instance import load_instance
from pimsat.pipeline import lower_program
from solver.task_timing import TimingCache

ROOT = Path(__file__).resolve().parents[2] / "instances"
ATTN = ROOT / "fpga" / "attention-gqa-h4-kv2-d16-c15-fpga.yaml"
LAYER = ROOT / "small" / "tiny-llama-2l-hbm2-8ch.yaml"


@pytest.mark.parametrize("path", [LAYER, ATTN], ids=lambda p: p.stem)
def test_parallel_lowering_equals_serial(path, monkeypatch):
    with counted_oracle() as serial_calls:
        hw, serial = lowered_at(path)
    monkeypatch.setattr(lower_parallel, "PARALLEL_WORK", 0)  # fork even for a small program
    inst = load_instance(path)
    with counted_oracle() as parent_calls:
        parallel = lower_program(hw, inst.build_program(), 4, jobs=2)
    assert lowering_summary(parallel) == lowering_summary(serial)
    # the workers timed the PIM shapes: the parent times what they do not cover (host ops' weight
    # reads of split modes may repeat; KV appends) and far fewer sequences than alone
    assert parent_calls[0] < serial_calls[0] // 2


def test_roots_are_one_per_distinct_shape():
    program = load_instance(LAYER).build_program()  # two identical layers
    roots = lower_parallel.roots(program)
    assert roots and len({r.op for r in roots}) == len(roots)
    layers = {program.op(r.op).attrs.get("layer") for r in roots}
    assert 0 in layers and not layers - {0, None}  # layer 1 repeats layer 0's shapes (None: the LM head)
    assert [r.work for r in roots] == sorted((r.work for r in roots), reverse=True)


def test_small_programs_and_daemons_stay_serial(monkeypatch):
    inst = load_instance(LAYER)
    hw, program = inst.build_hardware([]), inst.build_program()
    from solver.lower import LowerOptions

    options = (LowerOptions(),)
    store = TimingCache(size=1).store(hw)
    assert lower_parallel.warm(hw, program, options, store, 2) == 0  # below PARALLEL_WORK
    monkeypatch.setattr(lower_parallel, "PARALLEL_WORK", 0)
    assert lower_parallel.warm(hw, program, options, store, 1) == 0  # one job
    monkeypatch.setattr(multiprocessing.current_process(), "daemon", True, raising=False)
    assert lower_parallel.warm(hw, program, options, store, 2) == 0  # a daemon has no children
    assert not store.timings


def test_the_parts_of_a_shape_time_its_tilings_once_between_them(monkeypatch):
    """A root split by channel count (ChannelPart): the parts' timings together are the whole
    root's, none timed by two parts, and each part times some."""
    inst = load_instance(LAYER)
    hw, program = inst.build_hardware([]), inst.build_program()
    from solver.lower import LowerOptions
    from solver.payload import Style

    options = tuple(LowerOptions(groups=4, style=s) for s in Style)
    units = lower_parallel.units(hw, program, options)
    root = units[0].op
    parts = [u.part for u in units if u.op == root]
    assert len(parts) == 3 and sum(p.others for p in parts) == 1  # all groups (and the rest), halves, singles
    monkeypatch.setattr(lower_parallel, "_JOB", (hw, program, options))
    whole = set(lower_parallel._time_root(root)[0])
    timed = [set(lower_parallel._time_root(root, p)[0]) for p in parts]
    assert all(timed) and set.union(*timed) == whole
    assert sum(map(len, timed)) == len(whole)
