"""One program's channel streams as single commands, and the orders the model keeps fixed.

`expand` turns every channel instruction into its bus commands (a sweep of `count` bursts is
`count` commands; an RDACC of `count` accumulators moves ceil(4 count / burst_bytes) bursts), each
with the banks, bank groups and ranks it touches (as the simulator counts them: sim/timing.py),
the accumulators and global-buffer burst it uses, and its emitted issue cycle (the simulator's
command log). SIG and WAIT split a channel stream into *segments*.

`fixed_edges` lists the pairs (a, b) whose order the model keeps: a before b, with a minimum
distance (1, or tGB from a WRGB to a MAC reading its burst). Everything else is free.
"""

from __future__ import annotations

from dataclasses import dataclass, field

import numpy as np

from hwmodel import Hardware
from hwmodel.isa import Instruction, make
from hwmodel.model import COMMANDS

ROW_OPS = ("ACT", "PRE", "REF", "REFSB")
LINK_OPS = ("RD", "WR", "WRGB", "RDACC")


@dataclass
class Command:
    ch: int  # channel
    j: int  # index among all commands of the model (channels in order)
    op: str
    banks: int  # bank mask (0: WRGB)
    groups: int  # bank-group mask
    ranks: int  # rank mask
    seg: int  # segment of its channel stream (SIG/WAIT split them)
    instr: int  # emitted instruction index
    k: int  # burst of that instruction
    t0: int  # emitted issue cycle
    ins: Instruction  # the single-burst instruction that re-emits it (unstamped)
    accs: tuple[tuple[int, int], ...] = ()  # (unit, accumulator) it adds into (MAC) or reads (RDACC)
    gb: int = -1  # global-buffer burst it reads (MAC) or writes (WRGB)


@dataclass
class ChannelStream:
    """A channel stream in emitted order: commands by segment, with the SIG/WAIT between."""

    ch: int
    items: list = field(default_factory=list)  # ("cmd", Command) | ("SIG", id) | ("WAIT", id)


def _bits(m: int) -> list[int]:
    return [b for b in range(m.bit_length()) if (m >> b) & 1]


def _single(hw: Hardware, ins: Instruction, k: int) -> tuple[Instruction, int, tuple, int]:
    """(burst k of `ins` as an instruction of its own, bank mask, accumulators, gb burst)."""
    f, E, nb = ins.fields(), hw.elements_per_burst, hw.organization.banks_per_channel
    op = ins.op
    if op in ("ACT", "PRE"):
        return ins, f["mask"], (), -1
    if op == "REF":
        return ins, (1 << nb) - 1, (), -1
    if op == "REFSB":
        return ins, 1 << f["bank"], (), -1
    if op == "MAC":
        one = make("MAC", mask=f["mask"], col=f["col"] + k, count=1, gb=f["gb"] + k, acc=f["acc"])
        units = sorted({hw.pu_of(b) for b in _bits(f["mask"])})
        return one, f["mask"], tuple((u, f["acc"]) for u in units), f["gb"] + k
    if op == "RD":
        one = make("RD", bank=f["bank"], col=f["col"] + k, count=1, dst=f["dst"], offset=f["offset"] + k * E)
        return one, 1 << f["bank"], (), -1
    if op == "WR":
        lanes = E if f["emask"] == 0xFFFF else bin(f["emask"]).count("1")
        one = make(
            "WR",
            bank=f["bank"],
            col=f["col"] + k,
            count=1,
            src=f["src"],
            offset=f["offset"] + k * lanes,
            emask=f["emask"],
        )
        return one, 1 << f["bank"], (), -1
    if op == "WRGB":
        one = make("WRGB", gb=f["gb"] + k, count=1, src=f["src"], offset=f["offset"] + k * E)
        return one, 0, (), f["gb"] + k
    if op == "RDACC":
        per = hw.organization.burst_bytes // 4
        a0, n = f["acc"] + k * per, min(per, f["count"] - k * per)
        one = make(
            "RDACC",
            bank=f["bank"],
            acc=a0,
            count=n,
            dst=f["dst"],
            offset=f["offset"] + k * per * f["stride"],
            stride=f["stride"],
        )
        u = hw.pu_of(f["bank"])
        return one, 1 << f["bank"], tuple((u, a) for a in range(a0, a0 + n)), -1
    raise ValueError(f"not a channel command: {op}")


