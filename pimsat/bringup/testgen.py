"""Test programs for bring-up (issue 17 item 2): each a bundle, like a compiled instance's.

A generated test runs on a small container program, a gemv of NACC outputs over K = 1024 inputs
(`ir.kernels.gemv_program`): its input `x` is the host source of every WR and WRGB, its weight
the bank data (placed in two-row chunks), `gemv.weight#host` the destination of RDs and
`gemv.out#acc` of RDACCs. Every channel stream ends with its banks precharged, an RDACC of PIM
unit 0 into every staging element and a SIG; the host waits for them and runs the epilogue (a
sync between the host and the channel streams in every test). Commands are left unstamped: the
simulator issues each at its earliest legal cycle, and the bundle holds those stamps.

    random      constrained-random (riscv-dv style), legal by construction: a state machine over
                the banks' open rows and the written global-buffer bursts chooses ACT / PRE / MAC /
                WRGB / RD / WR / RDACC / REF with random masks, rows, columns, counts,
                accumulators, global-buffer slots, element masks and strides (directed.py: the
                directed tests)
    instances   the compiled fpga-tier instances
"""

from __future__ import annotations

from dataclasses import dataclass, field
from enum import StrEnum

import numpy as np

from hwmodel import load_hardware
from hwmodel.isa import ISA_VERSION, Instruction, make
from hwmodel.model import Hardware
from hwmodel.streams import Placement, StreamSet
from ir.kernels import gemv_program

from .bundle import Compiled

K = 1024  # elements of the container's input vector (the WR / WRGB source)
SYMBOLS = ["x", "gemv.weight#host", "gemv.out#acc"]
X, WHOST, YACC = range(3)
CHUNK_ROWS = 2  # weight placed in chunks of this many rows


class GenKind(StrEnum):
    DIRECTED = "directed"
    RANDOM = "random"
    INSTANCES = "instances"


@dataclass
class GeneratedTest:
    name: str
    kind: GenKind
    hw: Hardware
    channels: list[list[Instruction]]
    seed: int = 0
    exercises: dict = field(default_factory=dict)  # what the test is for (rows, fields, modes)

    def compiled(self) -> Compiled:
        prog = gemv_program(self.hw.pim.acc_registers, K)
        host: list[Instruction] = [make("WAIT", id=c) for c, s in enumerate(self.channels) if s]
        host.append(make("EPI", op=0))
        ss = StreamSet(self.hw.name, ISA_VERSION, list(SYMBOLS), self.channels, host, weight_placements(self.hw))
        test = {"kind": self.kind.value, "name": self.name, "seed": self.seed, **self.exercises}
        instance = {"name": self.name, "tier": "testgen", "seed": self.seed, "program": {"kind": "testgen"}}
        return Compiled(self.hw, prog, ss, self.seed, instance, f"testgen-{self.kind.value}", test)


def prototype(overrides: list[str] | None = None) -> Hardware:
    return load_hardware("fpga-proto", list(overrides or []))


