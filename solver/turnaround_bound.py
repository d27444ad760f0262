"""The gaps that buffer loads and accumulator read-outs force into a channel's MAC stream: the
channel view of the hardware bound's STREAMING term (solver/hardware_bound.py, issue 16).

Phases. A PIM unit's MACs read the channel's global buffer (B = pim.global_buffer_bytes /
burst_bytes bursts, written only by WRGB) and add into one of its A = pim.acc_registers
accumulators, which only RDACC empties. A *phase* of a unit is a maximal run of its MACs with no
WRGB of the channel and no RDACC of that unit between them. Within a phase the buffer holds at
most B bursts and each accumulator one output (products of two outputs added into one
accumulator are lost: the read-out is their sum), so a unit does at most A x B MACs per phase:
each pairs one of its <= A outputs with one of the <= B buffer bursts, and a pair MAC'd twice is
only more work. This holds for every op, batch and placement (a row split, a k split, fused ops:
an output is an (op, row, vector)). A unit with U MACs has Phi >= U / (A B) phases, so at least
Phi - 1 of the gaps between two consecutive MACs of the channel hold a WRGB or an RDACC of it.

What a gap costs beyond the MAC spacing s = mac_interval (charged to every MAC already), from
the timing-table rows (Timing.rule, so an overridden row moves it):

- a *load gap* (w >= 1 WRGBs): MAC -> WRGB (rtw) and WRGB -> MAC (wtr) hold between any MAC and
  any WRGB of the channel (a WRGB names every bank group and rank), so it is at least rtw + wtr:
  E_w = rtw + wtr - s. On a data_bus device these are the read-to-write and write-to-read
  turnarounds (hbm2-pim 16 + 19 - 4 = 31); a dedicated path has no such rows: E_w = 0 and the
  whole term vanishes (gddr6-aim).
- a *read-out gap* (RDACCs only, a >= 1 of them): MAC -> RDACC (tMACL), RDACC -> RDACC (rsp)
  and RDACC -> MAC are channel rows: at least E_r + (a - 1) rsp, E_r = tMACL + RDACC -> MAC - s.
  A gap holding both is a load gap: its two rows still hold.

Phases alone. A row split needs one load per buffer-full of the input; a k split needs only its
slice of it (few loads) but gives each unit more outputs (more read-outs). A load gap is a
boundary for every unit at once; a read-out gap only for the units it reads, each with an RDACC of
its own. With G_w load gaps, unit u needs (Phi_u - 1 - G_w)^+ read-out gaps with an RDACC of its
own; the read-out gaps' cost, E_r - rsp + rsp x a, is convex in a, so over the P units of a
channel they cost at least (Phibar - 1 - G_w)^+ x E_ro with E_ro = min(E_r + (P - 1) rsp,
P max(0, E_r)) (all P units read in each gap when E_r >= rsp, one RDACC per gap otherwise), Phibar
the units' mean phase count. That is linear in G_w, so the channel pays at least
(Phibar - 1) x min(E_w, E_ro) whatever mix of loads and read-outs a program picks (hbm2-pim 31, the
load's turnarounds). E_net (link reads, below) keeps this count; E_gap takes a sharper one.

Pairs: what a gap buys. The phase count lets a gap with one WRGB open a whole new phase. It
does not: a MAC pairs an accumulator *lifetime* (from the RDACC that cleared it, or the start, to
the next) with a buffer *content* (one WRGB's write of one burst, until the next write of that
burst), and two MACs with the same pair compute the same product (the same output, the same input
burst): a unit's useful MACs are distinct pairs of a lifetime and a content live at once. Sweeping
the unit's run in time, those pairs are the A x B live at its first MAC plus, per gap, the ones the
gap's writes and clears open: w WRGBs rewrite at most m = min(w, B) bursts and c cleared
accumulators start c lifetimes, which opens at most A m + c (B - m) pairs (the new lifetimes with
every content, the old ones with the new contents). An RDACC command clears at most
C = min(A, burst_bytes / 4) accumulators of one unit (it moves ceil(4 count / burst_bytes)
bursts, one command each), so a gap with a RDACC commands opens at most
P A m + (B - m) min(a C, P A) pairs over the channel's P units. It costs at least the least,
over the orders of its commands, of the cycles from MAC to MAC that the rows between every two
of them (MAC -> each, each -> each later one, each -> MAC) and the bus's one command per cycle
force, less s (`gap_costs`). A channel whose units do
U_c MACs then pays at least (U_c - P A B) x rho beyond the MAC spacing, rho the least cost per
opened pair over every (w, a): E_gap = rho x P A B per A x B MACs of a unit, as if each phase
cost E_gap (`boundary_cost`; a gap opens at most P A B pairs, so a REF hides at most one E_gap, as
below). What it prices: a row split reloads all B bursts per buffer-full of the input
(E_w + (B - 1) x WRGB spacing); a k split that gives each channel one buffer-full of k never
reloads and reads out all P A accumulators instead (E_r + (P A / C - 1) rsp). hbm2-pim: a load
16 + 7 x 2 + 19 - 4 = 45, the read-outs of all 8 units 22 + 7 x 2 + 2 - 4 = 34, each per 512
pairs, and no mix is cheaper: E_gap 34 (31 by phases alone); hbm3-pim (A = 16, two RDACCs a unit,
B = 64): a load 17 + 63 x 2 + 19 - 4 = 158, all 64 read-outs 16 + 63 x 2 + 2 - 4 = 140: E_gap
140 (32); fpga-proto (two units a channel): the read-outs, 22.

The first load. Before a channel's first MAC a WRGB wrote the buffer: that MAC is at least wtr
after cycle 0, counted as min(wtr, E_gap) so that no counted item exceeds one gap's count.

The channel. Its MAC commands are at least its busiest unit's MACs, so a channel whose units do
U_c MACs is busy at least U_c / P x s + (U_c / (P A B) - 1) x E_gap + min(wtr, E_gap). That grows
with U_c, so the busiest channel is at least this at U_c = U / channels: a rate of E_gap / (A B)
per unit MAC on top of s, plus `first_fill` = min(wtr, E_gap) - E_gap <= 0 once.

Link reads (a gemv's rows run on the host read their weights over the channel's link). The unit
view of STREAMING charges a read's slot (tLINK, or tCCD_S in one rank) on top of the MACs, as if
the channel's column path carried one or the other; this view assumes the same (the table itself
has no row between MAC and RD), and lets the reads sit inside the gaps: in a load gap a read
before the first WRGB precedes it by RD -> WRGB, one after the last follows it by WRGB -> RD
(and its slot ends before the next MAC), one between two WRGBs does both, so a load gap with
reads still costs E_w' = min(rtw, s - r + RD -> WRGB) + min(wtr, WRGB -> RD) - s beyond its reads'
slots r (hbm2-pim 16 + 14 - 4 = 26); a read-out gap E_r' = min(tMACL, s - r + RD -> RDACC) +
min(RDACC -> MAC, RDACC -> RD) - s, each further RDACC rsp' = min(rsp, RDACC -> RD + RD -> RDACC -
r) (hbm2-pim 2 and 2; E_ro' = min(E_r' + (P - 1) rsp', P E_r') = 16): E_net = min(E_w', E_ro').
A channel's time beyond its MACs is then at least both sum(E_gap) and sum(E_net) + its reads,
hence any convex combination: `share` x E_gap + (1 - share) x E_net per phase plus 1 - share of
the reads (solver/hardware_bound.op_work). share = 1 needs no assumption about reads at all.

Refresh. A REF between two MACs makes that gap at least tRFC + s (the unit view's argument) with
the turnaround rows still holding: a gap holds max, not sum, so each REF can hide one counted gap,
and refresh stretches the work by max(0, tRFC - counted) per tREFI (`refresh_busy`). A REFSB
(per-bank refresh) stops no command of the other units: nothing.

Refresh and the end (`ChannelEnds`, tighter than the paragraph above where it binds). An all-bank
REF needs every bank precharged and every bank activated again after it. A cluster of REFs
(back to back, REF -> REF tRFC) between two consecutive column commands X, Y of the channel
(MACs, or link reads in the share-0 count) makes their gap at least X -> PRE (tRTP, the lesser
of MAC -> PRE and RD -> PRE) + PRE -> REF (tRP) + tRFC per REF + ACT -> Y (tRCD, the lesser of
tRCDMAC and tRCDRD); X's slot (s, or the read spacing r: the larger) and at most one counted
boundary lie in it, so beyond its REFs' tRFC it adds `mid` = tRTP + tRP + tRCD - max(s, r) -
counted. A cluster before the first column command: that command comes tRFC per REF + tRCD
after it, where share x min(wtr, E_gap) was counted: `first` = tRCD - share x min(wtr, E_gap). A
cluster after the last command L: the program ends at least tRTP + tRP + its REFs' tRFC after L,
where L's slot was counted: `last` = tRTP + tRP - max(s, r); after a MAC, more: its unit's
read-out RDACC (tMACL after it) precedes the cluster by RDACC -> PRE + PRE -> REF, or follows it
by REF -> RDACC and then takes its data and the host's tail (`end_costs`), and where the host
runs no part of a gemv every counted command is a MAC (tRCDMAC, MAC -> PRE, s). Without one, it ends at least
`tail` after L's slot: after a MAC, tMACL to the RDACC of its accumulator, that read-out's data
(CL_ACC + BL2), the sync and the least epilogue of any op in memory (one head's share of an
attention epilogue, no launch: a launch may have been paid before, chain = 1); after a link read
(share-0 count) its data alone (CL + BL2). Every REF of a cluster but its first costs tRFC exactly,
so with e = min(mid, first): n REFs add n tRFC + n e when e < 0 (each at least tRFC + e >= tRFC
- counted: never less than the paragraph above), n tRFC + e when e >= 0 (at least one cluster);
and either no cluster follows L (+ tail) or one does (+ last, the other n - 1 REFs as before):
the lesser. A REFSB (per-bank refresh) stops no other unit: only the tail counts.

Left out, so that it holds: a one-bank unit's row changes (they idle that unit only; the unit view
charges them, and STREAMING takes the larger view); the WRGBs' own slots in E_net (the link reads'
count) and the last read-out after the last MAC. An op's own chain (CRITICAL_PATH) uses the same
rate: its MAC gaps are gaps of its channels whatever runs between them.
"""

