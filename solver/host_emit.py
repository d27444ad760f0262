"""Emit host-dispatch alternatives: weights read over the link (RD sweeps) for a host GEMV."""
from __future__ import annotations

from hwmodel import Hardware
from hwmodel.isa import Instruction, make

from .layout import Layout
from .symbols import Symbols, host_copy


def emit_weight_read(hw: Hardware, lay: Layout, symbols: Symbols, ci: int) -> list[Instruction]:
    """RD every real element of the tiling's resident matrix on channel `ci` into the host copy.

    Segment by segment: activate the segment in all units' banks at once, read each unit's runs
    (single-bank column reads), precharge.
    """
    t, sh = lay.t, lay.t.shape
    epb = t.elements_per_burst
    dst = symbols.id(host_copy(sh.resident))
    ch = t.channels[ci]
    by_segment: dict[int, list[tuple[int, int, int, int]]] = {}
    for slot in range(t.slot_count):
        for pu in range(t.pus):
            held = t.pu_rows(ci, slot, pu)
            if held is None:
                continue
            m, r0, r1 = held
            for p in range(t.passes):
                pr0 = r0 + p * t.rows_per_pass
                nrows = min(t.pass_rows(p), r1 - pr0)
                for c in range(t.chunks):
                    k0 = c * t.chunk_bursts * epb
                    for a in range(max(0, nrows)):
                        addr = lay.address(slot, p, c, a)
                        bank = lay.bank(pu, addr.segment)
                        by_segment.setdefault(addr.segment, []).append(
                            (bank, addr.col, t.chunk_len(c), sh.element_index(m, pr0 + a, k0)))
    seq: list[Instruction] = []
    for seg in sorted(by_segment):
        mask = lay.segment_mask(seg)
        seq.append(make("ACT", mask=mask, row=lay.row(ch, seg)))
        # interleave banks so consecutive reads alternate bank groups where possible
        for bank, col, n, start in sorted(by_segment[seg], key=lambda r: (r[1], r[0])):
            seq.append(make("RD", bank=bank, col=col, count=n, dst=dst, offset=start))
        seq.append(make("PRE", mask=mask))
    return seq
