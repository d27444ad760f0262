"""The steady state of a task loop as a modulo schedule (solver/cmdlevel/modulo.py, issue 16 item
2b): the period read from the emitted program, the least initiation interval proven, and the
periodic schedule checked outside the model (the standards' rule list, brute force)."""

from __future__ import annotations

import dataclasses
import json
from pathlib import Path

import numpy as np
import pytest

from hwmodel import bus
from pimsat.command_level import inputs_of
from pimsat.instance import Instance, load_instance
from pimsat.pipeline import SolveOptions, run
from pimsat.steady_state import channel_commands, critical_channel, steady_states
from sim.stdcheck import check_log
from solver.cmdlevel.commands import Command
from solver.cmdlevel.modulo import buffer_slots, find_periods, solve_period

ROOT = Path(__file__).resolve().parents[2]
_RUNS: dict[str, object] = {}


def _run(rel: str, sets: tuple[str, ...] = ()):
    if (rel, sets) not in _RUNS:
        inst = load_instance(ROOT / "instances" / rel)
        _RUNS[(rel, sets)] = run(inst, SolveOptions(functional=False, workers=1), list(sets))
    return _RUNS[(rel, sets)]


def _loop(rel: str, sets: tuple[str, ...] = ()):
    """(run, critical channel's commands, partner's or None, its first loop's period)."""
    r = _run(rel, sets)
    logs, _ = inputs_of(r)
    c = critical_channel(logs)
    cmds = channel_commands(r, c)
    partner = channel_commands(r, bus.partner(c)) if r.hardware.organization.shared_bus else None
    periods = find_periods(cmds, buffer_slots(r.hardware))
    assert periods
    return r, cmds, partner, periods[0]


def test_the_hbm2_gemv_loop_is_read_from_the_program():
    """gemv-4096-hbm2-64ch: each channel loads 8 buffer bursts, MACs them into 8 accumulators and
    changes rows, 31 times; the emitted program repeats that every 301 cycles."""
    r, cmds, _partner, p = _loop("micro/gemv-4096-hbm2-64ch.yaml")
    ops = [x.op for x in cmds[p.first : p.first + p.length]]
    assert {op: ops.count(op) for op in set(ops)} == {"WRGB": 8, "MAC": 64, "PRE": 2, "ACT": 2}
    assert p.emitted_ii == 301 and p.iterations >= 30
    times = [x.t0 for x in cmds[p.first : p.first + p.covered]]
    assert all(b - a == 301 for a, b in zip(times, times[p.length :]))


def test_the_hbm2_gemv_loop_is_proven_optimal_by_hand_and_by_the_model():
    """The least II is 64 MACs x tMAC (4) + one load gap: MAC -> WRGB 16 + WRGB -> MAC 19 - 4,
    and its 7 further WRGBs 2 apart = 256 + 31 + 14 = 301, the emitted period. One cycle less is
    infeasible."""
    r, cmds, partner, p = _loop("micro/gemv-4096-hbm2-64ch.yaml")
    t = r.hardware.timing
    # a WRGB names every rank and bank group of its channel: its turnarounds bind all the MACs
    by_hand = 64 * r.hardware.mac_interval + t.rule("MAC", "WRGB", "rank") + t.rule("WRGB", "MAC", "bank_group")
    by_hand += -r.hardware.mac_interval + 7 * t.rule("WRGB", "WRGB", "channel")
    assert by_hand == 301
    st = solve_period(r.hardware, cmds, p, partner, time_limit=60)
    assert st.status == "OPTIMAL" and st.ii == st.bound == by_hand == p.emitted_ii
    assert st.mac_floor == 256
    beyond = solve_period(r.hardware, cmds, p, partner, time_limit=60, ii_max=by_hand - 1)
    assert beyond.status == "INFEASIBLE"
    below = solve_period(r.hardware, cmds, p, partner, ii_max=200)  # under the MAC floor: no search
    assert below.status == "INFEASIBLE" and below.bound == 256


