"""The load/read-out boundaries of the hardware bound's channel view (solver/turnaround_bound.py):
the costs by hand from the timing rows, the term at a phase boundary, and never above a simulated
program where it binds (tiny buffers, few accumulators, batches, both write paths)."""

from __future__ import annotations

import pytest
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st

from hwmodel import load_hardware
from pimsat.instance import Instance
from pimsat.pipeline import SolveOptions, run
from solver.hardware_bound import Term, hardware_bound, op_work
from solver.turnaround_bound import phase_gaps


def test_costs_by_hand_hbm2_pim():
    g = phase_gaps(load_hardware("hbm2-pim"))
    # a load of the whole buffer: MAC -> WRGB 20 + 2 + 2 - 8 = 16, 7 more WRGBs x tCCD_S 2,
    # WRGB -> MAC 8 + 2 + 9 = 19, less tMAC 4: 45 for 8 x 8 new pairs in each of the 8 units;
    # read-outs of all 8 units: tMACL 22 + 7 RDACCs x 2 + RDACC -> MAC 2 - 4 = 34 for as many;
    # both in one gap, the WRGBs first: 16 + 14 + WRGB -> RDACC 14 + 14 + 2 - 4 = 56, for only as
    # many (the new accumulators meet only the new contents)
    assert g.gap == 34
    # with link reads (2 cycles each) inside: a load gap min(16, 4 - 2 + RD -> WRGB 16) + min(19,
    # WRGB -> RD 14) - 4 = 26; read-outs min(22, 4 - 2 + RD -> RDACC 2) + min(2, RDACC -> RD 2)
    # - 4 = 2 for the first unit, 2 for each further one: 16
    assert g.net == 16
    assert g.macs_per_phase == 8 * 8  # accumulators x buffer bursts (256 B / 32 B)
    assert g.first_load == 19
    # a REF may sit in one boundary's gap: tRFC 350 less what that boundary counts
    assert g.refresh_busy(350) == 350 - 34 and g.refresh_busy(350, 0.0) == 350 - 16
    assert g.refresh_busy(20) == 0


def test_a_dedicated_write_path_has_no_turnaround_so_no_term():
    g = phase_gaps(load_hardware("hbm2-pim", ["pim.gb_write_path=dedicated"]))
    assert g.gap == g.net == 0
    assert phase_gaps(load_hardware("gddr6-aim")).gap == 0


def test_the_costs_follow_an_overridden_row():
    hw = load_hardware("hbm2-pim")
    i = next(
        i
        for i, c in enumerate(hw.timing.constraints)
        if (c.prev, c.next, c.scope) == ("WRGB", "MAC", "bank_group") and c.when == "data_bus"
    )
    moved = phase_gaps(load_hardware("hbm2-pim", [f"timing.constraints[{i}].latency=40"]))
    assert moved.first_load == 40
    assert moved.gap == 34  # the load gap 16 + 40 - 4 = 52 is now dearer than the read-outs' 34


@pytest.mark.parametrize(
    ("rows", "sets", "channel"),
    [
        # 16 rows x 16 bursts over 4 units: 64 MACs each = one phase of 8 accumulators x 8
        # bursts, no boundary; the first load WRGB -> MAC 19 before the first MAC
        (16, [], 64 * 4 + 19),
        # 32 rows: 128 MACs per unit, two phases: one boundary of E_gap 22 (fpga-proto: 2 units
        # read out, 20 + 2, below a load's 31)
        (32, [], 128 * 4 + 22 + 19),
        # a buffer of 4 bursts: 64 MACs per unit are two phases of 8 x 4
        (16, ["pim.global_buffer_bytes=128"], 64 * 4 + 22 + 19),
        # a dedicated path: MACs alone
        (16, ["pim.gb_write_path=dedicated"], 64 * 4),
    ],
)
def test_the_term_at_a_phase_boundary_and_no_program_below(rows, sets, channel):
    """A channel's work in the channel view with every row in memory (the streaming term may let
    the host take a fraction), and every method's program above the bound."""
    inst = Instance(
        name=f"gaps-{rows}",
        program={"kind": "gemv", "n": rows, "k": 256},
        hardware={"preset": "fpga-proto", "set": sets},
    )
    hw, program = inst.build_hardware(), inst.build_program()
    g = phase_gaps(hw)
    assert sum(w.pim for w in op_work(hw, program, g)) + g.first_fill() == channel
    hb = hardware_bound(hw, program)
    for method in ("naive", "greedy", "cpsat"):
        r = run(inst, SolveOptions(method=method, time_limit=5.0, workers=1, functional=False))
        assert hb.cycles <= r.sim.cycles == r.compiled.predicted_cycles, (method, hb.as_dict(), r.sim.cycles)


