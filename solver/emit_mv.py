"""Emit the command sequence of one MV task on one channel (unstamped, in issue order).

The order is what makes it fast; the simulator's earliest-legal-cycle issue makes it exact.
`style="overlap"` (what the solver uses):
- ping-pong: while the units read one DRAM row (segment) in one bank of each pair, the other
  bank is precharged and activated for the next segment. A MAC sweep holds the in-order command
  stream until its last burst, so the PRE and the ACT go *inside* the segment's MAC runs, each
  after the burst at which the timing table first allows it (`row_commands.RowCommands`): the run is split
  there (MAC count=k1; PRE; MAC ...; ACT; MAC rest). The other bank's row change is then hidden
  whenever the segment streams for at least tRTP + tRP + tRCDMAC;
- double-buffered global buffer: the next chunk's WRGB bursts are spread over the MAC bursts
  of the current chunk (at least one after each MAC instruction; when a chunk has more bursts to
  load than MAC instructions, the MACs are split into shorter runs so the loads go in between -
  a tiling alternative, `Tiling.split_macs`, that lowering times and keeps only where faster),
  and the cycles a unit waits anyway after an ACT (tRCDMAC) carry loads too;
- with one bank per unit on a data-bus write path (`hbm3-pim`) every row change idles the units
  anyway (tRTP + tRP + tRCDMAC), and a load between two MACs pays both read/write turnarounds:
  the next chunk's loads go into the row changes instead (`row_change_loads`: after the PRE,
  the ACT among them), the rest with the chunk's last row change;
- the task's first row opens while the first chunk is written (`first_act_after`);
- accumulators read out (RDACC) per unit at the end of each pass, one bank group after another.
`style="naive"` (vendor-library style): the whole chunk is written to the global buffer before
its MACs, each DRAM row is activated only when needed and precharged right after use, nothing
overlaps.
"""

from __future__ import annotations

from collections import deque
from dataclasses import dataclass

import numpy as np

from hwmodel import Hardware
from hwmodel.isa import ISA, Instruction, make, make_args

from .layout import Layout
from .payload import Style
from .refresh_points import with_refresh
from .relocate import Relocations, table_key, task_table
from .row_commands import RowCommands, readout_act_wait, row_change_waits
from .symbols import Symbols, staging
from .tiling import channel_signature


def _scoped(hw: Hardware, prev: str, nxt: str) -> int:
    """The table's least gap between `prev` and `next` commands of one channel, whatever their banks
    (the largest of its rows' scopes: a WRGB names every bank group and rank)."""
    return max(hw.timing.rule(prev, nxt, sc) for sc in ("bank_group", "rank", "channel"))