def test_the_one_bank_loop_found_the_emitter_four_cycles_slow_and_now_meets_it():
    """hbm2-pim with one bank per unit (a what-if): the modulo schedule proved the k-split loop's
    least II 165 where the emitter took 169 (its ACT went in front of the chunk's loads, which
    the next MAC waits for); the emitter now puts the loads that fit before the ACT
    (solver/emit_mv.row_change_loads) and its loop runs at 165, proven the least."""
    r, cmds, partner, p = _loop("micro/gemv-4096-hbm2-64ch.yaml", ("pim.banks_per_pu=1",))
    assert p.emitted_ii == 165 and p.length == 38
    st = solve_period(r.hardware, cmds, p, partner, time_limit=120, workers=2)
    assert st.status == "OPTIMAL" and st.ii == st.bound == 165


HBM3_ROWS = Instance(
    name="gemv-8192x4096-hbm3-32pch", program={"kind": "gemv", "n": 8192, "k": 4096}, hardware={"preset": "hbm3-pim"}
)


def test_the_recurrence_bound_of_a_one_bank_loop_by_hand():
    """hbm3-pim (one bank per unit), GEMV 8192 x 4096: a period of 8 rows x 32 MACs, each row
    change idling the units tRTP + tRP + tRCDMAC = 8 + 19 + 19 cycles against the MAC spacing 4:
    the fixed orders' recurrence is 256 x 4 + 8 x (46 - 4) = 1,360 cycles, above the MAC stream's
    energy (1,024: the loads sit in the row changes). The emitted loop meets it (1,365 before a
    change carried only the loads that go before its ACT on the shared bus: emit_mv._change_budget)."""
    if "hbm3" not in _RUNS:
        _RUNS["hbm3"] = run(HBM3_ROWS, SolveOptions(functional=False, workers=1))
    r = _RUNS["hbm3"]
    logs, _ = inputs_of(r)
    c = critical_channel(logs)
    cmds = channel_commands(r, c)
    (p,) = find_periods(cmds, buffer_slots(r.hardware))
    assert p.length == 304 and p.emitted_ii == 1360
    t = r.hardware.timing
    change = t.p("tRTP") + t.p("tRP") + t.p("tRCDMAC") - r.hardware.mac_interval
    st = solve_period(r.hardware, cmds, p, channel_commands(r, bus.partner(c)), time_limit=10, workers=1)
    assert (st.energy, st.recurrence) == (256 * 4, 256 * 4 + 8 * change) == (1024, 1360), st.as_dict()
    assert p.emitted_ii == st.recurrence  # the emitted loop meets a lower bound: it is the least, without a search
    assert st.ii is None or st.ii == st.bound == 1360


def _periodic_log(r, st, c: int, partner: int | None, iterations: int) -> np.ndarray:
    """The model's periodic schedule, `iterations` long, as a command log: each command's row of
    the emitted log with its issue cycle from the model (iteration 0's), + i x II."""
    logs, _ = inputs_of(r)
    p, n = st.period.length, st.unrolled
    rows = []
    loops = [(c, st.period)] + ([(partner, st.partner_period)] if partner is not None else [])
    for k, (ch, period) in enumerate(loops):
        first = st.times[k * n * p : k * n * p + p]
        for i in range(iterations):
            src = logs[ch][period.first + i * p : period.first + (i + 1) * p].copy()
            src["cycle"] = np.asarray(first) + i * st.ii
            rows.append(src)
    log = np.concatenate(rows)
    return log[np.lexsort((log["cycle"], log["channel"]))]


@pytest.mark.parametrize(
    "rel", ["micro/gemv-4096-hbm2-64ch.yaml", "micro/gemv-4096-gddr6-32ch.yaml", "fpga/gemv-256x64-fpga.yaml"]
)
def test_the_periodic_schedule_meets_the_standards_rule_list(rel):
    """The model's schedule, repeated over several iterations, breaks none of the rules written
    from the standard (sim/stdcheck.py: Ramulator 2.1's lists, not the project's timing table);
    repeated one cycle sooner, it breaks some."""
    r, cmds, partner, p = _loop(rel)
    st = solve_period(r.hardware, cmds, p, partner, time_limit=60)
    assert st.status == "OPTIMAL" and st.ii <= p.emitted_ii
    c = cmds[0].ch

    def violations(ii: int) -> list:
        log = _periodic_log(r, dataclasses.replace(st, ii=ii), c, bus.partner(c) if partner else None, 6)
        log["cycle"] -= int(log["cycle"].min())
        return check_log(log, r.hardware)

    assert st.period.iterations >= 6
    assert violations(st.ii) == []
    assert violations(st.ii - 1) != []


