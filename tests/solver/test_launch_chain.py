"""One host kernel launch per program (solver/launch_chain.py, ISA 1.6): what lowering marks, the
host's release in every scheduler, the LAUNCH and chain bits decode writes, the programs exact and
bit-exact, and where it wins."""

from __future__ import annotations

from dataclasses import replace
from pathlib import Path

import pytest

from hwmodel.host_costs import HOST_COMPUTE
from pimsat.instance import Instance, load_instance
from pimsat.pipeline import SolveOptions, run
from solver.certificate import check_solution
from solver.lower import LowerOptions, lower
from solver.problem import HOST

ROOT = Path(__file__).resolve().parents[2]

ISA_1_5 = 'isa_version="1.5"'  # a device without LAUNCH: every host task launches its own kernel
TINY = {"kind": "model", "preset": "tiny-llama", "context": 15}
EIGHT = "organization.channels=8"


def _instance(program, preset="hbm2-pim", sets=(EIGHT,)):
    return Instance(name="launch-chain", program=program, hardware={"preset": preset, "set": list(sets)})


def _host_tasks(problem):
    return {t.name: t for j in problem.jobs for m in j.modes for t in m.tasks if t.resource == HOST}


def test_every_host_task_continues_the_programs_launch():
    """A tiny Llama: every host task of every mode is chained, its duration the launch less than
    on ISA 1.5, and the host is held for the launch; ISA 1.5, naive lowering and a host that
    keeps no kernel across a wait (host.persistent_kernel = false) chain nothing."""
    hw, program = _instance(TINY).build_hardware(), _instance(TINY).build_program()
    problem = lower(hw, program, LowerOptions(groups=2))[0]
    old = lower(_instance(TINY, sets=[EIGHT, ISA_1_5]).build_hardware(), program, LowerOptions(groups=2))[0]
    naive = lower(hw, program, LowerOptions(groups=2, style="naive"))[0]
    tasks, before = _host_tasks(problem), _host_tasks(old)
    assert tasks.keys() == before.keys() and len(tasks) > 100
    assert all(t.chained and t.duration == before[n].duration - hw.host.dispatch_cycles for n, t in tasks.items())
    assert problem.host_release == hw.host.dispatch_cycles == 200
    waits = _instance(TINY, sets=[EIGHT, "host.persistent_kernel=false"]).build_hardware()
    for p in (old, naive, lower(waits, program, LowerOptions(groups=2))[0]):
        assert p.host_release == 0 and not any(t.chained for t in _host_tasks(p).values())


@pytest.mark.parametrize("method", ["greedy", "cpsat"])
def test_a_program_opens_with_its_launch_and_stays_exact(method):
    """The host stream opens with a LAUNCH at cycle 0 and every host compute instruction carries
    chain=1; no host task starts before the launch ends (the certificate checks it); simulated =
    predicted, outputs within tolerance and bit-exact, above the hardware bound."""
    r = run(_instance(TINY), SolveOptions(method=method, functional=True, record=False, workers=1))
    host = r.compiled.streams.host
    assert host[0].op == "LAUNCH" and host[0].cycle == 0 and sum(i.op == "LAUNCH" for i in host) == 1
    assert all(i.get("chain") == 1 for i in host if i.op in HOST_COMPUTE)
    assert check_solution(r.problem, r.solution) == []
    assert r.sim.cycles == r.compiled.predicted_cycles and r.outputs_match and r.bit_exact
    assert r.bounds.hardware.cycles <= r.sim.cycles


def test_the_certificate_refuses_a_host_task_inside_the_launch():
    """A schedule whose first host task starts one cycle before the launch ends is refused."""
    r = run(_instance(TINY), SolveOptions(method="greedy", functional=False, record=False, workers=1))
    host = [
        t.name
        for j, name in r.solution.modes.items()
        for m in r.problem.job(j).modes
        if m.name == name
        for t in m.tasks
        if t.resource == HOST
    ]
    early = replace(r.solution, starts={**r.solution.starts, host[0]: 199})
    errs = check_solution(r.problem, early)
    assert f"task {host[0]}: starts 199 before the host's launch ends at 200" in errs


def test_a_lone_gemv_pays_its_launch_while_the_units_stream():
    """GEMV 4096 on gddr6-aim x32 (a launch 400 cycles): its epilogue was the program's only host
    work, launched after the last read-out's signal; with the LAUNCH at cycle 0 the program ends
    at its refresh instead: 7,923 -> 7,715 cycles (1.038 -> 1.011 x the hardware bound, 7,632)."""
    inst = load_instance(ROOT / "instances" / "micro" / "gemv-4096-gddr6-32ch.yaml")
    old = inst.model_copy(update={"hardware": inst.hardware.model_copy(update={"set": [*inst.hardware.set, ISA_1_5]})})
    opts = SolveOptions(method="cpsat", functional=False, record=False, workers=1)
    new, before = run(inst, opts), run(old, opts)
    assert (new.sim.cycles, before.sim.cycles) == (7715, 7923)
    assert new.sim.cycles == new.compiled.predicted_cycles and before.sim.cycles == before.compiled.predicted_cycles
    assert new.bounds.hardware.cycles == before.bounds.hardware.cycles == 7632


def test_one_launch_wins_where_the_host_is_on_the_critical_path():
    """A tiny Llama (2 layers, 64 wide) on 4 gddr6-aim channels, a launch 400 cycles: its GEMVs
    are short, so the host's launches are most of the path. CP-SAT on ISA 1.6 against the same
    device declaring ISA 1.5 (every host task launches): 4,636 against 15,734 cycles, both
    simulated as predicted, the hardware bound the same; a host that keeps no kernel across a
    wait takes the 15,734 too."""
    opts = SolveOptions(method="cpsat", functional=False, record=False, workers=1)
    new = run(_instance(TINY, "gddr6-aim", ["organization.channels=4"]), opts)
    old = run(_instance(TINY, "gddr6-aim", ["organization.channels=4", ISA_1_5]), opts)
    assert new.sim.cycles == new.compiled.predicted_cycles and old.sim.cycles == old.compiled.predicted_cycles
    assert (new.sim.cycles, old.sim.cycles) == (4636, 15734)
    assert new.bounds.hardware.cycles == old.bounds.hardware.cycles <= new.sim.cycles
    waits = run(_instance(TINY, "gddr6-aim", ["organization.channels=4", "host.persistent_kernel=false"]), opts)
    assert waits.sim.cycles == waits.compiled.predicted_cycles == old.sim.cycles  # a launch per host task
