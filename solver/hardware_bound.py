"""The hardware bound: a lower bound on the makespan of a decode step from the hardware
description and the op graph only, never from pimsat's emitter (issue 16).

No program of the ISA (hwmodel/isa.yaml, 1.x) can be shorter, whatever its tiling, placement,
grouping, dispatch or command order: every term is work a resource must do at the fastest rate
the hardware model allows it, or a chain of such work the ISA orders. The space it bounds:
every op on the host or in memory as the ISA allows (a gemv in memory, on the host or its rows
split between both at any fraction; attention in memory, where the KV cache is); a HOP and an
EPI compute a whole op, a head range of an attention op (ISA 1.4) or a batch range of any op
(ISA 1.5), so an op's output is ready piece by piece only as far as those ranges cut it.

Terms (`Term`), each in memory-clock cycles; the bound is the largest:

- STREAMING: every burst of a resident operand (weights, KV cache) meets every input vector in
  one MAC, the MACs of one channel at most one per `mac_interval` (tMAC, or more passes when a
  burst holds more elements than the unit has lanes), spread perfectly over all units. With
  one bank per unit a row change also idles the unit for tRTP + tRP + tRCDMAC - mac_interval
  (its last MAC -> PRE -> ACT -> first MAC; no other bank can hide it). A gemv may instead be
  read over the link (one burst per tLINK per channel, per tCCD_S within one rank) and run on
  the host's matrix unit, or any fraction of it may: the split is relaxed to a fractional
  knapsack, and the host's budget for it is what its own ops leave (term HOST). Refresh takes
  tRFC of every tREFI on every channel: T >= W + tRFC * floor(T / tREFI). With per-bank
  refresh (timing.refresh_mode = per_bank) a REFSB keeps only its bank busy, tRFCSB: with one
  bank per unit that unit streams nothing meanwhile (tRFCSB of every tREFI); with more, the
  unit's other banks can stream while one refreshes, so refresh costs the MACs nothing here.
  The first column command of a channel waits for its row: tRCDMAC after an ACT at cycle 0 or
  later (tRCDRD where a link read may come first: `first_activation`). After the last one the
  program still runs: the last MAC's read-out (tMACL, its data), the sync and an epilogue, or a
  REF cluster (all banks precharged first), whichever is less (`unit_ends`, ChannelEnds in
  solver/turnaround_bound.py, which also prices REFs between and before the commands).
  That is the unit view; STREAMING is the larger of it and the channel view
  (solver/turnaround_bound.py, where it is derived): a unit's MACs pair an accumulator
  lifetime with a buffer burst's content, A x B of them live at its first MAC, and a gap of its
  channel's MAC stream holding buffer loads (WRGB) or read-outs (RDACC) opens only so many new
  pairs for what it costs, so every acc_registers x buffer bursts MACs of a unit beyond the first
  cost the channel at least E_gap beyond the MAC spacing (hbm2-pim: the read-outs of all 8 units,
  22 + 7 x 2 + 2 - 4 = 34, against a load of the whole buffer, 45; 0 on a dedicated write path),
  the first load WRGB -> MAC before the first MAC; a REF cluster costs tRFC per REF and its row commands
  around it (PRE before, ACT after) less the boundary it may hide, or sits before the first or
  after the last column command (ChannelEnds: at least tRFC - E_gap per REF as before). Link
  reads may sit in those gaps: a boundary then costs E_net beyond their slots (hbm2-pim 16), and
  a share s of E_gap plus 1 - s of (E_net + the reads) bounds the channel for every s, searched
  for the best. No row changes in that view (a one-bank unit's idles only that unit).
- ROW_CYCLE: every row of a resident operand is opened at least once whichever unit or the link
  reads it; the fullest bank holds at least ceil(bursts / banks) bursts, so at least
  ceil(that / columns) rows, and one bank opens rows at most once per
  max(tRC, tRAS + tRP, tRCD + tRTP + tRP) (ACT -> first column command -> PRE -> ACT; tRCD the
  lesser of tRCDRD, for a read over the link, and tRCDMAC, for a MAC).
  With refresh as above (per-bank refresh: the bank's own tRFCSB of every tREFI).
- HOST: the host runs one instruction at a time: every host-only op's work (elements read and
  written / vector rate, as in hwmodel/host_costs), plus per PIM-capable op the least of its
  epilogue (output elements / vector rate) and, for a gemv, its GEMM on the host's matrix unit,
  plus one launch (dispatch_cycles; chained launches share it: from ISA 1.6 a program's one
  LAUNCH, which every host instruction continues, as pimsat's programs do, solver/launch_chain.py).
- CRITICAL_PATH: the longest chain of the op graph (tensor producer -> consumer), each op at the
  earliest its output can be ready once its inputs are: a host op after its work; an op in
  memory after the sync from the host (when another op produced its vector), its MACs spread
  over all units (with their load/read-out boundaries, the channel view), the sync back and its
  epilogue; a gemv at the earliest of that, its GEMM on
  the host (HOP) after its inputs and its weights' link reads (which start at cycle 0, before
  the input may exist) and the best split of its rows between both (HMV and MACs from the same
  input, then EPI: the crossing of the two parts' finish over the fraction f in memory); a KV
  append at once. No dispatch on the path (a chained launch pays it earlier: the LAUNCH at cycle 0),
  but on a host that keeps no kernel across a wait (`host.persistent_kernel` false) each epilogue
  after its WAIT pays one (`relaunch`; the channel's end too). A chain
  attn_score -> softmax -> attn_context may run by head ranges of at least one head, its
  pieces overlapping on the units and the host (`_head_chain_finish`): only the last score
  piece's own chain, the units' MACs of both ops and the host's work after the first piece's
  read-out order it. Where a program may run a batch as micro-batches (ISA 1.5 batch ranges,
  batch >= 2) the chain is the pipelined one instead (solver/pipeline_bound.py): per op, one
  batch row's least path to it, all of its own work with only the last row's epilogue, and one
  row's path after it.

What backs it: the derivation above for programs pimsat cannot emit; for those it can, the
tests (tests/solver/test_hardware_bound.py: never above a simulated program, over random
kernels x presets x timing and host overrides, every method). The row rules it assumes (ACT ->
ACT tRC, ACT -> PRE tRAS, PRE -> ACT tRP, ACT -> column tRCD, column -> PRE tRTP, per bank) are
rows of the standards' lists in hwmodel/standards (sim/stdcheck.py); the values are read from the
device's own timing-table rows (Timing.rule: a row overridden by index, `--set
timing.constraints[I].latency=...`, moves the bound with the simulator), as the simulator uses them.
One assumption is not a row: a channel's link reads (RD) and MACs are charged one after the other
(the unit view's link term, the channel view's E_net); the table has no MAC <-> RD row, so a
program could interleave them, which pimsat's emitter never does. The channel view at share 1
does not use it.
"""

