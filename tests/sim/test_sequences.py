"""Hand-derived command sequences: the expected cycles are computed here from the formulas."""

from __future__ import annotations

import numpy as np
import pytest
from simgen import PRESETS, streams

from hwmodel import load_hardware
from hwmodel.isa import make
from hwmodel.model import COMMANDS
from sim import SimulationError, simulate


def _p(hw):
    return hw.timing.params


@pytest.mark.parametrize("preset", PRESETS)
def test_four_rows_read_in_order(preset):
    """One bank reads every burst of rows 0..3. Row i: ACT_i; first RD at ACT_i + tRCDRD, then one
    RD every tCCD_L (same bank = same bank group); PRE at max(last RD + tRTP, ACT_i + tRAS);
    ACT_{i+1} at max(PRE + tRP, ACT_i + tRC)."""
    hw = load_hardware(preset, ["organization.channels=1"])
    p, cols = _p(hw), hw.organization.columns
    s = []
    for r in range(4):
        s += [make("ACT", mask=1, row=r), make("RD", bank=0, col=0, count=cols, dst=0, offset=0), make("PRE", mask=1)]
    res = simulate(hw, streams(hw, s, symbols=["t"]), functional=False)
    act = 0
    expect = []
    for _ in range(4):
        rd0 = act + p["tRCDRD"]
        rdl = rd0 + (cols - 1) * p["tCCD_L"]
        pre = max(rdl + p["tRTP"], act + p["tRAS"])
        expect += [(act, act), (rd0, rdl), (pre, pre)]
        act = max(pre + p["tRP"], act + p["tRC"])
    t = res.times(0)
    assert list(zip(t.issue.tolist(), t.last.tolist())) == expect
    # makespan: the last completion - PRE + tRP, or the last read's data (RD + CL + BL2)
    assert res.cycles == max(expect[-1][0] + p["tRP"], expect[-2][1] + p["CL"] + p["BL2"])
    assert int(res.row_misses.sum()) == 4 and int(res.row_hits.sum()) == 4 * (cols - 1)
    rd = res.log[res.log["command"] == COMMANDS.index("RD")]
    assert len(rd) == 4 * cols and np.all(np.diff(rd["cycle"][:cols]) == p["tCCD_L"])


@pytest.mark.parametrize("preset", PRESETS)
def test_all_banks_activated_back_to_back(preset):
    """ACT every bank of a channel, bank groups interleaved, unstamped. ACT_i issues at
    max(ACT_{i-1} + tACT_BUS (the row bus, any rank), ACT_{i-1} + tRRD_S, last ACT of its bank group + tRRD_L,
    ACT_{i-4} of its rank + tFAW) - ranks counted separately for tRRD_S and tFAW."""
    hw = load_hardware(preset, ["organization.channels=1"])
    p, org = _p(hw), hw.organization
    order = [
        r * org.banks_per_rank + g * org.banks_per_group + i
        for r in range(org.ranks)
        for i in range(org.banks_per_group)
        for g in range(org.bank_groups)
    ]
    s = [make("ACT", mask=1 << b, row=5) for b in order] + [make("PRE", mask=(1 << len(order)) - 1)]
    res = simulate(hw, streams(hw, s, symbols=["t"]), functional=False)
    times: list[int] = []
    for i, b in enumerate(order):
        t = 0 if i == 0 else times[-1] + max(1, p["tACT_BUS"])  # an ACT holds the channel's row bus
        same_rank = [times[j] for j in range(i) if org.rank_of(order[j]) == org.rank_of(b)]
        same_group = [times[j] for j in range(i) if org.bank_group_of(order[j]) == org.bank_group_of(b)]
        if same_rank:
            t = max(t, same_rank[-1] + p["tRRD_S"])
        if same_group:
            t = max(t, same_group[-1] + p["tRRD_L"])
        if len(same_rank) >= 4:
            t = max(t, same_rank[-4] + p["tFAW"])
        times.append(t)
    assert res.times(0).issue[: len(order)].tolist() == times
    # PRE of all banks: tRAS after the last ACT
    assert res.times(0).issue[-1] == times[-1] + p["tRAS"]


