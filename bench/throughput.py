"""Simulator throughput end to end: `pimsat simulate DIR --json` as a user runs it, per workload
and stream format, side by side in one run (issue 20).

    .venv/bin/python bench/throughput.py [--commands 2750000] [--repeat 3] [--only random,pim]
        [--instance instances/llm/llama-2-7b-1l-b1-c128-hbm2-64ch.yaml] [--json OUT] [--baseline DIR]

--baseline DIR: also run every workload with the code of DIR (another checkout, e.g.
`git archive COMMIT | tar -x -C DIR`, first on PYTHONPATH), alternating with this checkout's
runs, and report both side by side (rows "… @base"); same interpreter and packages.

Workloads (written once into a temporary folder, then simulated `--repeat` times, runs
alternating between workloads; the median wall is reported):
  tiny        100 commands: start-up (imports, loading the compiled kernels)
  random      plain DRAM traffic, one HBM2 pseudo-channel (hbm2-pim): ACT/PRE/RD/WR/REF, 1/3 writes,
              random banks and rows (bench/dram_traffic.py)
  sequential  the same mix over consecutive banks and columns (mostly row hits)
  reads       random, reads only;  writes: random, writes only
  pim         PIM sweeps on 64 hbm2-pim channels (bench/sim_bench.py's GEMV-like streams)
  layer       the program the compiler emits for --instance (greedy, timing-only)
Each workload runs from its binary streams (.bin) and from its assembly (.s only). Reported:
bus commands, instructions, wall seconds, commands/s end to end (the whole command, Python's
start-up included), peak resident memory of the process. The runs use Python's bytecode cache
as an installed package does (PYTHONDONTWRITEBYTECODE is dropped: compiling the project's
modules from source costs each run 0.03-0.09 s).
"""

from __future__ import annotations

import argparse
import json
import os
import shutil
import statistics
import subprocess
import sys
import tempfile
import time
from pathlib import Path

ROOT = Path(__file__).resolve().parents[1]
sys.path.insert(0, str(ROOT / "bench"))
PIMSAT = [sys.executable, "-m", "pimsat"]


def _run_measured(args: list[str], env: dict | None = None) -> tuple[float, int, dict]:
    """Wall seconds, peak RSS (bytes, of this child alone: wait4) and the JSON it printed."""
    t0 = time.perf_counter()
    pid = os.fork()
    if pid == 0:  # child: exec with stdout to a file
        fd = os.open(_OUT, os.O_WRONLY | os.O_CREAT | os.O_TRUNC)
        os.dup2(fd, 1)
        err = os.open(_ERR, os.O_WRONLY | os.O_CREAT | os.O_TRUNC)
        os.dup2(err, 2)
        os.chdir(ROOT)
        env = dict(os.environ if env is None else env)
        env.pop("PYTHONDONTWRITEBYTECODE", None)  # as installed: the interpreter's bytecode cache on
        os.execve(args[0], args, env)
    _, status, usage = os.wait4(pid, 0)
    wall = time.perf_counter() - t0
    if os.waitstatus_to_exitcode(status):
        raise SystemExit(f"{' '.join(args)} failed: {Path(_ERR).read_text().strip()}")
    return wall, usage.ru_maxrss * 1024, json.loads(Path(_OUT).read_text())


_OUT = _ERR = ""


def _workloads(tmp: Path, commands: int, only: set[str] | None, instance: str) -> dict[str, Path]:
    from dram_traffic import traffic_streams
    from sim_bench import make_streams

    from hwmodel import load_hardware
    from hwmodel.streams_io import write_streams

    hw = load_hardware("hbm2-pim")
    made: dict[str, Path] = {}

    def want(name):
        return only is None or name in only

    dram = {
        "tiny": dict(kind="random", commands=100, writes=1 / 3, row_hits=0.25),
        "random": dict(kind="random", commands=commands, writes=1 / 3, row_hits=0.25),
        "sequential": dict(kind="sequential", commands=commands, writes=1 / 3, row_hits=0.25, ref_every=480),
        "reads": dict(kind="random", commands=commands, writes=0.0, row_hits=0.25),
        "writes": dict(kind="random", commands=commands, writes=1.0, row_hits=0.25),
    }
    for name, kw in dram.items():
        if want(name):
            made[name] = write_streams(traffic_streams(hw, channels=1, seed=0, **kw), tmp / name)
    if want("pim"):
        made["pim"] = write_streams(make_streams(hw, 64, 40, 12), tmp / "pim")
    if want("layer"):
        out = tmp / "layer"
        subprocess.run(
            [*PIMSAT, "solve", instance, "--method", "greedy", "--timing-only", "--out", str(out), "--json"],
            check=True,
            cwd=ROOT,
            stdout=subprocess.DEVNULL,
        )
        made["layer"] = out / "streams"
    for name, d in list(made.items()):  # the same streams from assembly only
        asm = tmp / f"{name}-asm"
        shutil.copytree(d, asm)
        for p in asm.glob("*.bin"):
            p.unlink()
        made[f"{name} (.s)"] = asm
    return made


