"""Row changes hidden behind the other bank of each PIM unit (issue 16): the overlap emitter (and
the weight reads of host GEMVs) puts the other bank set's PRE and ACT inside the current
segment's MAC (read) runs, each at the burst where
the timing table first allows it, so a MAC of the next row follows the last MAC of the current
one at the MAC spacing. Before, a MAC sweep held the command stream until its last burst and
the ACT went out after it: on gemv-64x128-fpga every row change cost 11 idle cycles (last MAC of
a row to first MAC of the next: 15 cycles, against tMAC = 4)."""

from __future__ import annotations

import pytest

import ir
from hwmodel import load_hardware
from solver.emit_mv import MVEmitter
from solver.host_emit import emit_weight_read, read_pace
from solver.layout import Layout
from solver.mvshape import mv_shape
from solver.row_commands import row_change_waits
from solver.symbols import Symbols
from solver.task_timing import time_task
from solver.tiling import make_tiling


def _emitted(hw, program, style="overlap"):
    shape = mv_shape(program, program.ops[0].name)
    t = make_tiling(hw, shape, tuple(range(hw.organization.channels)), double_buffer=style == "overlap")
    seq = MVEmitter(hw, Layout(hw, t), Symbols(), style).emit(0)
    return seq, time_task(hw, seq)


def _bursts(hw, seq, timing):
    """(cycle, mask) of every MAC burst and (cycle, op, mask) of every other command."""
    macs, others = [], []
    for ins, at in zip(seq, timing.issue):
        if ins.op == "MAC":
            mask, count = ins.args[0], ins.args[2]
            macs += [(int(at) + i * hw.mac_interval, mask) for i in range(count)]
        else:
            others.append((int(at), ins.op, ins.args[0] if ins.op in ("ACT", "PRE") else None))
    return macs, others


def _row_changes(macs, others):
    """Gaps between the last MAC of a segment and the first MAC of the next, where only row
    commands lie between them (a pass boundary waits for the accumulators and a buffer load for
    the read/write turnarounds, not for a row)."""
    data = [c for c, op, _m in others if op not in ("ACT", "PRE")]
    out = []
    for (c0, m0), (c1, m1) in zip(macs, macs[1:]):
        if m0 != m1 and not any(c0 < r < c1 for r in data):
            out.append(c1 - c0)
    return out


def macs_after(cycle, macs):
    return [c for c, _m in macs if c > cycle]


def test_fpga_row_change_waits_follow_the_table():
    hw = load_hardware("fpga-proto")
    t = hw.timing
    assert (hw.mac_interval, t.p("tRTP"), t.p("tRP")) == (4, 5, 14)
    # PRE after 1 burst of the segment (the other bank's last MAC + tRTP = B0 + 1), ACT after 4
    # (PRE + tRP = B0 + 15, between the 4th and the 5th burst)
    assert row_change_waits(hw) == (1, 4)


def test_gemv_64x128_fpga_row_changes_cost_nothing():
    hw = load_hardware("fpga-proto")
    seq, timing = _emitted(hw, ir.gemv_program(64, 128))
    macs, others = _bursts(hw, seq, timing)
    gaps = _row_changes(macs, others)
    assert len(gaps) >= 12
    # every row change inside a pass: the next MAC at the MAC spacing (was 15 cycles)
    assert set(gaps) == {hw.mac_interval}
    # each PRE goes out exactly tRTP after its banks' last MAC (or, after a pass's read-out,
    # before the first MAC of the next pass), each ACT exactly tRP after its PRE
    t = hw.timing
    last_mac: dict[int, int] = {}
    pre_at: dict[int, int] = {}
    events = sorted([(c, "MAC", m) for c, m in macs] + others, key=lambda e: e[0])
    checked = 0
    for cycle, op, mask in events:
        if op == "MAC":
            last_mac[mask] = cycle
        elif op == "RDACC":
            last_mac.clear()
            readout = cycle
        elif op == "PRE":
            if mask in last_mac:
                assert cycle == last_mac[mask] + t.p("tRTP")
            elif macs_after(cycle, macs):  # right after the read-out, before the next pass's first MAC
                assert cycle == readout + 1 and cycle < min(macs_after(cycle, macs))
            pre_at[mask] = cycle
        elif op == "ACT" and mask in pre_at:
            assert cycle == pre_at.pop(mask) + t.p("tRP")
            checked += 1
    assert checked >= 12
    # the MAC sweeps were split to carry them: more MAC instructions than accumulator runs
    assert sum(ins.op == "MAC" for ins in seq) > 2 * 16


@pytest.mark.parametrize("preset", ["fpga-proto", "hbm2-pim"])
def test_row_changes_hidden_on_two_bank_units(preset):
    """Every preset with two banks per unit: no row change inside a pass idles the units."""
    hw = load_hardware(preset, ["organization.channels=2"])
    assert hw.pim.banks_per_pu == 2
    # two chunks that stay in the two halves of the global buffer: no loads between the MACs
    seq, timing = _emitted(hw, ir.gemv_program(512, 8 * hw.elements_per_burst))
    gaps = _row_changes(*_bursts(hw, seq, timing))
    assert gaps and set(gaps) == {hw.mac_interval}


def test_naive_style_keeps_closed_page_order():
    """The vendor-library baseline is not touched: one MAC sweep per run, PRE after the row."""
    hw = load_hardware("fpga-proto")
    seq, _timing = _emitted(hw, ir.gemv_program(64, 128), style="naive")
    ops = [ins.op for ins in seq]
    for i, op in enumerate(ops):
        if op == "ACT":
            assert ops[i + 1] in ("MAC", "WRGB")


@pytest.mark.parametrize("preset", ["fpga-proto", "hbm2-pim"])
def test_weight_reads_go_at_the_channel_pace_across_row_changes(preset):
    """A host GEMV's weight reads: bursts one at a time across bank groups (tCCD_S / tLINK apart,
    not tCCD_L as one bank's sweep), and the other bank's row opened between them: every read
    follows the one before at the channel's pace, row changes included."""
    hw = load_hardware(preset, ["organization.channels=2"])
    program = ir.gemv_program(64 if preset == "fpga-proto" else 32, 4 * hw.organization.columns * hw.elements_per_burst)
    shape = mv_shape(program, program.ops[0].name)
    lay = Layout(hw, make_tiling(hw, shape, (0, 1)))
    one_by_one, pace = read_pace(hw)
    t = hw.timing
    assert one_by_one and pace == max(t.p("tCCD_S"), t.p("tLINK")) < t.p("tCCD_L")
    seq = emit_weight_read(hw, lay, Symbols(), 0)
    timing = time_task(hw, seq)
    reads = [int(c) for ins, c in zip(seq, timing.issue) if ins.op == "RD"]
    assert all(ins.args[2] == 1 for ins in seq if ins.op == "RD")
    assert len(reads) > 2 * hw.organization.columns
    assert {b - a for a, b in zip(reads, reads[1:])} == {pace}
    rows = [ins for ins in seq if ins.op == "ACT"]
    assert len(rows) >= 4  # row changes, all hidden