@pytest.mark.parametrize("preset", PRESETS)
def test_mac_sweep_spacing(preset):
    """WRGB of n bursts (one every tCCD_S); ACT; all-bank MAC sweep of n: first at ACT + tRCDMAC
    (or the last WRGB's data, or its turnaround on a data-bus write path),
    then one every mac spacing tMAC; RDACC at last MAC + tMACL."""
    hw = load_hardware(preset, ["organization.channels=1"])
    p = _p(hw)
    n = min(hw.gb_bursts, hw.organization.columns)
    bpp, nb = hw.pim.banks_per_pu, hw.organization.banks_per_channel
    mask = sum(1 << b for b in range(0, nb, bpp))
    s = [
        make("WRGB", gb=0, count=n, src=0, offset=0),
        make("ACT", mask=mask, row=0),
        make("MAC", mask=mask, col=0, count=n, gb=0, acc=0),
        make("RDACC", bank=0, acc=0, count=1, dst=0, offset=0, stride=1),
        make("PRE", mask=mask),
    ]
    res = simulate(hw, streams(hw, s, symbols=["t"]), functional=False)
    act = (n - 1) * p["tCCD_S"] + 1
    last_wrgb = (n - 1) * p["tCCD_S"]
    turnaround = [hw.timing.latency_of(c) for c in hw.timing.constraints if (c.prev, c.next) == ("WRGB", "MAC")]
    mac0 = max([act + p["tRCDMAC"], last_wrgb + p["tGB"]] + [last_wrgb + t for t in turnaround])
    t = res.times(0)
    assert t.issue[1] == act and t.issue[2] == mac0
    macs = res.log[res.log["command"] == COMMANDS.index("MAC")]["cycle"]
    assert macs.tolist() == [mac0 + k * p["tMAC"] for k in range(n)]
    assert t.issue[3] == macs[-1] + p["tMACL"]
    assert res.pu_macs[0].sum() == n * len(range(0, nb, bpp))
    assert res.stalls["MAC->MAC channel tMAC"] == (n - 1) * (p["tMAC"] - 1)


def test_global_buffer_burst_readiness():
    """A MAC reads a global-buffer burst no earlier than tGB after the WRGB that wrote it (on a
    dedicated global-buffer write path: over the data bus the WRGB -> MAC turnaround binds first)."""
    hbm2 = load_hardware("hbm2-pim", ["organization.channels=1", "pim.gb_write_path=dedicated"])
    p = _p(hbm2)
    s = [
        make("ACT", mask=1, row=0),
        make("WRGB", cycle=100, gb=3, count=1, src=0, offset=0),
        make("MAC", mask=1, col=0, count=1, gb=3, acc=0),
        make("PRE", mask=1),
    ]
    res = simulate(hbm2, streams(hbm2, s, symbols=["t"]), functional=False)
    assert res.times(0).issue[2] == 100 + p["tGB"]
    s[2] = s[2].at(100 + p["tGB"] - 1)
    with pytest.raises(SimulationError) as e:
        simulate(hbm2, streams(hbm2, s, symbols=["t"]), functional=False)
    assert "tGB" in e.value.constraint and e.value.needed == p["tGB"] and e.value.actual == p["tGB"] - 1
    # reading another burst is not held up
    s[2] = make("MAC", mask=1, col=0, count=1, gb=0, acc=0, cycle=101)
    s[1] = make("WRGB", cycle=100, gb=3, count=1, src=0, offset=0)
    simulate(hbm2, streams(hbm2, s, symbols=["t"]), functional=False)


def test_refresh_owed_too_long(fpga):
    """No REF for (max_postponed + 1) x tREFI cycles: at that cycle max_postponed + 1 are owed."""
    p, maxp = _p(fpga), fpga.timing.max_postponed_refresh
    late = (maxp + 1) * p["tREFI"] + 10
    s = [make("ACT", mask=1, row=0), make("PRE", mask=1, cycle=late)]
    with pytest.raises(SimulationError) as e:
        simulate(fpga, streams(fpga, s), functional=False)
    assert e.value.kind == "refresh" and e.value.cycle == (maxp + 1) * p["tREFI"] and e.value.stream == 0


def test_refresh_late_ref_and_owed_at_end(fpga):
    p, maxp = _p(fpga), fpga.timing.max_postponed_refresh
    trefi = p["tREFI"]
    # REF #1 is due by (1 + maxp) * tREFI: issuing it at that cycle is one too late
    with pytest.raises(SimulationError) as e:
        simulate(fpga, streams(fpga, [make("REF", cycle=(1 + maxp) * trefi)]), functional=False)
    assert e.value.kind == "refresh" and e.value.instr == 0 and e.value.cycle == (1 + maxp) * trefi
    ok = [make("REF", cycle=(1 + maxp) * trefi - 1)] + [make("REF") for _ in range(maxp + 1)]
    simulate(fpga, streams(fpga, ok), functional=False)
    # ending at 2 x tREFI + 5 with one REF: one owed at the end
    end = [make("REF", cycle=10), make("ACT", mask=1, row=0, cycle=2 * trefi), make("PRE", mask=1)]
    with pytest.raises(SimulationError) as e:
        simulate(fpga, streams(fpga, end), functional=False)
    assert e.value.kind == "refresh" and "owing 1" in str(e.value)
    simulate(fpga, streams(fpga, [make("REF", cycle=10), make("REF")] + end[1:]), functional=False)


