"""The solver-free lower bound of instances without solving them (lowering only).

    .venv/bin/python bench/bounds.py INSTANCE... [--json OUT.json]

Prints per instance: bandwidth (streaming work alone), with refresh, the critical path of the op
graph, and the bound (the larger) - the `lower_bound_cycles` a `pimsat compare` report carries.
"""

from __future__ import annotations

import argparse
import json
from pathlib import Path

from pimsat.instance import load_instance
from pimsat.pipeline import SolveOptions, lower_program


def bound_row(path: str) -> dict:
    inst = load_instance(path)
    program, hw = inst.build_program(), inst.build_hardware([], None)
    b = lower_program(hw, program, SolveOptions().groups).bounds
    return {
        "instance": inst.name,
        "bandwidth_bound_cycles": b.bandwidth_cycles,
        "bandwidth_refresh_bound_cycles": b.bandwidth_refresh_cycles,
        "critical_path_cycles": b.critical_path_cycles,
        "lower_bound_cycles": b.cycles,
    }


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("instances", nargs="+")
    ap.add_argument("--json", type=Path)
    a = ap.parse_args()
    rows = []
    for path in a.instances:
        r = bound_row(path)
        rows.append(r)
        print(
            f"{r['instance']}: bound {r['lower_bound_cycles']:,} (bandwidth {r['bandwidth_bound_cycles']:,}, "
            f"with refresh {r['bandwidth_refresh_bound_cycles']:,}; critical path {r['critical_path_cycles']:,})",
            flush=True,
        )
        if a.json:
            a.json.write_text(json.dumps(rows, indent=1))


if __name__ == "__main__":
    main()