def expand(hw: Hardware, channels, logs: list[np.ndarray]) -> tuple[list[ChannelStream], list[Command]]:
    """Channel streams as single commands. `logs[c]`: the simulator's command log rows of channel
    c in issue order (their `cycle` and `instr`), which gives every command's emitted cycle."""
    org = hw.organization
    out, cmds = [], []
    for c, stream in enumerate(channels):
        log = logs[c]
        cs, seg, pos = ChannelStream(c), 0, 0
        for i, ins in enumerate(stream):
            if ins.op in ("SIG", "WAIT"):
                cs.items.append((ins.op, ins.get("id")))
                seg += 1
                continue
            n = 0
            while pos + n < len(log) and int(log["instr"][pos + n]) == i:
                n += 1
            if n == 0:
                raise ValueError(f"channel {c} instruction {i}: no commands in the log")
            for k in range(n):
                one, banks, accs, gb = _single(hw, ins, k)
                if ins.op == "WRGB":
                    groups, ranks = (1 << (org.ranks * org.bank_groups)) - 1, (1 << org.ranks) - 1
                else:
                    groups = ranks = 0
                    for b in _bits(banks):
                        groups |= 1 << org.bank_group_of(b)
                        ranks |= 1 << org.rank_of(b)
                cmd = Command(
                    c, len(cmds), ins.op, banks, groups, ranks, seg, i, k, int(log["cycle"][pos + k]), one, accs, gb
                )
                cmds.append(cmd)
                cs.items.append(("cmd", cmd))
            pos += n
        out.append(cs)
    return out, cmds


def fixed_edges(hw: Hardware, streams: list[ChannelStream]) -> list[tuple[int, int, int]]:
    """(a, b, d): command a issues at least d cycles before b, whatever the schedule. Per channel:

    * each bank's commands (every command whose bank mask holds it: ACT, PRE, RD, WR, MAC, the
      RDACC of the unit's first bank, REF, REFSB) in emitted order (bank state and bank data);
    * each (unit, accumulator)'s MACs and RDACC bursts in emitted order (fp32 sums in the same
      order: bit-true);
    * each global-buffer burst: its WRGB, then the MACs reading that content (d = tGB), then
      the next WRGB of the burst (the readers among themselves are free);
    * the link commands (RD, WR, WRGB, RDACC) in emitted order (host memory order);
    * the row commands (ACT, PRE, REF, REFSB) in emitted order;
    * a REF or REFSB is a barrier: every command before it in the stream stays before it, every
      command after stays after;
    * SIG and WAIT are barriers between segments (a segment's commands all issue after the
      previous segment's).
    Chains are returned as their consecutive pairs; the segment barriers are the model's
    (`segments`)."""
    tgb = hw.timing.p("tGB")
    edges: list[tuple[int, int, int]] = []
    for cs in streams:
        cmds = [x for kind, x in cs.items if kind == "cmd"]
        chains: dict[tuple, list[Command]] = {}
        for x in cmds:
            for b in _bits(x.banks):
                chains.setdefault(("bank", b), []).append(x)
            for ua in x.accs:
                chains.setdefault(("acc", ua), []).append(x)
            if x.op in LINK_OPS:
                chains.setdefault(("link",), []).append(x)
            if x.op in ROW_OPS:
                chains.setdefault(("row",), []).append(x)
        for chain in chains.values():
            edges += [(a.j, b.j, 1) for a, b in zip(chain, chain[1:])]
        last_w: dict[int, Command] = {}
        readers: dict[int, list[Command]] = {}
        for x in cmds:
            if x.gb < 0:
                continue
            if x.op == "WRGB":
                edges += [(r.j, x.j, 1) for r in readers.get(x.gb, [])]
                if x.gb in last_w and not readers.get(x.gb):
                    edges.append((last_w[x.gb].j, x.j, 1))
                last_w[x.gb], readers[x.gb] = x, []
            else:
                if x.gb in last_w:
                    edges.append((last_w[x.gb].j, x.j, tgb))
                readers.setdefault(x.gb, []).append(x)
        # refresh barriers
        for i, x in enumerate(cmds):
            if x.op in ("REF", "REFSB"):
                edges += [(y.j, x.j, 1) for y in cmds[:i]] + [(x.j, y.j, 1) for y in cmds[i + 1 :]]
    return edges


def segments(cs: ChannelStream) -> list[list[Command]]:
    """The commands of each segment (between SIG/WAIT), in emitted order (empty ones kept)."""
    segs: list[list[Command]] = [[]]
    for kind, x in cs.items:
        if kind == "cmd":
            segs[-1].append(x)
        else:
            segs.append([])
    return segs


COMMAND_INDEX = {c: i for i, c in enumerate(COMMANDS)}
