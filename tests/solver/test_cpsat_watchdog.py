"""The watchdog: the wall-clock limit of solve_cpsat, kept out of the window where a stop aborts
OR-Tools (solver/cpsat/watchdog.py)."""

from __future__ import annotations

import threading
import time

from ortools.sat.python import cp_model
from solver_testkit import random_problem

from solver.certificate import check_solution
from solver.cpsat.hints import add_hint
from solver.cpsat.solve import build_model, solve_cpsat
from solver.cpsat.symmetry import canonical_hint
from solver.cpsat.watchdog import Watchdog
from solver.heuristics import solve_greedy
from solver.index import problem_index, solution_makespan
from solver.problem import SearchEnd


class _Stops:
    def __init__(self):
        self.n = 0

    def __call__(self):
        self.n += 1


def _far() -> float:
    return time.perf_counter() + 3600


FIRST = "Starting CP-SAT solver v9.15.6755"


def test_a_request_outside_the_window_stops_at_once():
    stop = _Stops()
    wd = Watchdog(stop, _far(), max_defer=5)
    wd.on_log(FIRST)
    wd.on_log("Starting presolve at 0.00s")
    wd.request_stop()
    assert stop.n == 1 and wd.fired and wd.deferred_s == 0
    wd.request_stop()
    assert stop.n == 1  # one stop


def test_a_request_inside_the_window_waits_for_the_search_to_start():
    stop = _Stops()
    wd = Watchdog(stop, _far(), max_defer=5)
    wd.on_log(FIRST)
    wd.on_log("Presolve summary:")
    wd.request_stop()
    wd.on_log("Preloading model.")
    assert stop.n == 0 and not wd.fired
    wd.on_log("Starting deterministic search at 0.04s with 2 workers and batch size of 1.")
    assert stop.n == 1 and wd.fired and wd.deferred_s > 0 and wd.waited_for_window and not wd.forced


def test_the_portfolio_search_closes_the_window_too():
    stop = _Stops()
    wd = Watchdog(stop, _far(), max_defer=5)
    wd.on_log(FIRST)
    wd.on_log("Presolve summary:")
    wd.request_stop()
    wd.on_log("Starting search at 0.04s with 2 workers.")
    assert stop.n == 1


def test_the_deadline_stops_the_search():
    stop = _Stops()
    wd = Watchdog(stop, time.perf_counter() + 0.05, max_defer=5)
    wd.on_log(FIRST)
    wd.start()
    time.sleep(0.5)
    wd.cancel()
    assert stop.n == 1 and wd.fired and wd.deferred_s == 0


def test_a_window_that_never_closes_is_stopped_after_max_defer():
    stop = _Stops()
    wd = Watchdog(stop, time.perf_counter(), max_defer=0.1)
    wd.on_log("Presolve summary:")
    wd.start()
    time.sleep(0.6)
    wd.cancel()
    assert stop.n == 1 and wd.forced and wd.deferred_s >= 0.1


def test_cancel_before_the_deadline_stops_nothing():
    stop = _Stops()
    wd = Watchdog(stop, time.perf_counter() + 0.2, max_defer=5)
    wd.start()
    wd.cancel()
    time.sleep(0.3)
    assert stop.n == 0 and not wd.fired


def test_a_deadline_inside_the_window_is_issued_by_the_line_that_closes_it():
    stop = _Stops()
    wd = Watchdog(stop, time.perf_counter() + 0.05, max_defer=30)
    wd.on_log(FIRST)
    wd.on_log("Presolve summary:")
    wd.start()
    time.sleep(0.3)
    assert stop.n == 0  # the timer fired inside the window: pending
    closer = threading.Thread(target=wd.on_log, args=("Starting deterministic search at 0.3s",))
    closer.start()
    closer.join()
    wd.cancel()
    assert stop.n == 1 and 0.2 < wd.deferred_s < 5 and not wd.forced


