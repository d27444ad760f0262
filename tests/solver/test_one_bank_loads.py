"""Buffer loads, first activation and read-out order of the overlap emitter on units of one bank
(issue 16): on `hbm3-pim` (one bank per unit, buffer written over the data bus) every row change
idles the units for tRTP + tRP + tRCDMAC, and the next chunk's loads go there instead of between
two MACs, where each would pay both read/write turnarounds; the read-outs go one bank group after
another; on `gddr6-aim` (tRCDMAC 56) the first row opens while the buffer fills."""

from __future__ import annotations

import ir
from hwmodel import load_hardware
from solver.emit_mv import MVEmitter, _change_budget, _changes_left, first_act_after, row_change_loads
from solver.layout import Layout
from solver.mvshape import mv_shape
from solver.symbols import Symbols
from solver.task_timing import time_task
from solver.tiling import make_tiling


def _emitted(hw, program, style="overlap"):
    shape = mv_shape(program, program.ops[0].name)
    t = make_tiling(hw, shape, tuple(range(hw.organization.channels)), double_buffer=style == "overlap")
    seq = MVEmitter(hw, Layout(hw, t), Symbols(), style).emit(0)
    return seq, time_task(hw, seq)


def test_row_change_loads_follow_the_table():
    hw = load_hardware("hbm3-pim")
    t = hw.timing
    # MAC -> WRGB 17, WRGB -> MAC 19, WRGB spacing 2; tRTP 8 + tRP 19 + tRCDMAC 19 = 46 idle
    assert (t.p("tRTP"), t.p("tRP"), t.p("tRCDMAC")) == (8, 19, 19)
    assert row_change_loads(hw) == (5, 6)
    # a dedicated write path has no turnaround: loads go between the MACs as before
    assert row_change_loads(load_hardware("gddr6-aim")) is None


def test_on_a_shared_bus_a_change_carries_the_loads_before_its_act_where_the_step_has_room():
    """A pseudo-channel pair's loads interleave on the column bus; the even channel's load after
    its ACT takes the odd channel's slot. So with (5 before the ACT, 6 in all) a change carries 5
    where this change and the step's later ones take every pending load at 5 each, else 6 (the
    rest would go as a block between MACs); without a shared bus always 6."""
    assert _change_budget((5, 6), 32, 7) == 5 and _change_budget((5, 6), 40, 7) == 5
    assert _change_budget((5, 6), 41, 7) == 6 and _change_budget((5, 6), 32, None) == 6
    # (step, _, segment, ...): row changes at accesses 1 and 3 of step 0, at 5 of step 1
    access = [(0, 0, 0), (0, 0, 1), (0, 0, 1), (0, 0, 2), (1, 0, 2), (1, 0, 3)]
    assert _changes_left(access) == [2, 1, 1, 0, 1, 0]


def test_hbm3_loads_go_into_row_changes_and_beat_the_closed_page_order():
    hw = load_hardware("hbm3-pim", ["organization.channels=2"])
    program = ir.gemv_program(2 * 32 * 4, 4096)
    seq, timing = _emitted(hw, program)
    ops = [ins.op for ins in seq]
    first_mac = ops.index("MAC")
    # after the first block, no WRGB sits between two MACs without a row change between them
    between = []
    for i, op in enumerate(ops[first_mac:], first_mac):
        if op == "MAC":
            between = []
        else:
            between.append(op)
            if op == "WRGB":
                assert "PRE" in between, (i, between)
    naive_seq, naive = _emitted(hw, program, "naive")
    assert timing.duration < naive.duration
    # each row change: the next MAC at most a few cycles later than the row alone needs
    t = hw.timing
    idle = t.p("tRTP") + t.p("tRP") + t.p("tRCDMAC")
    macs = [(int(at), ins.args[2]) for ins, at in zip(seq, timing.issue) if ins.op == "MAC"]
    gaps = [b - (a + (n - 1) * hw.mac_interval) for (a, n), (b, _m) in zip(macs, macs[1:])]
    assert min(gaps) >= idle and sum(gaps) <= len(gaps) * idle + 20 * len(gaps) // 4


def test_readouts_alternate_bank_groups():
    hw = load_hardware("hbm3-pim", ["organization.channels=2"])
    seq, timing = _emitted(hw, ir.gemv_program(2 * 32 * 4, 512))
    org = hw.organization
    banks = [ins.args[0] for ins in seq if ins.op == "RDACC"]
    assert sorted(banks) == list(range(32))
    groups = [org.bank_group_of(b) for b in banks]
    assert all(a != b for a, b in zip(groups, groups[1:]))
    at = [int(c) for ins, c in zip(seq, timing.issue) if ins.op == "RDACC"]
    assert at[-1] - at[0] == 2 * (len(at) - 1)  # tCCD_S apart, not tCCD_L
    # the naive style (the vendor-library baseline) keeps unit order
    naive, _ = _emitted(hw, ir.gemv_program(2 * 32 * 4, 512), "naive")
    assert [ins.args[0] for ins in naive if ins.op == "RDACC"] == list(range(32))


def test_gddr6_first_row_opens_while_the_buffer_fills():
    hw = load_hardware("gddr6-aim", ["organization.channels=2"])
    t = hw.timing
    seq, timing = _emitted(hw, ir.gemv_program(2 * 16 * 8, 4096))
    ops = [ins.op for ins in seq]
    j = ops.index("ACT")
    assert ops[:j] == ["WRGB"] * j and j == first_act_after(hw, ops.index("MAC") - 1) > 0
    first_mac = int(timing.issue[ops.index("MAC")])
    last_load = max(int(c) for ins, c in zip(seq[: ops.index("MAC")], timing.issue) if ins.op == "WRGB")
    # the MAC waits for its row or its buffer, whichever is later, and not for both in turn
    assert first_mac <= max(int(timing.issue[j]) + t.p("tRCDMAC"), last_load + t.p("tGB")) + 1
    assert first_mac < t.p("tRCDMAC") + last_load


def test_loads_that_delay_the_mac_anyway_go_before_the_act():
    """hbm2-pim with one bank per unit (a what-if): the row change idles 5 + 14 cycles before the
    ACT can go, a load costs MAC -> WRGB 16 + WRGB -> MAC 19, so no load hides whole (free 0),
    but two fit before the ACT without holding it back. They go there: the MAC waits for the last
    load either way, and an ACT in front of all of them would only push that load back. The
    k-split loop of GEMV 4096 then runs at the least II the modulo schedule proves (165, it was
    169: tests/solver/test_modulo.py proves 165 the least for this program)."""
    hw = load_hardware("hbm2-pim", ["pim.banks_per_pu=1"])
    assert row_change_loads(hw) == (2, 0)
    program = ir.gemv_program(2 * 64 * 8, 1024)
    seq, _timing = _emitted(load_hardware("hbm2-pim", ["pim.banks_per_pu=1", "organization.channels=2"]), program)
    ops = [ins.op for ins in seq]
    changes = []  # WRGBs between each row change's PRE and its ACT, after the first MAC
    for i in range(ops.index("MAC"), len(ops)):
        if ops[i] == "PRE" and "ACT" in ops[i:]:
            changes.append(ops[i : ops.index("ACT", i)].count("WRGB"))
    assert changes and max(changes) == 2
    assert changes.count(2) >= len(changes) // 2  # (the others carry no load)
