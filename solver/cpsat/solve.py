"""`solve_cpsat`: build the CP-SAT model family by family, solve under a watchdog, certify.

Order of work (each step deterministic):
 1. index + validate the problem (`index.py`); capacity pre-check -> INFEASIBLE with the group,
    its need and its capacity in rows per bank;
 2. the hint: the caller's (checked; re-timed by the list scheduler if its starts violate a rule),
    or — with `auto_hint` — the greedy schedule. The horizon is the hint's model makespan
    (lumped refresh included), else `problem.horizon`, else the larger of
    `problem.trivial_horizon()` and a serial bound that also counts internal edge lags;
 3. the solver-free lower bound; if it meets the hint, the hint is optimal and no model is built;
 4. the model: modes -> precedence -> resources -> capacity -> makespan -> refresh ->
    symmetry -> objective; then the complete hint (every variable);
 5. solve with `num_workers`, `random_seed` (and the deterministic interleaved search, see
    `solve_cpsat`); the wall-clock limit is `watchdog.Watchdog`, a timer thread calling
    StopSearch at `time_limit` outside the window where OR-Tools aborts on a stop; the
    callbacks record (t, incumbent, bound) and feed `progress`;
 6. status mapping; on UNKNOWN with a hint, the hint is returned as FEASIBLE.
"""

from __future__ import annotations

import math
import threading
import time
from collections.abc import Callable
from dataclasses import replace

from ortools.sat.python import cp_model

from solver.certificate import check_solution
from solver.cpsat.capacity import add_capacity, capacity_only_feasible, check_capacity
from solver.cpsat.context import ModelContext
from solver.cpsat.hints import add_hint
from solver.cpsat.modes import HorizonInfeasible, add_modes
from solver.cpsat.objective import add_makespan, set_objective
from solver.cpsat.precedence import add_precedence
from solver.cpsat.refresh import add_refresh
from solver.cpsat.resources import add_resources
from solver.cpsat.symmetry import add_symmetry_breaking, canonical_hint
from solver.cpsat.watchdog import Watchdog
from solver.heuristics import schedule_with_modes, solve_greedy
from solver.index import ProblemIndex, problem_index, solution_makespan
from solver.problem import EARLIER_INCUMBENTS, Method, SchedulingProblem, SearchEnd, Solution, Status

Progress = Callable[[float, "int | None", "int | None"], None]

_STATUS = {
    cp_model.OPTIMAL: Status.OPTIMAL,
    cp_model.FEASIBLE: Status.FEASIBLE,
    cp_model.INFEASIBLE: Status.INFEASIBLE,
    cp_model.UNKNOWN: Status.UNKNOWN,
    cp_model.MODEL_INVALID: Status.MODEL_INVALID,
}


def build_model(
    problem: SchedulingProblem,
    horizon: int,
    lower_bound: int,
    index: ProblemIndex | None = None,
    symmetry_breaking: bool = True,
) -> ModelContext:
    """The complete CP-SAT model (no hint). Raises HorizonInfeasible."""
    idx = index or problem_index(problem)
    ctx = ModelContext(problem=problem, index=idx, horizon=horizon)
    add_modes(ctx)
    add_precedence(ctx)
    add_resources(ctx)
    add_capacity(ctx)
    add_makespan(ctx, lower_bound)
    add_refresh(ctx)
    if symmetry_breaking:
        add_symmetry_breaking(ctx)
    set_objective(ctx)
    return ctx


# improving solutions the search keeps: its last one and the EARLIER_INCUMBENTS before it
# (Solution.incumbents, which pimsat.pipeline.select_program decodes too)
KEPT_INCUMBENTS = EARLIER_INCUMBENTS + 1


def _assignment(problem: SchedulingProblem, ctx, value, boolean) -> tuple[dict[str, str], dict[str, int]]:
    """(mode per job, start per task of the chosen modes) of a solution read by `value` and
    `boolean` (the solver's, or a solution callback's)."""
    modes, starts = {}, {}
    for job in problem.jobs:
        for mode in ctx.live_modes(job):
            lit = ctx.lit[(job.name, mode.name)]
            if lit is None or boolean(lit):
                modes[job.name] = mode.name
                for t in mode.tasks:
                    starts[t.name] = int(value(ctx.start[t.name]))
                break
    return modes, starts


