"""The pipeline in one function: instance -> program + hardware -> problem -> solution ->
streams -> simulation -> verified report."""

from __future__ import annotations

import gc
import time
from collections.abc import Callable
from contextlib import contextmanager
from dataclasses import dataclass, field, replace
from typing import Any

import numpy as np

import ir
from hwmodel import Hardware
from hwmodel.numerics import argmax_within_tolerance, tolerance_dtype, within_tolerance
from solver.bounds import Bounds, lower_bounds
from solver.decode import Compiled, decode
from solver.lower import Lowering, LoweringError, LowerOptions, lower
from solver.lower_parallel import warm
from solver.payload import Style
from solver.problem import EARLIER_INCUMBENTS, Method, SchedulingProblem, Solution, Status
from solver.task_timing import TimingCache, use_oracle
from solver.template import expand, templatable, template_problem

from .instance import Instance
from .options import DEFAULT_WORK_BUDGET
from .sizes import TRACE_INSTRUCTIONS, format_bytes, resident_bytes


def _simulator_oracle(hw: Hardware, instrs, yield_to=None):
    """The simulator times the solver's command sequences (imported on first use: numba)."""
    from sim.oracle import time_commands

    return time_commands(hw, instrs, yield_to)


use_oracle(_simulator_oracle)  # lowering and decoding time tasks with the simulator's own rules

# Functional simulation stores every resident value; above this many bytes we run timing-only.
FUNCTIONAL_LIMIT_BYTES = 2 * 2**30


@dataclass
class SolveOptions:
    method: Method = Method.CPSAT
    time_limit: float = 60.0  # wall-clock guard (s); a search it stops is not reproducible (Solution.search_end)
    workers: int = 2
    seed: int = 0
    groups: int = 4
    # CP-SAT's work budget (deterministic seconds): a search it ends gives the same program on every
    # run, whatever the load. None: the wall clock alone (not reproducible when it stops the search)
    deterministic_time: float | None = DEFAULT_WORK_BUDGET
    functional: bool | None = None  # None: functional when it fits FUNCTIONAL_LIMIT_BYTES
    # keep the simulator's command log (trace.json); timing-only runs without it are streamed. None:
    # only for a program of at most TRACE_INSTRUCTIONS channel instructions
    record: bool | None = True
    progress: Callable[[float, int | None, int | None], None] | None = None
    sim_progress: Callable[[int, int], None] | None = None  # (instructions simulated, instructions), now and then
    sim_jobs: int = 1  # threads simulating channel streams at once (sim.simulate's jobs, 0: by size; same result)
    # processes timing a large program's PIM shapes (solver/lower_parallel.py, 0: cores; same result)
    lower_jobs: int = 1
    # alternatives lowering withholds (solver.lower.Alternative values): a what-if without them
    without: frozenset[str] = frozenset()


@dataclass
class RunResult:
    instance: Instance
    hardware: Hardware
    program: ir.Program
    problem: SchedulingProblem
    lowering: Lowering
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
    """The method's solution and the alternatives the decoder also times, keeping the fastest
    program (on a timeout or a model/refresh mismatch the best valid program wins): greedy's
    other candidate schedules, and for cpsat the greedy hint and those. So the decoded program of
    cpsat is never slower than greedy's."""
    from solver.heuristics import greedy_schedules, solve_naive

    if opts.method == Method.NAIVE:
        return solve_naive(problem), []
    greedy, *others = greedy_schedules(problem)  # the model leaves refresh out: the decoder ranks them
    if opts.method == Method.GREEDY or greedy.status == Status.INFEASIBLE:
        return greedy, others
    from solver.cpsat import solve_cpsat

    cp = solve_cpsat(
        problem,
        time_limit=opts.time_limit,
        workers=opts.workers,
        seed=opts.seed,
        hint=greedy,
        progress=opts.progress,
        deterministic_time=opts.deterministic_time,
    )
    return cp, [greedy, *others]


