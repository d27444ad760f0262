"""Compile and simulate a program with given values (an imported .pt2's own weights and step
inputs), by the pipeline's stages: what `pimsat solve` does with seeded values, here with the
real ones, so that a run reproduces one PyTorch step."""

from __future__ import annotations

from dataclasses import dataclass

import numpy as np

import ir
from hwmodel import Hardware

from .pipeline import SolveOptions, Verdict, lower_program, select_program, solve_program, verify_program


@dataclass
class Run:
    verdict: Verdict  # against pimsat's own references (float tolerance, bit-true model)
    cycles: int
    outputs: dict[str, np.ndarray]  # host outputs of the program
    banks: object  # the resident tensors at the end (the KV caches after the append)


def compile_and_simulate(
    hw: Hardware, program: ir.Program, inputs: dict[str, np.ndarray], state: dict[str, np.ndarray], opts: SolveOptions
) -> Run:
    import sim

    lowered = lower_program(hw, program, opts.groups)
    problem, lowering = lowered.for_method(opts.method)
    solved = solve_program(problem, opts)
    selected = select_program(problem, lowering, solved, functional=True, lazy=False)
    result = sim.simulate(hw, selected.compiled.streams, program=program, state=state, inputs=inputs, functional=True)
    verdict = verify_program(hw, program, selected.compiled, result, inputs, state)
    return Run(verdict, int(result.cycles), dict(result.outputs), result.resident)


@dataclass
class AgainstPyTorch:
    """A simulated step of an imported archive against the outputs PyTorch computed for it (the
    ``out_0``, ``out_1``, ... arrays of the step's .npz, as tools/make_pt2_fixtures.py writes them)."""

    source: str  # the .npz
    outputs_match: bool  # every graph output within the dtype's tolerance of PyTorch's
    max_abs_error: float
    next_token_equal: bool  # argmax over the last axis of the first output (the logits)

    def as_dict(self) -> dict:
        return {
            "source": self.source,
            "outputs_match": self.outputs_match,
            "max_abs_error": self.max_abs_error,
            "next_token_equal": self.next_token_equal,
        }


def against_pytorch(instance, program: ir.Program, result, arithmetic: str | None = None) -> AgainstPyTorch | None:
    """The functional ``result`` of ``instance`` (kind pt2, with ``program.inputs``) against
    PyTorch's own outputs of that step, at the tolerance of the coarser of each output's dtype and
    the device's ``arithmetic`` (``hw.pim.dtype``); None when there is nothing to compare with
    (another kind, a timing-only run, or a step .npz without PyTorch's outputs)."""
    from hwmodel.numerics import tolerance_dtype, within_tolerance

    if instance.program.kind != "pt2" or instance.program.inputs is None or not result.outputs:
        return None
    imp = instance.imported()
    path = instance.file(instance.program.inputs)
    with np.load(path) as step:
        want = [step[f"out_{i}"] for i in range(len(imp.outputs)) if f"out_{i}" in step]
    if len(want) != len(imp.outputs):
        return None
    got = imp.torch_outputs(result.outputs, banks=result.resident)
    match, worst = True, 0.0
    for (name, _), g, w in zip(imp.outputs, got, want):
        key = tolerance_dtype(program.tensors[name].dtype.value, arithmetic)
        ok, err = within_tolerance(g, np.asarray(w, dtype=np.float32), key)
        match, worst = match and bool(ok), max(worst, float(err))
    same_token = bool(np.array_equal(np.asarray(got[0]).argmax(-1), np.asarray(want[0]).argmax(-1)))
    return AgainstPyTorch(str(path), match, worst, same_token)


__all__ = ["AgainstPyTorch", "Run", "against_pytorch", "compile_and_simulate"]
