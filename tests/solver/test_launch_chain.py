"""Host tasks that continue the host kernel's launch (solver/launch_chain.py, ISA 1.6): which tasks
lowering marks, their durations, the chain bits decode writes, the programs exact and bit-exact
with one launch paid, and where it wins."""

from __future__ import annotations

import pytest

from hwmodel.host_costs import HOST_COMPUTE
from pimsat.instance import Instance
from pimsat.pipeline import SolveOptions, run
from solver.launch_chain import hands_over_on_host
from solver.lower import LowerOptions, lower
from solver.problem import HOST

ISA_1_5 = 'isa_version="1.5"'  # a device whose chained instruction must follow one of its own kind
TINY = {"kind": "model", "preset": "tiny-llama", "context": 15}


def _instance(program, preset="hbm2-pim", sets=("organization.channels=8",)):
    return Instance(name="launch-chain", program=program, hardware={"preset": preset, "set": list(sets)})


def _host_tasks(problem):
    return {t.name: t for j in problem.jobs for m in j.modes for t in m.tasks if t.resource == HOST}


def test_every_host_task_after_the_first_host_op_is_chained():
    """A tiny Llama layer: every host task of every mode has a host task before it in every
    schedule but the embedding's HOP, the program's first op. The chained ones take the launch
    less than on ISA 1.5, which chains nothing across tasks; naive lowering chains nothing."""
    inst = _instance(TINY)
    hw, program = inst.build_hardware(), inst.build_program()
    problem = lower(hw, program, LowerOptions(groups=2))[0]
    old = lower(
        _instance(TINY, sets=["organization.channels=8", ISA_1_5]).build_hardware(), program, LowerOptions(groups=2)
    )[0]
    naive = lower(hw, program, LowerOptions(groups=2, style="naive"))[0]
    tasks, before = _host_tasks(problem), _host_tasks(old)
    assert tasks.keys() == before.keys() and len(tasks) > 100
    first = {n for n, t in tasks.items() if not t.chained}
    assert first == {n for n in tasks if n.startswith("embed_tokens/")}
    for n, t in tasks.items():
        assert t.duration == before[n].duration - hw.host.dispatch_cycles * t.chained
    assert not any(t.chained for t in _host_tasks(naive).values())
    assert all(hands_over_on_host(m) for j in problem.jobs for m in j.modes)


def test_a_gemv_alone_pays_its_launch():
    """A single gemv: nothing runs on the host before its epilogue (or its rows on the host), so
    no host task is chained."""
    inst = _instance({"kind": "gemv", "n": 64, "k": 128}, "fpga-proto", ())
    problem = lower(inst.build_hardware(), inst.build_program(), LowerOptions(groups=2))[0]
    assert _host_tasks(problem) and not any(t.chained for t in _host_tasks(problem).values())


@pytest.mark.parametrize("method", ["greedy", "cpsat"])
def test_a_layer_pays_one_launch_and_stays_exact(method):
    """A tiny Llama on 8 hbm2-pim channels: the host stream's first compute instruction launches the
    kernel and every later one continues it (chain=1 on each task's first instruction as well);
    simulated = predicted, outputs within tolerance and bit-exact, above the hardware bound."""
    r = run(_instance(TINY), SolveOptions(method=method, functional=True, record=False, workers=1))
    host = [i for i in r.compiled.streams.host if i.op in HOST_COMPUTE]
    assert host[0].get("chain") == 0 and all(i.get("chain") == 1 for i in host[1:])
    assert r.sim.cycles == r.compiled.predicted_cycles and r.outputs_match and r.bit_exact
    assert r.bounds.hardware.cycles <= r.sim.cycles


def test_chaining_wins_where_the_host_is_on_the_critical_path():
    """A tiny Llama (2 layers, 64-wide) on 4 gddr6-aim channels, a launch 400 cycles: its GEMVs
    are short, so the host's launches are most of the path. CP-SAT on ISA 1.6 against the same
    device declaring ISA 1.5 (every host task launches): 4,653 against 15,734 cycles, both
    simulated as predicted, the hardware bound the same."""
    opts = SolveOptions(method="cpsat", functional=False, record=False, workers=1)
    new = run(_instance(TINY, "gddr6-aim", ["organization.channels=4"]), opts)
    old = run(_instance(TINY, "gddr6-aim", ["organization.channels=4", ISA_1_5]), opts)
    assert new.sim.cycles == new.compiled.predicted_cycles and old.sim.cycles == old.compiled.predicted_cycles
    assert (new.sim.cycles, old.sim.cycles) == (4653, 15734)
    assert new.bounds.hardware.cycles == old.bounds.hardware.cycles <= new.sim.cycles


def test_the_hardware_bound_does_not_move():
    """The bound counted one launch per program and none on the critical path before ISA 1.6
    already: the same on both versions."""
    inst, old = _instance(TINY), _instance(TINY, sets=["organization.channels=8", ISA_1_5])
    opts = SolveOptions(method="greedy", functional=False, record=False, workers=1)
    a, b = run(inst, opts), run(old, opts)
    assert a.bounds.hardware.cycles == b.bounds.hardware.cycles <= a.sim.cycles <= b.sim.cycles