def test_refresh_needs_closed_banks(hbm2):
    with pytest.raises(SimulationError) as e:
        simulate(hbm2, streams(hbm2, [make("ACT", mask=4, row=0), make("REF"), make("PRE", mask=4)]), functional=False)
    assert e.value.kind == "bank_state" and e.value.bank == 2 and e.value.instr == 1


def test_bus_conflict_and_stream_order(hbm2):
    s = [make("ACT", mask=1, row=0, cycle=10), make("ACT", mask=1 << 4, row=0, cycle=10), make("PRE", mask=0x11)]
    with pytest.raises(SimulationError) as e:
        simulate(hbm2, streams(hbm2, s), functional=False)
    err = e.value
    assert err.kind == "bus" and err.cycle == 10 and err.instr == 1 and err.needed == 1 and err.actual == 0
    # a sweep: the next instruction may not start before the sweep's last command
    s = [
        make("WRGB", gb=0, count=4, src=0, offset=0, cycle=0),
        make("ACT", mask=1, row=0, cycle=5),
        make("PRE", mask=1),
    ]
    with pytest.raises(SimulationError) as e:
        simulate(hbm2, streams(hbm2, s, symbols=["t"]), functional=False)
    assert e.value.kind == "bus" and e.value.instr == 1


@pytest.mark.parametrize(
    "bad, kind",
    [
        ([make("MAC", mask=1, col=0, count=1, gb=0, acc=0)], "bank_state"),  # closed bank
        ([make("ACT", mask=1, row=0), make("ACT", mask=1, row=1)], "bank_state"),  # open bank
        ([make("PRE", mask=1)], "bank_state"),
        ([make("ACT", mask=3, row=0), make("MAC", mask=3, col=0, count=1, gb=0, acc=0)], "pim_unit"),
        ([make("ACT", mask=1, row=0), make("MAC", mask=1, col=0, count=1, gb=8, acc=0)], "range"),  # GB has 8
        ([make("ACT", mask=1, row=0), make("MAC", mask=1, col=0, count=1, gb=0, acc=8)], "range"),  # 8 accumulators
        ([make("RDACC", bank=0, acc=4, count=5, dst=0, offset=0, stride=1)], "range"),
        ([make("ACT", mask=1, row=0), make("RD", bank=0, col=30, count=3, dst=0, offset=0)], "range"),
        ([make("ACT", mask=1 << 16, row=0)], "range"),
        ([make("ACT", mask=1, row=16384)], "range"),
        ([make("RD", bank=16, col=0, count=1, dst=0, offset=0)], "range"),
        ([make("WRGB", gb=0, count=0, src=0, offset=0)], "range"),
        ([make("HOP", op=0)], "stream"),
    ],
)
def test_state_and_range_errors(hbm2, bad, kind):
    with pytest.raises(SimulationError) as e:
        simulate(hbm2, streams(hbm2, bad, symbols=["t"]), functional=False)
    assert e.value.kind == kind, str(e.value)
    assert e.value.stream == 0 and e.value.instr == len(bad) - 1 and e.value.text and e.value.cycle is not None


@pytest.mark.parametrize(
    "opened, mac_mask, kind, bank",
    [
        (0b0001, 0b0011, "bank_state", 1),  # bank 1 closed and bank 1 shares bank 0's unit: the state first
        (0b0010, 0b0111, "bank_state", 0),  # the lowest bad bank is reported
        (0b0111, 0b1111, "pim_unit", 1),  # bank 1 doubles a unit before bank 3 (closed) is reached
        (0b0011, 0b0011, "pim_unit", 1),
    ],
)
def test_first_bad_bank_of_a_mask(hbm2, opened, mac_mask, kind, bank):
    """A MAC over several banks reports the first bank, in bank order, that breaks a rule; at one
    bank the bank state is checked before the PIM unit (hbm2-pim: banks 2u and 2u+1 share unit u)."""
    s = [make("ACT", mask=opened, row=0), make("MAC", mask=mac_mask, col=0, count=1, gb=0, acc=0)]
    with pytest.raises(SimulationError) as e:
        simulate(hbm2, streams(hbm2, s, symbols=["t"]), functional=False)
    assert (e.value.kind, e.value.bank, e.value.instr) == (kind, bank, 1), str(e.value)