from __future__ import annotations

from collections.abc import Callable
from dataclasses import dataclass
from enum import StrEnum
from math import ceil

from hwmodel import Hardware
from hwmodel.host_costs import epilogue_cycles, has_batch_ranges, has_head_ranges, host_op_cycles, op_batch
from hwmodel.model import completion_cycles
from ir import OpKind, Program

from .mvshape import mv_shape
from .pipeline_bound import batch_rows
from .pipeline_bound import pipelined_path_bound as pipelined
from .problem import Refresh
from .turnaround_bound import ChannelEnds, PhaseGaps, channel_ends, end_costs, link_read_spacing, phase_gaps


class Term(StrEnum):
    STREAMING = "streaming"
    ROW_CYCLE = "row_cycle"
    HOST = "host"
    CRITICAL_PATH = "critical_path"


@dataclass(frozen=True)
class BoundTerm:
    term: Term
    cycles: int


@dataclass(frozen=True)
class HardwareBound:
    terms: tuple[BoundTerm, ...]

    @property
    def cycles(self) -> int:
        return max(t.cycles for t in self.terms)

    @property
    def binding(self) -> Term:
        """The term that sets the bound (the first of equals, in `Term` order)."""
        return max(self.terms, key=lambda t: t.cycles).term

    def as_dict(self) -> dict[str, int]:
        return {str(t.term): t.cycles for t in self.terms}