from __future__ import annotations

from dataclasses import dataclass
from functools import lru_cache
from math import ceil

from hwmodel import Hardware
from hwmodel.model import completion_cycles


@dataclass(frozen=True)
class PhaseGaps:
    """What buffer loads and read-outs add to a channel's MAC stream (module docstring)."""

    gap: int  # E_gap: the least a phase boundary costs beyond the MAC spacing, loads or read-outs
    net: int  # E_net: the same beyond the link reads the boundary's gaps may carry
    macs_per_phase: int  # A x B: a unit's MACs between two boundaries, at most
    first_load: int  # wtr: WRGB -> MAC, before the channel's first MAC

    def counted(self, share: float = 1.0) -> float:
        """What one phase boundary adds when `share` of E_gap and 1 - share of E_net count."""
        return share * self.gap + (1.0 - share) * self.net

    def per_mac(self, share: float = 1.0) -> float:
        """Cycles a unit's MAC adds to its channel's work: one boundary per A x B MACs."""
        return self.counted(share) / self.macs_per_phase

    def first_fill(self, share: float = 1.0) -> float:
        """The constant charged once per channel with MACs (<= 0): the first load, min(wtr,
        E_gap), in place of a boundary."""
        return share * min(self.first_load, self.gap) - self.counted(share)

    def refresh_busy(self, busy: int, share: float = 1.0) -> int:
        """What a refresh keeping the channel `busy` cycles adds once it may hide a boundary."""
        return max(0, busy - ceil(self.counted(share)))