def weight_placements(hw: Hardware) -> list[Placement]:
    """The container's weight laid out in chunks of CHUNK_ROWS rows, channel by channel and bank
    by bank from row 0 (a fixed layout: every test knows where data is)."""
    org = hw.organization
    per_chunk = CHUNK_ROWS * org.columns * hw.elements_per_burst
    total = hw.pim.acc_registers * K
    out, elem, slot = [], 0, 0
    while elem < total:
        ch, bank = slot % org.channels, (slot // org.channels) % org.banks_per_channel
        row = CHUNK_ROWS * (slot // (org.channels * org.banks_per_channel))
        n = min(per_chunk, total - elem)
        out.append(Placement("gemv.weight", ch, bank, row, 0, elem, n))
        elem += n
        slot += 1
    return out


def epilogue(hw: Hardware, stream: list[Instruction], openrow: list[int], ch: int) -> list[Instruction]:
    """Close the open banks, read PIM unit 0's accumulators into every staging element, signal."""
    mask = sum(1 << b for b, r in enumerate(openrow) if r >= 0)
    if mask:
        stream.append(make("PRE", mask=mask))
    nacc = hw.pim.acc_registers
    stream.append(make("RDACC", bank=0, acc=0, count=nacc, dst=YACC, offset=0, stride=1))
    stream.append(make("SIG", id=ch))
    return stream


# ---- constrained-random --------------------------------------------------------------------------
class RandomChannel:
    """One channel's random stream, legal by construction (see the module docstring)."""

    def __init__(self, hw: Hardware, rng: np.random.Generator):
        self.hw, self.rng = hw, rng
        org = hw.organization
        self.nb, self.rows, self.cols = org.banks_per_channel, org.rows, org.columns
        self.ngb, self.nacc, self.bpp = hw.gb_bursts, hw.pim.acc_registers, hw.pim.banks_per_pu
        self.e = hw.elements_per_burst
        self.openrow = [-1] * self.nb
        self.gb = [False] * self.ngb
        self.refs = 0
        self.out: list[Instruction] = []

    def _subset(self, banks: list[int]) -> int:
        pick = [b for b in banks if self.rng.random() < 0.5] or [int(self.rng.choice(banks))]
        return sum(1 << b for b in pick)

    def _row(self) -> int:  # rows holding weight data more often than not
        return int(self.rng.integers(0, 8)) if self.rng.random() < 0.7 else int(self.rng.integers(0, self.rows))

    def step(self) -> None:
        r = self.rng
        closed = [b for b in range(self.nb) if self.openrow[b] < 0]
        opened = [b for b in range(self.nb) if self.openrow[b] >= 0]
        choices = ["WRGB", "RDACC"] + ["ACT"] * bool(closed) + ["PRE"] * bool(opened)
        choices += ["MAC", "MAC", "RD", "WR"] * bool(opened) + ["REF"] * (self.refs < 4)
        op = choices[int(r.integers(0, len(choices)))]
        if op == "ACT":
            mask, row = self._subset(closed), self._row()
            self.out.append(make("ACT", mask=mask, row=row))
            for b in range(self.nb):
                if (mask >> b) & 1:
                    self.openrow[b] = row
        elif op == "PRE":
            mask = self._subset(opened)
            self.out.append(make("PRE", mask=mask))
            for b in range(self.nb):
                if (mask >> b) & 1:
                    self.openrow[b] = -1
        elif op == "REF":
            if opened:
                self.out.append(make("PRE", mask=sum(1 << b for b in opened)))
                self.openrow = [-1] * self.nb
            self.out.append(make("REF"))
            self.refs += 1
        elif op == "WRGB":
            g = int(r.integers(0, self.ngb))
            n = int(r.integers(1, self.ngb - g + 1))
            self.out.append(make("WRGB", gb=g, count=n, src=X, offset=int(r.integers(0, K))))
            self.gb[g : g + n] = [True] * n
        elif op == "MAC":
            self._mac(opened)
        elif op in ("RD", "WR"):
            b = int(r.choice(opened))
            col = int(r.integers(0, self.cols))
            n = int(r.integers(1, self.cols - col + 1))
            if op == "RD":
                size = self.nacc * K
                self.out.append(make("RD", bank=b, col=col, count=n, dst=WHOST, offset=int(r.integers(0, size))))
            else:
                emask = int(r.integers(1, 1 << self.e)) if r.random() < 0.6 else (1 << self.e) - 1
                self.out.append(make("WR", bank=b, col=col, count=n, src=X, offset=int(r.integers(0, K)), emask=emask))
        else:
            self._rdacc()

    def _mac(self, opened: list[int]) -> None:
        r = self.rng
        written = [g for g in range(self.ngb) if self.gb[g]]
        if not written:
            return self.step_wrgb_first()
        by_pu: dict[int, list[int]] = {}
        for b in opened:
            by_pu.setdefault(b // self.bpp, []).append(b)
        banks = [int(r.choice(bs)) for bs in by_pu.values() if r.random() < 0.7] or [int(r.choice(opened))]
        g = int(r.choice(written))
        run = 1
        while g + run < self.ngb and self.gb[g + run]:
            run += 1
        col = int(r.integers(0, self.cols))
        n = int(r.integers(1, min(run, self.cols - col) + 1))
        mask = sum(1 << b for b in banks)
        self.out.append(make("MAC", mask=mask, col=col, count=n, gb=g, acc=int(r.integers(0, self.nacc))))

    def step_wrgb_first(self) -> None:
        self.out.append(make("WRGB", gb=0, count=self.ngb, src=X, offset=0))
        self.gb = [True] * self.ngb

    def _rdacc(self) -> None:
        r = self.rng
        pu = int(r.integers(0, self.nb // self.bpp))
        a = int(r.integers(0, self.nacc))
        n = int(r.integers(1, self.nacc - a + 1))
        stride = int(r.integers(0, 2))
        span = stride * (n - 1)
        off = int(r.integers(0, self.nacc - span))
        self.out.append(make("RDACC", bank=pu * self.bpp, acc=a, count=n, dst=YACC, offset=off, stride=stride))


def random_case(seed: int, steps: int = 40) -> GeneratedTest:
    hw = prototype()
    rng = np.random.default_rng(seed)
    channels = []
    for ch in range(hw.organization.channels):
        g = RandomChannel(hw, rng)
        for _ in range(int(rng.integers(steps // 2, steps + 1))):
            g.step()
        channels.append(epilogue(hw, g.out, g.openrow, ch))
    counts: dict[str, int] = {}
    for s in channels:
        for i in s:
            counts[i.op] = counts.get(i.op, 0) + 1
    return GeneratedTest(
        f"random-{seed:06d}", GenKind.RANDOM, hw, channels, seed, {"instructions": dict(sorted(counts.items()))}
    )