def row_switch_cycles(hw: Hardware) -> int:
    """Extra cycles a unit with ONE bank loses at every DRAM row change: after its last MAC in a
    row, PRE (tRTP), ACT (tRP) and the first MAC of the next row (tRCDMAC) cannot overlap with
    MACs (with two or more banks per unit the next row can be opened in the other bank)."""
    t = hw.timing
    return max(
        0, t.rule("MAC", "PRE", "bank") + t.rule("PRE", "ACT", "bank") + t.rule("ACT", "MAC", "bank") - hw.mac_interval
    )


@dataclass(frozen=True)
class OpWork:
    """Cycles one op costs: on every channel if it runs in memory (`pim`, row changes included),
    or on every channel's link plus the host matrix unit if the host runs it (`link`, `host`;
    `host` is None when the op has no host alternative; without the launch, which the host's own
    busy cycles count once)."""

    pim: float
    link: float
    host: float | None


def resident_bursts(hw: Hardware, program: Program, op_name: str) -> int:
    """Bursts of op `op_name`'s resident operand: each matrix row in whole bursts (a burst's
    lanes hold one row's elements)."""
    sh = mv_shape(program, op_name)
    return sh.matrices * sh.rows * ceil(sh.k / hw.elements_per_burst)


def op_work(hw: Hardware, program: Program, gaps: PhaseGaps | None = None, share: float = 1.0) -> list[OpWork]:
    """Each PIM-capable op's work. The unit view (`gaps` None): MACs and, with one bank per unit,
    row changes; the host's share of a gemv costs its link reads. The channel view (`gaps`,
    solver/turnaround_bound.py): MACs and the load/read-out boundaries they force, no row
    changes; the link reads may sit in those gaps, so each boundary counts `share` x E_gap +
    (1 - `share`) x E_net and the link reads 1 - `share` of their slots."""
    pus, chans = hw.total_pus, hw.organization.channels
    switch = row_switch_cycles(hw) if hw.pim.banks_per_pu == 1 and gaps is None else 0
    per_mac = hw.mac_interval + (gaps.per_mac(share) if gaps is not None else 0.0)
    reads = 1.0 - share if gaps is not None else 1.0
    read_spacing = link_read_spacing(hw)
    out = []
    for i, op in enumerate(program.ops):
        if not op.pim_capable:
            continue
        bursts = resident_bursts(hw, program, op.name)
        rows_per_unit = bursts / pus / hw.organization.columns
        pim = bursts * mv_shape(program, op.name).vectors / pus * per_mac + max(0.0, rows_per_unit - 1) * switch
        if op.kind.value == "gemv":
            # the host's GEMM without a launch: the program's one launch is in the host's own busy
            # cycles already (host_busy_cycles), and a chained HMV or HOP pays none
            out.append(OpWork(pim, reads * bursts / chans * read_spacing, float(_host_compute(hw, program, i))))
        else:
            out.append(OpWork(pim, pim, None))
    return out


def channel_work_after_offload(work: list[OpWork], host_budget: float) -> float:
    """Least channel work when ops (or fractions of them) move to the host within `host_budget`
    host cycles: the fractional knapsack, best channel cycles saved per host cycle first."""
    total = sum(w.pim for w in work)
    movable = sorted(
        (w for w in work if w.host is not None and w.link < w.pim),
        key=lambda w: (w.pim - w.link) / max(w.host, 1e-9),
        reverse=True,
    )
    for w in movable:
        if host_budget <= 0:
            break
        share = min(1.0, host_budget / max(w.host, 1e-9))
        total -= share * (w.pim - w.link)
        host_budget -= share * w.host
    return total


def streaming_cycles(hw: Hardware, program: Program) -> tuple[int, int]:
    """(channel work, makespan bound with refresh) at the best split of the GEMVs between the
    units and an otherwise idle host (fractional, so a valid relaxation)."""
    return streaming_bound(hw, op_work(hw, program), 0)


