"""Plain DRAM traffic as pimsat streams: per-command workloads for the simulator's throughput.

    .venv/bin/python bench/dram_traffic.py OUT_DIR [--kind random|sequential] [--commands 2750000]
        [--writes 0.333] [--row-hits 0.25] [--preset hbm2-pim] [--channels 1] [--seed 0]

Writes a stream directory (`pimsat simulate OUT_DIR` reads it): each channel a legal,
unstamped stream of ACT, PRE, RD, WR and REF, one burst per RD/WR, `--writes` of the accesses
writes. random: every access picks a bank at random and hits its open row with probability
`--row-hits`, else closes it and opens a random row (PRE, ACT). sequential: bank after bank,
the columns of a row in order, then the next row. A REF (after a PRE of every bank) comes
every `tREFI / 4` commands (sequential: `tREFI / 8`), so refresh never falls behind (an early REF
waits for its credit). The command count is approximate (within one access).
"""

from __future__ import annotations

import argparse
from pathlib import Path

import numpy as np

from hwmodel import load_hardware
from hwmodel.isa import Instruction
from hwmodel.streams import StreamSet
from hwmodel.streams_io import write_streams


def channel_traffic(
    hw,
    kind: str,
    commands: int,
    writes: float,
    row_hits: float,
    seed: int,
    window: int = 16,
    ref_every: int | None = None,
) -> list[Instruction]:
    """Accesses in windows of `window` (the way a controller looks ahead): the window's row
    misses are closed (PRE) and opened (ACT) first, then its reads and writes issue, so an
    in-order stream keeps several banks busy at once. A window takes at most one access per bank."""
    org = hw.organization
    nb, rows, cols = org.banks_per_channel, org.rows, org.columns
    rng = np.random.default_rng(seed)
    # commands between two REFs: random traffic issues about one command per 4 cycles; sequential
    # traffic's row hits are column commands about tCCD_L apart with read/write turnarounds, so
    # twice as many cycles per command (at tREFI / 4 it falls behind on refresh)
    ref_every = ref_every or hw.timing.p("tREFI") // (8 if kind == "sequential" else 4)
    all_banks = (1 << nb) - 1
    pre_all, ref = Instruction("PRE", (all_banks,)), Instruction("REF", ())
    open_row = [-1] * nb
    out: list[Instruction] = []
    n_acc = 4 * commands  # draws in bulk (a window skips draws of a bank it already has)
    bank = rng.integers(0, nb, n_acc).tolist()
    hit = (rng.random(n_acc) < row_hits).tolist()
    row = rng.integers(0, rows, n_acc).tolist()
    col = rng.integers(0, cols, n_acc).tolist()
    wr = (rng.random(n_acc) < writes).tolist()
    seq = [0, 0, 0]  # bank, row, column of the sequential walk
    k = 0
    last_ref = 0
    while len(out) < commands and k < n_acc:
        if len(out) - last_ref >= ref_every:
            if any(r >= 0 for r in open_row):
                out.append(pre_all)
                open_row = [-1] * nb
            out.append(ref)
            last_ref = len(out)
        acc: list[tuple[int, int, int, bool]] = []
        used: set[int] = set()
        while len(acc) < window and k < n_acc:
            if kind == "random":
                b, c = bank[k], col[k]
                r = open_row[b] if hit[k] and open_row[b] >= 0 else row[k]
            else:
                b, r, c = seq
                seq[0] = (b + 1) % nb
                if seq[0] == 0:
                    seq[2] = (c + 1) % cols
                    if seq[2] == 0:
                        seq[1] = (r + 1) % rows
            if b in used:
                if kind == "random":
                    k += 1
                    continue
                break
            used.add(b)
            acc.append((b, r, c, wr[k]))
            k += 1
        for b, r, _c, _w in acc:
            if open_row[b] >= 0 and open_row[b] != r:
                out.append(Instruction("PRE", (1 << b,)))
        for b, r, _c, _w in acc:
            if open_row[b] != r:
                out.append(Instruction("ACT", (1 << b, r)))
                open_row[b] = r
        for b, _r, c, w in sorted(acc, key=lambda a: a[3]):  # reads, then writes: one turnaround
            out.append(Instruction("WR", (b, c, 1, 0, 0, 0)) if w else Instruction("RD", (b, c, 1, 0, 0)))
    if any(r >= 0 for r in open_row):
        out.append(pre_all)
    return out


def traffic_streams(
    hw, kind: str, commands: int, writes: float, row_hits: float, channels: int, seed: int, ref_every: int | None = None
) -> StreamSet:
    chans = [
        channel_traffic(hw, kind, commands, writes, row_hits, seed + c, ref_every=ref_every) for c in range(channels)
    ]
    return StreamSet(hw.name, hw.isa_version, ["data"], chans, [])


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    ap.add_argument("out", type=Path)
    ap.add_argument("--kind", choices=("random", "sequential"), default="random")
    ap.add_argument("--commands", type=int, default=2_750_000, help="commands per channel (about)")
    ap.add_argument("--writes", type=float, default=1 / 3)
    ap.add_argument("--row-hits", type=float, default=0.25)
    ap.add_argument("--preset", default="hbm2-pim")
    ap.add_argument("--channels", type=int, default=1)
    ap.add_argument("--seed", type=int, default=0)
    ap.add_argument(
        "--ref-every",
        type=int,
        default=None,
        help="commands between two REFs (default tREFI / 4, sequential tREFI / 8)",
    )
    a = ap.parse_args()
    hw = load_hardware(a.preset)
    ss = traffic_streams(hw, a.kind, a.commands, a.writes, a.row_hits, a.channels, a.seed, a.ref_every)
    write_streams(ss, a.out, {"workload": {"kind": a.kind, "writes": a.writes, "row_hits": a.row_hits, "seed": a.seed}})
    print(f"{a.out}: {ss.instruction_count():,} instructions on {a.channels} channel(s) of {hw.name}")


if __name__ == "__main__":
    main()
