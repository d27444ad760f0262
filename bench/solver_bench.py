"""Benchmark of the scheduling core on random layered problems.

    .venv/bin/python bench/solver_bench.py [--sizes 50,200,800] [--time-limit 10] [--workers 2]
        [--groups 4] [--seed 0] [--parallel] [--param NAME=VALUE ...]

For each size (total number of tasks over all modes = intervals in the CP-SAT model) it builds a
random layered decode-step-like problem (host ops; PIM ops with placement modes over channel
groups: all groups, pairs, single groups, or the host), and reports naive and greedy objectives,
and for CP-SAT without a hint and with the greedy hint: time to first solution, objective,
bound and gap at the time limit. Durations are exact-cycle scale (10^2 .. 10^6).
"""

from __future__ import annotations

import argparse
import random
import sys
import time
from pathlib import Path

ROOT = str(Path(__file__).resolve().parents[1])
if ROOT not in sys.path:
    sys.path.insert(0, ROOT)

from solver.certificate import check_solution  # noqa: E402
from solver.cpsat import solution_makespan, solve_cpsat  # noqa: E402
from solver.heuristics import solve_greedy, solve_naive  # noqa: E402
from solver.problem import HOST, Dependency, Group, Job, Mode, Refresh, SchedulingProblem, Task  # noqa: E402
from solver.synthetic import pim_mode  # noqa: E402


def layered_problem(
    n_tasks: int, seed: int = 0, n_groups: int = 4, width: int = 4, refresh: bool = True
) -> SchedulingProblem:
    """Jobs in layers of `width`; each job depends on 1-2 jobs of the previous layer."""
    rng = random.Random(seed)
    groups = [f"g{i}" for i in range(n_groups)]
    subsets: list[list[str]] = []
    for s in [groups] + [groups[i : i + 2] for i in range(0, n_groups, 2)] + [[g] for g in groups]:
        if s not in subsets:
            subsets.append(s)
    jobs: list[Job] = []
    deps: list[Dependency] = []
    layers: list[list[str]] = []
    total = 0
    while total < n_tasks:
        layer = []
        for _ in range(width):
            if total >= n_tasks:
                break
            name = f"j{len(jobs)}"
            if rng.random() < 0.35:
                t = Task(f"{name}/host", HOST, rng.randint(200, 20_000))
                modes = (Mode("host", (t,), (), (t.name,), t.name, {}),)
            else:
                mac = rng.randint(10_000, 1_000_000)
                rows = rng.randint(100, 3000)
                bc, rd, ga = rng.randint(100, 2000), rng.randint(500, 20_000), rng.randint(50, 500)
                modes_l = [
                    pim_mode(
                        name,
                        s,
                        bc,
                        mac,
                        rd,
                        ga * len(s),
                        rows,
                        name=("naive[all]" if s == groups else f"pim[{','.join(s)}]"),
                    )
                    for s in subsets
                ]
                if rng.random() < 0.3:
                    t = Task(f"{name}/host", HOST, mac * 6)
                    modes_l.append(Mode("host", (t,), (), (t.name,), t.name, {}))
                modes = tuple(modes_l)
            jobs.append(Job(name, (name,), modes))
            total += sum(len(m.tasks) for m in modes)
            if layers:
                prev = layers[-1]
                for a in rng.sample(prev, min(len(prev), rng.randint(1, 2))):
                    deps.append(Dependency(a, name))
            layer.append(name)
        layers.append(layer)
    # capacity: 25 % headroom over a perfectly balanced placement (binding, always feasible)
    rows_total = sum(max(m.usage.values(), default=0) * len(m.usage) for j in jobs for m in j.modes[:1])
    cap = -(-rows_total * 5 // (4 * n_groups))
    gs = [Group(g, tuple(range(16 * i, 16 * i + 16)), cap) for i, g in enumerate(groups)]
    ref = Refresh(tREFI=3900, tRFC=350, max_postponed=8) if refresh else None
    return SchedulingProblem(
        name=f"layered{n_tasks}-s{seed}", jobs=jobs, dependencies=deps, groups=gs, refresh=ref, sync_cycles=200
    )


def _first(sol) -> float | None:
    for t, inc, _ in sol.history:
        if inc is not None:
            return t
    return None


def run(
    sizes: list[int],
    time_limit: float,
    workers: int,
    seed: int,
    n_groups: int = 4,
    params: dict | None = None,
    deterministic: bool = True,
) -> None:
    hdr = (
        f"{'tasks':>5} {'jobs':>4} {'naive':>10} {'greedy':>10} | {'hint':>5} {'first_s':>7} "
        f"{'objective':>10} {'bound':>10} {'gap':>7} {'status':>8} {'wall_s':>6} {'det_s':>6}"
    )
    print(hdr)
    print("-" * len(hdr))
    for n in sizes:
        p = layered_problem(n, seed=seed, n_groups=n_groups)
        n_tasks = sum(len(m.tasks) for j in p.jobs for m in j.modes)
        nv = solve_naive(p)
        gr = solve_greedy(p)
        nv_obj = solution_makespan(p, nv) if nv.modes else -1
        gr_obj = solution_makespan(p, gr) if gr.modes else -1
        for auto in (False, True):
            t0 = time.perf_counter()
            s = solve_cpsat(
                p,
                time_limit=time_limit,
                workers=workers,
                seed=0,
                auto_hint=auto,
                params=params,
                deterministic=deterministic,
            )
            wall = time.perf_counter() - t0
            errs = check_solution(p, s) if s.modes else []
            assert not errs, errs[:3]
            first = _first(s)
            gap = f"{100 * s.gap:6.2f}%" if s.gap is not None else "   n/a"
            print(
                f"{n_tasks:>5} {len(p.jobs):>4} {nv_obj:>10,} {gr_obj:>10,} | "
                f"{'greedy' if auto else 'none':>5} "
                f"{(f'{first:7.2f}' if first is not None else '    n/a')} "
                f"{(s.objective or 0):>10,} {(s.bound or 0):>10,} {gap} {s.status:>8} "
                f"{wall:6.2f} {(s.deterministic_seconds or 0):6.2f}",
                flush=True,
            )


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--sizes", default="50,200,800")
    ap.add_argument("--time-limit", type=float, default=10.0)
    ap.add_argument("--workers", type=int, default=2)
    ap.add_argument("--seed", type=int, default=0)
    ap.add_argument("--groups", type=int, default=4)
    ap.add_argument(
        "--parallel",
        action="store_true",
        help="CP-SAT's non-deterministic parallel portfolio instead of the deterministic interleaved search",
    )
    ap.add_argument("--param", action="append", default=[], help="extra CP-SAT parameter NAME=VALUE (repeatable)")
    a = ap.parse_args()
    params = {}
    for kv in a.param:
        k, v = kv.split("=", 1)
        params[k] = {"true": True, "false": False}.get(v.lower(), v)
        if isinstance(params[k], str):
            params[k] = float(v) if "." in v else int(v)
    run(
        [int(x) for x in a.sizes.split(",")],
        a.time_limit,
        a.workers,
        a.seed,
        a.groups,
        params,
        deterministic=not a.parallel,
    )


if __name__ == "__main__":
    main()