def with_refresh(
    hw: Hardware, work: int, per_bank_busy: bool = False, gaps: PhaseGaps | None = None, share: float = 1.0
) -> int:
    """`work` stretched by refresh: tRFC per tREFI (all-bank). Per-bank refresh: a unit's work
    by tRFCSB per tREFI with one bank per unit, not at all with more (another bank of the unit
    streams meanwhile); one bank's work (`per_bank_busy`) by tRFCSB per tREFI. A channel's work
    in the channel view (`gaps`, `share`): a REF may sit in a gap and hide what that boundary
    counts (PhaseGaps.refresh_busy); a REFSB stops no other unit of the channel, so nothing."""
    t = hw.timing
    busy = t.rule("REF", "ACT", "rank")
    if t.refresh_mode == "per_bank":
        busy = t.rule("REFSB", "ACT", "bank") if per_bank_busy or hw.pim.banks_per_pu == 1 else 0
        if gaps is not None:
            busy = 0
    if gaps is not None:
        busy = gaps.refresh_busy(busy, share)
    return Refresh(t.p("tREFI"), busy, t.max_postponed_refresh).stretch(work)


def _host_compute(hw: Hardware, program: Program, i: int) -> int:
    """The host's busy cycles for op i without its launch (dispatch)."""
    return host_op_cycles(hw, program, i) - hw.host.dispatch_cycles


def relaunch(hw: Hardware) -> int:
    """What an epilogue after its WAIT pays beyond its work: nothing where the host keeps a
    kernel launched across a wait (a program pays its one launch earlier), a launch where it
    does not (`host.persistent_kernel` false). Why: an EPI of op X reads staging that X's read-outs
    wrote, so a WAIT on a signal set after them precedes it in the host stream; on such a host the
    first host instruction after the last WAIT before the EPI cannot continue a launch, so it, or
    an instruction between it and the EPI, pays `dispatch_cycles` after X's data + the sync."""
    return 0 if hw.host.persistent_kernel else hw.host.dispatch_cycles


def _epilogue_compute(hw: Hardware, program: Program, i: int) -> int:
    return epilogue_cycles(hw, program, i) - hw.host.dispatch_cycles


def host_busy_cycles(hw: Hardware, program: Program) -> tuple[int, int, int]:
    """(host-only ops' work + one launch, the epilogues of ops that only run in memory, the
    least share of the gemvs: their epilogue or their GEMM)."""
    own, fixed, share = hw.host.dispatch_cycles, 0, 0
    for i, op in enumerate(program.ops):
        if op.kind is OpKind.kv_append:
            continue  # written into the banks by the channels
        if not op.pim_capable:
            own += _host_compute(hw, program, i)
        elif op.kind is OpKind.gemv:
            share += min(_epilogue_compute(hw, program, i), _host_compute(hw, program, i))
        else:
            fixed += _epilogue_compute(hw, program, i)
    return own, fixed, share


def first_activation(hw: Hardware, reads: bool = True) -> int:
    """Cycles before a channel's first column command that serves a resident row: its bank's ACT
    (at cycle 0 at the earliest) and tRCD: tRCDMAC, or with `reads` (the host may run part of a
    gemv, its weights read over the link) the lesser of it and tRCDRD. The unit view counts each
    MAC and read its slot (s, r) from the first to the last command; the program ends at least
    tMACL + the read-out's data after its last MAC, and a read's data after its last read: where
    that is shorter than the slot, the difference comes off."""
    t = hw.timing
    comp = completion_cycles(t)
    short = max(0, hw.mac_interval - t.rule("MAC", "RDACC", "channel") - comp["RDACC"])
    rcd = t.rule("ACT", "MAC", "bank")
    if reads:
        short = max(short, link_read_spacing(hw) - comp["RD"])
        rcd = min(rcd, t.rule("ACT", "RD", "bank"))
    return max(0, rcd - short)


