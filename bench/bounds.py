"""The solver-free lower bound of instances without solving them (lowering only).

    .venv/bin/python bench/bounds.py INSTANCE... [--json OUT.json] [--modes]

Prints per instance the hardware bound and its terms (solver/hardware_bound.py: no lowering, so
it takes a second even for a whole model), the `lower_bound_cycles` a `pimsat compare` report
carries; with --modes also the mode bound (critical path over the lowered modes).
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


if __name__ == "__main__":
    main()
