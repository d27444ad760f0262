"""Golden digests of emitted programs: a change that alters any stream (even at the same cycle
count) shows up as a digest change.

    python bench/program_digests.py [--tier fpga --tier micro] [--write]

For every instance of the tiers and every method, the program `pimsat solve --method M
--timing-only` emits (the same streams a functional run emits; placements aside) is hashed with
hwmodel.streams.program_digest. Without --write, compares with tests/solver/golden/program_digests.json
and exits 1 on a difference (listing it); with --write, records the current digests there.
"""

from __future__ import annotations

import argparse
import json
import sys
from pathlib import Path

ROOT = Path(__file__).resolve().parents[1]
if str(ROOT) not in sys.path:
    sys.path.insert(0, str(ROOT))

from hwmodel.streams import program_digest  # noqa: E402
from pimsat.instance import instance_files, load_instance  # noqa: E402
from pimsat.pipeline import SolveOptions, run  # noqa: E402

GOLDEN = ROOT / "tests" / "solver" / "golden" / "program_digests.json"
METHODS = ("naive", "greedy", "cpsat")


def digests(tiers: list[str]) -> dict[str, dict[str, dict[str, object]]]:
    out: dict[str, dict[str, dict[str, object]]] = {}
    for tier in tiers:
        for path in instance_files(ROOT / "instances" / tier):
            inst = load_instance(path)
            row = out.setdefault(inst.name, {})
            for m in METHODS:
                r = run(inst, SolveOptions(method=m, functional=False, record=False))
                row[m] = {"cycles": r.compiled.predicted_cycles, "sha256": program_digest(r.compiled.streams)}
    return out


def differences(now: dict, golden: dict) -> list[str]:
    out = []
    for name, row in now.items():
        for m, d in row.items():
            g = golden.get(name, {}).get(m)
            if g != d:
                out.append(f"{name} {m}: {g} -> {d}")
    return out


def main(argv=None) -> int:
    ap = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    ap.add_argument("--tier", action="append", choices=("fpga", "micro", "small"))
    ap.add_argument("--write", action="store_true")
    a = ap.parse_args(argv)
    tiers = a.tier or ["fpga", "micro"]
    now = digests(tiers)
    golden = json.loads(GOLDEN.read_text()) if GOLDEN.exists() else {}
    if a.write:
        golden.update(now)
        GOLDEN.parent.mkdir(parents=True, exist_ok=True)
        GOLDEN.write_text(json.dumps(golden, indent=1, sort_keys=True) + "\n")
        print(f"wrote {sum(len(r) for r in now.values())} digests to {GOLDEN.relative_to(ROOT)}")
        return 0
    diff = differences(now, golden)
    for d in diff:
        print(d)
    print(f"{sum(len(r) for r in now.values())} programs, {len(diff)} differ from {GOLDEN.relative_to(ROOT)}")
    return 1 if diff else 0


if __name__ == "__main__":
    sys.exit(main())