def streaming_bound(
    hw: Hardware,
    work: list[OpWork],
    host_busy: int,
    gaps: PhaseGaps | None = None,
    share: float = 1.0,
    ends: Callable[[bool], ChannelEnds | None] | None = None,
    activate: bool = False,
) -> tuple[int, int]:
    """(least channel work, makespan bound with refresh) when the host, busy `host_busy` cycles
    with its own ops, takes over the best fractions of gemvs in what is left of T. With `gaps`
    (the channel view, `op_work(..., gaps, share)`) the work includes `share` of the first
    load's constant (`PhaseGaps.first_fill`); without (the unit view) and with `activate` the
    first activation (`first_activation`; not in the bandwidth figure, `streaming_cycles`).
    `ends(reads)`: REFs and the end as ChannelEnds says, `reads` whether the host takes a part
    of a gemv (its weights then go over the link: the channel's first and last column commands
    may be reads); None: refresh as `with_refresh`. A program whose host takes no part of any
    gemv has all of the channel work and MACs only; one whose host takes some has at least the
    knapsack's least work: T is feasible if either case fits."""
    total = sum(w.pim for w in work)
    movable = any(w.host is not None for w in work)

    def first(reads: bool) -> float:
        if not work:
            return 0.0
        if gaps is not None:
            return gaps.first_fill(share)
        return float(first_activation(hw, reads)) if activate else 0.0

    def channel(budget: int) -> int:
        return max(0, ceil(channel_work_after_offload(work, budget) + first(True) - 1e-6))

    def stretch(w: int, reads: bool) -> int:
        e = ends(reads) if ends is not None and w > 0 else None
        if e is not None:
            return e.stretch(hw.timing.p("tREFI"), w)
        return with_refresh(hw, w, gaps=gaps, share=share)

    def stretched(budget: int) -> int:
        alone = stretch(max(0, ceil(total + first(False) - 1e-6)), False)
        if not movable or budget <= 0:
            return alone
        return min(alone, stretch(channel(budget), True))

    lo, hi = host_busy, max(host_busy, stretched(0))
    while lo < hi:
        mid = (lo + hi) // 2
        if stretched(mid - host_busy) <= mid:
            hi = mid
        else:
            lo = mid + 1
    return channel(lo - host_busy), lo


def row_period(hw: Hardware) -> int:
    """Least cycles between two ACTs of one bank that serve a column command in between."""
    t = hw.timing
    rp = t.rule("PRE", "ACT", "bank")
    rtp = min(t.rule("MAC", "PRE", "bank"), t.rule("RD", "PRE", "bank"))
    return max(t.rule("ACT", "ACT", "bank"), t.rule("ACT", "PRE", "bank") + rp, first_column_delay(hw) + rtp + rp)


def first_column_delay(hw: Hardware) -> int:
    """ACT -> the first column command that can serve a resident row: a MAC (tRCDMAC) or a read
    over the link (tRCDRD), whichever is sooner."""
    return min(hw.timing.rule("ACT", "RD", "bank"), hw.timing.rule("ACT", "MAC", "bank"))


def row_cycle_bound(hw: Hardware, program: Program) -> int:
    """The rows the fullest bank opens: (rows - 1) periods plus the first ACT -> column command
    (tRCDRD or tRCDMAC, the lesser), stretched by refresh."""
    org = hw.organization
    bursts = sum(resident_bursts(hw, program, op.name) for op in program.ops if op.pim_capable)
    if bursts == 0:
        return 0
    rows = ceil(ceil(bursts / (org.channels * org.banks_per_channel)) / org.columns)
    return with_refresh(hw, (rows - 1) * row_period(hw) + first_column_delay(hw), per_bank_busy=True)


