"""Tiling: how an MV op is cut over a set of channels, their PIM units, passes and chunks.

A `Tiling` is pure arithmetic on an `MVShape` and the hardware: every channel of the set gets
the same number of *slots* (matrix slices) with the same rows per PIM unit, so that all channels
run the same command sequence in lockstep (padding rows hold no data and are never read out).
Within a unit, rows are processed in *passes* of at most `acc_registers // vg` rows for a group
of `vg` vectors, and the reduction dimension in *chunks* of `chunk_bursts` bursts per vector
that fit in (half of, when double-buffered) the channel's global buffer.
"""

from __future__ import annotations

from dataclasses import dataclass
from functools import lru_cache
from math import ceil

from hwmodel import Hardware

from .mvshape import MVShape


@dataclass(frozen=True)
class Slice:
    matrix: int
    row0: int
    row1: int  # exclusive


@dataclass(frozen=True)
class Tiling:
    shape: MVShape
    channels: tuple[int, ...]
    slots: tuple[tuple[Slice | None, ...], ...]  # per channel (index in `channels`), per slot
    rows_per_pu: int  # per slot
    pus: int
    vg: int  # vectors per group
    rows_per_pass: int
    chunk_bursts: int  # bursts per vector per chunk
    elements_per_burst: int
    double_buffer: bool
    interleave: bool = True  # segments alternate between a unit's banks (see layout.py)
    split_macs: bool = True  # MAC runs may be split to carry global-buffer loads (see emit_mv.py)

    @property
    def slot_count(self) -> int:
        return len(self.slots[0])

    @property
    def k_bursts(self) -> int:
        return ceil(self.shape.k / self.elements_per_burst)

    @property
    def chunks(self) -> int:
        return ceil(self.k_bursts / self.chunk_bursts)

    def chunk_len(self, c: int) -> int:
        """Bursts of chunk c (the last one may be shorter)."""
        return min(self.chunk_bursts, self.k_bursts - c * self.chunk_bursts)

    @property
    def vector_groups(self) -> int:
        return ceil(self.shape.vectors / self.vg)

    @property
    def passes(self) -> int:
        return ceil(self.rows_per_pu / self.rows_per_pass)

    def pass_rows(self, p: int) -> int:
        return min(self.rows_per_pass, self.rows_per_pu - p * self.rows_per_pass)

    def pu_rows(self, ch_index: int, slot: int, pu: int) -> tuple[int, int, int] | None:
        """(matrix, first row, end row) that unit `pu` holds in this slot, or None if padding."""
        sl = self.slots[ch_index][slot]
        if sl is None:
            return None
        r0 = sl.row0 + pu * self.rows_per_pu
        r1 = min(r0 + self.rows_per_pu, sl.row1)
        return (sl.matrix, r0, r1) if r0 < r1 else None


def _largest_divisor_at_most(n: int, cap: int) -> int:
    for d in range(min(n, cap), 0, -1):
        if n % d == 0:
            return d
    return 1


