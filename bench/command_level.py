"""Command-level CP-SAT on every fpga-tier instance (issue 16, item 2a): per instance, the
emitted program's cycles, the command-level optimum over solver/cmdlevel's space (or its bound
and gap), the proof time, the hardware bound and the ratios. Every command-level schedule is
re-emitted stamped and simulated (functional, bit-true checked); the script fails if the
simulator disagrees with the model.

    python bench/command_level.py [INSTANCES...] [--time-limit 50] [--workers 1] [--method cpsat]

Without instances: instances/fpga/*.yaml. The programs are the pipeline's (pimsat.pipeline.run,
the method given, functional), the model covers each whole program: every channel's commands,
the host stream and their SIG/WAIT (the fpga programs are small enough: at most 1,424 commands).
"""

from __future__ import annotations

import argparse
from pathlib import Path

from pimsat.command_level import command_level
from pimsat.instance import instance_files, load_instance
from pimsat.pipeline import SolveOptions, run

ROOT = Path(__file__).resolve().parent.parent


def measure(path, time_limit: float = 50.0, workers: int = 1, method: str = "cpsat") -> dict:
    inst = load_instance(path)
    r = run(inst, SolveOptions(method=method, workers=workers, functional=True))
    cl = command_level(r, time_limit=time_limit, workers=workers)
    s, hb = cl.schedule, r.bounds.hardware.cycles
    return {
        "instance": inst.name,
        "emitted": int(r.sim.cycles),
        "status": s.status,
        "command_level": s.objective,
        "bound": s.bound,
        "gap": s.gap,
        "seconds": s.seconds,
        "simulated": cl.simulated_cycles,
        "bit_exact": cl.bit_exact,
        "hardware_bound": hb,
        "commands": s.stats["commands"],
        "free_pairs": s.stats["free_pairs"],
    }


def main(argv=None) -> None:
    ap = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    ap.add_argument("instances", nargs="*")
    ap.add_argument("--time-limit", type=float, default=50.0)
    ap.add_argument("--workers", type=int, default=1)
    ap.add_argument("--method", default="cpsat")
    a = ap.parse_args(argv)
    paths = a.instances or instance_files(ROOT / "instances" / "fpga")
    print(
        "| instance | emitted | command level | status (gap) | proof s | hardware bound "
        "| emitted ÷ hw | cmd ÷ hw | commands | free pairs |"
    )
    print("|---|---:|---:|---|---:|---:|---:|---:|---:|---:|")
    for p in paths:
        m = measure(p, a.time_limit, a.workers, a.method)
        if m["simulated"] != m["command_level"]:
            raise SystemExit(f"{m['instance']}: simulated {m['simulated']}, model {m['command_level']}")
        hb = m["hardware_bound"]
        print(
            f"| {m['instance']} | {m['emitted']:,} | {m['command_level']:,} | {m['status']} ({m['gap']:.1%}, "
            f"bound {m['bound']:,}) | {m['seconds']:.1f} | {hb:,} | {m['emitted'] / hb:.2f} | "
            f"{m['command_level'] / hb:.2f} | {m['commands']:,} | {m['free_pairs']:,} |",
            flush=True,
        )


if __name__ == "__main__":
    main()