def _earliest_finish(
    hw: Hardware,
    program: Program,
    i: int,
    work: OpWork | None,
    start: int,
    fed: bool,
    first_fill: float = 0.0,
    share: float = 1.0,
    epi_share: float | None = None,
) -> int:
    """Least cycle op i's output can be ready when its inputs are ready at `start` (`fed`: its
    vector input is produced by another op, so a channel waits for the host's signal;
    `first_fill`: the channel view's constant, PhaseGaps.first_fill, once on the op's MACs).
    `share`: of a piece of the op holding that share of its rows (`work` scaled by the caller),
    the host's work scaled alike; `epi_share` (default `share`): the epilogue's scale alone (the
    last piece's, after all of the op's MACs: solver/pipeline_bound.py)."""
    op = program.ops[i]
    if op.kind is OpKind.kv_append:
        return start
    if not op.pim_capable:
        return start + ceil(_host_compute(hw, program, i) * share - 1e-6)
    sync = hw.host.sync_cycles
    lead = sync if fed else 0  # the vector reaches the channels; the result comes back: + sync
    # MACs over all units, row changes included; after the sync back, the epilogue (and its
    # launch on a host that keeps none across a wait)
    macs, epi = work.pim, _epilogue_compute(hw, program, i) * (share if epi_share is None else epi_share)
    back = sync + relaunch(hw)
    in_memory = start + lead + ceil(macs + first_fill + epi - 1e-6) + back
    if op.kind is not OpKind.gemv:
        return in_memory
    gemm = _host_compute(hw, program, i) * share
    on_host = max(start, ceil(work.link)) + gemm  # the weights over the link (from cycle 0), then HOP

    def pim_part(f: float) -> float:  # rows [0, f) in memory, the rest on the host (HMV), then EPI
        return start + lead + f * macs + first_fill + back  # (f = 0: `on_host` is less)

    def host_part(f: float) -> float:
        return max(start, (1 - f) * work.link) + (1 - f) * gemm

    lo, hi = 0.0, 1.0  # pim_part rises with f, host_part falls: bracket their crossing
    for _ in range(40):
        mid = (lo + hi) / 2
        lo, hi = (mid, hi) if pim_part(mid) < host_part(mid) else (lo, mid)
    split = ceil(max(pim_part(lo), host_part(hi)) + epi - 1e-6)  # at most the crossing's value
    return min(in_memory, ceil(on_host - 1e-6), split)


def path_bound(hw: Hardware, program: Program, work: list[OpWork], first_fill: float = 0.0) -> int:
    """The CRITICAL_PATH term: the longest chain of whole ops, or where a program may run a
    batch as micro-batches (ISA 1.5 batch ranges, batch >= 2) the pipelined chain
    (solver/pipeline_bound.py)."""
    if has_batch_ranges(hw) and batch_rows(program) >= 2:
        return pipelined_path_bound(hw, program, work, first_fill)
    return critical_path_bound(hw, program, work, first_fill)


def pipelined_path_bound(hw: Hardware, program: Program, work: list[OpWork], first_fill: float = 0.0) -> int:
    """The chain of one batch row's pieces around each op's whole work (solver/pipeline_bound.py)."""
    chains = head_chains(program) if has_head_ranges(hw) else {}
    return pipelined(hw, program, work, _earliest_finish, chains, first_fill)


def critical_path_bound(hw: Hardware, program: Program, work: list[OpWork], first_fill: float = 0.0) -> int:
    """The longest chain's cycles."""
    pim_work = iter(work)
    per_op = [next(pim_work) if op.pim_capable else None for op in program.ops]
    producer = {t: i for i, op in enumerate(program.ops) for t in op.outputs}
    chains = head_chains(program) if has_head_ranges(hw) else {}
    finish = [0] * len(program.ops)
    began: dict[int, tuple[int, bool]] = {}  # score op of a head chain -> (its start, fed)
    for i, op in enumerate(program.ops):  # topological order
        preds = [producer[t] for t in op.inputs if t in producer]
        start = max((finish[p] for p in preds), default=0)
        fed = op.pim_capable and op.inputs[0] in producer
        if i in chains:  # a link of score -> softmax -> context, which may run by head ranges
            k, j, c = chains[i]
            if i == k:
                began[k] = (start, fed)
            s0, fed_k = began[k]
            other = max((finish[p] for p in preds if p != j), default=0) if i == c else 0
            finish[i] = _head_chain_finish(hw, program, (k, j, c), per_op[k], per_op[c], s0, fed_k, other, first_fill)[
                (k, j, c).index(i)
            ]
            continue
        finish[i] = _earliest_finish(hw, program, i, per_op[i], start, fed, first_fill)
    return max(finish, default=0)