def row_change_loads(hw: Hardware) -> tuple[int, int] | None:
    """(before the ACT, hidden): of the global-buffer loads a row change of one-bank units
    carries, how many go before its ACT (as many as issue before the ACT could), and how many a
    change takes from the next step's pending loads (as many as delay the next MAC not at all);
    None where a load between two MACs costs no more than the MAC spacing (a dedicated write
    path: loads are spread over the MACs instead).

    With one bank per unit every row change idles the units: last MAC at m, PRE at m + tRTP, ACT
    at + tRP, next MAC at + tRCDMAC. Loads there pay the read/write turnarounds (MAC -> WRGB rtw,
    WRGB -> MAC wtr) inside that idle time instead of on top of the MACs: the j-th load of the
    change issues at m + rtw + (j - 1) x wsp (WRGB spacing), so the ACT goes after the loads
    that issue before m + tRTP + tRP (in-order stream), and w loads delay the next MAC not at all
    while rtw + (w - 1) x wsp + wtr <= tRTP + tRP + tRCDMAC. hbm3-pim: 17 + 2 (w - 1) + 19 <= 46,
    5 loads before the ACT, 6 in all. Where even fewer loads than fit before the ACT delay the
    next MAC, they still all go before it: the MAC waits for the last load, which an ACT ahead of
    them would only push back (hbm2-pim with one bank per unit: 2 of the 4 loads of a k-split
    chunk before the ACT, the loop's II 169 -> 165 cycles, the least one,
    solver/cmdlevel/modulo.py).

    On a shared command bus (a pseudo-channel pair) the two channels' changes come a few cycles
    apart and their loads interleave on the column bus, one slot apart. The even channel's load
    after its ACT lands in the odd channel's slot and pushes that channel's last loads, so its
    next MAC waits a cycle for the data. There the emitter has a change carry only the loads that
    go before its ACT where the step's later changes can take the rest at that rate
    (`_change_budget`)."""
    t, s = hw.timing, hw.mac_interval
    rtw, wtr, wsp = _scoped(hw, "MAC", "WRGB"), _scoped(hw, "WRGB", "MAC"), max(1, _scoped(hw, "WRGB", "WRGB"))
    if rtw + wtr <= 2 * s:
        return None
    idle = t.rule("MAC", "PRE", "bank") + t.rule("PRE", "ACT", "bank")
    before = max(0, (idle - 1 - rtw) // wsp + 1)
    free = max(0, (idle + t.rule("ACT", "MAC", "bank") - rtw - wtr) // wsp + 1)
    return before, free


def _changes_left(access) -> list[int]:
    """Per access: how many row changes (a segment other than the access before's) the accesses
    after it in the same chunk step hold."""
    out = [0] * len(access)
    left = 0
    for j in range(len(access) - 1, -1, -1):
        out[j] = left
        if j and access[j][0] == access[j - 1][0]:
            left += access[j][2] != access[j - 1][2]
        else:
            left = 0
    return out


def _change_budget(change_loads: tuple[int, int], pending: int, later: int | None) -> int:
    """The loads a row change carries (row_change_loads: `before` the ACT, `free` in all): on a
    shared command bus (`later`: the step's row changes after this one) only those before the
    ACT, if this change and the later ones can take all `pending` loads at that rate (hbm3-pim:
    5 of 6; the GEMV 8192 x 4096 loop 1,365 -> 1,360 cycles, the least one,
    solver/cmdlevel/modulo.py), else as many as are free (the loads left over would go as a
    block between MACs, paying both turnarounds: the GEMV 4096 by rows)."""
    before, free = change_loads
    if later is not None and pending <= before * (1 + later):
        return before
    return free


def first_act_after(hw: Hardware, loads: int) -> int:
    """Of the `loads` buffer writes before a task's first MAC, how many go before the ACT of its
    first row: the ACT as late as it can go without holding back the first MAC (which waits
    tRCDMAC after the ACT and WRGB -> MAC, or the buffer's data latency tGB, after the last
    write), so that it takes no place in front of a write that the MAC waits for (gddr6-aim,
    tRCDMAC 56, tGB 3, no turnaround: after 5 of 32 writes, the first MAC at 65 instead of 119;
    where the writes take longer than the row, after all of them, as before)."""
    t = hw.timing
    wtr = max(_scoped(hw, "WRGB", "MAC"), t.params.get("tGB", 0))
    wsp = max(1, _scoped(hw, "WRGB", "WRGB"))
    ahead = -(-(t.rule("ACT", "MAC", "bank") - wtr + 1) // wsp)  # writes the ACT must precede
    return min(loads, max(0, loads - ahead))


class _Interned:
    """Instructions of one kind, built once per distinct field values: row commands and MACs
    recur across passes, chunks and channels."""

    def __init__(self, op: str, *fields: str):
        self.op, self.fields = op, fields
        self.ordered = fields == ISA.by_mnemonic(op).field_names  # (then built from the values as they are)
        self._built: dict[tuple[int, ...], Instruction] = {}

    def __call__(self, *values: int) -> Instruction:
        ins = self._built.get(values)
        if ins is None:
            ins = self._built[values] = (
                make_args(self.op, values) if self.ordered else make(self.op, **dict(zip(self.fields, values)))
            )
        return ins


@dataclass
class _Template:
    """The commands of the first channel emitted for a row distribution, and where its data
    commands sit (found when another channel first uses the template: most tilings time one
    channel of each distribution and never build a second)."""

    channel: int  # index in the tiling's channels
    matrices: tuple[int, ...]  # per slot: whose vectors the WRGBs write
    commands: list[Instruction]
    _positions: tuple[list[int], list[int]] | None = None

    def positions(self) -> tuple[list[int], list[int]]:
        """(positions of the WRGBs, positions of the RDACCs)."""
        if self._positions is None:
            ops = [ins.op for ins in self.commands]
            self._positions = (
                [i for i, op in enumerate(ops) if op == "WRGB"],
                [i for i, op in enumerate(ops) if op == "RDACC"],
            )
        return self._positions


class MVEmitter:
    def __init__(self, hw: Hardware, layout: Layout, symbols: Symbols, style: Style = Style.OVERLAP):
        self.hw, self.lay, self.t, self.sym = hw, layout, layout.t, symbols
        self.style = Style(style)
        self.bpp = hw.pim.banks_per_pu
        self.epb = hw.elements_per_burst
        self._staging = {out: symbols.id(staging(out)) for out in self.t.shape.outputs}  # RDACC destinations
        self.vec_sym = symbols.id(self.t.shape.vector)
        self._wrgb_cache: dict[tuple[int, int, int, int], tuple[Instruction, ...]] = {}
        self._mac = _Interned("MAC", "mask", "col", "count", "gb", "acc")
        self._act = _Interned("ACT", "mask", "row")
        self._pre = _Interned("PRE", "mask")
        self._templates: dict[tuple, _Template] = {}  # per channel signature and base row
        self.split_used = False  # the last channel emitted split a MAC run (else split_macs made no difference)
        shape = self.t.shape
        self._part_edges = sorted({e for p in shape.parts for e in (p.row0, p.row0 + p.rows)})
        self._readout_order = self._units_for_readout()

    def _units_for_readout(self) -> list[int]:
        """The units in the order their accumulators are read out. Overlap style: one unit of each
        bank group in turn (its first bank's place in the group, then the group), so that two
        consecutive RDACCs name different bank groups and go tCCD_S apart instead of tCCD_L
        (hbm3-pim: 32 read-outs in 62 cycles instead of 110). Naive style (the vendor-library
        baseline): unit order."""
        units = range(self.t.pus)
        if self.style != Style.OVERLAP:
            return list(units)
        org = self.hw.organization
        return sorted(units, key=lambda pu: ((pu * self.bpp) % org.banks_per_group, org.bank_group_of(pu * self.bpp)))

    # ------------------------------------------------------------------------------------------
    def steps(self):
        """(slot, pass, vector group, chunk) in execution order."""
        t = self.t
        for slot in range(t.slot_count):
            for p in range(t.passes):
                for g in range(t.vector_groups):
                    for c in range(t.chunks):
                        yield slot, p, g, c

    def _group_vectors(self, g: int) -> range:
        t = self.t
        return range(g * t.vg, min(t.shape.vectors, (g + 1) * t.vg))

    def _wrgb(self, ci: int, slot: int, g: int, c: int, half: int) -> tuple[Instruction, ...]:
        """GB writes for chunk c of the vectors of group g (one burst per instruction); channels
        that broadcast the same vectors share them."""
        matrix = self._slot_matrix(ci, slot)
        key = (matrix, g, c, half)
        writes = self._wrgb_cache.get(key)
        if writes is None:
            writes = self._wrgb_cache[key] = self._gb_writes(matrix, g, c, half)
        return writes

    def _slot_matrix(self, ci: int, slot: int) -> int:
        """The matrix whose vectors the slot broadcasts (a padding slot: channel 0's first)."""
        t = self.t
        sl = t.slots[ci][slot] or next(s for s in t.slots[0] if s is not None)
        return sl.matrix

    def _gb_writes(self, matrix: int, g: int, c: int, half: int) -> tuple[Instruction, ...]:
        t, sh = self.t, self.t.shape
        base = half * (self.hw.gb_bursts // 2 if t.double_buffer else 0)
        out = []
        n = t.chunk_len(c)
        for vi, v in enumerate(self._group_vectors(g)):
            for b in range(n):
                src = sh.vector_index(matrix, v, (c * t.chunk_bursts + b) * self.epb)
                out.append(make_args("WRGB", (base + vi * t.chunk_bursts + b, 1, self.vec_sym, src)))
        return tuple(out)

    def _rdacc(self, ci: int, slot: int, p: int, g: int) -> list[Instruction]:
        t, sh = self.t, self.t.shape
        out = []
        for pu in self._readout_order:
            held = t.pu_rows(ci, slot, pu)
            if held is None:
                continue
            m, r0, r1 = held
            pr0 = r0 + p * t.rows_per_pass
            n = min(t.pass_rows(p), r1 - pr0)
            if n <= 0:
                continue
            bank = pu * self.bpp
            # one RDACC per vector and per run of rows that belong to one output (fused parts)
            runs = self._part_runs(pr0, n)
            for vi, v in enumerate(self._group_vectors(g)):
                for a0, a1 in runs:
                    tensor, offset = sh.output_at(m, v, pr0 + a0)
                    # RDACC bank, acc, count, dst, offset, stride
                    out.append(
                        make_args(
                            "RDACC", (bank, vi * t.rows_per_pass + a0, a1 - a0, self._staging_id(tensor), offset, 1)
                        )
                    )
        return out

    def _staging_id(self, tensor: str) -> int:
        i = self._staging.get(tensor)
        if i is None:
            i = self._staging[tensor] = self.sym.id(staging(tensor))
        return i

    def _part_runs(self, r0: int, n: int) -> list[tuple[int, int]]:
        """Rows r0 .. r0+n-1 cut where one fused part ends and the next begins: [(a0, a1), ...]
        relative to r0."""
        edges = [0, *(e - r0 for e in self._part_edges if r0 < e < r0 + n), n]
        return list(zip(edges, edges[1:]))

    def _plan(self):
        """Steps, the run access order (step, row-in-pass, segment, col, bursts) and, for every
        access, the next distinct segment; the same for every channel of the tiling (cached)."""
        cached = getattr(self.lay, "_plan_cache", None)
        if cached is not None:
            return cached
        t, lay = self.t, self.lay
        steps = list(self.steps())
        access: list[tuple[int, int, int, int, int]] = []
        cb, cols = t.chunk_bursts, lay.columns
        for si, (slot, p, _g, c) in enumerate(steps):
            n = t.chunk_len(c)
            first = lay.run_index(slot, p, c, 0) * cb
            for a in range(t.pass_rows(p)):
                burst = first + a * cb
                access.append((si, a, burst // cols, burst % cols, n))
        next_seg: list[int | None] = [None] * len(access)
        nxt = None
        for i in range(len(access) - 1, -1, -1):
            next_seg[i] = nxt
            if i == 0 or access[i - 1][2] != access[i][2]:
                nxt = access[i][2]
        lay._plan_cache = (steps, access, next_seg)
        return lay._plan_cache

    # ------------------------------------------------------------------------------------------
    def emit(self, ci: int) -> list[Instruction]:
        """The command sequence of channel `channels[ci]` of the tiling.

        Channels with the same row distribution run the same commands but for their data
        (WRGB sources, RDACC destinations): after the first, they are built from its template."""
        sig = (channel_signature(self.t, ci), self.lay.base_rows[self.t.channels[ci]])
        template = self._templates.get(sig)
        if template is None:
            seq = self._emit(ci)
            self._templates[sig] = _Template(ci, self._slot_matrices(ci), seq)
            return seq
        seq = list(template.commands)
        if ci == template.channel:
            return seq
        gb_writes, readouts = template.positions()
        if self._slot_matrices(ci) != template.matrices:  # other vectors in the global buffer
            for pos, ins in zip(gb_writes, self._gb_sequence(ci)):
                seq[pos] = ins
        for pos, ins in zip(readouts, self._readout_sequence(ci)):
            seq[pos] = ins
        return seq

    def encoded(self, ci: int, cache: dict, encode, layers: Relocations | None = None) -> np.ndarray:
        """`encode(emit(ci))` without emitting channels of the same structure again (see
        relocate.task_table; the roles: the vector, then each output's staging)."""
        t = self.t
        return task_table(
            *self._table_args(ci),
            cache,
            layers,
            lambda: (self.sym.get(t.shape.vector), *(self.sym.get(staging(o)) for o in t.shape.outputs)),
            lambda: encode(self._emit(ci)),
        )

    def table_key(self, ci: int) -> tuple:
        """The key `encoded` keeps channel `ci`'s table under (relocate.table_key)."""
        return table_key(*self._table_args(ci))

    def _table_args(self, ci: int) -> tuple:
        return ("mv", self.style), self.t, ci, self.lay.base_rows[self.t.channels[ci]]

    def _slot_matrices(self, ci: int) -> tuple[int, ...]:
        """Per slot of the channel: whose vectors its WRGBs write."""
        return tuple(self._slot_matrix(ci, slot) for slot in range(self.t.slot_count))

    def _gb_sequence(self, ci: int) -> list[Instruction]:
        """The channel's WRGB instructions in the order `_emit` places them."""
        steps = self._plan()[0]
        overlap = self.style == Style.OVERLAP and self.t.double_buffer
        resident = self._resident_steps()
        out: list[Instruction] = []
        for i, (slot, _p, g, c) in enumerate(steps):
            if not resident[i]:
                out.extend(self._wrgb(ci, slot, g, c, i % 2 if overlap else 0))
        return out

    def _resident_steps(self) -> list[bool]:
        """Per step: its chunk of vectors is already in the global-buffer half it would be written
        to (the same slot, vector group and chunk was the last thing loaded there), so it is not
        loaded again. That happens when every chunk fits in the buffer at once (e.g. two chunks
        in the two halves of a double buffer): later passes find the vector in place. The same
        for every channel of the tiling (it depends on slots, not on their matrices)."""
        cached = getattr(self.lay, "_resident_cache", None)
        key = (self.style,)
        if cached is not None and cached[0] == key:
            return cached[1]
        steps = self._plan()[0]
        double = self.style == Style.OVERLAP and self.t.double_buffer
        holds: dict[int, tuple[int, int, int]] = {}
        out = []
        for i, (slot, _p, g, c) in enumerate(steps):
            half = i % 2 if double else 0
            out.append(holds.get(half) == (slot, g, c))
            holds[half] = (slot, g, c)
        self.lay._resident_cache = (key, out)
        return out

    def _readout_sequence(self, ci: int) -> list[Instruction]:
        """The channel's RDACC instructions in the order `_emit` places them: after each
        (slot, pass, vector group)."""
        out: list[Instruction] = []
        for slot, p, g in self._readout_points():
            out.extend(self._rdacc(ci, slot, p, g))
        return out

    def _readout_points(self) -> list[tuple[int, int, int]]:
        steps = self._plan()[0]
        points: list[tuple[int, int, int]] = []
        for slot, p, g, _c in steps:
            if not points or points[-1] != (slot, p, g):
                points.append((slot, p, g))
        return points

    def _emit(self, ci: int) -> list[Instruction]:
        t, lay, hw = self.t, self.lay, self.hw
        overlap = self.style == Style.OVERLAP
        seq: list[Instruction] = []
        open_rows: dict[int, int] = {}  # bank set (bank index within the unit) -> open segment
        steps, access, next_seg = self._plan()
        rows = RowCommands(seq, self._mac)  # the other bank set's PRE/ACT, inside the MAC runs
        prefetch_seg = -1  # the segment whose row commands `rows` holds
        pre_wait, act_wait = row_change_waits(hw)
        settled_act_wait = readout_act_wait(hw)
        readout_banks = sum(1 << (pu * self.bpp) for pu in range(t.pus))  # the banks RDACC names

        ch = t.channels[ci]

        def open_segment(seg: int, carry: list[Instruction] | None = None) -> bool:
            """PRE/ACT so that `seg` is open; True if an ACT was emitted. `carry`: buffer loads
            that go in the row change (after the PRE, the first `change_loads[0]` before the
            ACT; row_change_loads), or as a block when the row is already open."""
            sel = lay.sel(seg)
            cur = open_rows.get(sel)
            carry = carry or []
            if cur == seg:
                seq.extend(carry)
                return False
            if cur is not None:
                seq.append(self._pre(lay.segment_mask(cur)))
            k = change_loads[0] if cur is not None and change_loads else 0
            seq.extend(carry[:k])
            seq.append(self._act(lay.segment_mask(seg), lay.row(ch, seg)))
            seq.extend(carry[k:])
            open_rows[sel] = seg
            return True

        loads = _LoadSpreader(seq, rows.mac, t.split_macs)  # the next step's GB loads
        left = _changes_left(access) if hw.organization.shared_bus else None
        # one bank per unit on a data-bus write path: the next step's loads go into the row
        # changes (where the units idle anyway), never between two MACs (row_change_loads)
        change_loads = row_change_loads(hw) if overlap and self.bpp == 1 and t.double_buffer else None
        act_loads = max(0, hw.timing.rule("ACT", "MAC", "bank") // max(hw.link_cycles, hw.timing.p("tCCD_S")) - 1)

        # loop invariants of the MAC emission below (it runs once per MAC instruction)
        seg_mask = lay.segment_mask
        double_overlap = t.double_buffer and overlap
        gb_half, cb, rpp = hw.gb_bursts // 2, t.chunk_bursts, t.rows_per_pass
        half = 0
        prev_step = None
        step_of_access = 0
        resident = self._resident_steps()
        for idx, (si, a, seg, col, n) in enumerate(access):
            slot, p, g, c = steps[si]
            carry: list[Instruction] | None = None  # loads for this access's row change
            if si != prev_step:
                # entering a new chunk step
                readout = False
                if prev_step is not None:
                    ps, pp, pg, pc = steps[prev_step]
                    readout = (ps, pp, pg) != (slot, p, g)
                    if readout:
                        # the row commands go out while the accumulators settle, but an ACT of a
                        # bank the RDACCs name (a unit's first) only after them: the standard
                        # wants tRCD between an ACT and a column read of its bank
                        late = rows.flush(keep=readout_banks)
                        loads.flush()
                        seq.extend(self._rdacc(ci, ps, pp, pg))
                        seq.extend(late)
                half = step_of_access % 2
                if not overlap or step_of_access == 0 or not t.double_buffer:
                    if not resident[si]:
                        rows.flush()
                        block = self._wrgb(ci, slot, g, c, half if t.double_buffer and overlap else 0)
                        # the first row opens while the buffer fills (first_act_after: a table
                        # lookup, so only for the task's first step of the overlap style)
                        j = first_act_after(hw, len(block)) if overlap and prev_step is None else len(block)
                        if j < len(block) and open_rows.get(lay.sel(seg)) != seg:
                            seq.extend(block[:j])
                            open_segment(seg)
                            seq.extend(block[j:])
                        else:
                            seq.extend(block)
                elif change_loads is not None and not readout and loads.pending:
                    carry = list(loads.pending)  # this step's loads, finished in its row change
                    loads.pending.clear()
                else:
                    if loads.pending:
                        rows.flush()
                    loads.flush()
                # queue the next step's GB load (double buffer)
                if overlap and t.double_buffer and si + 1 < len(steps) and not resident[si + 1]:
                    ns, npp, ng, nc = steps[si + 1]
                    macs = t.pass_rows(p) * len(self._group_vectors(g))
                    loads.queue(self._wrgb(ci, ns, ng, nc, (step_of_access + 1) % 2), macs, macs * t.chunk_len(c))
                step_of_access += 1
                prev_step = si
            if rows.pending and seg == prefetch_seg:
                rows.flush()  # not yet issued: issue now, before its first MAC
            if change_loads is not None:
                if carry is None and loads.pending and open_rows.get(lay.sel(seg), seg) != seg:
                    k = _change_budget(change_loads, len(loads.pending), None if left is None else left[idx])
                    carry = [loads.pending.popleft() for _ in range(min(len(loads.pending), k))]
                open_segment(seg, carry)
            elif open_segment(seg) and overlap and loads.pending:
                # the unit waits tRCDMAC for its row anyway: the bus carries loads meanwhile
                loads.emit(act_loads)
            # first access of a segment: prepare the next distinct segment in the other bank set,
            # its PRE and ACT placed by MAC bursts of this segment (row_change_waits)
            if overlap and self.bpp > 1 and (idx == 0 or access[idx - 1][2] != seg) and next_seg[idx] is not None:
                ns = next_seg[idx]
                sel = lay.sel(ns)
                if sel != lay.sel(seg) and open_rows.get(sel) != ns:
                    rows.flush()  # (an earlier segment's, if it had too few bursts)
                    cur = open_rows.get(sel)
                    act_after = 0  # bursts of this segment before the ACT
                    if cur is not None:
                        # after a read-out the other bank's last MAC is tMACL (>= tRTP) behind:
                        # its PRE goes before this segment's first MAC
                        settled = bool(seq) and seq[-1].op == "RDACC"
                        rows.queue(0 if settled else pre_wait, self._pre(lay.segment_mask(cur)))
                        act_after = settled_act_wait if settled else act_wait
                    rows.queue(act_after, self._act(lay.segment_mask(ns), lay.row(ch, ns)))
                    prefetch_seg = ns
                    open_rows[sel] = ns
            mask = seg_mask(seg)
            gb0 = half * gb_half if double_overlap else 0
            for vi in range(len(self._group_vectors(g))):
                gbase, acc = gb0 + vi * cb, vi * rpp + a
                if loads.pending and overlap and change_loads is None:
                    loads.interleave(mask, col, n, gbase, acc)
                else:
                    rows.mac(mask, col, n, gbase, acc)
            if not overlap:
                # closed-page policy: precharge as soon as the row's last run has been read
                if idx + 1 == len(access) or access[idx + 1][2] != seg:
                    seq.append(self._pre(lay.segment_mask(seg)))
                    open_rows.pop(lay.sel(seg), None)
        rows.flush()
        loads.flush()
        if prev_step is not None:
            ps, pp, pg, _pc = steps[prev_step]
            seq.extend(self._rdacc(ci, ps, pp, pg))
        for _sel, seg in sorted(open_rows.items()):
            seq.append(self._pre(lay.segment_mask(seg)))
        self.split_used = loads.diverged
        return with_refresh(hw, seq)


class _LoadSpreader:
    """Spreads the next chunk's global-buffer loads (pending WRGBs) over the current chunk's MACs.

    One load follows each MAC instruction while any is pending. When the step has more loads than
    MAC instructions (and the tiling allows splitting), that is not enough: then after MAC bursts
    `done` of the step's `bursts`, at least ceil(loads * done / bursts) loads have been emitted,
    and a MAC that must carry more than one load is split into shorter runs (same accumulator,
    consecutive columns and buffer bursts) with the loads in between."""

    def __init__(self, seq: list[Instruction], mac, may_split: bool):
        """`mac(mask, col, count, gb, acc)` emits a MAC run (RowCommands.mac)."""
        self.seq, self.mac, self.may_split = seq, mac, may_split
        self.pending: deque[Instruction] = deque()
        self.loads = self.bursts = self.done = self.emitted = 0
        self.split = False
        self.diverged = False  # some MAC carried more than one load: not what an unsplit tiling emits

    def queue(self, loads, macs: int, bursts: int) -> None:
        """The next step's loads, to spread over this step's `macs` MAC instructions (`bursts`)."""
        self.pending = deque(loads)
        self.loads, self.bursts, self.done, self.emitted = len(self.pending), max(1, bursts), 0, 0
        self.split = self.may_split and self.loads > macs

    def flush(self) -> None:
        """Emit the loads still pending, in one block."""
        self.seq.extend(self.pending)
        self.pending.clear()

    def emit(self, k: int) -> None:
        for _ in range(min(k, len(self.pending))):
            self.seq.append(self.pending.popleft())
            self.emitted += 1

    def interleave(self, mask: int, col: int, n: int, gb: int, acc: int) -> None:
        self.done += n
        if not self.split:  # one load after the MAC (the general case below with due = 0)
            self.mac(mask, col, n, gb, acc)
            self.seq.append(self.pending.popleft())
            self.emitted += 1
            return
        due = -(-self.loads * min(self.done, self.bursts) // self.bursts)
        q = min(len(self.pending), max(1, due - self.emitted))
        self.diverged |= q > 1  # (q == 1: one MAC, one load, as unsplit)
        pieces = min(n, q)
        for i in range(pieces):
            a, b = n * i // pieces, n * (i + 1) // pieces
            self.mac(mask, col + a, b - a, gb + a, acc)
            self.emit(q * (i + 1) // pieces - q * i // pieces)
