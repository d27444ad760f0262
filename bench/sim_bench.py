"""Simulator speed: DRAM commands per second and simulated cycles per second.

    .venv/bin/python bench/sim_bench.py [--preset hbm2-pim] [--channels 64] [--blocks 40] [--functional-blocks 4]
    .venv/bin/python bench/sim_bench.py --instance INSTANCE [--method greedy]

Streams (valid, unstamped): every channel streams weight rows through its PIM units like a GEMV
- per row pair: ACT the next row in the other bank of every unit (ping-pong), then for each
global-buffer-sized chunk of the row a WRGB of the input chunk and an all-bank MAC sweep, PRE;
after each block of rows an RDACC of every unit, PRE and a REF. The timing-only run is timed
end to end (encoding the Instruction objects included) and the kernel alone; the functional
run uses fewer blocks (it moves real data).

--instance: the program the compiler emits for an instance (timing-only, streamed as in `compare`):
instructions, the simulate phase, the kernel's share of it and the rates.
"""

from __future__ import annotations

import argparse
import time

import numpy as np

from hwmodel import load_hardware
from hwmodel.isa import Instruction
from hwmodel.streams import Placement, StreamSet


def channel_stream(hw, blocks: int, rows_per_block: int, stag: int = 1) -> list[Instruction]:
    nb, bpp = hw.organization.banks_per_channel, hw.pim.banks_per_pu
    cols, gbb = hw.organization.columns, hw.gb_bursts
    chunk = min(cols, gbb)
    halves = [sum(1 << (p * bpp + h) for p in range(nb // bpp)) for h in range(bpp)]
    s: list[Instruction] = []
    row = 0
    for _blk in range(blocks):
        s.append(Instruction("ACT", (halves[0], row)))
        for r in range(rows_per_block):
            cur = halves[r % bpp]
            if r + 1 < rows_per_block:
                s.append(Instruction("ACT", (halves[(r + 1) % bpp], row + (r + 1) // bpp)))
            for k in range(cols // chunk):
                s.append(Instruction("WRGB", (0, chunk, 0, k * chunk * hw.elements_per_burst)))
                s.append(Instruction("MAC", (cur, k * chunk, chunk, 0, r % hw.pim.acc_registers)))
            s.append(Instruction("PRE", (cur,)))
        for p in range(nb // bpp):
            s.append(Instruction("RDACC", (p * bpp, 0, hw.pim.acc_registers, stag, 0, 1)))
        s.append(Instruction("REF", ()))
        row += rows_per_block
    return s


def make_streams(hw, channels: int, blocks: int, rows_per_block: int) -> StreamSet:
    chans = [channel_stream(hw, blocks, rows_per_block) for _ in range(channels)]
    if hw.organization.shared_bus and channels > 1:
        # pseudo-channel pairs share their command buses: the odd channel of each pair starts
        # later by the smallest shift at which its copy of the stream collides with none of the
        # even one's commands (as the decoder staggers lockstep pairs: hwmodel/bus.py)
        # (one block shows the spacings of the periodic stream, and is shorter than tREFI)
        delay = stagger(hw, channel_stream(hw, 1, rows_per_block))
        for c in range(1, channels, 2):
            chans[c] = [chans[c][0].at(delay)] + chans[c][1:]
    return StreamSet(hw.name, hw.isa_version, ["x", "acc#acc"], chans, [])


def stagger(hw, stream: list[Instruction]) -> int:
    """The smallest start of a copy of `stream` that shares no bus cycle with the original."""
    from hwmodel import bus
    from sim.oracle import time_commands

    t = time_commands(hw, stream)
    rec = bus.records_from_commands(t.command_cycles, t.commands, t.command_instrs)
    return bus.smallest_shift(rec, rec, bus.act_bus_cycles(hw))


def bench_timing(hw, ss: StreamSet, record: bool) -> dict:
    from sim import simulate

    t0 = time.perf_counter()
    r = simulate(hw, ss, functional=False, record=record)
    dt = time.perf_counter() - t0
    return {
        "commands": r.commands,
        "cycles": r.cycles,
        "seconds": dt,
        "cmd_per_s": r.commands / dt,
        "cycles_per_s": r.cycles / dt,
        "instructions": ss.instruction_count(),
    }


def bench_kernel(hw, ss: StreamSet) -> dict:
    """The channel kernel alone (streams already encoded)."""
    from sim import channel as K
    from sim.encode import SignalMap, encode_stream
    from sim.timing import compile_tables

    tab = compile_tables(hw)
    signals = SignalMap()
    tables = [signals.densify(encode_stream(hw, s)) for s in ss.channels]
    progs = [np.ascontiguousarray(t.reshape(-1)) for t in tables]
    sig = signals.time
    states = [K.new_state(tab, len(t), None) for t in tables]
    t0 = time.perf_counter()
    for p, s in zip(progs, states):
        assert K.call(tab, p, s, sig) == K.DONE
    dt = time.perf_counter() - t0
    n = int(sum(s["counts"].sum() for s in states))
    return {"commands": n, "seconds": dt, "cmd_per_s": n / dt}


def functional_program(hw, channels, blocks, rows_per_block):
    """A GEMV whose weights match the bench layout, so the functional run has real data."""
    from ir import gemv_program

    nb = hw.organization.banks_per_channel
    E, cols = hw.elements_per_burst, hw.organization.columns
    k = cols * E
    prog = gemv_program(hw.pim.acc_registers, k, dtype=hw.pim.dtype)
    placements = []
    for c in range(channels):
        for b in range(nb):
            for row in range(blocks * rows_per_block):
                placements.append(Placement("gemv.weight", c, b, row, 0, 0, k))
    return prog, placements


def bench_instance(path: str, method: str) -> None:
    from pimsat import pipeline
    from pimsat.instance import load_instance

    run = pipeline.run(load_instance(path), pipeline.SolveOptions(method=method, functional=False, record=False))
    n, ph = run.compiled.streams.instruction_count(), run.sim.phase_seconds
    sim_s = run.timings["simulate"]
    print(
        f"{path} ({method}): {n:,} instructions, {run.sim.cycles:,} cycles; simulate {sim_s:.1f} s = "
        f"{n / sim_s / 1e6:.2f} M instructions/s, of which the kernel {ph['kernel']:.1f} s = "
        f"{n / ph['kernel'] / 1e6:.2f} M instructions/s ({100 * ph['kernel'] / sim_s:.0f} %)"
    )


def main() -> None:
    ap = argparse.ArgumentParser()
    ap.add_argument("--instance", help="time the simulation of this instance's compiled program instead")
    ap.add_argument("--method", default="greedy")
    ap.add_argument("--preset", default="hbm2-pim")
    ap.add_argument("--channels", type=int, default=64)
    ap.add_argument("--blocks", type=int, default=40)
    ap.add_argument("--rows-per-block", type=int, default=12)  # a block within the refresh budget
    ap.add_argument("--functional-blocks", type=int, default=2)
    a = ap.parse_args()
    if a.instance:
        bench_instance(a.instance, a.method)
        return
    hw = load_hardware(a.preset)
    from sim import simulate

    # warm up (numba compile / cache load)
    simulate(hw, make_streams(hw, 1, 1, 2), functional=False)
    t0 = time.perf_counter()
    ss = make_streams(hw, a.channels, a.blocks, a.rows_per_block)
    gen = time.perf_counter() - t0
    print(f"{a.preset}: {a.channels} channels, {ss.instruction_count():,} instructions generated in {gen:.1f} s")
    for record in (False, True):
        r = bench_timing(hw, ss, record)
        print(
            f"timing-only{' +log' if record else ''}: {r['commands']:,} commands, {r['cycles']:,} cycles per "
            f"channel in {r['seconds']:.2f} s -> {r['cmd_per_s'] / 1e6:.2f} M commands/s, "
            f"{r['cycles_per_s'] * a.channels / 1e6:.1f} M channel-cycles/s"
        )
    k = bench_kernel(hw, ss)
    print(
        f"kernel alone: {k['commands']:,} commands in {k['seconds']:.2f} s -> {k['cmd_per_s'] / 1e6:.1f} M commands/s"
    )
    bench_functional(hw, a.channels, a.functional_blocks, a.rows_per_block)


def bench_functional(hw, channels: int, blocks: int, rows_per_block: int) -> None:
    """The same streams with data: a GEMV's weights placed where the MACs read, x broadcast. The
    streams end without an epilogue, so the data path runs through sim.functional directly."""
    from ir import generate_inputs, generate_state
    from sim.engine import run_timing
    from sim.functional import Machine

    prog, placements = functional_program(hw, channels, blocks, rows_per_block)
    ss = make_streams(hw, channels, blocks, rows_per_block)
    ss.symbols, ss.placements = ["x", "gemv.out#acc"], placements
    st, inp = generate_state(prog), generate_inputs(prog)
    t0 = time.perf_counter()
    timed = run_timing(hw, ss.channels, ss.host, prog, False, len(ss.symbols))
    m = Machine(hw, ss, prog, st, inp, timed)
    t1 = time.perf_counter()
    m.run()
    dt = time.perf_counter() - t0
    n = int(sum(s["counts"].sum() for s in timed.channels))
    print(
        f"functional: {n:,} commands, {timed.makespan:,} cycles in {dt:.2f} s (timing + loading "
        f"{t1 - t0:.2f} s) -> {n / dt / 1e6:.2f} M commands/s, "
        f"{timed.makespan * channels / dt / 1e6:.2f} M channel-cycles/s"
    )


if __name__ == "__main__":
    main()