def head_chains(program: Program) -> dict[int, tuple[int, int, int]]:
    """Op index -> (attn_score, softmax, attn_context) for every op of such a chain: a softmax
    whose input an attn_score produces and whose output only attn_context ops read, which a
    program may run by head ranges (ISA 1.4: HOP/EPI `head0`, `heads`)."""
    producer = {t: i for i, op in enumerate(program.ops) for t in op.outputs}
    out: dict[int, tuple[int, int, int]] = {}
    for j, op in enumerate(program.ops):
        if op.kind is not OpKind.softmax or op.inputs[0] not in producer:
            continue
        k = producer[op.inputs[0]]
        readers = [c for c, o in enumerate(program.ops) if op.outputs[0] in o.inputs]
        if program.ops[k].kind is not OpKind.attn_score or len(readers) != 1:
            continue
        c = readers[0]
        if program.ops[c].kind is OpKind.attn_context and program.ops[c].inputs[0] == op.outputs[0]:
            for x in (k, j, c):
                out[x] = (k, j, c)
    return out


def _head_chain_finish(
    hw: Hardware,
    program: Program,
    chain: tuple[int, int, int],
    score: OpWork,
    context: OpWork,
    start: int,
    fed: bool,
    other: int,
    first_fill: float,
) -> tuple[int, int, int]:
    """Least cycles all of the score, the softmax and the context of a head chain can be ready
    (`head_chains`) when the score's inputs are ready at `start` (`fed`: its query comes from
    another op) and the context's other inputs (its V cache) at `other`. A program may run the
    chain by head ranges of at least one head each, pieces of the op overlapping on the units
    and the host, so only these chains order the work (H heads; S, C: the score's and the
    context's MACs over all units; Es, X, Ec: the score's epilogue, the softmax and the
    context's epilogue on the host, without launches; a piece of h heads takes h / H of each):
    the last score MAC ends >= start + lead + first_fill + S; after it its piece's epilogue and
    softmax, the sync, the piece's context, the sync and its epilogue; the first piece's read-out
    comes >= S / H after the first MAC, and the host then does all of Es + X + Ec; the units do
    all of S + C, the last read-out then the sync and a piece's epilogue; the context's MACs
    follow its V cache."""
    k, j, c = chain
    sync = hw.host.sync_cycles
    back = sync + relaunch(hw)  # a result back to the host, its epilogue's launch on a host that keeps none
    heads = program.ops[k].attrs["heads"]
    es, x, ec = (_epilogue_compute(hw, program, k), _host_compute(hw, program, j), _epilogue_compute(hw, program, c))
    first_mac = start + (sync if fed else 0) + first_fill
    s, cm = score.pim, context.pim
    scores = max(first_mac + s + back + es / heads, first_mac + s / heads + back + es)
    softmax = max(scores + x / heads, first_mac + s / heads + back + es + x)
    ctx = max(
        softmax + sync + cm / heads + back + ec / heads,
        first_mac + s + cm + back + ec / heads,
        first_mac + s / heads + back + es + x + ec,
        other + cm + back + ec / heads,
    )
    return tuple(ceil(v - 1e-6) for v in (scores, softmax, ctx))  # type: ignore[return-value]