def test_the_turnarounds_raise_streaming_on_a_data_bus_device_and_no_program_beats_it():
    """GEMV 256 x 1024 on two hbm2-pim channels: the unit view is the same with either write path
    (the turnaround rows are not its rows); the channel view adds the boundaries."""

    def inst(path: str) -> Instance:
        sets = ["organization.channels=2", "organization.rows=256", f"pim.gb_write_path={path}"]
        return Instance(
            name=f"gaps-{path}",
            program={"kind": "gemv", "n": 256, "k": 1024},
            hardware={"preset": "hbm2-pim", "set": sets},
        )

    data_bus, dedicated = (
        hardware_bound(i.build_hardware(), i.build_program()) for i in (inst("data_bus"), inst("dedicated"))
    )
    # unit view: 256 x 64 bursts / 16 units = 1,024 MACs x 4 per unit, the first ACT -> MAC
    # (tRCDMAC 14), one REF (tRFC 350) after the last column command: RD -> PRE 5 + PRE -> REF
    # 14 less its slot 2, had the host run a few rows whose weights it read last (after the last
    # MAC: its unit's read-out tMACL 22 + RDACC -> PRE 5 + PRE -> REF 14 - 4 = 37;
    # ChannelEnds.last)
    assert dedicated.as_dict()[Term.STREAMING] == 4096 + 14 + 350 + 17
    # channel view: 1,024 MACs per unit are 16 phases of 8 x 8: 15 boundaries of 34, the first
    # load 19, the REF at its cheapest after the last MAC's read-out (22 + 5 + 14 - 4: in a
    # boundary it would cost 5 + 14 + 350 + tRCDMAC 14 - 4 - 34, before the first MAC 350 + 14
    # - 19); the host's fraction (its GEMM in what is left of T, its weights' reads inside the
    # gaps) takes a little off
    full = 4096 + 15 * 34 + 19 + 350 + 37
    assert full - 100 < data_bus.as_dict()[Term.STREAMING] <= full
    for method in ("naive", "greedy", "cpsat"):
        r = run(inst("data_bus"), SolveOptions(method=method, time_limit=5.0, workers=1, functional=False))
        assert data_bus.cycles <= r.sim.cycles, (method, data_bus.as_dict(), r.sim.cycles)


HBM2_2CH = ["organization.channels=2", "organization.rows=256"]


@pytest.mark.parametrize(
    ("preset", "program", "sets"),
    [
        # batch 16 through a 1-burst buffer and 2 accumulators: 2 MACs per phase
        (
            "fpga-proto",
            {"kind": "gemv", "n": 8, "k": 512, "batch": 16},
            ["pim.global_buffer_bytes=32", "pim.acc_registers=2"],
        ),
        # a k-split-friendly shape (16 rows, k 1024) with 2 x 2 MACs per phase
        (
            "hbm2-pim",
            {"kind": "gemv", "n": 16, "k": 1024, "batch": 2},
            HBM2_2CH + ["pim.global_buffer_bytes=64", "pim.acc_registers=2"],
        ),
        # attention at batch 4 through a 1-burst buffer
        (
            "fpga-proto",
            {"kind": "attention", "heads": 2, "kv_heads": 2, "head_dim": 32, "context": 40, "batch": 4},
            ["pim.global_buffer_bytes=32"],
        ),
        # 16 accumulators a unit, read out by 2 RDACCs of 8 each (the pairs count's C < A)
        ("hbm2-pim", {"kind": "gemv", "n": 256, "k": 2048}, HBM2_2CH + ["pim.acc_registers=16"]),
    ],
    ids=["gemv-b16-gb32-acc2", "gemv-ksplit-b2-hbm2", "attention-b4-gb32", "gemv-acc16-hbm2"],
)
def test_where_the_boundaries_bind_no_program_is_below(preset, program, sets):
    """Cases where the channel view sets the bound (it is above the same device's with a
    dedicated write path, where the term is 0): every method's program is still above it."""

    def inst(path: str) -> Instance:
        return Instance(
            name="gaps-binds", program=program, hardware={"preset": preset, "set": sets + [f"pim.gb_write_path={path}"]}
        )

    data_bus, dedicated = (
        hardware_bound(i.build_hardware(), i.build_program()) for i in (inst("data_bus"), inst("dedicated"))
    )
    assert data_bus.cycles > dedicated.cycles
    for method in ("naive", "greedy", "cpsat"):
        r = run(inst("data_bus"), SolveOptions(method=method, time_limit=5.0, workers=1, groups=2, functional=False))
        assert data_bus.cycles <= r.sim.cycles == r.compiled.predicted_cycles, (
            method,
            data_bus.as_dict(),
            r.sim.cycles,
        )