class _Recorder(cp_model.CpSolverSolutionCallback):
    """Records (t, incumbent, bound), the last KEPT_INCUMBENTS improving solutions (`capture`
    reads one). The wall-clock limit is the watchdog's (watchdog.py)."""

    def __init__(self, t0: float, progress: Progress | None, capture=None):
        super().__init__()
        self.capture = capture
        self.incumbents: list[tuple[int, dict[str, str], dict[str, int]]] = []
        self.t0 = t0
        self.progress = progress
        self.history: list[tuple[float, int | None, int | None]] = []
        self.incumbent: int | None = None
        self.bound: int | None = None
        self.lock = threading.Lock()
        self.progress_error: Exception | None = None

    def _emit(self, t: float) -> None:
        self.history.append((t, self.incumbent, self.bound))
        if self.progress is not None and self.progress_error is None:
            try:
                self.progress(t, self.incumbent, self.bound)
            except Exception as e:  # a broken display must not kill the solve
                self.progress_error = e

    def on_solution_callback(self) -> None:
        now = time.perf_counter()
        with self.lock:
            obj = int(round(self.ObjectiveValue()))
            b = self.BestObjectiveBound()
            if math.isfinite(b):
                self.bound = max(self.bound or 0, int(math.ceil(b - 1e-9)))
            improving = self.incumbent is None or obj < self.incumbent
            self.incumbent = obj if self.incumbent is None else min(self.incumbent, obj)
            if improving and self.capture is not None:
                self.incumbents = [*self.incumbents[-(KEPT_INCUMBENTS - 1) :], (obj, *self.capture(self))]
            self._emit(now - self.t0)

    def on_bound(self, b: float) -> None:
        now = time.perf_counter()
        if not math.isfinite(b):
            return
        with self.lock:
            nb = int(math.ceil(b - 1e-9))
            if self.bound is not None and nb <= self.bound:
                return
            self.bound = nb
            self._emit(now - self.t0)


def _result(
    status: Status,
    modes,
    starts,
    objective,
    bound,
    t0,
    history,
    notes,
    msg: str = "",
    end: SearchEnd = SearchEnd.proof,
    det: float | None = None,
) -> Solution:
    wall = time.perf_counter() - t0
    message = "; ".join([m for m in [msg] + notes if m])
    return Solution(
        method=Method.CPSAT,
        status=status,
        modes=dict(modes),
        starts=dict(starts),
        objective=objective,
        bound=bound,
        wall_seconds=wall,
        history=history,
        message=message,
        search_end=end,
        deterministic_seconds=det,
    )


