"""The pipeline in one function: instance -> program + hardware -> problem -> solution ->
streams -> simulation -> verified report."""
from __future__ import annotations

import time
from dataclasses import dataclass, field, replace
from typing import Any, Callable

import numpy as np

import ir
from hwmodel import Hardware
from solver.bounds import Bounds, lower_bounds
from solver.exact_durations import exact_durations
from solver.decode import Compiled, decode
from solver.lower import LowerOptions, LoweringError, lower
from solver.problem import SchedulingProblem, Solution
from solver.template import expand, layer_count, template_problem

from .options import DEFAULT_WORK_BUDGET
from .instance import Instance
from .sizes import format_bytes, resident_bytes

# Functional simulation stores every resident value; above this many bytes we run timing-only.
FUNCTIONAL_LIMIT_BYTES = 2 * 2**30


@dataclass
class SolveOptions:
    method: str = "cpsat"  # cpsat | greedy | naive
    time_limit: float = 60.0  # wall-clock guard (s); a search it stops is not reproducible (Solution.search_end)
    workers: int = 2
    seed: int = 0
    groups: int = 4
    # CP-SAT's work budget (deterministic seconds): a search it ends gives the same program on every
    # run, whatever the load. None: the wall clock alone (not reproducible when it stops the search)
    deterministic_time: float | None = DEFAULT_WORK_BUDGET
    functional: bool | None = None  # None: functional when it fits FUNCTIONAL_LIMIT_BYTES
    record: bool = True  # keep the simulator's command log (trace.json); timing-only runs without it are streamed
    progress: Callable[[float, int | None, int | None], None] | None = None
    sim_progress: Callable[[int, int], None] | None = None  # (instructions simulated, instructions), now and then


@dataclass
class RunResult:
    instance: Instance
    hardware: Hardware
    program: ir.Program
    problem: SchedulingProblem
    lowering: Any
    solution: Solution
    compiled: Compiled
    bounds: Bounds
    sim: Any
    outputs_match: bool | None
    max_abs_error: float | None
    solve_seconds: float
    timings: dict[str, float] = field(default_factory=dict)
    bit_exact: bool | None = None  # simulated values == the bit-true model (None: timing-only)


def solve(problem: SchedulingProblem, opts: SolveOptions) -> tuple[Solution, list[Solution]]:
    """The method's solution, and for cpsat also the greedy hint (the decoder keeps whichever
    program is faster: on a timeout or a model/refresh mismatch the best valid program wins)."""
    from solver.heuristics import solve_greedy, solve_naive

    if opts.method == "naive":
        return solve_naive(problem), []
    greedy = solve_greedy(problem)
    if opts.method == "greedy" or greedy.status == "INFEASIBLE":
        return greedy, []
    from solver.cpsat import solve_cpsat

    cp = solve_cpsat(problem, time_limit=opts.time_limit, workers=opts.workers, seed=opts.seed, hint=greedy,
                     progress=opts.progress, deterministic_time=opts.deterministic_time)
    return cp, [greedy]


def solve_layered(problem: SchedulingProblem, opts: SolveOptions) -> tuple[Solution, list[Solution]]:
    """Solve one layer (the template) and replicate it over all layers (solver/template.py)."""
    from solver.heuristics import solve_greedy

    outside = solve_greedy(problem)
    if outside.status == "INFEASIBLE":
        return outside, []
    sub = template_problem(problem, outside)
    tpl, alts = solve(sub, opts)
    if tpl.status == "INFEASIBLE":
        return tpl, []
    note = (f"layer template solved ({len(sub.jobs)} jobs, repeated {sub.repeat}x); the proven bound covers "
            f"one layer ({tpl.bound}) and is not reported for the whole step")
    full = replace(expand(problem, tpl, outside), bound=None, message=note)
    return full, [replace(expand(problem, a, outside), bound=None) for a in alts]


def _same_program(a: Solution, b: Solution) -> bool:
    if a.modes != b.modes:
        return False
    order = lambda s: sorted(s.starts, key=lambda t: (s.starts[t], t))  # noqa: E731
    return order(a) == order(b)