def test_a_deadline_passed_before_the_solve_started_is_issued_at_its_first_line():
    """CpSolver.stop_search before solve() has created its search does nothing: the stop waits
    for CP-SAT's first log line."""
    stop = _Stops()
    wd = Watchdog(stop, time.perf_counter() - 1, max_defer=30)
    wd.start()
    time.sleep(0.2)
    assert stop.n == 0 and not wd.fired
    wd.on_log(FIRST)
    wd.cancel()
    assert stop.n == 1 and wd.deferred_s >= 0.2 and not wd.forced and not wd.waited_for_window


def test_solve_cpsat_keeps_a_limit_spent_while_building_the_model():
    """time_limit 0: the deadline has passed when the search starts; CP-SAT is stopped at once,
    and the greedy hint comes back (before the fix the stop was lost and the search ran on to
    its proof)."""
    p = random_problem(7, n_jobs=9, n_groups=3, refresh=True)
    s = solve_cpsat(p, time_limit=0.0)
    assert s.status.value == "FEASIBLE" and "returning the hint" in s.message
    assert s.search_end == SearchEnd.wall_clock and check_solution(p, s) == []


def _hinted_model():
    p = random_problem(7, n_jobs=9, n_groups=3, refresh=True)
    idx = problem_index(p)
    hint = solve_greedy(p)
    h = solution_makespan(p, hint)
    ctx = build_model(p, h, idx.lower_bound(h), idx)
    if ctx.symmetry_classes:
        hint = canonical_hint(p, idx, hint, ctx.symmetry_classes)
    add_hint(ctx, hint)
    return p, ctx


def test_a_stop_while_cpsat_loads_the_hinted_model_waits_and_does_not_abort():
    """The stop is requested exactly where OR-Tools 9.15 aborts on one ("Preloading model.",
    interleaved search, 2 workers, a complete hint: bench/cpsat_stop_window.py). Issued there, it
    would end this test process; the watchdog issues it when the search starts."""
    _, ctx = _hinted_model()
    solver = cp_model.CpSolver()
    prm = solver.parameters
    prm.num_workers = 2
    prm.interleave_search = True
    prm.interleave_batch_size = 1
    prm.log_search_progress = True
    prm.log_to_stdout = False
    seen = []

    def at_preload(line: str) -> None:
        seen.append(line)
        if line.startswith("Preloading model"):
            wd.request_stop()

    wd = Watchdog(solver.stop_search, _far(), max_defer=30, echo=at_preload)
    solver.log_callback = wd.on_log
    code = solver.solve(ctx.model)
    assert any(line.startswith("Preloading model") for line in seen)
    assert wd.fired and not wd.forced and wd.deferred_s > 0
    assert code in (cp_model.FEASIBLE, cp_model.OPTIMAL)


def test_solve_cpsat_under_a_stop_at_the_preload_line(monkeypatch):
    """The same through solve_cpsat: a valid schedule, and the wait reported."""
    import solver.cpsat.solve as solve_mod

    class AtPreload(Watchdog):
        def on_log(self, line):
            super().on_log(line)
            if line.startswith("Preloading model"):
                self.request_stop()

    monkeypatch.setattr(solve_mod, "Watchdog", AtPreload)
    p = random_problem(7, n_jobs=9, n_groups=3, refresh=True)
    s = solve_cpsat(p, time_limit=60, hint=solve_greedy(p), auto_hint=False)
    assert s.status.value in ("FEASIBLE", "OPTIMAL") and check_solution(p, s) == []
    assert "waited" in s.message and "to start its search" in s.message


def test_log_search_still_prints_the_log_and_only_then(capfd):
    """The watchdog reads the log through a callback; stdout (pimsat solve --json) stays clean."""
    p = random_problem(3, n_jobs=6, n_groups=2)
    solve_cpsat(p, time_limit=10)
    assert "CP-SAT" not in capfd.readouterr().out
    solve_cpsat(p, time_limit=10, log_search=True)
    assert "Starting CP-SAT solver" in capfd.readouterr().out
