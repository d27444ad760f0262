"""`pimsat compare --json` reports -> the Markdown table the README shows (one row per instance).

    .venv/bin/python bench/compare_table.py OUT.json... [--phases] [--bounds BOUNDS.json]

Columns: naive, greedy, cpsat simulated cycles; cpsat status; CP-SAT's proven bound (one layer for
template solves: blank); the hardware bound (solver/hardware_bound.py), its binding term and
cpsat over it; naive / cpsat (below
1.00x: naive's program is faster, outside the space cpsat searches); exact (every method:
simulated = predicted and 0 violations); with
--phases also cpsat's lower / solve / decode / simulate seconds and instruction count. With
--bounds, the hardware bounds come from `bench/bounds.py --json` (for reports written before a
change to the bound; the programs and their cycles do not depend on it).
"""

from __future__ import annotations

import argparse
import json
from pathlib import Path


def _n(v) -> str:
    return "—" if v is None else f"{v:,}"


def _bound(report: dict, bounds: dict[str, dict] | None) -> tuple[int, str]:
    """(hardware bound, binding term) of an instance: from `bounds` if given, else the report's
    (reports written before the hardware bound carry only `lower_bound_cycles`)."""
    b = (bounds or {}).get(report["instance"], report)
    return b.get("hardware_bound_cycles", b["lower_bound_cycles"]), b.get("binding_term", "—")


def rows(reports: list[dict], phases: bool, bounds: dict[str, dict] | None = None) -> list[str]:
    by: dict[str, dict[str, dict]] = {}
    for r in reports:
        by.setdefault(r["instance"], {})[r["method"]] = r
    head = [
        "instance",
        "naive",
        "greedy",
        "cpsat",
        "cpsat status",
        "proven bound",
        "hardware bound",
        "binds",
        "cpsat / hardware bound",
        "naive / cpsat",
        "exact",
    ]
    if phases:
        head += ["lower / solve / decode / simulate (s)", "instructions"]
    out = [
        "| " + " | ".join(head) + " |",
        "|---|" + "---:|" * 3 + "---|" + "---:|" * 2 + "---|" + "---:|" * 2 + "---|" + ("---|---:|" if phases else ""),
    ]
    for name in sorted(by):
        m = by[name]
        if not {"naive", "greedy", "cpsat"} <= set(m):
            continue
        cyc = {k: m[k]["simulated_cycles"] for k in ("naive", "greedy", "cpsat")}
        cp = m["cpsat"]
        lb, binds = _bound(cp, bounds)
        exact = all(r["predicted_minus_simulated"] == 0 and r["violations"] == 0 for r in m.values())
        cells = [
            name,
            _n(cyc["naive"]),
            _n(cyc["greedy"]),
            _n(cyc["cpsat"]),
            cp["status"],
            _n(cp["bound_cycles"]),
            _n(lb),
            binds.replace("_", " "),
            f"{cyc['cpsat'] / lb:.2f}×",
            f"{cyc['naive'] / cyc['cpsat']:.2f}×",
            "yes" if exact else "NO",
        ]
        if phases:
            ph = cp["phase_seconds"]
            lower = max(r["phase_seconds"]["lower"] for r in m.values())  # `compare` lowers once per instance
            cells += [
                f"{lower:.0f} / {cp['solve_seconds']:.1f} / {ph['decode']:.0f} / {ph['simulate']:.0f}",
                f"{cp['instructions'] / 1e6:.1f} M",
            ]
        out.append("| " + " | ".join(cells) + " |")
    return out


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("files", nargs="+", type=Path)
    ap.add_argument("--phases", action="store_true")
    ap.add_argument("--bounds", type=Path)
    a = ap.parse_args()
    reports = [r for f in a.files for r in json.loads(f.read_text())]
    bounds = {b["instance"]: b for b in json.loads(a.bounds.read_text())} if a.bounds else None
    print("\n".join(rows(reports, a.phases, bounds)))


if __name__ == "__main__":
    main()
