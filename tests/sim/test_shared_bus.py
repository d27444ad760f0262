"""Pseudo-channels sharing their channel's command buses (organization.command_bus = shared_pair,
hbm2-pim and hbm3-pim): the simulator (sim/engine.check_shared_buses, from the occupancy each
kernel records) and the standards checker (sim/stdcheck, hwmodel/standards/hbm2.yaml
`pseudo_channel_pairs`) both refuse two row commands, or two column commands, of channels 2k and
2k+1 in overlapping cycles (an ACT holds the row bus tACT_BUS = 2 cycles), legal at the limit and
refused one cycle beyond; a row and a column command may share a cycle; per_channel lifts it."""

from __future__ import annotations

import numpy as np
import pytest
from simgen import streams

import sim.channel as K
from hwmodel import load_hardware
from hwmodel.isa import make
from hwmodel.table import encode_stream
from sim import SimulationError, simulate
from sim.stdcheck import CheckOptions, check_log
from sim.timing import compile_tables

T = 200


@pytest.fixture(scope="module", params=["hbm2-pim", "hbm3-pim"])
def hw(request):
    return load_hardware(request.param, ["organization.channels=2"])


def _act(t, bank=0):
    return make("ACT", cycle=t, mask=1 << bank, row=1)


def _pre(t, bank=0):
    return make("PRE", cycle=t, mask=1 << bank)


def _rd(t, bank=0):
    return make("RD", cycle=t, bank=bank, col=0, count=1, dst=0, offset=0)


def _pair_programs(hw, kind: str, gap: int):
    """Channel 0 issues its command at T, channel 1 its command `gap` cycles later (negative:
    earlier). kind: ACT/ACT, ACT/PRE (channel 0's ACT, channel 1's PRE), RD/RD, ACT/RD."""
    late = T + 3 * hw.timing.p("tRC")
    if kind == "ACT/ACT":
        return [_act(T), _pre(late)], [_act(T + gap), _pre(late + 5)]
    if kind == "ACT/PRE":
        return [_act(T), _pre(late)], [_act(20), _pre(T + gap)]
    if kind == "RD/RD":
        return [_act(20), _rd(T), _pre(late)], [_act(40), _rd(T + gap), _pre(late + 5)]
    if kind == "ACT/RD":  # a row and a column command of the pair
        return [_act(T), _pre(late)], [_act(40), _rd(T + gap), _pre(late + 5)]
    raise AssertionError(kind)


def _run(hw, a, b, **kw):
    return simulate(hw, streams(hw, a, b), functional=False, **kw)


def _pair_violations(hw, a, b):
    """The standards checker's pair-rule violations of the program's command log (simulated with
    a bus per channel, so the simulator lets it through)."""
    free = load_hardware(hw.name, ["organization.channels=2", "organization.command_bus=per_channel"])
    log = _run(free, a, b, record=True).log
    return [v for v in check_log(log, hw) if v.rule.startswith("pair")]


@pytest.mark.parametrize(
    "kind, limit",
    [("ACT/ACT", "act"), ("ACT/PRE", "act"), ("RD/RD", 1)],
)
@pytest.mark.parametrize("order", [1, -1])
def test_pair_limit_legal_and_one_cycle_beyond_refused(hw, kind, limit, order):
    act_w = hw.timing.p("tACT_BUS")
    assert act_w == 2
    need = act_w if limit == "act" else 1
    if order == -1 and kind == "ACT/PRE":  # channel 1's PRE first: a 1-cycle row command
        need = 1
    # legal at the limit
    a, b = _pair_programs(hw, kind, order * need)
    _run(hw, a, b, record=False)
    assert _pair_violations(hw, a, b) == []
    # one cycle beyond
    a, b = _pair_programs(hw, kind, order * (need - 1))
    with pytest.raises(SimulationError) as e:
        _run(hw, a, b, record=False)
    err = e.value
    bus = "column" if kind == "RD/RD" else "row"
    first, second = (0, 1) if order == 1 else (1, 0)
    if need == 1:  # the same cycle: the odd channel's command is named
        first, second = 0, 1
    assert err.kind == "bus"
    assert err.cycle == T + max(0, order * (need - 1)) if order == 1 else err.cycle == T
    assert err.stream == second and err.partner[0] == first
    assert f"channels 0 and 1 share a {bus} command bus" in str(err)
    assert "shared_pair" in str(err) and f"channel {first} instr" in str(err)
    vs = _pair_violations(hw, a, b)
    assert vs, "stdcheck must refuse it too"
    assert {v.cycle for v in vs} <= {T, T + order * (need - 1)}
    assert all(bus in v.rule or "ACT 2-cycle" in v.rule for v in vs)


