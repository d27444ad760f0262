"""Simulator throughput end to end: `pimsat simulate DIR --json` as a user runs it, per workload
and stream format, side by side in one run (issue 20).

    .venv/bin/python bench/throughput.py [--commands 2750000] [--repeat 3] [--only random,pim]
        [--instance instances/llm/llama-2-7b-1l-b1-c128-hbm2-64ch.yaml] [--json OUT] [--baseline DIR]
        [--jobs 1,2] [--streams NAME=DIR]

--baseline DIR: also run every workload with the code of DIR (another checkout, e.g.
`git archive COMMIT | tar -x -C DIR`, first on PYTHONPATH), alternating with this checkout's
runs, and report both side by side (rows "… @base"); same interpreter and packages.

--jobs 1,2: run every workload of more than one channel with `pimsat simulate --jobs N` for each
N (rows "… -jN"; sim/parallel.py), alternating. Each round also times a compute loop on 1 and on 2
threads ("cores free": its speed-up, 2.0 on two idle cores): a shared machine gives parallel runs
less than its core count (and a serial run a busy core), and the figure says how much the runs had.
--streams NAME=DIR: also simulate the stream folder DIR (e.g. a `pimsat solve --out` of a larger
instance), as workload NAME.

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


def _cores_free() -> float:
    """Speed-up of a compute loop (compiled, GIL released) on 2 threads over 1: the cores the
    machine gave this process just now (2.0: two idle cores)."""
    import threading

    import numba

    @numba.njit(nogil=True, cache=False)
    def spin(n):
        a = b = c = 1
        for i in range(n):
            a = (a ^ i) + 3
            b = (b + a) ^ 5
            c = (c * 3) ^ b
        return a + b + c

    spin(10)
    n = 60_000_000
    t = time.perf_counter()
    spin(n)
    one = time.perf_counter() - t
    th = [threading.Thread(target=spin, args=(n,)) for _ in range(2)]
    t = time.perf_counter()
    for x in th:
        x.start()
    for x in th:
        x.join()
    return 2 * one / (time.perf_counter() - t)


def _channels(d: Path) -> int:
    return int(json.loads((d / "manifest.json").read_text())["channels"])


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
        # (blocks of 11 rows: one REF per block keeps up with tREFI since ACTs hold the row bus)
        made["pim"] = write_streams(make_streams(hw, 64, 44, 11), tmp / "pim")
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
    ap.add_argument("--jobs", default="1", help="comma-separated `pimsat simulate --jobs` values (multi-channel)")
    ap.add_argument("--streams", action="append", default=[], help="NAME=DIR: also this stream folder")
    a = ap.parse_args()
    jobs = [int(j) for j in a.jobs.split(",")]
    only = set(a.only.split(",")) if a.only else None
    with tempfile.TemporaryDirectory(prefix="pimsat-throughput-") as t:
        tmp = Path(t)
        _OUT, _ERR = str(tmp / "out.json"), str(tmp / "err.txt")
        dirs = _workloads(tmp, a.commands, only, a.instance)
        for spec in a.streams:
            name, d = spec.split("=", 1)
            dirs[name] = Path(d).resolve()
        exe = [str(Path(sys.executable).parent / "pimsat")]
        args = {n: [*exe, "simulate", str(d), "--hw", "hbm2-pim", "--timing-only", "--json"] for n, d in dirs.items()}
        for name in ["layer", "layer (.s)"] + [x.split("=", 1)[0] for x in a.streams]:
            if name in args:
                args[name] = [*exe, "simulate", str(dirs[name]), "--timing-only", "--json"]
        for name in list(args):  # each job count, side by side (one channel: nothing to share)
            if _channels(dirs[name]) > 1:
                for j in jobs:
                    if j != 1:
                        args[f"{name} -j{j}"] = [*args[name], "--jobs", str(j)]
            if 1 not in jobs and _channels(dirs[name]) > 1:
                del args[name]
        args = dict(sorted(args.items(), key=lambda kv: list(dirs).index(kv[0].split(" -j")[0])))
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
        cores: list[float] = []
        for _ in range(a.repeat):
            cores.append(_cores_free())
            for name, cmd in args.items():
                runs[name].append(_run_measured(cmd, envs.get(name)))
    for name, rs in runs.items():
        if name.endswith(" @base"):
            mine_out, base_out = runs[name[: -len(" @base")]][0][2], rs[0][2]
            for k in ("cycles", "dram_commands", "command_counts", "stall_cycles", "row_hits"):
                if mine_out.get(k) != base_out.get(k):
                    print(f"{name}: {k} differs from this checkout's: {base_out.get(k)} != {mine_out.get(k)}")
    for name, rs in runs.items():
        if " -j" in name:  # a parallel run measures what the serial one measures
            serial = runs[name.split(" -j")[0]][0][2] if name.split(" -j")[0] in runs else None
            if serial is not None:
                for k in ("cycles", "dram_commands", "command_counts", "stall_cycles", "row_hits", "row_misses"):
                    if rs[0][2].get(k) != serial.get(k):
                        raise SystemExit(f"{name}: {k} differs from the serial run's")
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
    if cores:
        print(f"cores free (compute loop, 2 threads over 1): {', '.join(f'{c:.2f}' for c in cores)}")
    if a.json_out:
        Path(a.json_out).write_text(json.dumps(rows, indent=1) + "\n")


if __name__ == "__main__":
    main()