def functional_fits(program: ir.Program) -> bool:
    return program.weight_bytes() + program.kv_bytes() <= FUNCTIONAL_LIMIT_BYTES


_LOWERED: dict[tuple, tuple] = {}  # the last instance's lowering: `compare` runs every method on it


def _lower_both_styles(instance: Instance, hw: Hardware, program: ir.Program, groups: int):
    """Both lowering styles and the solver-free bound. They do not depend on the method, so the
    last instance's are kept: the methods of one `compare` row lower once (the largest layers
    spend most of their time here, timing every candidate's commands)."""
    key = (instance.model_dump_json(), hw.model_dump_json(), groups)
    if key not in _LOWERED:
        try:
            lowered = {s: lower(hw, program, LowerOptions(groups=groups, style=s)) for s in ("overlap", "naive")}
        except LoweringError as e:
            raise InfeasibleError(str(e)) from None
        # the solver-free bound does not depend on the method: every op at its fastest mode of
        # either lowering style, on the dependency graph
        exact = {k: v for s in ("overlap", "naive") for k, v in exact_durations(*lowered[s]).items()}
        bounds = lower_bounds(hw, program, lowered["overlap"][0], lowered["naive"][0], exact=exact)
        _LOWERED.clear()
        _LOWERED[key] = (lowered, bounds)
    return _LOWERED[key]


def run(instance: Instance, opts: SolveOptions, hw_overrides: list[str] | tuple[str, ...] = (),
        preset: str | None = None) -> RunResult:
    import sim

    clock: dict[str, float] = {}
    t0 = time.perf_counter()
    program = instance.build_program()
    hw = instance.build_hardware(hw_overrides, preset)
    style = "naive" if opts.method == "naive" else "overlap"
    _check_capacity(hw, program)
    lowered, bounds = _lower_both_styles(instance, hw, program, opts.groups)
    problem, lowering = lowered[style]
    clock["lower"] = time.perf_counter() - t0

    t1 = time.perf_counter()
    if layer_count(problem) > 1 and opts.method != "naive":
        solution, alternatives = solve_layered(problem, opts)
    else:
        solution, alternatives = solve(problem, opts)
    solve_seconds = time.perf_counter() - t1
    if solution.status == "INFEASIBLE":
        raise InfeasibleError(solution.message or "no schedule satisfies the capacity constraints")

    functional = functional_fits(program) if opts.functional is None else opts.functional
    t2 = time.perf_counter()
    # The alternatives (the greedy hint) are decoded first and only their predicted cycles kept:
    # one program's streams in memory at a time. The rare alternative that beats the solution is
    # decoded again (decoding is deterministic).
    best_alt, best_alt_cycles = None, None
    for alt in alternatives:
        if solution.modes and _same_program(solution, alt):
            continue  # same modes and task order: the decoder would emit the same program
        cycles = decode(problem, lowering, alt, placements=False, lazy=True).predicted_cycles  # no commands built
        if best_alt_cycles is None or cycles < best_alt_cycles:
            best_alt, best_alt_cycles = alt, cycles
    # a streamed simulation (timing-only, no command log) reads lazily built streams, a task's
    # encoded commands at a time: the program never sits in memory whole, and lockstep channels
    # share one encoding of their commands
    lazy = not functional and not opts.record
    compiled = decode(problem, lowering, solution, placements=functional, lazy=lazy) if solution.modes else None
    if best_alt is not None and (compiled is None or best_alt_cycles < compiled.predicted_cycles):
        note = (f"the {best_alt.method} hint decodes to {best_alt_cycles:,} cycles"
                + (f", the {solution.method} solution to {compiled.predicted_cycles:,}" if compiled else "")
                + "; kept the faster program")
        compiled = None
        solution = replace(solution, modes=best_alt.modes, starts=best_alt.starts, objective=best_alt.objective,
                           status="FEASIBLE" if solution.status in ("OPTIMAL", "FEASIBLE") else solution.status,
                           message=(solution.message + " " if solution.message else "") + note)
        compiled = decode(problem, lowering, best_alt, placements=functional, lazy=lazy)
    if compiled is None:
        raise InfeasibleError(solution.message or f"{solution.method} found no schedule ({solution.status})")
    clock["decode"] = time.perf_counter() - t2

    state = inputs = None
    if functional:
        state = ir.generate_state(program, seed=instance.seed)
        inputs = ir.generate_inputs(program, seed=instance.seed)
    t3 = time.perf_counter()
    result = sim.simulate(hw, compiled.streams, program=program, state=state, inputs=inputs, functional=functional,
                          record=opts.record, progress=opts.sim_progress)
    clock["simulate"] = time.perf_counter() - t3

    if int(result.cycles) != compiled.predicted_cycles:
        raise VerificationError(f"simulated {int(result.cycles):,} cycles, the decoder predicted "
                                f"{compiled.predicted_cycles:,}: the cost model and the simulator disagree")
    match = err = bits = None
    if functional:
        reference = ir.run(program, inputs, state)
        match, err = compare_outputs(program, result.outputs, reference)
        bits = bit_true_check(hw, program, inputs, state, compiled.streams, result)
        if not bits.exact:
            raise VerificationError(f"the simulated program computes other bits than the hardware's arithmetic "
                                    f"(sim/bittrue.py): {bits.summary()}")
    return RunResult(instance, hw, program, problem, lowering, solution, compiled, bounds, result, match, err,
                     solve_seconds, clock, bit_exact=None if bits is None else bits.exact)


