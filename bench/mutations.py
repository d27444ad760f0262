"""Mutation analysis of emitted programs: does `pimsat simulate` notice every change of one
instruction field?

    python bench/mutations.py INSTANCE... [--method greedy] [--per-class N] [--seed S]

Each instance is compiled (functional), then every instruction of every stream is mutated one
field at a time (value + 1, or - 1 where + 1 does not fit), its issue stamp moved one cycle
either way or removed, and the instruction deleted. Each mutant is simulated and judged the way
`pimsat simulate` judges a stream folder:

  detected    the simulator refuses it (a timing, data or stream rule; the error names it), or
              it runs a different number of cycles than compiled, or its outputs miss the float
              reference's tolerance, or any host tensor differs from the bit-true model;
  harmless    none of those, and the command log, every host tensor and the cycles are those of
              the compiled program (the change does nothing);
  legal       none of those: the same data and total cycles, and the same commands in the same
              order but for (a) other issue cycles (a stamp moved within its slack, or removed
              where the earliest legal cycle is earlier) or (b) one REF fewer where the program
              had refreshed ahead (pulled in): the simulator checked the variant's timing and
              refresh rules (JEDEC's owed/pulled-in/interval limits) and it is a valid program;
  UNDETECTED  anything else: the program does something else and nothing says so.

`--per-class N` keeps at most N mutants per (opcode, mutation) class, chosen by the seed (the
tests use a sample; the figures in the issue notes come from full runs, N = 0).
"""

from __future__ import annotations

import argparse
import random
import sys
from collections import Counter, defaultdict
from dataclasses import dataclass
from pathlib import Path

import numpy as np

ROOT = Path(__file__).resolve().parents[1]
if str(ROOT) not in sys.path:
    sys.path.insert(0, str(ROOT))

import ir  # noqa: E402
import sim  # noqa: E402
from hwmodel.isa import Instruction  # noqa: E402
from hwmodel.model import COMMANDS  # noqa: E402
from hwmodel.streams import StreamSet  # noqa: E402
from pimsat.instance import load_instance  # noqa: E402
from pimsat.pipeline import SolveOptions, bit_true_check, compare_outputs, run  # noqa: E402

DETECTED, HARMLESS, LEGAL, UNDETECTED = "detected", "harmless", "legal", "UNDETECTED"


@dataclass
class Compiled:
    name: str
    hw: object
    program: ir.Program
    state: dict
    inputs: dict
    streams: StreamSet
    cycles: int
    log: np.ndarray
    host: dict


def compile_instance(path: str | Path, method: str = "greedy") -> Compiled:
    inst = load_instance(path)
    r = run(inst, SolveOptions(method=method, functional=True, time_limit=10))
    state = ir.generate_state(r.program, seed=inst.seed)
    inputs = ir.generate_inputs(r.program, seed=inst.seed)
    return Compiled(
        inst.name,
        r.hardware,
        r.program,
        state,
        inputs,
        r.compiled.streams,
        r.compiled.predicted_cycles,
        r.sim.log,
        r.sim.host,
    )


def mutants(c: Compiled):
    """(class, where, StreamSet) for every single mutation of the program."""
    ss = c.streams
    streams = [(k, s) for k, s in enumerate(ss.channels)] + [(None, ss.host)]

    def replaced(k, i, new):
        chans = [list(s) for s in ss.channels]
        host = list(ss.host)
        target = host if k is None else chans[k]
        if new is None:
            del target[i]
        else:
            target[i] = new
        return StreamSet(ss.hardware, ss.isa_version, list(ss.symbols), chans, host, list(ss.placements))

    for k, stream in streams:
        label = "host" if k is None else f"ch{k}"
        for i, ins in enumerate(stream):
            where = f"{label}[{i}] {ins}"
            limits = ins.spec.fields
            for fi, f in enumerate(limits):
                v = ins.args[fi]
                nv = v + 1 if v + 1 < 1 << f.bits else v - 1
                args = ins.args[:fi] + (nv,) + ins.args[fi + 1 :]
                yield f"{ins.op}.{f.name}", where, replaced(k, i, Instruction(ins.op, args, ins.cycle))
            if ins.cycle is not None:
                if ins.cycle > 0:
                    yield f"{ins.op}.stamp-1", where, replaced(k, i, ins.at(ins.cycle - 1))
                yield f"{ins.op}.stamp+1", where, replaced(k, i, ins.at(ins.cycle + 1))
                yield f"{ins.op}.unstamped", where, replaced(k, i, Instruction(ins.op, ins.args, None))
            yield f"{ins.op}.deleted", where, replaced(k, i, None)


