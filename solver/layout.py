"""DRAM-row-aligned layout of an MV op's blocks in the banks of its channels.

Inside each PIM unit the resident data is laid out in the order the MAC commands consume it:
slot, pass, chunk, row-in-pass, each *run* (one row's chunk) taking `chunk_bursts` consecutive
bursts. Runs never straddle a DRAM row (chunk_bursts divides the row's columns). DRAM rows
(*segments*) alternate between the unit's banks (ping-pong: while one bank is being read, the
other one is precharged and activated), so segment i lives in bank `pu*bpp + i % bpp`, DRAM row
`base_row + i // bpp`. Every unit of every channel of the tiling uses the same addresses.
"""

from __future__ import annotations

from dataclasses import dataclass
from functools import cached_property
from math import ceil

from hwmodel import Hardware
from hwmodel.streams import Placement

from .tiling import Tiling


@dataclass(frozen=True)
class RunAddress:
    segment: int
    col: int


class Layout:
    def __init__(self, hw: Hardware, tiling: Tiling, base_rows: dict[int, int] | int = 0):
        self.hw, self.t, self.interleave = hw, tiling, tiling.interleave
        self._masks: dict[int, int] = {}
        if isinstance(base_rows, int):
            base_rows = {ch: base_rows for ch in tiling.channels}
        self.base_rows = base_rows
        self.bpp = hw.pim.banks_per_pu
        self.columns = hw.organization.columns
        t = tiling
        # run index of (slot, pass, chunk, a): offsets per (slot, pass)
        self._pass_base: list[list[int]] = []
        n = 0
        for _s in range(t.slot_count):
            bases = []
            for p in range(t.passes):
                bases.append(n)
                n += t.chunks * t.pass_rows(p)
            self._pass_base.append(bases)
        self.runs = n

    def run_index(self, slot: int, p: int, c: int, a: int) -> int:
        return self._pass_base[slot][p] + c * self.t.pass_rows(p) + a

    def address(self, slot: int, p: int, c: int, a: int) -> RunAddress:
        burst = self.run_index(slot, p, c, a) * self.t.chunk_bursts
        return RunAddress(burst // self.columns, burst % self.columns)

    # ---- where segment i lives: bank `sel` of each unit, DRAM row `rel_row` above the base ------
    def sel(self, seg: int) -> int:
        """Interleaved (ping-pong): segments alternate between the unit's banks. Not interleaved
        (vendor-library style): the first half of the unit's rows in its first bank, and so on."""
        if self.interleave or self.bpp == 1:
            return seg % self.bpp
        return seg // self.rows_per_bank

    def rel_row(self, seg: int) -> int:
        if self.interleave or self.bpp == 1:
            return seg // self.bpp
        return seg % self.rows_per_bank

    def bank(self, pu: int, seg: int) -> int:
        return pu * self.bpp + self.sel(seg)

    def row(self, channel: int, seg: int) -> int:
        return self.base_rows[channel] + self.rel_row(seg)

    @cached_property
    def segments(self) -> int:
        return ceil(self.runs * self.t.chunk_bursts / self.columns)

    @cached_property
    def rows_per_bank(self) -> int:
        return ceil(self.segments / self.bpp)

    def segment_mask(self, segment: int) -> int:
        """All-bank mask: the bank holding `segment` in every unit."""
        sel = self.sel(segment)
        mask = self._masks.get(sel)
        if mask is None:
            mask = 0
            for pu in range(self.t.pus):
                mask |= 1 << (pu * self.bpp + sel)
            self._masks[sel] = mask
        return mask

    def pass_blocks(self, ci: int):
        """Every (slot, pu, matrix, first row, rows, pass, chunk) block of real data on channel ci."""
        t = self.t
        for slot in range(t.slot_count):
            for pu in range(t.pus):
                held = t.pu_rows(ci, slot, pu)
                if held is None:
                    continue
                m, r0, r1 = held
                for p in range(t.passes):
                    pr0 = r0 + p * t.rows_per_pass
                    nrows = min(t.pass_rows(p), r1 - pr0)
                    if nrows <= 0:
                        continue
                    for c in range(t.chunks):
                        yield slot, pu, m, pr0, nrows, p, c

    def placements(self) -> list[Placement]:
        """Where every real element of the resident tensor lives."""
        t, sh = self.t, self.t.shape
        epb, cb, cols = t.elements_per_burst, t.chunk_bursts, self.columns
        stride_k = sh.element_stride()
        # burst offset of the first run of every (slot, pass, chunk): the same in every unit
        first = {
            (slot, p, c): self.run_index(slot, p, c, 0) * cb
            for slot in range(t.slot_count)
            for p in range(t.passes)
            for c in range(t.chunks)
        }
        out: list[Placement] = []
        for ci, ch in enumerate(t.channels):
            for slot, pu, m, pr0, nrows, p, c in self.pass_blocks(ci):
                k0 = c * cb * epb
                klen = min(t.chunk_len(c) * epb, sh.k - k0)
                b0 = first[(slot, p, c)]
                seg0, seg1 = b0 // cols, (b0 + (nrows - 1) * cb) // cols
                if stride_k == 1 and klen == cb * epb and seg0 == seg1 and sh.same_part(pr0, pr0 + nrows - 1):
                    # the pass's rows are consecutive runs in one DRAM row
                    start = sh.element_index(m, pr0, k0)
                    row_stride = sh.element_index(m, pr0 + 1, k0) - start if nrows > 1 else 0
                    out.append(
                        Placement(
                            sh.resident_at(pr0),
                            ch,
                            self.bank(pu, seg0),
                            self.row(ch, seg0),
                            b0 % cols,
                            start,
                            klen,
                            nrows,
                            row_stride,
                        )
                    )
                    continue
                for a in range(nrows):
                    burst = b0 + a * cb
                    seg = burst // cols
                    bank, row, col = self.bank(pu, seg), self.row(ch, seg), burst % cols
                    start = sh.element_index(m, pr0 + a, k0)
                    tensor = sh.resident_at(pr0 + a)
                    if stride_k == 1:
                        out.append(Placement(tensor, ch, bank, row, col, start, klen))
                    else:
                        out.append(Placement(tensor, ch, bank, row, col, start, 1, klen, stride_k))
        return out

    def locate(
        self, ch_index: int, m: int, row: int, k: int, slot: int | None = None
    ) -> tuple[int, int, int, int, int] | None:
        """(pu, bank, dram row, col, lane) of matrix m's element (row, k) on that channel (in
        `slot` if the caller knows it). The unit follows from the row: units hold consecutive
        runs of rows_per_pu rows of the slot's slice."""
        t = self.t
        epb = t.elements_per_burst
        for slot in range(t.slot_count) if slot is None else (slot,):  # noqa: B020  (one slot, or every slot)
            sl = t.slots[ch_index][slot]
            if sl is None or sl.matrix != m or not sl.row0 <= row < sl.row1:
                continue
            pu = (row - sl.row0) // t.rows_per_pu
            held = t.pu_rows(ch_index, slot, pu) if pu < t.pus else None
            if held is not None and held[1] <= row < held[2]:
                local = row - held[1]
                p, a = divmod(local, t.rows_per_pass)
                c, within = divmod(k, t.chunk_bursts * epb)
                addr = self.address(slot, p, c, a)
                burst, lane = divmod(within, epb)
                ch = t.channels[ch_index]
                return pu, self.bank(pu, addr.segment), self.row(ch, addr.segment), addr.col + burst, lane
        return None