def make_tiling(
    hw: Hardware,
    shape: MVShape,
    channels: tuple[int, ...],
    double_buffer: bool = True,
    interleave: bool | None = None,
    split_macs: bool = True,
    max_vg: int | None = None,
) -> Tiling:
    """`max_vg`: at most this many vectors per group (default: as many as the global buffer's half
    and the accumulators allow). Fewer vectors per group means longer chunks and passes of more
    rows: fewer switches between buffer writes and MACs (each one pays both read/write
    turnarounds on a data-bus write path) for more row activations; lowering times both."""
    nch = len(channels)
    pus = hw.pus_per_channel
    m, rows = shape.matrices, shape.rows
    slots: list[list[Slice | None]]
    if m >= nch:
        per = ceil(m / nch)
        slots = [[Slice(i, 0, rows) if (i := c + s * nch) < m else None for s in range(per)] for c in range(nch)]
        rows_per_slot = rows
    else:
        spc = nch // m  # channels per matrix (extra channels idle)
        rows_per_slot = ceil(rows / spc)
        slots = []
        for c in range(nch):
            i, part = divmod(c, spc)
            r0 = part * rows_per_slot
            ok = i < m and r0 < rows
            slots.append([Slice(i, r0, min(rows, r0 + rows_per_slot)) if ok else None])
    rows_per_pu = ceil(rows_per_slot / pus)
    gb = hw.gb_bursts
    half = gb // 2 if double_buffer and gb >= 2 else gb
    double_buffer = double_buffer and gb >= 2
    vg = max(1, min(shape.vectors, half, hw.pim.acc_registers, max_vg or shape.vectors))
    epb = hw.elements_per_burst
    k_bursts = ceil(shape.k / epb)
    # a run (one row's chunk) must not straddle a DRAM row: chunk divides the row's columns
    chunk = _largest_divisor_at_most(hw.organization.columns, max(1, min(half // vg, k_bursts)))
    rows_per_pass = max(1, min(rows_per_pu, hw.pim.acc_registers // vg))
    return Tiling(
        shape,
        tuple(channels),
        tuple(tuple(s) for s in slots),
        rows_per_pu,
        pus,
        vg,
        rows_per_pass,
        chunk,
        epb,
        double_buffer,
        double_buffer if interleave is None else interleave,
        split_macs,
    )


def channel_signature(t: Tiling, ci: int) -> tuple:
    """Channels with equal signatures run structurally identical command sequences (same
    commands, counts and stamps; only data addresses differ): per slot and unit, the rows it
    holds and where fused parts cut them (each cut is one more accumulator read-out)."""
    edges = tuple(sorted({e for p in t.shape.parts for e in (p.row0, p.row0 + p.rows)}))
    return _signature(t.slots[ci][: t.slot_count], t.rows_per_pu, t.pus, edges)


@lru_cache(maxsize=4096)  # bounded: lowering and decode ask for the same few channels again and again
def _signature(slots: tuple[Slice | None, ...], rows_per_pu: int, pus: int, edges: tuple[int, ...]) -> tuple:
    """channel_signature of a channel whose slots are `slots` (Tiling.pu_rows, unrolled)."""
    out = []
    for sl in slots:
        for pu in range(pus):
            r0 = None if sl is None else sl.row0 + pu * rows_per_pu
            r1 = None if sl is None else min(r0 + rows_per_pu, sl.row1)
            if sl is None or r0 >= r1:
                out.append(0)
                continue
            cuts = tuple(e - r0 for e in edges if r0 < e < r1)
            out.append((r1 - r0, cuts) if cuts else r1 - r0)
    return tuple(out)


def channel_parts(t: Tiling, ci: int) -> tuple:
    """Per slot and unit of channel `ci`: the fused part (index into shape.parts) of each run of
    rows between part cuts. With the channel's signature (the runs) and base row, this fixes
    every field of its commands but host offsets: banks, rows, columns, counts, and the tensors
    they name (a part's weight copy, its output's staging)."""
    if not t.shape.parts:
        return ()
    return _parts(t.slots[ci][: t.slot_count], t.rows_per_pu, t.pus, t.shape.parts)


@lru_cache(maxsize=4096)  # bounded, as _signature
def _parts(slots: tuple[Slice | None, ...], rows_per_pu: int, pus: int, parts: tuple) -> tuple:
    """channel_parts of a channel whose slots are `slots`, of a shape cut into `parts`."""
    edges = sorted({e for p in parts for e in (p.row0, p.row0 + p.rows)})
    out = []
    for sl in slots:
        for pu in range(pus):
            r0 = None if sl is None else sl.row0 + pu * rows_per_pu
            r1 = None if sl is None else min(r0 + rows_per_pu, sl.row1)
            if sl is not None and r0 < r1:
                out.append(tuple(_part_at(parts, r) for r in (r0, *(e for e in edges if r0 < e < r1))))
    return tuple(out)


def _part_at(parts: tuple, row: int) -> int | None:
    """The index of the part holding `row` (MVShape.part_of, then its index in parts)."""
    for p in parts:
        if p.row0 <= row < p.row0 + p.rows:
            return parts.index(p)
    return None


def slot_rows(t: Tiling, ci: int) -> tuple:
    """The row range each slot of channel `ci` holds (None: padding). Channels with equal slot
    rows write a KV append to the same banks, rows and columns (from other host offsets)."""
    return tuple(None if sl is None else (sl.row0, sl.row1) for sl in t.slots[ci])


def structure_key(t: Tiling) -> tuple:
    """Beside a channel's signature, what fixes its command sequence up to data addresses and DRAM
    rows: the tiling's arithmetic and the shape's dimensions, not its names. The tasks of
    repeated layers share it (and so their timing: a task is timed from a quiet state, where
    which rows it opens does not matter, only when)."""
    sh = t.shape
    return (
        sh.kind_key,
        sh.matrices,
        sh.rows,
        sh.k,
        sh.vectors,
        sh.batch,
        sh.groups,
        sh.heads_per_group,
        sh.head_dim,
        sh.max_ctx,
        sh.heads,
        len(t.channels),
        t.slot_count,
        t.rows_per_pu,
        t.pus,
        t.vg,
        t.rows_per_pass,
        t.chunk_bursts,
        t.elements_per_burst,
        t.double_buffer,
        t.interleave,
        t.split_macs,
    )
