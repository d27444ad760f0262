"""Lowering on one process against several, side by side (issue 20: both cores where the work allows).

    python bench/lower_jobs.py INSTANCE... [--jobs 1,2] [--repeat 1] [--before]

For each instance, lowers the program (both styles and the bound, pimsat.pipeline.lower_program)
with each `--jobs` value in turn, alternating `--repeat` times, each in a fresh process (no
state shared between runs), and prints the wall seconds of the lowering alone, the speed-up over
the first value, and whether every run lowered the same problem (a digest of every job's modes,
tasks and durations, and the timed choices). `--before` adds a run of the lowering as
it was before the two styles shared one timing store (each style emitting its own tasks).
"""

from __future__ import annotations

import argparse
import json
import statistics
import subprocess
import sys
import time

CHILD = r"""
import hashlib, sys, time
from pimsat.instance import load_instance
from pimsat import pipeline
from solver.lower import LowerOptions, lower
from solver.payload import Style
inst = load_instance(sys.argv[1]); jobs = int(sys.argv[2]); before = sys.argv[3] == "1"
hw, program = inst.build_hardware([]), inst.build_program()
t0 = time.perf_counter()
if before:
    by_style = {s: lower(hw, program, LowerOptions(groups=4, style=s)) for s in Style}
else:
    by_style = pipeline.lower_program(hw, program, 4, jobs=jobs).by_style
wall = time.perf_counter() - t0
h = hashlib.sha256()
for style, (problem, lowering) in by_style.items():
    for j in problem.jobs:
        h.update(repr((j.name, [(m.name, m.tasks, m.edges) for m in j.modes])).encode())
    h.update(repr((sorted(lowering.split_macs.items()), sorted(lowering.vector_groups.items()),
                   sorted(lowering.double_buffers.items()), lowering.max_tail)).encode())
print(f"{wall:.3f} {h.hexdigest()[:16]}")
"""


def _run(instance: str, jobs: int, before: bool) -> tuple[float, str]:
    out = subprocess.run(
        [sys.executable, "-c", CHILD, instance, str(jobs), "1" if before else "0"],
        check=True,
        capture_output=True,
        text=True,
    ).stdout.split()
    return float(out[0]), out[1]


def main() -> int:
    ap = argparse.ArgumentParser()
    ap.add_argument("instances", nargs="+")
    ap.add_argument("--jobs", default="1,2")
    ap.add_argument("--repeat", type=int, default=1)
    ap.add_argument("--before", action="store_true")
    ap.add_argument("--json", default=None, help="also write the figures as JSON")
    a = ap.parse_args()
    variants = [("before", 1, True)] if a.before else []
    variants += [(f"jobs {j}", int(j), False) for j in a.jobs.split(",")]
    rows = []
    t_all = time.perf_counter()
    for inst in a.instances:
        walls: dict[str, list[float]] = {v[0]: [] for v in variants}
        digests = set()
        for _ in range(a.repeat):
            for name, jobs, before in variants:
                w, d = _run(inst, jobs, before)
                walls[name].append(w)
                digests.add(d)
        med = {k: statistics.median(v) for k, v in walls.items()}
        first = med[variants[0][0]]
        row = {"instance": inst, "median_s": med, "same_problem": len(digests) == 1}
        rows.append(row)
        cells = "  ".join(f"{k} {v:7.1f} s ({first / v:4.2f}x)" for k, v in med.items())
        print(f"{inst.rsplit('/', 1)[-1]:48s} {cells}  same problem: {'yes' if len(digests) == 1 else 'NO'}")
    print(f"({time.perf_counter() - t_all:.0f} s in all; medians of {a.repeat})")
    if a.json:
        with open(a.json, "w") as f:
            json.dump(rows, f, indent=2)
    return 0 if all(r["same_problem"] for r in rows) else 1


if __name__ == "__main__":
    raise SystemExit(main())
