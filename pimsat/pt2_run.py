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


__all__ = ["Run", "compile_and_simulate"]