def solve_layered(problem: SchedulingProblem, opts: SolveOptions) -> tuple[Solution, list[Solution]]:
    """Solve one layer (the template) and replicate it over all layers (solver/template.py)."""
    from solver.heuristics import solve_greedy

    outside = solve_greedy(problem)
    if outside.status == Status.INFEASIBLE:
        return outside, []
    sub = template_problem(problem, outside)
    tpl, alts = solve(sub, opts)
    if tpl.status == Status.INFEASIBLE:
        return tpl, []
    note = f"layer template solved ({len(sub.jobs)} jobs, repeated {sub.repeat}x)"
    if tpl.bound is not None:  # (cpsat's: a heuristic proves nothing)
        note += f"; the proven bound covers one layer ({tpl.bound:,}) and is not reported for the whole step"
    earlier = [replace(expand(problem, i, outside), bound=None) for i in tpl.incumbents]
    full = replace(expand(problem, tpl, outside), bound=None, message=note, incumbents=earlier)
    return full, [replace(expand(problem, a, outside), bound=None) for a in alts]


def _same_program(a: Solution, b: Solution) -> bool:
    if a.modes != b.modes:
        return False
    order = lambda s: sorted(s.starts, key=lambda t: (s.starts[t], t))  # noqa: E731
    return order(a) == order(b)


def functional_fits(program: ir.Program) -> bool:
    return program.weight_bytes() + program.kv_bytes() <= FUNCTIONAL_LIMIT_BYTES


# ---- stages ------------------------------------------------------------------------------------
# Each stage is a plain function from data to data; `run` composes them. Tools that need a slice
# of the pipeline (bench/, `pimsat simulate`) call these, not `run`'s internals.


@dataclass(frozen=True)
class Lowered:
    """Both lowering styles of a program and its solver-free bound (which takes every op at its
    fastest mode of either style, so it does not depend on the method)."""

    by_style: dict[Style, tuple[SchedulingProblem, Lowering]]
    bounds: Bounds

    def for_method(self, method: Method | str) -> tuple[SchedulingProblem, Lowering]:
        """The problem a method schedules: naive the vendor-style lowering, the others overlap."""
        return self.by_style[Style.NAIVE if Method(method) is Method.NAIVE else Style.OVERLAP]


def lower_program(
    hw: Hardware,
    program: ir.Program,
    groups: int,
    timings: TimingCache | None = None,
    jobs: int = 1,
    without: frozenset[str] = frozenset(),
) -> Lowered:
    """Stage 1: lower both styles (exact task durations) and compute the solver-free bound.
    `timings`: task timings shared with earlier lowerings of hardware with the same timing
    fingerprint (solver.task_timing.TimingCache); the result is the same without it. The two
    styles always share one store: the overlap lowering times the naive style's tilings as
    alternatives, which the naive lowering then need not emit again (with a TimingCache handed in,
    the methods' streamed decodes also relocate each other's encoded tasks).
    `jobs`: processes timing the distinct PIM shapes first (solver/lower_parallel.py; large
    programs only), the same result as one. `without`: alternatives not offered
    (solver.lower.Alternative)."""
    if timings is None:  # the styles' own store: timings shared, each decode's tables its own
        timings = TimingCache(size=1)
        timings.store(hw).share_layers = False
    store = timings.store(hw)  # (started afresh here if over its bytes; not while lowering)
    options = tuple(LowerOptions.without(without, groups=groups, style=s) for s in Style)
    try:
        with young_gc_only():  # (the timing workers fork inside: they inherit it)
            warm(hw, program, options, store, jobs)
            by_style = {o.style: lower(hw, program, o, timings) for o in options}
    except LoweringError as e:
        raise InfeasibleError(str(e)) from None
    bounds = lower_bounds(hw, program, by_style[Style.OVERLAP][0], by_style[Style.NAIVE][0])
    return Lowered(by_style, bounds)


@contextmanager
def young_gc_only():
    """The cyclic collector on young objects only, and less often: lowering builds and drops
    millions of short-lived instruction objects while the timings it keeps grow, and each full
    collection walks all of those (6-8 % of a b4 layer's lowering). Cycles among new objects
    are still collected; the old generation again after it, as before."""
    was = gc.get_threshold()
    gc.set_threshold(50_000, 20, 1_000_000)
    try:
        yield
    finally:
        gc.set_threshold(*was)