def test_open_banks_survive_slices(hbm2, monkeypatch):
    """The kernel keeps the open banks as a bitmask between slices of a streamed run: a bank opened
    in one slice is open (MAC legal, ACT not) in the next."""
    import sim.engine as engine

    monkeypatch.setattr(engine, "SLICE", 1)
    ok = [
        make("ACT", mask=0b0101, row=3),
        make("MAC", mask=0b0101, col=0, count=1, gb=0, acc=0),
        make("PRE", mask=0b0101),
    ]
    res = simulate(hbm2, streams(hbm2, ok, symbols=["t"]), functional=False, record=False)
    assert res.cycles > 0
    with pytest.raises(SimulationError) as e:
        simulate(
            hbm2,
            streams(hbm2, ok[:1] + [make("ACT", mask=0b0100, row=1)], symbols=["t"]),
            functional=False,
            record=False,
        )
    assert (e.value.kind, e.value.bank, e.value.instr) == ("bank_state", 2, 1)


def test_bank_left_open_at_end(hbm2):
    with pytest.raises(SimulationError) as e:
        simulate(hbm2, streams(hbm2, [make("ACT", mask=1 << 5, row=7)]), functional=False)
    assert e.value.kind == "bank_state" and e.value.bank == 5 and "still open" in str(e.value)


def test_sig_wait_timing(hbm2):
    """SIG is set at the completion of everything before it; WAIT releases sync_cycles later."""
    p = _p(hbm2)
    ch0 = [make("ACT", mask=1, row=0), make("PRE", mask=1), make("SIG", id=7)]
    ch1 = [make("WAIT", id=7), make("ACT", mask=1, row=0), make("PRE", mask=1)]
    res = simulate(hbm2, streams(hbm2, ch0, ch1), functional=False)
    sig = p["tRAS"] + p["tRP"]  # PRE at tRAS, done tRP later
    assert res.signals == {7: sig}
    assert res.times(1).issue[1] == sig + hbm2.host.sync_cycles
    # a stamped instruction may not issue before its WAIT releases
    ch1[1] = ch1[1].at(sig + hbm2.host.sync_cycles - 1)
    with pytest.raises(SimulationError) as e:
        simulate(hbm2, streams(hbm2, ch0, ch1), functional=False)
    assert e.value.kind == "sync" and e.value.stream == 1 and e.value.instr == 1


def test_refresh_pulled_in_credit(fpga):
    """At most max_pulled_in REFs ahead of schedule earn credit: REF #j is legal from cycle
    (j - max_pulled_in) x tREFI, refused one cycle before; an unstamped one waits for its credit."""
    p, pull = _p(fpga), fpga.timing.max_pulled_in_refresh
    trefi = p["tREFI"]
    ahead = [make("REF") for _ in range(pull)]
    ok = simulate(fpga, streams(fpga, ahead + [make("REF", cycle=trefi)]), functional=False)
    assert ok.times(0).issue[pull] == trefi
    with pytest.raises(SimulationError) as e:
        simulate(fpga, streams(fpga, ahead + [make("REF", cycle=trefi - 1)]), functional=False)
    err = e.value
    assert err.kind == "refresh" and err.instr == pull and err.cycle == trefi - 1
    assert err.needed == trefi and err.actual == trefi - 1 and "max_pulled_in_refresh" in str(err)
    waits = simulate(fpga, streams(fpga, ahead + [make("REF")]), functional=False)
    assert waits.times(0).issue[pull] == trefi and waits.stalls["REF pulled-in credit"] > 0


def test_refresh_interval_at_most_nine_trefi(fpga):
    """Two REFs at most max_refresh_interval x tREFI apart: legal at the limit, refused one beyond."""
    p, gap = _p(fpga), fpga.timing.max_refresh_interval * _p(fpga)["tREFI"]
    ahead = [make("REF") for _ in range(fpga.timing.max_pulled_in_refresh)]  # the 8th at 7 x tRFC
    last = 7 * p["tRFC"]
    ok = simulate(fpga, streams(fpga, ahead + [make("REF", cycle=last + gap)]), functional=False)
    assert ok.times(0).issue[len(ahead) - 1] == last
    with pytest.raises(SimulationError) as e:
        simulate(fpga, streams(fpga, ahead + [make("REF", cycle=last + gap + 1)]), functional=False)
    err = e.value
    assert err.kind == "refresh" and err.instr == len(ahead) and "max_refresh_interval" in str(err)
    assert err.needed == gap and err.actual == gap + 1