def main() -> None:
    global _OUT, _ERR
    ap = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    ap.add_argument("--commands", type=int, default=2_750_000, help="commands of the DRAM workloads")
    ap.add_argument("--repeat", type=int, default=3)
    ap.add_argument("--only", default=None, help="comma-separated workloads (default: all)")
    ap.add_argument("--instance", default="instances/llm/llama-2-7b-1l-b1-c128-hbm2-64ch.yaml")
    ap.add_argument("--json", dest="json_out", default=None)
    ap.add_argument("--baseline", type=Path, default=None, help="another checkout to run side by side")
    a = ap.parse_args()
    only = set(a.only.split(",")) if a.only else None
    with tempfile.TemporaryDirectory(prefix="pimsat-throughput-") as t:
        tmp = Path(t)
        _OUT, _ERR = str(tmp / "out.json"), str(tmp / "err.txt")
        dirs = _workloads(tmp, a.commands, only, a.instance)
        exe = [str(Path(sys.executable).parent / "pimsat")]
        args = {n: [*exe, "simulate", str(d), "--hw", "hbm2-pim", "--timing-only", "--json"] for n, d in dirs.items()}
        for name in ("layer", "layer (.s)"):
            if name in args:
                args[name] = [*exe, "simulate", str(dirs[name]), "--timing-only", "--json"]
        envs: dict[str, dict | None] = dict.fromkeys(args)
        if a.baseline is not None:  # the same command with the baseline's code first on the path
            base_env = {**os.environ, "PYTHONPATH": str(a.baseline.resolve())}
            mine = dict(args)  # (the entry point script: sys.path[0] is its folder, then PYTHONPATH)
            args = {n: cmd for name, cmd in mine.items() for n in (f"{name} @base", name)}
            for name in mine:
                envs[f"{name} @base"] = base_env
        first = next(iter(dirs))
        for name in args:  # warm the compiled kernels' caches (each checkout: .bin and .s readers)
            if name.split(" @")[0] in (first, f"{first} (.s)"):
                _run_measured(args[name], envs[name])
        runs: dict[str, list[tuple[float, int, dict]]] = {n: [] for n in args}
        for _ in range(a.repeat):
            for name, cmd in args.items():
                runs[name].append(_run_measured(cmd, envs.get(name)))
    for name, rs in runs.items():
        if name.endswith(" @base"):
            mine_out, base_out = runs[name[: -len(" @base")]][0][2], rs[0][2]
            for k in ("cycles", "dram_commands", "command_counts", "stall_cycles", "row_hits"):
                if mine_out.get(k) != base_out.get(k):
                    print(f"{name}: {k} differs from this checkout's: {base_out.get(k)} != {mine_out.get(k)}")
    rows = []
    for name, rs in runs.items():
        wall = statistics.median(r[0] for r in rs)
        out = rs[0][2]
        cmds = int(out["dram_commands"])
        rows.append(
            {
                "workload": name,
                "commands": cmds,
                "cycles": int(out["cycles"]),
                "wall_s": round(wall, 3),
                "commands_per_s": round(cmds / wall),
                "simulate_phase_s": round(statistics.median(r[2]["wall_seconds"] for r in rs), 3),
                "peak_mb": round(max(r[1] for r in rs) / 2**20),
            }
        )
    print(f"{'workload':<24} {'commands':>11} {'cycles':>12} {'wall s':>8} {'cmd/s':>11} {'sim s':>7} {'peak MB':>8}")
    for r in rows:
        print(
            f"{r['workload']:<24} {r['commands']:>11,} {r['cycles']:>12,} {r['wall_s']:>8.2f} "
            f"{r['commands_per_s']:>11,} {r['simulate_phase_s']:>7.2f} {r['peak_mb']:>8,}"
        )
    print(f"(median of {a.repeat} runs each, alternating; wall = the whole `pimsat simulate` process)")
    if a.json_out:
        Path(a.json_out).write_text(json.dumps(rows, indent=1) + "\n")


if __name__ == "__main__":
    main()