class LoweringCache:
    """Lowered programs keyed by what lowering reads (the instance, the resolved hardware, the
    group count, the alternatives withheld), the last `size` kept: the methods of one
    `compare` row lower once (the largest layers spend most of their time there, timing every
    candidate's commands). With a
    TimingCache (`timings`), a lowering of other hardware re-times no task whose timing its
    changes do not touch (a sweep over host fields: pimsat/sweep/run.py)."""

    def __init__(self, size: int = 1, timings: TimingCache | None = None):
        self.size = size
        self.timings = timings
        self._entries: dict[tuple, Lowered] = {}

    def lowered(
        self,
        instance: Instance,
        hw: Hardware,
        program: ir.Program,
        groups: int,
        jobs: int = 1,
        without: frozenset[str] = frozenset(),
    ) -> Lowered:
        key = (instance.model_dump_json(), hw.model_dump_json(), groups, tuple(sorted(without)))
        hit = self._entries.pop(key, None)
        if hit is None:
            hit = lower_program(hw, program, groups, self.timings, jobs, frozenset(without))
        self._entries[key] = hit  # most recent last
        while len(self._entries) > self.size:
            self._entries.pop(next(iter(self._entries)))
        return hit


DEFAULT_CACHE = LoweringCache()  # what `run` uses unless given another (the CLI's compare relies on it)


@dataclass
class Solved:
    """Stage 2's result: the method's solution and the alternatives the selection may prefer (for
    cpsat, the greedy hint)."""

    solution: Solution
    alternatives: list[Solution]
    seconds: float


def solve_program(problem: SchedulingProblem, opts: SolveOptions) -> Solved:
    """Stage 2: schedule (a multi-layer program through its layer template, except naive)."""
    t0 = time.perf_counter()
    if templatable(problem) is None and Method(opts.method) is not Method.NAIVE:
        solution, alternatives = solve_layered(problem, opts)
    else:
        solution, alternatives = solve(problem, opts)
    if solution.status == Status.INFEASIBLE:
        raise InfeasibleError(solution.message or "no schedule satisfies the capacity constraints")
    return Solved(solution, alternatives, time.perf_counter() - t0)


@dataclass
class Selected:
    """Stage 3's result: the program kept and the solution it decodes (status final)."""

    solution: Solution
    compiled: Compiled


def final_status(solution: Solution, predicted_cycles: int) -> Status:
    """The one rule for the status a report shows: CP-SAT's OPTIMAL holds for the model; when the
    exact decode lost cycles to refresh placement (or another program was kept) it is FEASIBLE."""
    s = Status(solution.status)
    if s is Status.OPTIMAL and predicted_cycles > (solution.objective or 0):
        return Status.FEASIBLE
    return s


