"""Check a sweep's results against single `pimsat solve` runs, one process per point and method.

    python bench/sweep_vs_solve.py SWEEP_OUT_DIR INSTANCE.yaml [--set KEY=VALUE ...] [--limit N]

For every row of SWEEP_OUT_DIR/results.jsonl of INSTANCE (a point and a method) runs
`pimsat solve INSTANCE --method M --set AXIS=VALUE ... --timing-only --json` with the point's axis
values (after the sweep's own --set overrides, given again here) and compares the status, the
cycles and the hardware bound with its terms (an `hw` axis is solve's --hw). Prints one line per
mismatch and a summary; exit 1 on any mismatch. (program.FIELD axes are skipped.)
"""

from __future__ import annotations

import argparse
import json
import subprocess
import sys
from pathlib import Path

from pimsat.instance import load_instance


def _key(rep: dict) -> tuple:
    return rep["status"], rep["objective_cycles"], rep["hardware_bound_cycles"], rep["bound_terms"]


def main() -> int:
    ap = argparse.ArgumentParser()
    ap.add_argument("out", type=Path)
    ap.add_argument("instance")
    ap.add_argument("--set", action="append", default=[], dest="sets")
    ap.add_argument("--limit", type=int, default=0, help="check only the first N rows (0: all)")
    args = ap.parse_args()
    name = load_instance(args.instance).name
    rows = [json.loads(line) for line in (args.out / "results.jsonl").open()]
    rows = [r for r in rows if r["instance"] == name and r["outcome"] == "DONE"]
    bad = checked = skipped = 0
    for row in rows[: args.limit or None]:
        coords = row["coords"]
        if any(k.startswith("program.") for k in coords):
            skipped += 1
            continue
        cmd = [sys.executable, "-m", "pimsat", "solve", args.instance, "--method", row["method"], "--timing-only"]
        if "hw" in coords:
            cmd += ["--hw", coords["hw"]]
        for s in [*args.sets, *(f"{k}={v}" for k, v in coords.items() if k != "hw")]:
            cmd += ["--set", s]
        rep = json.loads(subprocess.run([*cmd, "--json"], capture_output=True, text=True, check=True).stdout)
        checked += 1
        if _key(rep) != _key(row["report"]):
            bad += 1
            print(f"MISMATCH {coords} {row['method']}: solve {_key(rep)}, sweep {_key(row['report'])}")
    print(
        f"{checked} single solve runs compared with the sweep ({skipped} skipped): {checked - bad} equal, {bad} differ"
    )
    return 1 if bad else 0


if __name__ == "__main__":
    sys.exit(main())