def unit_ends(hw: Hardware, program: Program, work: list[OpWork]) -> Callable[[bool], ChannelEnds | None]:
    """REFs and the end in the unit view (all-bank refresh; None otherwise), per `reads` (whether
    the host runs part of a gemv): as in the channel view (solver/turnaround_bound.py,
    ChannelEnds) with what this view counts. It counts no boundary, and with one bank per unit
    a row change (tRTP + tRP + tRCDMAC - s) that a REF cluster there extends by its REFs' tRFC
    alone (PRE -> REF against PRE -> ACT), so `mid` is 0 there and tRTP + tRP + tRCD - slot with
    more banks per unit; `first` is what tRCD exceeds the first activation it counts by (0).
    After the last command a REF cluster (`end_costs`: `last`) or none (`tail`)."""
    t = hw.timing
    tail_h = host_tail(hw, program)

    def at(reads: bool) -> ChannelEnds | None:
        if t.refresh_mode != "all_bank" or not work:
            return None
        slot = max(hw.mac_interval, link_read_spacing(hw)) if reads else hw.mac_interval
        rcd, rtp, last, tail = end_costs(hw, tail_h, reads)
        pre_ref, pre_act = t.rule("PRE", "REF", "rank"), t.rule("PRE", "ACT", "bank")
        return ChannelEnds(
            trfc=t.rule("REF", "ACT", "rank"),
            mid=min(0, pre_ref - pre_act) if hw.pim.banks_per_pu == 1 else rtp + pre_ref + rcd - slot,
            first=max(0, rcd - first_activation(hw, reads)),
            last=last,
            tail=tail,
        )

    return at


def host_tail(hw: Hardware, program: Program) -> float:
    """After a channel's last read-out the host still syncs and runs an epilogue: the sync and the
    least epilogue of any op in memory without its launch (one head's share where attention may
    finish by head ranges, one batch row's where an op may finish by batch ranges), for
    ChannelEnds.tail."""
    epis = []
    for i, op in enumerate(program.ops):
        if not op.pim_capable or op.kind is OpKind.kv_append:
            continue
        pieces = op.attrs.get("heads", 1) if has_head_ranges(hw) and op.kind is not OpKind.gemv else 1
        if has_batch_ranges(hw):  # an epilogue of one batch row's outputs (ISA 1.5)
            pieces = max(pieces, op_batch(program, op))
        epis.append(_epilogue_compute(hw, program, i) / max(1, pieces))
    return hw.host.sync_cycles + relaunch(hw) + min(epis, default=0.0)


def channel_view_streaming(hw: Hardware, program: Program, host_busy: int, gaps: PhaseGaps) -> int:
    """The streaming bound of the channel view at the best share of its gaps against its link
    reads (`op_work`): every share gives a valid bound; over the host's fractions the least
    channel time is a minimax in (fraction, share), concave in the share, searched by thirds.
    REFs and the channel's end as ChannelEnds says at that share."""
    tail = host_tail(hw, program)

    def at(share: float) -> int:
        ends = {reads: channel_ends(hw, gaps, share, tail, reads) for reads in (False, True)}
        return streaming_bound(hw, op_work(hw, program, gaps, share), host_busy, gaps, share, ends.get)[1]

    lo, hi, best = 0.0, 1.0, at(1.0)
    for _ in range(24):
        a, b = lo + (hi - lo) / 3, hi - (hi - lo) / 3
        fa, fb = at(a), at(b)
        best = max(best, fa, fb)
        lo, hi = (a, hi) if fa < fb else (lo, b)
    return best


def hardware_bound(hw: Hardware, program: Program) -> HardwareBound:
    work = op_work(hw, program)
    own, fixed, share = host_busy_cycles(hw, program)
    _channel, streaming = streaming_bound(hw, work, own + fixed, ends=unit_ends(hw, program, work), activate=True)
    critical = path_bound(hw, program, work)
    gaps = phase_gaps(hw)
    if gaps.gap > 0:  # the channel view: MACs with the load/read-out gaps they force
        streaming = max(streaming, channel_view_streaming(hw, program, own + fixed, gaps))
        # an op's own chain: its MACs with their gaps; its link reads feed the host's part
        macs = op_work(hw, program, gaps)
        chain = [OpWork(c.pim, u.link, u.host) for c, u in zip(macs, work)]
        critical = max(critical, path_bound(hw, program, chain, gaps.first_fill()))
    return HardwareBound(
        (
            BoundTerm(Term.STREAMING, streaming),
            BoundTerm(Term.ROW_CYCLE, row_cycle_bound(hw, program)),
            BoundTerm(Term.HOST, own + fixed + share),
            BoundTerm(Term.CRITICAL_PATH, critical),
        )
    )