def select_program(
    problem: SchedulingProblem, lowering: Lowering, solved: Solved, *, functional: bool, lazy: bool
) -> Selected:
    """Stage 3: decode the solution and keep the fastest program of it, CP-SAT's earlier
    solutions (`_earlier_incumbent`) and the greedy schedules (greedy's own solution and
    alternatives, or cpsat's). The greedy schedules are decoded
    timing only (no streams held), in order of their model end (each task's start + duration,
    refresh left out), while that end is below the fastest of them so far. A list schedule's
    tasks start as early as its order allows, and the decoder keeps that order and only adds
    REFs, so its program does not end before its model end and the rest would not be faster; an
    expanded layer template's model end can lie above its program, so there the cut may pass
    over a faster one. The rule is the same for both methods whatever the solution, so cpsat's
    program is never slower than greedy's. One that would decode to the
    program of one timed already is skipped. The rare alternative that beats the solution is
    decoded again (decoding is deterministic). A solution the alternative beats keeps its bound
    but not its claim: FEASIBLE, with a note."""
    solution = solved.solution
    compiled = decode(problem, lowering, solution, placements=functional, lazy=lazy) if solution.modes else None
    if compiled is not None and solution.incumbents:
        solution, compiled = _earlier_incumbent(problem, lowering, solution, compiled, functional, lazy)
    # the greedy schedules: greedy's solution and its alternatives, or cpsat's alternatives (the
    # hint and the others), timed by the same rule for both methods, so cpsat <= greedy holds
    own = solution.method == Method.GREEDY and compiled is not None
    pool = ([solution] if own else []) + [a for a in solved.alternatives if a.modes]
    best_alt, fastest, timed = None, None, []
    for end, _k, alt in sorted((e, k, a) for k, (e, a) in enumerate(zip(_model_ends(problem, pool), pool))):
        if fastest is not None and end >= fastest:
            break
        if any(_same_program(s, alt) for s in timed):
            continue  # same modes and task order: the decoder would emit the same program
        timed.append(alt)
        if compiled is not None and (alt is solution or _same_program(solution, alt)):
            cycles = compiled.predicted_cycles  # (the solution's program, decoded already)
        else:  # no commands built
            cycles = decode(problem, lowering, alt, placements=False, lazy=True).predicted_cycles
        if fastest is None or cycles < fastest:
            best_alt, fastest = alt, cycles
    if best_alt is solution or (compiled is not None and fastest is not None and fastest >= compiled.predicted_cycles):
        best_alt = None  # the solution's program is the fastest
    if best_alt is not None:
        same = best_alt.method == solution.method
        hint = not same and best_alt is solved.alternatives[0]
        what = "the greedy hint" if hint else "another greedy schedule"
        what += f" ({best_alt.message})" if best_alt.message and not hint else ""
        note = (
            f"{what} decodes to {fastest:,} cycles"
            + (f", the {solution.method} solution to {compiled.predicted_cycles:,}" if compiled else "")
            + "; kept the faster program"
        )
        compiled = None  # (freed before the next decode: a large program's streams)
        # (a greedy solution's own message described the schedule not kept)
        solution = _adopt(solution, best_alt, (solution.message + "; " if solution.message and not same else "") + note)
        compiled = decode(problem, lowering, best_alt, placements=functional, lazy=lazy)
    if compiled is None:
        raise InfeasibleError(solution.message or f"{solution.method} found no schedule ({solution.status})")
    solution = replace(solution, status=final_status(solution, compiled.predicted_cycles))
    return Selected(solution, compiled)


MAX_INCUMBENTS_DECODED = EARLIER_INCUMBENTS  # all a CP-SAT search hands back


def _earlier_incumbent(
    problem: SchedulingProblem, lowering: Lowering, solution: Solution, compiled: Compiled, functional: bool, lazy: bool
) -> tuple[Solution, Compiled]:
    """The solution, or an earlier improving solution of its search that decodes faster. The
    model lumps refresh (tRFC per tREFI, placed anywhere); the decoder places each REF, so the
    model's optimum can decode above a schedule the model ranks a little worse (one that leaves
    the REFs the host's idle windows, say). Up to MAX_INCUMBENTS_DECODED of them are timed
    (timing only, no streams), the latest (best model objective) first, while that objective is
    below the fastest program so far (a cut, not a proof: a program may end a few cycles before
    its model objective). An expanded layer template's incumbents have no objective of the whole
    step (their model ends lie far above their programs), so they are timed without the cut. One
    that wins is decoded again (decoding is deterministic); the search's bound stays, its claim
    does not (FEASIBLE, with a note)."""
    fastest, best = compiled.predicted_cycles, None
    timed = [solution]
    for inc in solution.incumbents[::-1][:MAX_INCUMBENTS_DECODED]:
        if inc.objective is not None and inc.objective >= fastest:
            break
        if any(_same_program(s, inc) for s in timed):
            continue
        timed.append(inc)
        cycles = decode(problem, lowering, inc, placements=False, lazy=True).predicted_cycles
        if cycles < fastest:
            best, fastest = inc, cycles
    if best is None:
        return solution, compiled
    if best.objective is not None:
        what = (
            f"an earlier CP-SAT solution (model {best.objective:,}) decodes to {fastest:,} cycles, "
            f"the last one (model {solution.objective:,})"
        )
    else:
        what = f"an earlier CP-SAT solution of the layer template decodes to {fastest:,} cycles, the last one"
    note = f"{what} to {compiled.predicted_cycles:,}; kept the faster program"
    kept = _adopt(solution, best, (solution.message + "; " if solution.message else "") + note)
    return kept, decode(problem, lowering, best, placements=functional, lazy=lazy)


