"""Layer templates (solver/template.py): layers come from the IR's `layer` attribute, and a
template stands for the layers only when they are structurally identical."""

from __future__ import annotations

from dataclasses import replace
from pathlib import Path

import pytest

from pimsat.instance import load_instance
from pimsat.pipeline import DEFAULT_CACHE, SolveOptions, solve_layered
from solver.problem import SchedulingProblem
from solver.template import layer_count, layers_of, templatable

ROOT = Path(__file__).resolve().parents[2]


@pytest.fixture(scope="module")
def tiny_llama() -> SchedulingProblem:
    inst = load_instance(ROOT / "instances" / "small" / "tiny-llama-2l-hbm2-8ch.yaml")
    program, hw = inst.build_program(), inst.build_hardware([], None)
    return DEFAULT_CACHE.lowered(inst, hw, program, 4).for_method("greedy")[0]


def _renamed(problem: SchedulingProblem) -> SchedulingProblem:
    """The same problem with every job and task renamed so no name says 'layers.N.' (as a program
    imported from another frontend may name its ops)."""

    def ren(s: str) -> str:
        return s.replace("layers.", "blk")

    jobs = []
    for j in problem.jobs:
        modes = tuple(
            replace(
                m,
                tasks=tuple(replace(t, name=ren(t.name)) for t in m.tasks),
                edges=tuple(replace(e, before=ren(e.before), after=ren(e.after)) for e in m.edges),
                inputs=tuple(ren(i) for i in m.inputs),
                output=ren(m.output),
                outputs={k: ren(v) for k, v in m.outputs.items()},
                reads={ren(k): v for k, v in m.reads.items()},
            )
            for m in j.modes
        )
        jobs.append(replace(j, name=ren(j.name), modes=modes))
    deps = [replace(d, before=ren(d.before), after=ren(d.after)) for d in problem.dependencies]
    out = SchedulingProblem(
        problem.name,
        jobs,
        deps,
        problem.groups,
        problem.refresh,
        problem.sync_cycles,
        host_release=problem.host_release,
    )
    out.horizon = problem.horizon
    return out


def test_layers_come_from_the_ir_attribute_not_the_names(tiny_llama):
    assert layer_count(tiny_llama) == 2 and templatable(tiny_llama) is None
    renamed = _renamed(tiny_llama)
    assert not any("layers." in j.name for j in renamed.jobs)
    assert layer_count(renamed) == 2 and templatable(renamed) is None
    # the renamed problem gets the same template decision, job for job and task for task
    opts = SolveOptions(method="greedy")
    a, _ = solve_layered(tiny_llama, opts)
    b, _ = solve_layered(renamed, opts)
    assert len(a.modes) == len(tiny_llama.jobs)
    assert b.modes == {k.replace("layers.", "blk"): v for k, v in a.modes.items()}
    assert b.starts == {k.replace("layers.", "blk"): v for k, v in a.starts.items()}


def test_a_layer_that_differs_is_not_templated(tiny_llama):
    jobs = list(tiny_llama.jobs)
    i = next(k for k, j in enumerate(jobs) if j.layer == 1)
    m = jobs[i].modes[0]
    slower = replace(m, tasks=(replace(m.tasks[0], duration=m.tasks[0].duration + 1),) + m.tasks[1:])
    jobs[i] = replace(jobs[i], modes=(slower,) + jobs[i].modes[1:])
    changed = SchedulingProblem(
        tiny_llama.name, jobs, tiny_llama.dependencies, tiny_llama.groups, tiny_llama.refresh, tiny_llama.sync_cycles
    )
    assert templatable(changed) == "layer 1's jobs, modes or task durations differ from layer 0's"


def test_one_layer_is_not_a_template(tiny_llama):
    jobs = [j if j.layer != 1 else replace(j, layer=None) for j in tiny_llama.jobs]
    one = SchedulingProblem(
        tiny_llama.name, jobs, tiny_llama.dependencies, tiny_llama.groups, tiny_llama.refresh, tiny_llama.sync_cycles
    )
    assert list(layers_of(one)) == [0] and templatable(one) == "fewer than two decoder layers"
