"""Emit host-dispatch alternatives: weights read over the link (RD sweeps) for a host GEMV."""

from __future__ import annotations

import numpy as np

from hwmodel import Hardware
from hwmodel.isa import Instruction, make, make_args

from .layout import Layout
from .refresh_points import with_refresh
from .relocate import Relocations, table_key, task_table
from .row_commands import RowCommands, row_change_waits
from .symbols import Symbols, host_copy


def emit_weight_read(hw: Hardware, lay: Layout, symbols: Symbols, ci: int) -> list[Instruction]:
    """RD every real element of the tiling's resident matrix on channel `ci` into the host copy
    (of each fused op's weight, for a fused matrix).

    Segment by segment: activate the segment in all units' banks at once, read each unit's runs
    (single-bank column reads). Where one bank's sweep is slower than the channel's pace (RD ->
    RD tCCD_L in a bank group against tCCD_S and tLINK), the units' bursts are read one at a time
    in turn across bank groups (`read_pace`). With two banks per unit and segments alternating
    between them, the other bank's PRE and its next row's ACT go between the reads where the
    timing table first allows them (row_commands), so row changes are hidden; otherwise each
    segment is precharged after its reads.
    """
    t, sh = lay.t, lay.t.shape
    epb = t.elements_per_burst
    ch = t.channels[ci]
    dst: dict[str, int] = {}  # resident tensor -> id of its host copy (a fused matrix has one per op)
    by_segment: dict[int, list[tuple[int, int, int, int, int]]] = {}
    for slot, pu, m, pr0, nrows, p, c in lay.pass_blocks(ci):
        k0 = c * t.chunk_bursts * epb
        for a in range(nrows):
            addr = lay.address(slot, p, c, a)
            res = sh.resident_at(pr0 + a)
            if res not in dst:
                dst[res] = symbols.id(host_copy(res))
            by_segment.setdefault(addr.segment, []).append(
                (lay.bank(pu, addr.segment), addr.col, t.chunk_len(c), sh.element_index(m, pr0 + a, k0), dst[res])
            )
    one_by_one, step = read_pace(hw)
    pre_wait, act_wait = row_change_waits(hw, step)
    seq: list[Instruction] = []
    rows = RowCommands(seq)
    open_rows: dict[int, int] = {}  # bank set -> open segment
    segments = sorted(by_segment)
    for i, seg in enumerate(segments):
        sel, mask = lay.sel(seg), lay.segment_mask(seg)
        rows.flush()  # this segment's ACT, if the previous one had too few reads to carry it
        if open_rows.get(sel) != seg:
            if sel in open_rows:
                seq.append(make("PRE", mask=lay.segment_mask(open_rows[sel])))
            seq.append(make("ACT", mask=mask, row=lay.row(ch, seg)))
            open_rows[sel] = seg
        nxt = segments[i + 1] if i + 1 < len(segments) else None
        hide = nxt is not None and lay.sel(nxt) != sel
        if hide:
            other = lay.sel(nxt)
            after = 0
            if other in open_rows:
                rows.queue(pre_wait, make("PRE", mask=lay.segment_mask(open_rows[other])))
                after = act_wait
            rows.queue(after, make("ACT", mask=lay.segment_mask(nxt), row=lay.row(ch, nxt)))
            open_rows[other] = nxt
        runs = sorted(by_segment[seg], key=lambda r: (r[1], r[0]))
        for bank, col, n, start, d in _in_turn(hw, runs) if one_by_one else runs:
            rows.run(
                n, lambda a, b, bank=bank, col=col, start=start, d=d: _rd(bank, col + a, b - a, d, start + a * epb)
            )
        if not hide:
            rows.flush()
            seq.append(make("PRE", mask=mask))  # closed page: the next segment is in this bank
            open_rows.pop(sel, None)
    rows.flush()
    for _sel, seg in sorted(open_rows.items()):
        seq.append(make("PRE", mask=lay.segment_mask(seg)))
    return with_refresh(hw, seq)


def _rd(bank: int, col: int, count: int, d: int, offset: int) -> Instruction:
    return make_args("RD", (bank, col, count, d, offset))  # fields: bank, col, count, dst, offset


def read_pace(hw: Hardware) -> tuple[bool, int]:
    """(one burst at a time across bank groups, cycles between reads). A bank's sweep reads every
    tCCD_L-like cycles (the RD -> RD rows of scope bank and bank group); reads that alternate
    bank groups every tCCD_S / tLINK (rank and channel rows). Bursts one at a time when that is
    faster and the units' banks span more than one bank group."""
    t = hw.timing
    rows = [c for c in t.constraints if c.prev == "RD" and c.next == "RD"]
    near = max((t.latency_of(c) for c in rows if c.scope in ("bank", "bank_group")), default=1)
    far = max((t.latency_of(c) for c in rows if c.scope in ("rank", "channel")), default=1)
    org = hw.organization
    groups = {org.bank_group_of(pu * hw.pim.banks_per_pu) for pu in range(hw.pus_per_channel)}
    if near > far and len(groups) > 1:
        return True, far
    return False, near


def _in_turn(hw: Hardware, runs):
    """The runs' bursts one at a time, in turn over the banks, consecutive reads in different
    bank groups where the banks allow."""
    per_bank: dict[int, list] = {}
    for bank, col, n, start, d in runs:
        per_bank.setdefault(bank, []).extend((bank, col + i, 1, start + i * hw.elements_per_burst, d) for i in range(n))
    org = hw.organization
    rank: dict[int, int] = {}
    order = []
    for bank in sorted(per_bank):
        g = org.bank_group_of(bank)
        order.append((rank.get(g, 0), g, bank))
        rank[g] = rank.get(g, 0) + 1
    banks = [b for _r, _g, b in sorted(order)]
    out = []
    for i in range(max(len(v) for v in per_bank.values())):
        out.extend(per_bank[b][i] for b in banks if i < len(per_bank[b]))
    return out


def weight_read_key(lay: Layout, ci: int) -> tuple:
    """The key `encoded_weight_read` keeps channel `ci`'s table under (relocate.table_key)."""
    return table_key(*_read_table_args(lay, ci))


def _read_table_args(lay: Layout, ci: int) -> tuple:
    return ("rd",), lay.t, ci, lay.base_rows[lay.t.channels[ci]]


def encoded_weight_read(
    hw: Hardware, lay: Layout, symbols: Symbols, ci: int, cache: dict, encode, layers: Relocations | None = None
) -> np.ndarray:
    """`encode(emit_weight_read(...))` without emitting channels of the same structure again (see
    relocate.task_table; the roles: each part's host copy)."""
    t = lay.t
    residents = [p.resident for p in t.shape.parts] if t.shape.parts else [t.shape.resident]
    return task_table(
        *_read_table_args(lay, ci),
        cache,
        layers,
        lambda: tuple(symbols.get(host_copy(r)) for r in residents),
        lambda: encode(emit_weight_read(hw, lay, symbols, ci)),
    )