def _adopt(solution: Solution, other: Solution, message: str) -> Solution:
    """`solution` with the schedule of `other`, which decodes faster: its search's bound stays,
    its claim does not (an OPTIMAL proof was of the schedule not kept: FEASIBLE)."""
    return replace(
        solution,
        modes=other.modes,
        starts=other.starts,
        objective=other.objective,
        status=Status.FEASIBLE if solution.status is Status.OPTIMAL else solution.status,
        message=message,
    )


def _model_ends(problem: SchedulingProblem, solutions: list[Solution]) -> list[int]:
    """Each solution's model end: the latest start + duration of its tasks (refresh left out)."""
    if not solutions:
        return []
    duration = {t.name: t.duration for j in problem.jobs for m in j.modes for t in m.tasks}
    return [max((st + duration[t] for t, st in s.starts.items()), default=0) for s in solutions]


@dataclass
class Verdict:
    """Stage 5's result: the simulated program against the compiler and the two references."""

    outputs_match: bool | None  # within tolerance of the float reference (None: timing-only)
    max_abs_error: float | None
    bit_exact: bool | None  # equal to the bit-true model (None: timing-only)


def simulate_program(
    hw: Hardware,
    program: ir.Program,
    compiled: Compiled,
    *,
    functional: bool,
    record: bool,
    values: Callable[[ir.Program], tuple[dict, dict]],
    progress=None,
    jobs: int = 1,
):
    """Stage 4: run the streams in the simulator; (result, inputs, state) (inputs and state None
    when timing-only). ``values(program)`` gives a functional run's (inputs, state): the
    instance's (Instance.values: the seeded generator's, an imported archive's own weights)."""
    import sim

    state = inputs = None
    if functional:
        inputs, state = values(program)
    result = sim.simulate(
        hw,
        compiled.streams,
        program=program,
        state=state,
        inputs=inputs,
        functional=functional,
        record=record,
        progress=progress,
        jobs=jobs,
    )
    return result, inputs, state


def verify_program(hw: Hardware, program: ir.Program, compiled: Compiled, result, inputs, state) -> Verdict:
    """Stage 5: simulated cycles = predicted (else a compiler bug), and for a functional run the
    outputs against the float reference (tolerance) and everything against the bit-true model."""
    if int(result.cycles) != compiled.predicted_cycles:
        raise VerificationError(
            f"simulated {int(result.cycles):,} cycles, the decoder predicted "
            f"{compiled.predicted_cycles:,}: the cost model and the simulator disagree"
        )
    if inputs is None:
        return Verdict(None, None, None)
    reference = ir.run(program, inputs, state)
    match, err = compare_outputs(program, result.outputs, reference, hw.pim.dtype)
    bits = bit_true_check(hw, program, inputs, state, compiled.streams, result)
    if not bits.exact:
        raise VerificationError(
            f"the simulated program computes other bits than the hardware's arithmetic "
            f"(sim/bittrue.py): {bits.summary()}"
        )
    return Verdict(match, err, True)


