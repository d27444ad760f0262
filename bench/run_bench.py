"""Benchmark the compiler on instance tiers: every method, every instance; figures and ratios.

    python bench/run_bench.py --tier fpga --tier micro [--time-limit 30] [--json out.json]
    (or: pimsat bench --tier fpga --tier micro)

For each instance: predicted and simulated cycles per method, the solver-free bound, gap,
speed-up of cpsat over naive, and a comparison with bench/best_known.json (a regression is a
cpsat makespan above the recorded best).
"""
from __future__ import annotations

import argparse
import json
import sys
import time
from pathlib import Path

ROOT = Path(__file__).resolve().parent.parent
sys.path.insert(0, str(ROOT))

from rich.console import Console  # noqa: E402
from rich.table import Table  # noqa: E402

from pimsat.instance import instance_files, load_instance  # noqa: E402
from pimsat.pipeline import SolveOptions, run  # noqa: E402
from pimsat.report import report_dict  # noqa: E402

BEST = ROOT / "bench" / "best_known.json"


def main() -> int:
    ap = argparse.ArgumentParser()
    ap.add_argument("--tier", action="append", default=[])
    ap.add_argument("--instance", action="append", default=[])
    ap.add_argument("--time-limit", type=float, default=30.0)
    ap.add_argument("--methods", default="naive,greedy,cpsat")
    ap.add_argument("--json")
    ap.add_argument("--record", action="store_true", help="update best_known.json with better results")
    a = ap.parse_args()
    paths = [p for t in (a.tier or ["fpga"]) for p in instance_files(ROOT / "instances" / t)]
    paths += [Path(p) for p in a.instance]
    best = json.loads(BEST.read_text()) if BEST.exists() else {}
    console = Console(width=None if sys.stdout.isatty() else 170)
    table = Table(title=f"pimsat bench ({time.strftime('%Y-%m-%d')})")
    for c in ("instance", "naive", "greedy", "cpsat", "sim == pred", "bound", "cpsat/bound", "naive/cpsat",
              "solve s", "best known"):
        table.add_column(c, justify="left" if c == "instance" else "right")
    results = []
    failures = 0
    for path in paths:
        inst = load_instance(path)
        reps = {}
        for m in a.methods.split(","):
            reps[m] = report_dict(run(inst, SolveOptions(method=m, time_limit=a.time_limit)))
        results.extend(reps.values())
        cp = reps.get("cpsat") or reps[list(reps)[-1]]
        exact = all(r["objective_cycles"] == r["simulated_cycles"] for r in reps.values())
        lb = max(x for x in (cp["bound_cycles"], cp["lower_bound_cycles"]) if x is not None)
        prev = best.get(inst.name)
        flag = "" if prev is None else ("new best" if cp["objective_cycles"] < prev else
                                        ("=" if cp["objective_cycles"] == prev else f"REGRESSION (was {prev:,})"))
        failures += int(not exact) + int(flag.startswith("REGRESSION"))
        failures += sum(r["outputs_match"] is False for r in reps.values())
        if a.record and (prev is None or cp["objective_cycles"] < prev):
            best[inst.name] = cp["objective_cycles"]
        table.add_row(inst.name, *[f"{reps[m]['simulated_cycles']:,}" if m in reps else "—"
                                   for m in ("naive", "greedy", "cpsat")],
                      "yes" if exact else "NO", f"{lb:,}", f"{cp['simulated_cycles'] / lb:.3f}",
                      f"{reps['naive']['simulated_cycles'] / cp['simulated_cycles']:.2f}×" if "naive" in reps else "—",
                      f"{cp['solve_seconds']:.1f}", flag or "—")
    console.print(table)
    if a.record:
        BEST.write_text(json.dumps(dict(sorted(best.items())), indent=2) + "\n")
    if a.json:
        Path(a.json).write_text(json.dumps(results, indent=2) + "\n")
    if failures:
        console.print(f"[bold red]{failures} failure(s): regression, mismatch or wrong outputs[/]")
    return 1 if failures else 0


if __name__ == "__main__":
    raise SystemExit(main())