def test_cli_solve_steady_state(tmp_path):
    """`pimsat solve --steady-state --json`: the report's `steady_state` block names the loop's
    task, and the emitted loop is proven optimal."""
    from click.testing import CliRunner

    from pimsat.cli import main

    path = ROOT / "instances" / "fpga" / "gemv-256x64-fpga.yaml"
    res = CliRunner().invoke(main, ["solve", str(path), "--steady-state", "--json", "--workers", "1"])
    assert res.exit_code == 0, res.output
    block = json.loads(res.output)["steady_state"]
    assert block["scope"].startswith("periodic schedules")
    (loop,) = block["loops"]
    assert loop["task"].startswith("gemv/")
    assert loop["status"] == "OPTIMAL" and loop["ii"] == loop["bound_ii"] == loop["emitted_ii"]
    assert loop["emitted_proven_optimal"] is True


def test_steady_states_of_a_program_without_loops():
    """gemv-64x128-fpga holds no loop of three iterations: an empty list, not an error."""
    assert steady_states(_run("fpga/gemv-64x128-fpga.yaml"), time_limit=10)["loops"] == []


def _cmd(j: int, op: str, t0: int, gb: int = -1, acc: int = 0) -> Command:
    banks = {"WRGB": 0, "REF": 0xFFFF}.get(op, 0x5)
    accs = ((0, acc),) if op == "MAC" else ()
    return Command(0, j, op, banks, 0, 0, 0, j, 0, t0, None, accs, gb)


def test_a_loop_cut_by_refresh_is_one_loop_in_all_its_runs():
    """find_periods on a hand-made stream: a load and two MACs every 10 cycles, 4 times, a REF,
    then 5 more from another command of the period on. The loop is found once, with the REF
    outside it, and counted in both runs; runs of MACs alone are no loop."""
    cmds, t = [], 0
    for _ in range(4):
        for op, gb, acc in (("WRGB", 0, 0), ("MAC", 0, 0), ("MAC", 0, 1)):
            cmds.append(_cmd(len(cmds), op, t + len(cmds) % 3 * 3, gb, acc))
        t += 10
    cmds.append(_cmd(len(cmds), "REF", t + 200))
    t += 400
    rest = [("MAC", 0, 1)] + [x for _ in range(5) for x in (("WRGB", 0, 0), ("MAC", 0, 0), ("MAC", 0, 1))]
    for k, (op, gb, acc) in enumerate(rest):
        cmds.append(_cmd(len(cmds), op, t + (k + 2) // 3 * 10 + (k + 2) % 3 * 3, gb, acc))
    (p,) = find_periods(cmds, slots=8)
    assert p.length == 3 and p.emitted_ii == 10
    assert not any(x.op == "REF" for x in cmds[p.first : p.first + p.covered])
    assert p.iterations == 5 and p.repeats == 4 + 5
    macs = [_cmd(j, "MAC", 4 * j, 0, 0) for j in range(20)]
    assert find_periods(macs, slots=8) == []


def test_attention_loops_on_a_shared_bus_are_paired_and_proven():
    """attention-llama2-c2048-hbm2-64ch: the score loop of each of the 4 head groups (3
    iterations, their pair channel's within half an II) and the context loop are modelled beside
    the channel they share their buses with, and each emitted loop is proven the least (292, 301)."""
    block = steady_states(_run("micro/attention-llama2-c2048-hbm2-64ch.yaml"), time_limit=60)
    loops = block["loops"]
    assert [lp["task"].split("/")[0] for lp in loops] == ["scores"] * 4 + ["context"]
    assert [lp["emitted_ii"] for lp in loops] == [292] * 4 + [301]
    assert all(lp["emitted_proven_optimal"] for lp in loops)
    assert block["proven_loop_cycles"] == sum(lp["repeats"] * lp["emitted_ii"] for lp in loops)