@dataclass(frozen=True)
class ChannelEnds:
    """What REFs and the channel's last column command add to its work in the channel view, at
    one share (module docstring, "Refresh and the end")."""

    trfc: int  # each all-bank REF (0: per-bank refresh, nothing)
    mid: float  # a REF cluster between two column commands, beyond its REFs' tRFC
    first: float  # a cluster before the first column command
    last: float  # a cluster after the last one
    tail: float  # no cluster after the last one: read-out, sync, an epilogue

    def extra(self, n: int) -> float:
        """Beyond n x tRFC, when the channel issues n REFs."""
        if n == 0 or self.trfc == 0:
            return self.tail
        e = min(self.mid, self.first)

        def clusters(m: int) -> float:
            return m * e if e < 0 else (e if m else 0.0)

        return min(clusters(n) + self.tail, self.last + clusters(n - 1))

    def stretch(self, tREFI: int, work: float) -> int:
        """Least T >= work with T >= work + n x tRFC + extra(n), n = floor(T / tREFI) (the REFs owed
        by T: JEDEC leaves none owed at the end). n x tRFC + extra(n) never falls as n grows
        (tRFC + e >= 0), so the iteration from below stops at the least such T."""
        if self.trfc >= tREFI:
            raise ValueError(f"refresh tRFC {self.trfc} >= tREFI {tREFI}: no time left for work")
        t = max(0, ceil(work - 1e-6))
        while True:
            n = t // tREFI
            need = max(t, ceil(work + n * self.trfc + self.extra(n) - 1e-6))
            if need == t:
                return t
            t = need