@pytest.mark.parametrize("gap", [0, 1])
def test_row_and_column_command_may_share_a_cycle(hw, gap):
    a, b = _pair_programs(hw, "ACT/RD", gap)
    _run(hw, a, b, record=False)
    assert _pair_violations(hw, a, b) == []


def test_per_channel_buses_accept_lockstep(hw):
    a, b = _pair_programs(hw, "ACT/ACT", 0)
    free = load_hardware(hw.name, ["organization.channels=2", "organization.command_bus=per_channel"])
    _run(free, a, b, record=False)
    log = _run(free, a, b, record=True).log
    assert [v for v in check_log(log, free) if v.rule.startswith("pair")] == []
    # the checker's option says the same as the hardware field
    assert check_log(log, free, options=CheckOptions(pseudo_channel_pairs=True))


def test_sweeps_interleave_and_collide_as_progressions(hw):
    """Sweeps are recorded as arithmetic progressions: MAC sweeps of the pair two cycles apart
    interleave on the column bus (MACs every tCCD_L = 4); one sweep's last burst on the other's
    first is found, at its cycle."""
    step = hw.mac_interval
    assert step >= 2
    n = 8

    def chan(t0, t_pre, setup=0):
        return [
            make("ACT", cycle=20 + setup, mask=1, row=1),
            make("WRGB", cycle=30 + setup, gb=0, count=n, src=0, offset=0),
            make("MAC", cycle=t0, mask=1, col=0, count=n, gb=0, acc=0),
            make("PRE", cycle=t_pre, mask=1),
        ]

    late = T + 4 * n * step
    _run(hw, chan(T, late), chan(T + step // 2, late + 3, 3), record=False)
    with pytest.raises(SimulationError) as e:
        _run(hw, chan(T, late), chan(T + (n - 1) * step, late + n * step, 3), record=False)
    assert e.value.cycle == T + (n - 1) * step and e.value.stream == 1 and "column" in str(e.value)


@pytest.mark.parametrize("k", [0, 1, 2, 5])
def test_a_run_of_one_mac_instructions_is_one_record_and_names_its_colliding_instruction(hw, k):
    """A sweep of two MACs and the one-MAC instructions after it at the same spacing are one
    bus-occupancy record; a partner's RD on its element k names the instruction issuing it."""
    step, n = hw.mac_interval, 6
    late = T + 4 * n * step
    ch0 = [make("ACT", cycle=20, mask=1, row=1), make("WRGB", cycle=30, gb=0, count=n, src=0, offset=0)]
    ch0.append(make("MAC", cycle=T, mask=1, col=0, count=2, gb=0, acc=0))
    ch0 += [make("MAC", cycle=T + i * step, mask=1, col=i, count=1, gb=i, acc=0) for i in range(2, n)]
    ch0.append(_pre(late))
    tab = compile_tables(hw)
    st = K.new_state(tab, len(ch0), None)
    rows = encode_stream(hw, ch0)
    assert K.call(tab, np.ascontiguousarray(rows.reshape(-1)), st, np.full(1, -1, dtype=np.int64)) == K.DONE
    occ = K.occupancy(st)
    assert occ[:, 4].tolist() == [K.ACT, K.WRGB, K.MAC, K.PRE]  # the MACs: one record
    assert occ[2, :3].tolist() == [T, step, n]
    ch1 = [make("ACT", cycle=40, mask=1, row=1), _rd(T + k * step), _pre(late + 5)]
    with pytest.raises(SimulationError) as e:
        _run(hw, ch0, ch1, record=False)
    want = 2 + max(0, k - 1)
    assert e.value.cycle == T + k * step and e.value.stream == 1 and e.value.partner == (0, want)
    assert f"channel 0 instr {want} `@{ch0[want].cycle} MAC" in str(e.value)


def test_occupancy_buffer_drains_and_grows(hw, monkeypatch):
    """A kernel's occupancy buffer drained many times (and grown for a sweep longer than it)
    still finds a collision at the end of the program."""
    monkeypatch.setattr(K, "OCC_CHUNK", 2)

    def chan(last, off=0):
        s = [make("ACT", cycle=20 + 3 * off, mask=1, row=1)]
        s += [_rd(100 + 4 * off + 8 * k) for k in range(40)]
        s.append(make("WRGB", cycle=500 + off, gb=0, count=hw.gb_bursts, src=0, offset=0))
        s += [_rd(last), _pre(last + 50 + off)]
        return s

    _run(hw, chan(1000), chan(1001, off=1), record=False)
    with pytest.raises(SimulationError) as e:
        _run(hw, chan(1000), chan(1000, off=1), record=False)
    assert e.value.cycle == 1000 and e.value.instr == 42


@pytest.mark.parametrize("jobs", [2, 3])
def test_parallel_gives_the_serial_first_error(hw, jobs):
    """The pair check runs after every channel: a parallel run reports the serial run's error,
    a channel's own violation before a collision of the pair, and the earliest collision over
    the pairs."""
    hw4 = load_hardware(hw.name, ["organization.channels=4"])
    a, b = _pair_programs(hw4, "RD/RD", 0)
    c, d = _pair_programs(hw4, "ACT/ACT", 1)
    ss = streams(hw4, a, b, c, d)
    errs = []
    for j in (1, jobs):
        with pytest.raises(SimulationError) as e:
            simulate(hw4, ss, functional=False, record=False, jobs=j)
        errs.append((str(e.value), e.value.cycle, e.value.stream))
    assert errs[0] == errs[1]
    assert errs[0][1] == T and errs[0][2] == 1  # pair (0, 1) at T before pair (2, 3) at T + 1
    # a channel's own timing error (channel 3's PRE before tRAS) comes first
    bad = [_act(T + 1), _pre(T + 2)]
    ss = streams(hw4, a, b, c, bad)
    for j in (1, jobs):
        with pytest.raises(SimulationError) as e:
            simulate(hw4, ss, functional=False, record=False, jobs=j)
        assert e.value.kind == "timing" and e.value.stream == 3


def test_oracle_yields_whole_sweeps_to_the_partner(hw):
    """The timing oracle's pair timing (sim.oracle.time_commands(..., yield_to=)): the commands
    go at the first cycles the partner leaves their bus free, a sweep moved whole (its commands
    at the sweep spacing, as the stamped program will issue them), and the two stamped programs
    simulate together without a collision."""
    from hwmodel import bus
    from sim.oracle import time_commands

    n = 8
    seq = [
        make("ACT", mask=0x5, row=1),
        make("WRGB", gb=0, count=n, src=0, offset=0),
        make("MAC", mask=0x5, col=0, count=n, gb=0, acc=0),
        make("MAC", mask=0x5, col=n, count=n, gb=0, acc=1),
        make("PRE", mask=0x5),
    ]
    alone = time_commands(hw, seq)
    rec = bus.records_from_commands(alone.command_cycles, alone.commands, alone.command_instrs)
    paired = time_commands(hw, seq, yield_to=rec)
    assert (
        bus.collision(
            rec, bus.records_from_commands(paired.command_cycles, paired.commands, paired.command_instrs), 0, 2
        )
        is None
    )
    assert paired.issue[0] >= alone.issue[0] + hw.timing.p("tACT_BUS")  # the even channel's ACT holds the row bus
    mac = paired.command_cycles[paired.commands == K.MAC]
    assert set(np.diff(mac[:n])) == {hw.mac_interval}  # the sweep moved whole
    a = [ins.at(int(t)) for ins, t in zip(seq, alone.issue)]
    b = [ins.at(int(t)) for ins, t in zip(seq, paired.issue)]
    assert _run(hw, a, b, record=False).cycles == max(alone.cycles, paired.cycles)


def test_a_sweep_passes_a_single_partner_command_between_its_bursts(hw):
    """A partner's lone column command between two bursts of a sweep is no collision: the sweep
    goes at its own earliest cycle (a regression: a one-command record ending before a later
    burst was taken for a clash, and the sweep waited until it had passed)."""
    from hwmodel import bus
    from sim.oracle import time_commands

    n = 4
    seq = [make("ACT", mask=0x5, row=1), make("WRGB", gb=0, count=n, src=0, offset=0)]
    seq += [make("MAC", mask=0x5, col=0, count=n, gb=0, acc=0), make("PRE", mask=0x5)]
    alone = time_commands(hw, seq)
    mac = alone.command_cycles[alone.commands == K.MAC]
    assert set(np.diff(mac)) == {hw.mac_interval} and hw.mac_interval > 1
    lone = np.array([[int(mac[0]) + 1, 0, 1, 0, K.RD]], dtype=np.int64)  # between the first two bursts
    paired = time_commands(hw, seq, yield_to=lone)
    assert list(paired.command_cycles[paired.commands == K.MAC]) == list(mac)
    assert (
        bus.collision(
            lone, bus.records_from_commands(paired.command_cycles, paired.commands, paired.command_instrs), 0, 2
        )
        is None
    )
    on = np.array([[int(mac[1]), 0, 1, 0, K.RD]], dtype=np.int64)  # on the second burst: the sweep moves
    moved = time_commands(hw, seq, yield_to=on)
    assert int(moved.command_cycles[moved.commands == K.MAC][0]) > int(mac[0])


def test_incremental_check_reports_the_whole_runs_collision(hw, monkeypatch):
    """The pairs are checked as their channels stop (slice ends, WAITs) and records that can meet
    nothing new are let go (sim/pairs.py): a streamed run cut into 3-instruction slices, serial
    or on threads, reports the collision the whole run reports, and a legal program passes."""
    import sim.engine

    def chan(off, clash_at=None):
        s = [make("ACT", cycle=20 + 3 * off, mask=1, row=1)]
        s += [_rd(100 + 4 * off + 8 * k) for k in range(30)]
        s += [make("SIG", id=10 + off), make("WAIT", id=11 - off)]
        s += [_rd(600 + 4 * off + 8 * k) for k in range(30)]
        if clash_at is not None:
            s.append(_rd(clash_at))
        s.append(_pre(1000 + 5 * off))
        return s

    legal = streams(hw, chan(0, 900), chan(1, 901))
    bad = streams(hw, chan(0, 900), chan(1, 900))
    whole = []
    for ss in (legal, bad):
        try:
            whole.append(simulate(hw, ss, functional=False, record=True).cycles)
        except SimulationError as e:
            whole.append(str(e))
    assert isinstance(whole[0], int) and "cycle 900" in whole[1]
    monkeypatch.setattr(sim.engine, "SLICE", 3)
    for jobs in (1, 2):
        assert simulate(hw, legal, functional=False, record=False, jobs=jobs).cycles == whole[0]
        with pytest.raises(SimulationError) as e:
            simulate(hw, bad, functional=False, record=False, jobs=jobs)
        assert str(e.value) == whole[1]
