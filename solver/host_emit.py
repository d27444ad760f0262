"""Emit host-dispatch alternatives: weights read over the link (RD sweeps) for a host GEMV."""

from __future__ import annotations

import numpy as np

from hwmodel import Hardware
from hwmodel.isa import Instruction, make, make_args

from .layout import Layout
from .refresh_points import with_refresh
from .relocate import Relocations, task_table
from .symbols import Symbols, host_copy


def emit_weight_read(hw: Hardware, lay: Layout, symbols: Symbols, ci: int) -> list[Instruction]:
    """RD every real element of the tiling's resident matrix on channel `ci` into the host copy
    (of each fused op's weight, for a fused matrix).

    Segment by segment: activate the segment in all units' banks at once, read each unit's runs
    (single-bank column reads), precharge.
    """
    t, sh = lay.t, lay.t.shape
    epb = t.elements_per_burst
    ch = t.channels[ci]
    dst: dict[str, int] = {}  # resident tensor -> id of its host copy (a fused matrix has one per op)
    by_segment: dict[int, list[tuple[int, int, int, int]]] = {}
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
    seq: list[Instruction] = []
    for seg in sorted(by_segment):
        mask = lay.segment_mask(seg)
        seq.append(make("ACT", mask=mask, row=lay.row(ch, seg)))
        # interleave banks so consecutive reads alternate bank groups where possible
        for bank, col, n, start, d in sorted(by_segment[seg], key=lambda r: (r[1], r[0])):
            seq.append(make_args("RD", (bank, col, n, d, start)))  # fields: bank, col, count, dst, offset
        seq.append(make("PRE", mask=mask))
    return with_refresh(hw, seq)


def encoded_weight_read(
    hw: Hardware, lay: Layout, symbols: Symbols, ci: int, cache: dict, encode, layers: Relocations | None = None
) -> np.ndarray:
    """`encode(emit_weight_read(...))` without emitting channels of the same structure again (see
    relocate.task_table; the roles: each part's host copy)."""
    t = lay.t
    residents = [p.resident for p in t.shape.parts] if t.shape.parts else [t.shape.resident]
    return task_table(
        ("rd",),
        t,
        ci,
        lay.base_rows[t.channels[ci]],
        cache,
        layers,
        lambda: tuple(symbols.get(host_copy(r)) for r in residents),
        lambda: encode(emit_weight_read(hw, lay, symbols, ci)),
    )