def end_costs(hw: Hardware, host_tail: float, reads: bool) -> tuple[int, int, float, float]:
    """(ACT -> first column command, X -> PRE, `last`, `tail`) of ChannelEnds for a channel whose
    column commands are MACs and, with `reads`, link reads (module docstring). After the last MAC
    L a REF cluster comes after the read-out of its unit (RDACC >= L + tMACL, that unit's bank
    precharged RDACC -> PRE after it, then PRE -> REF) or the read-out comes after the cluster
    (REF -> RDACC, its data, the host's tail): the lesser, and at least L -> PRE -> REF."""
    t, s, r = hw.timing, hw.mac_interval, link_read_spacing(hw)
    comp = completion_cycles(t)
    pre_ref, trfc = t.rule("PRE", "REF", "rank"), t.rule("REF", "ACT", "rank")
    mac_pre, rd_pre = t.rule("MAC", "PRE", "bank"), t.rule("RD", "PRE", "bank")
    readout = t.rule("MAC", "RDACC", "channel")
    last_mac = max(
        mac_pre + pre_ref - s,
        min(
            readout + t.rule("RDACC", "PRE", "bank") + pre_ref - s,
            mac_pre + pre_ref + t.rule("REF", "RDACC", "rank") - trfc + comp["RDACC"] + host_tail - s,
        ),
    )
    tail_mac = readout + comp["RDACC"] + host_tail - s
    if not reads:
        return t.rule("ACT", "MAC", "bank"), mac_pre, last_mac, max(0.0, tail_mac)
    return (
        min(t.rule("ACT", "MAC", "bank"), t.rule("ACT", "RD", "bank")),
        min(mac_pre, rd_pre),
        min(last_mac, rd_pre + pre_ref - r),
        max(0.0, min(tail_mac, comp["RD"] - r)),
    )


def channel_ends(hw: Hardware, gaps: PhaseGaps, share: float, host_tail: float, reads: bool = True) -> ChannelEnds:
    """ChannelEnds at `share` (`host_tail`: the sync and the least epilogue, without a launch, of
    the program's ops in memory; `reads`: the host runs part of a gemv, its weights read over
    the link, else every column command counted is a MAC)."""
    t, s = hw.timing, hw.mac_interval
    slot = max(s, link_read_spacing(hw)) if reads else s
    rcd, rtp, last, tail = end_costs(hw, host_tail, reads)
    _, _, last_m, tail_m = end_costs(hw, host_tail, False)
    return ChannelEnds(
        trfc=t.rule("REF", "ACT", "rank") if t.refresh_mode == "all_bank" else 0,
        mid=rtp + t.rule("PRE", "REF", "rank") + rcd - slot - gaps.counted(share),
        first=rcd - share * min(gaps.first_load, gaps.gap),
        # at share 1 only MACs are counted: the last counted command is a MAC
        last=share * last_m + (1.0 - share) * last,
        tail=share * tail_m + (1.0 - share) * tail,
    )


def link_read_spacing(hw: Hardware) -> int:
    """Cycles a read to the host holds a channel: one burst per tLINK, and per tCCD_S in one rank."""
    return max(hw.link_cycles, hw.timing.rule("RD", "RD", "rank") if hw.organization.ranks == 1 else 0)


@dataclass(frozen=True)
class GapTurns:
    """The table's least cycles between two commands of a phase boundary (WRGB loads, RDACC
    read-outs) and the MACs around it, whatever their banks (module docstring)."""

    to_load: int  # MAC -> WRGB
    load_spacing: int  # WRGB -> WRGB
    load_to_mac: int  # WRGB -> MAC
    to_readout: int  # MAC -> RDACC (tMACL)
    readout_spacing: int  # RDACC -> RDACC
    readout_to_mac: int  # RDACC -> MAC
    readout_to_load: int  # RDACC -> WRGB
    load_to_readout: int  # WRGB -> RDACC


def gap_costs(turns: GapTurns, s: int, loads: int, readouts: int) -> list[list[int]]:
    """cost[w][a]: the least cycles beyond the MAC spacing `s` of a gap between two MACs that
    holds w WRGBs and a RDACC commands (w <= `loads`, a <= `readouts`), over every order of them.
    Every row holds between every two of its commands, not only consecutive ones, and the bus
    carries one command per cycle; of a kind, the last one's rows bind the next command (same
    latency, later issue), so an order's issue cycles follow from the last WRGB's and the last
    RDACC's: the Pareto-least such pairs per (w, a)."""
    none = -(1 << 30)  # no command of that kind yet
    fronts: list[list[set[tuple[int, int]]]] = [[set() for _ in range(readouts + 1)] for _ in range(loads + 1)]
    fronts[0][0].add((none, none))
    for w in range(loads + 1):
        for a in range(readouts + 1):
            front = _pareto(fronts[w][a])
            fronts[w][a] = front
            for last_w, last_r in front:
                bus = max(0, last_w, last_r) + 1  # one command per cycle on the bus
                if w < loads:
                    t = max(turns.to_load, last_w + turns.load_spacing, last_r + turns.readout_to_load, bus)
                    fronts[w + 1][a].add((t, last_r))
                if a < readouts:
                    t = max(turns.to_readout, last_w + turns.load_to_readout, last_r + turns.readout_spacing, bus)
                    fronts[w][a + 1].add((last_w, t))
    return [
        [
            min(max(lw + turns.load_to_mac, lr + turns.readout_to_mac, lw + 1, lr + 1, s) for lw, lr in fronts[w][a])
            - s
            if w or a
            else 0
            for a in range(readouts + 1)
        ]
        for w in range(loads + 1)
    ]


