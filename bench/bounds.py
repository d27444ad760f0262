"""The solver-free lower bound of instances without solving them (lowering only).

    .venv/bin/python bench/bounds.py INSTANCE... [--json OUT.json] [--modes] [--reports COMPARE.json...]

Prints per instance the hardware bound and its terms (solver/hardware_bound.py: no lowering, so
it takes a second even for a whole model), the `lower_bound_cycles` a `pimsat compare` report
carries; with --modes also the mode bound (critical path over the lowered modes). With --reports
(`pimsat compare --json` files, of any commit) it checks the bound against every program in them
and exits 1 if one is faster than the bound.
"""

from __future__ import annotations

import argparse
import json
from pathlib import Path

from pimsat.instance import load_instance
from pimsat.pipeline import SolveOptions, lower_program
from solver.hardware_bound import hardware_bound


def bound_row(path: str, modes: bool = False) -> dict:
    inst = load_instance(path)
    program, hw = inst.build_program(), inst.build_hardware([], None)
    hb = hardware_bound(hw, program)
    row = {
        "instance": inst.name,
        "hardware_bound_cycles": hb.cycles,
        "bound_terms": hb.as_dict(),
        "binding_term": str(hb.binding),
        "lower_bound_cycles": hb.cycles,
    }
    if modes:  # lowering: as long as a compare's lower phase
        row["mode_bound_cycles"] = lower_program(hw, program, SolveOptions().groups).bounds.mode_bound_cycles
    return row


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("instances", nargs="+")
    ap.add_argument("--json", type=Path)
    ap.add_argument("--modes", action="store_true", help="also the mode bound (lowers each instance)")
    ap.add_argument("--reports", nargs="+", type=Path, default=[], help="compare --json files to check")
    a = ap.parse_args()
    rows = []
    for path in a.instances:
        r = bound_row(path, a.modes)
        rows.append(r)
        mode = f"; mode bound {r['mode_bound_cycles']:,}" if "mode_bound_cycles" in r else ""
        terms = ", ".join(f"{k} {v:,}" for k, v in r["bound_terms"].items())
        print(
            f"{r['instance']}: hardware bound {r['hardware_bound_cycles']:,} ({r['binding_term']}; {terms}){mode}",
            flush=True,
        )
        if a.json:
            a.json.write_text(json.dumps(rows, indent=1))
    if a.reports:
        bound = {r["instance"]: r["hardware_bound_cycles"] for r in rows}
        programs = [p for f in a.reports for p in json.loads(f.read_text()) if p["instance"] in bound]
        below = [p for p in programs if p["simulated_cycles"] < bound[p["instance"]]]
        for p in below:
            print(
                f"BELOW THE BOUND: {p['instance']} {p['method']} {p['simulated_cycles']:,} < {bound[p['instance']]:,}"
            )
        n = len({p["instance"] for p in programs})
        print(f"{len(programs)} programs of {n} instances: {len(below)} below the bound")
        raise SystemExit(1 if below else 0)


if __name__ == "__main__":
    main()