def solve_cpsat(
    problem: SchedulingProblem,
    time_limit: float = 30.0,
    workers: int = 2,
    seed: int = 0,
    hint: Solution | None = None,
    progress: Progress | None = None,
    *,
    auto_hint: bool = True,
    symmetry_breaking: bool = True,
    deterministic: bool = True,
    deterministic_time: float | None = None,
    log_search: bool = False,
    guard_margin: float | None = None,
    params: dict | None = None,
) -> Solution:
    """Solve `problem` with CP-SAT; see the module docstring.

    Solution.objective is the model makespan: the latest task end, raised where needed by the
    lumped refresh relaxation (refresh.py); Solution.bound is a proven lower bound on it.
    `auto_hint` (default): without a caller's hint, the greedy schedule is the hint and the
    horizon.

    Determinism: with `deterministic` (default) CP-SAT runs its deterministic interleaved
    search (`interleave_search`, one subsolver task per batch): for a fixed seed the result does
    not depend on `workers` or on machine load whenever the search ends by proof (OPTIMAL /
    INFEASIBLE) — or by `deterministic_time` (CP-SAT's deterministic time units, set it to make
    time-limited runs reproducible too; the wall-clock limit still applies as the watchdog).
    Batches of one task measured fastest on this 2-core machine (a batch waits for its slowest
    task: the default batch size took 2.4x longer over the test set), so `workers` only matters
    with `deterministic=False`: CP-SAT's classic parallel portfolio, faster on many cores but
    not reproducible (which of several optimal schedules comes back depends on thread timing).
    `guard_margin`: the longest the watchdog waits past `time_limit` for CP-SAT to leave the
    window where a stop aborts it (default max(5 s, 10 % of the limit); it then stops anyway).
    `params`: extra CP-SAT parameters (name -> value), applied last (a `max_time_in_seconds`
    there is CP-SAT's own limit, which the watchdog cannot defer; `log_search_progress=False`
    hides the search's phases from the watchdog, whose stop then comes `guard_margin` late).
    """
    t0 = time.perf_counter()
    notes: list[str] = []
    idx = problem_index(problem)
    msg = check_capacity(idx)
    if msg:
        return _result(Status.INFEASIBLE, {}, {}, None, None, t0, [], notes, msg)

    # ---- hint and horizon
    if hint is not None and hint.modes:
        errs = check_solution(problem, hint)
        if errs:
            try:
                fixed = schedule_with_modes(problem, hint.modes, method=hint.method)
            except KeyError:
                fixed = None
            if fixed is not None and fixed.status == Status.HEURISTIC:
                notes.append(f"hint re-timed by the list scheduler ({len(errs)} violations, first: {errs[0]})")
                hint = fixed
            else:
                notes.append(f"hint ignored ({errs[0]})")
                hint = None
    elif hint is not None:
        hint = None  # an INFEASIBLE/UNKNOWN solution carries no schedule
    if hint is None and auto_hint:
        g = solve_greedy(problem)
        if g.status == Status.HEURISTIC:
            hint = g
            notes.append("hint: greedy")
    if hint is not None:
        hint_obj = solution_makespan(problem, hint)
        horizon = hint_obj
    else:
        hint_obj = None
        horizon = problem.horizon if problem.horizon > 0 else max(problem.trivial_horizon(), idx.serial_horizon())
    lb = idx.lower_bound(horizon)
    history: list[tuple[float, int | None, int | None]] = []
    if hint is not None:
        history.append((time.perf_counter() - t0, hint_obj, lb))
        if progress is not None:
            try:
                progress(history[-1][0], hint_obj, lb)
            except Exception as e:  # a broken display must not kill the solve
                notes.append(f"progress callback disabled after error: {e!r}")
                progress = None
        if lb >= hint_obj:
            notes.append("the hint meets the solver-free lower bound")
            return _result(Status.OPTIMAL, hint.modes, hint.starts, hint_obj, hint_obj, t0, history, notes)
    elif lb > horizon:
        return _result(
            Status.INFEASIBLE,
            {},
            {},
            None,
            None,
            t0,
            history,
            notes,
            f"no schedule within the horizon of {horizon:,} cycles (lower bound {lb:,})",
        )

    # ---- model
    try:
        ctx = build_model(problem, horizon, lb, idx, symmetry_breaking=symmetry_breaking)
    except HorizonInfeasible as e:
        return _result(Status.INFEASIBLE, {}, {}, None, None, t0, history, notes, str(e))
    notes.extend(ctx.notes)
    if hint is not None:
        if ctx.symmetry_classes:
            hint = canonical_hint(problem, idx, hint, ctx.symmetry_classes)
        add_hint(ctx, hint)

    # ---- solve under the watchdog
    solver = cp_model.CpSolver()
    prm = solver.parameters
    prm.num_workers = max(1, int(workers))
    # pimsat handles Ctrl-C itself (pimsat/signals.py); with this on, OR-Tools takes SIGINT during
    # the search and re-installs the default action afterwards, so a later Ctrl-C killed pimsat
    prm.catch_sigint_signal = False
    prm.random_seed = int(seed)
    # no wall-clock limit of CP-SAT's own: the watchdog below is the limit (see watchdog.py for the
    # OR-Tools abort it avoids); it reads the search's phases from the log
    prm.log_search_progress = True
    prm.log_to_stdout = bool(log_search)
    if deterministic:
        prm.interleave_search = True
        prm.interleave_batch_size = 1
    if deterministic_time is not None:
        prm.max_deterministic_time = float(deterministic_time)
    for k, v in (params or {}).items():
        setattr(prm, k, v)
    max_defer = guard_margin if guard_margin is not None else max(5.0, 0.1 * time_limit)
    rec = _Recorder(t0, progress, lambda cb: _assignment(problem, ctx, cb.value, cb.boolean_value))
    rec.history = history
    rec.bound = lb
    if hint_obj is not None:
        rec.incumbent = hint_obj
    solver.best_bound_callback = rec.on_bound
    watchdog = Watchdog(solver.stop_search, t0 + time_limit, max_defer)
    solver.log_callback = watchdog.on_log
    watchdog.start()
    try:
        code = solver.solve(ctx.model, rec)
    finally:
        watchdog.cancel()
    status = _STATUS.get(code, Status.UNKNOWN)
    det_used, wall_used = float(solver.deterministic_time), float(solver.wall_time)
    end = SearchEnd.proof
    if status not in (Status.OPTIMAL, Status.INFEASIBLE):
        # what ended the search: the work budget (reproducible) or the wall clock (load-dependent)
        if deterministic_time is not None and det_used >= 0.999 * float(deterministic_time):
            end = SearchEnd.work_budget
            notes.append(
                f"search ended by its work budget ({det_used:.2f} deterministic s, {wall_used:.1f} s "
                "wall): reproducible"
            )
        else:
            end = SearchEnd.wall_clock
            budget = "no" if deterministic_time is None else f"{float(deterministic_time):g}"
            notes.append(
                f"search cut short by the wall clock ({wall_used:.1f} s, {det_used:.2f} of {budget} "
                "deterministic s): not reproducible, the result depends on the machine's load"
            )
    if watchdog.fired and watchdog.waited_for_window:
        notes.append(
            f"the time limit's stop waited {watchdog.deferred_s:.2f} s for CP-SAT to start its search"
            + (" and was then forced" if watchdog.forced else "")
            + " (OR-Tools aborts on a stop while it loads the presolved model with a hint)"
        )
    if rec.progress_error is not None:
        notes.append(f"progress callback disabled after error: {rec.progress_error!r}")

    bound_raw = solver.best_objective_bound
    bound = max(lb, int(math.ceil(bound_raw - 1e-9))) if math.isfinite(bound_raw) else lb

    if status in (Status.OPTIMAL, Status.FEASIBLE):
        modes, starts = _assignment(problem, ctx, solver.value, solver.boolean_value)
        obj = int(round(solver.objective_value))
        if status == Status.OPTIMAL:
            bound = obj
        bound = min(bound, obj)
        history.append((time.perf_counter() - t0, obj, bound))
        result = _result(status, modes, starts, obj, bound, t0, history, notes, end=end, det=det_used)
        earlier = [
            _result(Status.FEASIBLE, m, st, o, None, t0, [], [], end=end)
            for o, m, st in rec.incumbents
            if o > obj and (m, st) != (modes, starts)
        ]
        return replace(result, incumbents=earlier)

    if status == Status.INFEASIBLE:
        if hint is not None:  # cannot happen: the hint is a feasible assignment
            return _result(
                Status.FEASIBLE,
                hint.modes,
                hint.starts,
                hint_obj,
                None,
                t0,
                history,
                notes,
                "CP-SAT reported INFEASIBLE despite a valid hint (bug)",
            )
        cap_ok = capacity_only_feasible(problem)
        if cap_ok is False:
            need = idx.min_usage()
            detail = ", ".join(f"{g.name} {need[g.name]:,}/{g.capacity_rows:,}" for g in problem.groups)
            msg = (
                "no choice of modes fits every group's capacity at once (least need per "
                f"group alone, rows per bank: {detail})"
            )
        else:
            msg = f"no schedule within the horizon of {horizon:,} cycles"
        return _result(Status.INFEASIBLE, {}, {}, None, None, t0, history, notes, msg)

    if status == Status.MODEL_INVALID:
        raise RuntimeError(f"CP-SAT model invalid: {ctx.model.validate()}")

    # UNKNOWN: time limit before any solution
    if hint is not None:
        history.append((time.perf_counter() - t0, hint_obj, min(bound, hint_obj)))
        return _result(
            Status.FEASIBLE,
            hint.modes,
            hint.starts,
            hint_obj,
            min(bound, hint_obj),
            t0,
            history,
            notes,
            f"time limit reached before CP-SAT found a solution: returning the hint ({hint.method})",
            end=end,
            det=det_used,
        )
    return _result(
        Status.UNKNOWN,
        {},
        {},
        None,
        bound,
        t0,
        history,
        notes,
        "time limit reached before any solution",
        end=end,
        det=det_used,
    )