def _pareto(points: set[tuple[int, int]]) -> set[tuple[int, int]]:
    """The pairs no other pair is at most in both coordinates."""
    out, best = set(), None
    for x, y in sorted(points):
        if best is None or y < best:
            out.add((x, y))
            best = y
    return out


@lru_cache(maxsize=256)
def boundary_cost(turns: GapTurns, s: int, units: int, accs: int, bursts: int, per_readout: int) -> int:
    """E_gap: the least a channel's gaps cost per A x B new (accumulator lifetime, buffer content)
    pairs of each of its `units` units (module docstring, "Pairs"): over gaps of w WRGBs and a
    RDACC commands (each clearing at most `per_readout` accumulators of one unit), the least
    cost[w][a] per pair they open, P A w + (B - w) min(a C, P A), times P A B; floored, >= 0."""
    most = -(-units * accs // per_readout)  # RDACCs that clear every accumulator of the channel
    cost = gap_costs(turns, s, bursts, most)
    rate = min(
        cost[w][a] / (units * accs * w + (bursts - w) * min(a * per_readout, units * accs))
        for w in range(bursts + 1)
        for a in range(most + 1)
        if w or a
    )
    return max(0, int(rate * units * accs * bursts + 1e-9))


def _readout_boundary(first: int, further: int, units: int) -> int:
    """A boundary made of read-out gaps, over all `units` of a channel: all read in one gap (first
    + (units - 1) x further) or one per gap (units x first), whichever is less (first >= 0)."""
    return max(0, min(first + (units - 1) * further, units * max(0, first)))


def phase_gaps(hw: Hardware) -> PhaseGaps:
    t, s, r = hw.timing, hw.mac_interval, link_read_spacing(hw)

    def rule(a: str, b: str, *scopes: str) -> int:
        return max(t.rule(a, b, sc) for sc in scopes)

    rtw, wtr = rule("MAC", "WRGB", "rank"), rule("WRGB", "MAC", "bank_group")
    tmacl, r2m, rsp = (
        rule("MAC", "RDACC", "channel"),
        rule("RDACC", "MAC", "channel"),
        rule("RDACC", "RDACC", "channel"),
    )
    units = hw.pus_per_channel
    turns = GapTurns(
        to_load=rtw,
        load_spacing=rule("WRGB", "WRGB", "channel", "rank"),
        load_to_mac=wtr,
        to_readout=tmacl,
        readout_spacing=rsp,
        readout_to_mac=r2m,
        readout_to_load=rule("RDACC", "WRGB", "channel", "rank"),
        load_to_readout=rule("WRGB", "RDACC", "channel", "rank"),
    )
    gap = boundary_cost(
        turns,
        s,
        units,
        hw.pim.acc_registers,
        hw.gb_bursts,
        max(1, min(hw.pim.acc_registers, hw.organization.burst_bytes // 4)),
    )
    # with link reads inside the gaps (each holding r cycles)
    rd2w, w2rd = rule("RD", "WRGB", "rank", "channel"), rule("WRGB", "RD", "rank", "channel")
    rd2acc, acc2rd = rule("RD", "RDACC", "rank", "channel"), rule("RDACC", "RD", "rank", "channel")
    load = min(rtw, s - r + rd2w) + min(wtr, w2rd) - s
    if w2rd + rd2w < r:  # reads between two WRGBs would gain: count nothing
        load = 0
    further = min(rsp, acc2rd + rd2acc - r)
    readout = _readout_boundary(min(tmacl, s - r + rd2acc) + min(r2m, acc2rd) - s, max(0, further), units)
    if further < 0:
        readout = 0
    return PhaseGaps(
        gap=max(0, gap),
        net=max(0, min(load, readout, gap)),
        macs_per_phase=hw.pim.acc_registers * hw.gb_bursts,
        first_load=wtr,
    )
