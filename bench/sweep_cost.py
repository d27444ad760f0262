"""What a co-design sweep over host fields costs against one point, measured side by side.

    python bench/sweep_cost.py [--instance I] [--workers 1] [--repeat 1]

Runs, back to back as separate processes (each the whole command, as a user runs it):
  one point:  pimsat sweep I --axis host.dispatch_cycles=100 --axis host.sync_cycles=20
  12 points:  pimsat sweep I --axis host.dispatch_cycles=100,200,400,800 --axis host.sync_cycles=20,50,100
(--methods greedy,cpsat --timing-only --workers N), and prints the wall times, their ratio (issue
18: at most 2x) and whether the 12-point results.csv is byte-identical to one made without the
timing cache (--no-timing-cache, with --check-cache).
"""

from __future__ import annotations

import argparse
import filecmp
import subprocess
import sys
import tempfile
import time
from pathlib import Path

ONE = ["--axis", "host.dispatch_cycles=100", "--axis", "host.sync_cycles=20"]
TWELVE = ["--axis", "host.dispatch_cycles=100,200,400,800", "--axis", "host.sync_cycles=20,50,100"]


def _sweep(instance: str, axes: list[str], workers: int, out: Path, *extra: str) -> float:
    cmd = [sys.executable, "-m", "pimsat", "sweep", instance, *axes, "--methods", "greedy,cpsat"]
    cmd += ["--timing-only", "--workers", str(workers), "--out", str(out), *extra]
    t0 = time.perf_counter()
    subprocess.run(cmd, check=True, capture_output=True)
    return time.perf_counter() - t0


def main() -> int:
    ap = argparse.ArgumentParser()
    ap.add_argument("--instance", default="instances/llm/llama-2-7b-1l-b1-c2048-hbm2-64ch.yaml")
    ap.add_argument("--workers", type=int, default=1)
    ap.add_argument("--repeat", type=int, default=1, help="alternate the two commands this many times (medians)")
    ap.add_argument("--check-cache", action="store_true", help="also run the 12 points without the timing cache")
    args = ap.parse_args()
    ones, twelves = [], []
    with tempfile.TemporaryDirectory() as tmp:
        d = Path(tmp)
        for i in range(args.repeat):
            ones.append(_sweep(args.instance, ONE, args.workers, d / f"one{i}"))
            twelves.append(_sweep(args.instance, TWELVE, args.workers, d / f"twelve{i}"))
        one, twelve = sorted(ones)[len(ones) // 2], sorted(twelves)[len(twelves) // 2]
        print(f"{args.instance}, --workers {args.workers}, median of {args.repeat}")
        print(f"  one point  {one:7.2f} s")
        print(f"  12 points  {twelve:7.2f} s   ({twelve / one:.2f}x one point)")
        if args.check_cache:
            t = _sweep(args.instance, TWELVE, args.workers, d / "nocache", "--no-timing-cache")
            same = filecmp.cmp(d / "twelve0" / "results.csv", d / "nocache" / "results.csv", shallow=False)
            print(f"  12 points, --no-timing-cache  {t:7.2f} s; results.csv identical: {same}")
    return 0


if __name__ == "__main__":
    sys.exit(main())
