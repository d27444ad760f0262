"""The steady state of every task loop as a modulo schedule (issue 16, item 2b): per instance and
loop of the critical channel, the period (commands, iterations), the emitted II, the least II
proven over solver/cmdlevel/modulo.py's space (or its bound), the MAC floor, the proof time; and
per instance the share of the channel's cycles spent in loops proven optimal.

    python bench/steady_state.py [INSTANCES...] [--time-limit 60] [--workers 1] [--method cpsat]

Without instances: instances/fpga, instances/micro and the b1 one-layer Llama-2-7B instances at
context 128 (hbm2-pim, gddr6-aim). The programs are the pipeline's (pimsat.pipeline.run,
timing-only, the command log kept); the same block as `pimsat solve INSTANCE --steady-state`.
"""

from __future__ import annotations

import argparse
from pathlib import Path

from pimsat.instance import instance_files, load_instance
from pimsat.pipeline import SolveOptions, run
from pimsat.steady_state import steady_states

ROOT = Path(__file__).resolve().parent.parent
LAYERS = ["llama-2-7b-1l-b1-c128-hbm2-64ch.yaml", "llama-2-7b-1l-b1-c128-gddr6-32ch.yaml"]


def main(argv=None) -> None:
    ap = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    ap.add_argument("instances", nargs="*")
    ap.add_argument("--time-limit", type=float, default=60.0)
    ap.add_argument("--workers", type=int, default=1)
    ap.add_argument("--method", default="cpsat")
    a = ap.parse_args(argv)
    paths = a.instances or (
        instance_files(ROOT / "instances" / "fpga")
        + instance_files(ROOT / "instances" / "micro")
        + [ROOT / "instances" / "llm" / n for n in LAYERS]
    )
    print(
        "| instance | loop (task) | commands × iterations (in all runs) | emitted II | least II (status) "
        "| MAC floor | s |"
    )
    print("|---|---|---:|---:|---|---:|---:|")
    shares = []
    for p in paths:
        inst = load_instance(p)
        r = run(inst, SolveOptions(method=a.method, workers=a.workers, functional=False, record=True))
        block = steady_states(r, time_limit=a.time_limit, workers=a.workers)
        for lp in block["loops"]:
            least = (
                f"not modelled: {lp['reason']}"
                if lp["status"] == "UNSUPPORTED"
                else f"{lp['ii']:,} ({lp['status']}, bound {lp['bound_ii']:,})"
            )
            print(
                f"| {inst.name} | {lp['task']} | {lp['commands_per_period']} × {lp['iterations']} ({lp['repeats']}) "
                f"| {lp['emitted_ii']:,} | {least} | {lp['mac_floor']:,} | {lp['seconds']:.1f} |"
            )
        if not block["loops"]:
            print(f"| {inst.name} | (no loop of three iterations or more) | | | | | |")
        shares.append((inst.name, block["proven_loop_cycles"], block["cycles"]))
    print()
    print("| instance | channel cycles in loops proven optimal | program cycles | share |")
    print("|---|---:|---:|---:|")
    for name, proven, total in shares:
        print(f"| {name} | {proven:,} | {total:,} | {proven / max(1, total):.0%} |")


if __name__ == "__main__":
    main()