def run(
    instance: Instance,
    opts: SolveOptions,
    hw_overrides: list[str] | tuple[str, ...] = (),
    preset: str | None = None,
    cache: LoweringCache | None = None,
    hardware: Hardware | None = None,
) -> RunResult:
    """instance -> program + hardware -> lowered -> solved -> selected program -> simulated -> verified.
    `hardware`: what `instance.build_hardware(hw_overrides, preset)` gives, built already (the
    methods of a sweep point share it); the overrides are then not read."""
    clock: dict[str, float] = {}
    t0 = time.perf_counter()
    program = instance.build_program()
    hw = hardware if hardware is not None else instance.build_hardware(hw_overrides, preset)
    _check_capacity(hw, program)
    lowered = (cache or DEFAULT_CACHE).lowered(instance, hw, program, opts.groups, opts.lower_jobs, opts.without)
    problem, lowering = lowered.for_method(opts.method)
    clock["lower"] = time.perf_counter() - t0

    solved = solve_program(problem, opts)

    functional = functional_fits(program) if opts.functional is None else opts.functional
    t2 = time.perf_counter()
    # a streamed simulation (timing-only, no command log) reads lazily built streams, a task's
    # encoded commands at a time: the program never sits in memory whole, and lockstep channels
    # share one encoding of their commands
    selected = select_program(problem, lowering, solved, functional=functional, lazy=not functional and not opts.record)
    record = opts.record
    if record is None:  # (a lazy program's command log is the eager one's: the simulator reads the same rows)
        streams = selected.compiled.streams if selected.compiled else None
        record = streams is not None and sum(len(s) for s in streams.channels) <= TRACE_INSTRUCTIONS
    clock["decode"] = time.perf_counter() - t2

    t3 = time.perf_counter()
    result, inputs, state = simulate_program(
        hw,
        program,
        selected.compiled,
        functional=functional,
        record=record,
        values=instance.values,
        progress=opts.sim_progress,
        jobs=opts.sim_jobs,
    )
    clock["simulate"] = time.perf_counter() - t3
    verdict = verify_program(hw, program, selected.compiled, result, inputs, state)
    return RunResult(
        instance,
        hw,
        program,
        problem,
        lowering,
        selected.solution,
        selected.compiled,
        lowered.bounds,
        result,
        verdict.outputs_match,
        verdict.max_abs_error,
        solved.seconds,
        clock,
        bit_exact=verdict.bit_exact,
    )


def bit_true_check(hw: Hardware, program: ir.Program, inputs, state, streams, result):
    """Every tensor the simulated host holds against the bit-true model (exact)."""
    from sim import bittrue

    model = bittrue.run(hw, program, inputs, state, bittrue.Dispatch.from_streams(program, streams))
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
            f"weights {format_bytes(w)}{kv_text} need {format_bytes(w + kv)}; "
            f"{hw.name} holds {format_bytes(org.capacity_bytes)} "
            f"({org.channels} channels x {org.banks_per_channel} banks x {org.rows} rows x {org.row_bytes} B)"
            f", {format_bytes((w + kv) / org.channels)} per channel needed, {format_bytes(org.channel_bytes)} available"
        )


def compare_outputs(
    program: ir.Program,
    outputs: dict[str, np.ndarray],
    reference: dict[str, np.ndarray],
    arithmetic: str | None = None,
) -> tuple[bool, float]:
    """Every program output against the float reference (every tensor of `ir.run`), by the one
    tolerance rule (hwmodel.numerics: within_tolerance; an argmax over float logits by
    argmax_within_tolerance), at the tolerance of the coarser of the output's dtype and the
    device's `arithmetic` (`hw.pim.dtype`); (all match, the largest absolute error of a float
    output)."""
    ok, worst = True, 0.0
    producer = {op.outputs[0]: op for op in program.ops}
    for name in program.outputs:
        dtype = program.tensors[name].dtype.value
        op = producer.get(name)
        logits = op.inputs[0] if op is not None and op.kind is ir.OpKind.argmax else None
        if logits is not None and logits in reference and program.tensors[logits].dtype.value != "int32":
            key = tolerance_dtype(program.tensors[logits].dtype.value, arithmetic)
            match, _ = argmax_within_tolerance(outputs[name], reference[logits], key)
            ok &= match
            continue
        match, err = within_tolerance(outputs[name], reference[name], tolerance_dtype(dtype, arithmetic))
        ok &= match
        if dtype != "int32":
            worst = max(worst, err)
    return ok, worst