def bit_true_check(hw: Hardware, program: ir.Program, inputs, state, streams, result):
    """Every tensor the simulated host holds against the bit-true model (exact)."""
    from sim import bittrue

    model = bittrue.run(hw, program, inputs, state, bittrue.Dispatch.from_host_stream(program, streams.host))
    image = bittrue.bank_image(hw, program, model, changed=result.resident.stored_into)
    return bittrue.compare(program, result.host, model, banks=(result.resident, image))


class InfeasibleError(RuntimeError):
    pass


class VerificationError(RuntimeError):
    """An emitted program whose simulation disagrees with the compiler: a compiler bug."""


def _check_capacity(hw: Hardware, program: ir.Program) -> None:
    """Refuse, in hardware terms, a program whose resident data cannot fit at all."""
    kv = program.kv_bytes()
    w = resident_bytes(program) - kv
    org = hw.organization
    if w + kv > org.capacity_bytes:
        ctx = program.meta.get("context")
        kv_text = f" + KV cache {format_bytes(kv)}" + (f" for {ctx + 1} tokens" if ctx is not None else "")
        raise InfeasibleError(
            f"weights {format_bytes(w)}{kv_text} need {format_bytes(w + kv)}; {hw.name} holds {format_bytes(org.capacity_bytes)} "
            f"({org.channels} channels x {org.banks_per_channel} banks x {org.rows} rows x {org.row_bytes} B)"
            f", {format_bytes((w + kv) / org.channels)} per channel needed, {format_bytes(org.channel_bytes)} available")


TOLERANCE = {"fp16": 2e-2, "bf16": 6e-2, "fp32": 1e-4}


def compare_outputs(program: ir.Program, outputs: dict[str, np.ndarray],
                    reference: dict[str, np.ndarray]) -> tuple[bool, float]:
    """Every program output against the reference: same shape; floats within TOLERANCE[dtype]
    relative to the output's magnitude (max(1, max|ref|)); integers (argmax) exactly equal."""
    ok, worst = True, 0.0
    for name in program.outputs:
        t = program.tensors[name]
        got = np.asarray(outputs[name], dtype=np.float64)
        ref = np.asarray(reference[name], dtype=np.float64)
        if got.shape != ref.shape:
            return False, float("inf")
        err = float(np.max(np.abs(got - ref))) if got.size else 0.0
        if t.dtype.value == "int32":
            ok &= err == 0.0
            continue
        scale = max(1.0, float(np.max(np.abs(ref)))) if ref.size else 1.0
        worst = max(worst, err)
        ok &= err <= TOLERANCE.get(t.dtype.value, 2e-2) * scale
    return ok, worst