def test_refresh_and_the_end_by_hand_hbm2_pim():
    """ChannelEnds (solver/turnaround_bound.py) on hbm2-pim at share 1 (no link reads counted)."""
    from solver.turnaround_bound import channel_ends

    hw = load_hardware("hbm2-pim")
    g = phase_gaps(hw)
    ends = channel_ends(hw, g, 1.0, host_tail=100)
    # a REF cluster between two MACs: MAC -> PRE tRTP 5, PRE -> REF tRP 14, ACT -> MAC tRCDMAC 14,
    # less the MAC's slot 4 and the boundary (34) it may hide
    assert ends.mid == 5 + 14 + 14 - 4 - 34
    # before the first MAC: tRCDMAC 14 after the REFs, where the first load's 19 was counted
    assert ends.first == 14 - 19
    # after the last MAC: its unit's read-out tMACL 22 after it, RDACC -> PRE 5, PRE -> REF 14,
    # less its slot (at least tRTP 5 + tRP 14 - 4; the read-out after the REFs would cost
    # REF -> RDACC 350 and the host's tail)
    assert ends.last == 22 + 5 + 14 - 4
    # no REF after it: tMACL 22, the read-out's data CL_ACC 20 + BL2 2, then the host's 100
    assert ends.tail == 22 + 22 + 100 - 4
    # no REF: the tail; one: after the last MAC (37) rather than in a gap (-5 + 140); two: one
    # before the first MAC or in a boundary and one after the last (-5 + 37), each REF tRFC 350
    # besides
    assert [ends.extra(n) for n in range(3)] == [140, 37, 32]
    assert ends.stretch(3900, 3000) == 3140
    assert ends.stretch(3900, 3800) == 3800 + 350 + 37
    assert ends.stretch(3900, 7500) == 7500 + 700 + 32
    # where the host may run part of the gemv at share 0, its reads may come last: the read's
    # RD -> PRE 5 + PRE -> REF 14 less its slot 2, its data CL 20 + BL2 2 less the slot
    reads = channel_ends(hw, g, 0.0, host_tail=100, reads=True)
    assert (reads.last, reads.tail) == (5 + 14 - 2, 20 + 2 - 2)
    assert reads.mid == 5 + 14 + 14 - 4 - g.net and reads.first == 14
    # never below the former count, tRFC - 34 per REF and nothing at the end
    for work in range(0, 20000, 997):
        assert ends.stretch(3900, work) >= g.refresh_busy(350) * ((ends.stretch(3900, work)) // 3900) + work


def test_a_gaps_least_cost_is_the_least_over_every_order_of_its_commands():
    """gap_costs (a DP over the last WRGB's and RDACC's issue cycles) against every order by brute
    force, each command at the earliest every row from each earlier one allows, on hbm2-pim's
    rows and on made-up rows where mixing the kinds pays or only the bus binds."""
    import itertools

    from solver.turnaround_bound import GapTurns, gap_costs

    hbm2 = GapTurns(16, 2, 19, 22, 2, 2, 16, 14)
    odd = GapTurns(to_load=9, load_spacing=5, load_to_mac=1, to_readout=1, readout_spacing=7, readout_to_mac=9,
                   readout_to_load=0, load_to_readout=0)  # fmt: skip
    tight = GapTurns(1, 0, 1, 1, 0, 0, 0, 0)  # only the bus's one command per cycle
    for turns in (hbm2, odd, tight):
        row = {
            ("M", "W"): turns.to_load,
            ("M", "R"): turns.to_readout,
            ("W", "M"): turns.load_to_mac,
            ("R", "M"): turns.readout_to_mac,
            ("W", "W"): turns.load_spacing,
            ("R", "R"): turns.readout_spacing,
            ("W", "R"): turns.load_to_readout,
            ("R", "W"): turns.readout_to_load,
            ("M", "M"): 4,  # tMAC
        }
        cost = gap_costs(turns, 4, 4, 4)
        for w, a in itertools.product(range(5), range(5)):
            if not w and not a:
                continue
            best = None
            for order in set(itertools.permutations("W" * w + "R" * a)):
                seq = ("M",) + order + ("M",)
                t = [0]
                for j in range(1, len(seq)):
                    t.append(max([t[i] + row[seq[i], seq[j]] for i in range(j)] + [t[-1] + 1]))
                best = t[-1] if best is None else min(best, t[-1])
            assert cost[w][a] == best - 4, (turns, w, a)
        # the row from the last WRGB binds the next MAC even after an RDACC: two WRGBs then an
        # RDACC (16 + 2 + 14 + 2 = 34 by consecutive rows) still end 19 after the last WRGB
        if turns is hbm2:
            assert cost[2][1] == 16 + 2 + 19 - 4


@pytest.mark.parametrize(
    ("preset", "sets", "gap"),
    [
        # the read-outs of all 8 units (34) beat a load of 8 bursts (45), per 512 pairs each
        ("hbm2-pim", [], 34),
        # 16 accumulators are 2 RDACCs a unit: 64 read-outs 16 + 63 x 2 + 2 - 4 = 140, against a
        # load of 64 bursts 17 + 63 x 2 + 19 - 4 = 158
        ("hbm3-pim", [], 140),
        # 2 units read out: 22 + 2 + 2 - 4 = 22 (a load 45)
        ("fpga-proto", [], 22),
        # a buffer of 2 bursts: a load 16 + 2 + 19 - 4 = 33 per 8 x 2 pairs a unit; the read-outs
        # open only 8 x 2 pairs a unit too, for 34
        ("hbm2-pim", ["pim.global_buffer_bytes=64"], 33),
        # 4 accumulators: 8 read-outs open 4 x 8 pairs a unit for 34; a load 45 does too
        ("hbm2-pim", ["pim.acc_registers=4"], 34),
    ],
)
def test_e_gap_by_hand_and_never_below_the_phase_count(preset, sets, gap):
    """E_gap by the pairs count (module docstring) by hand, and never below the count by phases
    alone (min of a load's turnarounds and all units' read-outs), which it sharpens."""
    hw = load_hardware(preset, sets)
    g = phase_gaps(hw)
    assert g.gap == gap
    t, s = hw.timing, hw.mac_interval
    e_w = t.rule("MAC", "WRGB", "rank") + t.rule("WRGB", "MAC", "bank_group") - s
    e_r = t.rule("MAC", "RDACC", "channel") + t.rule("RDACC", "MAC", "channel") - s
    rsp = t.rule("RDACC", "RDACC", "channel")
    units = hw.pus_per_channel
    assert g.gap >= min(e_w, e_r + (units - 1) * rsp, units * e_r)


@settings(max_examples=10, deadline=None, suppress_health_check=[HealthCheck.too_slow, HealthCheck.filter_too_much])
@given(
    n=st.integers(8, 384),
    k=st.integers(16, 2048),
    batch=st.sampled_from([1, 2, 4]),
    preset=st.sampled_from(
        [
            ("hbm2-pim", ["organization.channels=2", "organization.rows=512"]),
            ("hbm3-pim", ["organization.channels=2", "organization.rows=256"]),
        ]
    ),
    over=st.lists(
        st.sampled_from(
            ["pim.global_buffer_bytes=64", "pim.global_buffer_bytes=128", "pim.acc_registers=2", "pim.acc_registers=16"]
        ),
        max_size=2,
        unique=True,
    ),
    method=st.sampled_from(["naive", "greedy", "cpsat"]),
)
def test_many_phases_no_program_below_the_pairs_count(n, k, batch, preset, over, method):
    """GEMVs large enough for many phase boundaries per unit (small buffers, 2-16 accumulators),
    where the pairs count sets the channel view: every program stays above the bound and
    simulates as predicted (a scratch run of 200 such examples found none below)."""
    from hypothesis import assume

    from pimsat.pipeline import InfeasibleError

    name, sets = preset
    inst = Instance(
        name="pairs",
        program={"kind": "gemv", "n": n, "k": k, "batch": batch},
        hardware={"preset": name, "set": sets + over},
    )
    try:
        r = run(inst, SolveOptions(method=method, time_limit=3.0, workers=1, groups=2, functional=False))
    except InfeasibleError:
        assume(False)
    assert r.bounds.hardware.cycles <= r.sim.cycles == r.compiled.predicted_cycles
