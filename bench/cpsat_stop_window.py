"""Where a stop aborts CP-SAT (OR-Tools 9.15), and that `solve_cpsat`'s watchdog does not.

Each case runs in its own process (an abort ends the process). A case solves one scheduling
problem (`layered_problem`, the solver benchmark's) with the greedy schedule as a complete hint,
or without it, and calls `stop_search` from CP-SAT's log callback when a given line is printed:
a stop at an exact phase of the solve, whatever the machine's load. Then the same problem through
`solve_cpsat` with its watchdog, the stop requested at the same line.

    python bench/cpsat_stop_window.py [--tasks 60] [--seed 1]

Prints one row per case: the search setting, the line the stop is issued at, and the outcome
(the status, or ABORT with OR-Tools' CHECK message).
"""

from __future__ import annotations

import argparse
import subprocess
import sys
from pathlib import Path

ROOT = Path(__file__).resolve().parents[1]
LINES = ("Presolve summary", "Preloading model.", "#Model", "Starting deterministic search")
SETTINGS = {
    "interleaved, 2 workers, hint": dict(workers=2, interleave=True, hint=True),
    "interleaved, 2 workers, no hint": dict(workers=2, interleave=True, hint=False),
    "portfolio, 2 workers, hint": dict(workers=2, interleave=False, hint=True),
    "interleaved, 1 worker, hint": dict(workers=1, interleave=True, hint=True),
}

CASE = r"""
import sys
sys.path[:0] = [{root!r}, {bench!r}]
from ortools.sat.python import cp_model
from solver_bench import layered_problem
from solver.cpsat.hints import add_hint
from solver.cpsat.solve import build_model, solve_cpsat
from solver.cpsat.symmetry import canonical_hint
from solver.cpsat.watchdog import Watchdog
from solver.heuristics import solve_greedy
from solver.index import problem_index, solution_makespan

p = layered_problem({tasks}, seed={seed}, n_groups=3)
hint = solve_greedy(p)
at = {line!r}
if {guarded}:
    import solver.cpsat.solve as S
    made = []
    class Probe(Watchdog):
        def __init__(self, *a, **k):
            super().__init__(*a, **k)
            made.append(self)
        def on_log(self, line):
            if line.startswith(at):
                self.request_stop()
            super().on_log(line)
    S.Watchdog = Probe
    s = solve_cpsat(p, time_limit=60, workers={workers}, hint=hint)
    print(s.status.value, f"(stop waited {{made[0].deferred_s * 1000:.1f}} ms)")
else:
    idx = problem_index(p)
    h = solution_makespan(p, hint)
    ctx = build_model(p, h, idx.lower_bound(h), idx)
    if {hint}:
        if ctx.symmetry_classes:
            hint = canonical_hint(p, idx, hint, ctx.symmetry_classes)
        add_hint(ctx, hint)
    solver = cp_model.CpSolver()
    prm = solver.parameters
    prm.num_workers = {workers}
    prm.interleave_search = {interleave}
    prm.interleave_batch_size = 1
    prm.log_search_progress = True
    prm.log_to_stdout = False
    solver.log_callback = lambda line: solver.stop_search() if line.startswith(at) else None
    print(solver.status_name(solver.solve(ctx.model)))
"""


def run_case(tasks: int, seed: int, line: str, guarded: bool, workers: int, interleave: bool, hint: bool) -> str:
    code = CASE.format(
        root=str(ROOT),
        bench=str(ROOT / "bench"),
        tasks=tasks,
        seed=seed,
        line=line,
        guarded=guarded,
        workers=workers,
        interleave=interleave,
        hint=hint,
    )
    r = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True, timeout=600)
    if r.returncode == 0:
        return r.stdout.strip().splitlines()[-1]
    check = next((ln for ln in r.stderr.splitlines() if "Check failed" in ln), r.stderr.strip()[-120:])
    return f"ABORT (exit {r.returncode}): {check.strip()}"


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    ap.add_argument("--tasks", type=int, default=60)
    ap.add_argument("--seed", type=int, default=1)
    a = ap.parse_args()
    print(f"layered_problem({a.tasks}, seed={a.seed}, n_groups=3); stop_search at a log line\n")
    print(f"{'search':34} {'stop at':32} outcome")
    for name, st in SETTINGS.items():
        for line in LINES:
            print(f"{name:34} {line:32} {run_case(a.tasks, a.seed, line, False, **st)}", flush=True)
    name = "solve_cpsat (watchdog), 2 workers"
    for line in LINES:
        out = run_case(a.tasks, a.seed, line, True, workers=2, interleave=True, hint=True)
        print(f"{name:34} {line:32} {out}", flush=True)


if __name__ == "__main__":
    main()