def judge(c: Compiled, ss: StreamSet) -> tuple[str, str]:
    """(verdict, how) for one mutant."""
    try:
        res = sim.simulate(c.hw, ss, c.program, c.state, c.inputs)
    except sim.SimulationError as e:
        return DETECTED, f"refused: {e.kind}"
    if int(res.cycles) != c.cycles:
        return DETECTED, "cycles differ from compiled"
    ok, _err = compare_outputs(c.program, res.outputs, ir.run(c.program, c.inputs, c.state))
    if not ok:
        return DETECTED, "outputs miss the reference tolerance"
    bits = bit_true_check(c.hw, c.program, c.inputs, c.state, ss, res)
    if not bits.exact:
        return DETECTED, "differs from the bit-true model"
    same_log = res.log.shape == c.log.shape and bool(np.array_equal(res.log, c.log))
    same_host = set(res.host) == set(c.host) and all(
        np.array_equal(np.asarray(res.host[n]), np.asarray(c.host[n]), equal_nan=True) for n in c.host
    )
    if same_log and same_host:
        return HARMLESS, "same log, tensors and cycles"
    if same_host and _same_commands(res.log, c.log):
        return LEGAL, "same commands, data and cycles; other legal issue cycles"
    if same_host and _same_commands(res.log, c.log, drop_ref=True) and _refs(res.log) == _refs(c.log) - 1:
        return LEGAL, "one REF fewer, refresh rules still met; same data and cycles"
    return UNDETECTED, ("command log differs" if not same_log else "host tensors differ")


_REF = COMMANDS.index("REF")


def _refs(log: np.ndarray) -> int:
    return int((log["command"] == _REF).sum())


def _same_commands(a: np.ndarray, b: np.ndarray, drop_ref: bool = False) -> bool:
    """The logs list the same commands per channel in the same order (cycles aside; with
    drop_ref, REFs aside too)."""
    if drop_ref:
        a, b = a[a["command"] != _REF], b[b["command"] != _REF]
    if a.shape != b.shape:
        return False
    keys = [k for k in a.dtype.names if k not in ("cycle", "instr")]
    return all(np.array_equal(a[k], b[k]) for k in keys)


def analyse(c: Compiled, per_class: int = 0, seed: int = 0):
    """Counter of (class, verdict) and the undetected mutants' descriptions."""
    by_class = defaultdict(list)
    for cls, where, m in mutants(c):
        by_class[cls].append((where, m))
    rng = random.Random(seed)
    counts: Counter = Counter()
    undetected: list[str] = []
    for cls in sorted(by_class):
        items = by_class[cls]
        if per_class and len(items) > per_class:
            items = rng.sample(items, per_class)
        for where, m in items:
            verdict, how = judge(c, m)
            counts[(cls, verdict)] += 1
            if verdict == UNDETECTED:
                undetected.append(f"{cls} at {where}: {how}")
    return counts, undetected


def main(argv=None) -> int:
    ap = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    ap.add_argument("instances", nargs="+")
    ap.add_argument("--method", default="greedy")
    ap.add_argument("--per-class", type=int, default=0, help="at most N mutants per class (0: all)")
    ap.add_argument("--seed", type=int, default=0)
    a = ap.parse_args(argv)
    bad = 0
    for path in a.instances:
        c = compile_instance(path, a.method)
        counts, undetected = analyse(c, a.per_class, a.seed)
        total = sum(counts.values())
        det = sum(v for (_, verdict), v in counts.items() if verdict == DETECTED)
        harm = sum(v for (_, verdict), v in counts.items() if verdict == HARMLESS)
        ret = sum(v for (_, verdict), v in counts.items() if verdict == LEGAL)
        print(
            f"{c.name} ({a.method}, {c.streams.instruction_count():,} instructions): {total:,} mutants, "
            f"{det:,} detected, {harm:,} harmless, {ret:,} legal variants, {len(undetected):,} undetected"
        )
        for cls, n in Counter(u.split(" at ")[0] + " (" + u.rsplit(": ", 1)[1] + ")" for u in undetected).most_common():
            print(f"    {n:5d}  {cls}")
        bad += len(undetected)
    return 1 if bad else 0


if __name__ == "__main__":
    sys.exit(main())
