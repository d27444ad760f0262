"""Command-level CP-SAT (solver/cmdlevel): the model against brute force over its own space
with the simulator as the oracle, the timing rows at their boundaries, and every fpga-tier
program re-emitted from the model's optimum and simulated exactly as predicted."""

from __future__ import annotations

import itertools
from pathlib import Path

import pytest

import sim
from hwmodel import load_hardware
from hwmodel.isa import make
from hwmodel.streams import StreamSet
from pimsat.command_level import command_level, inputs_of
from pimsat.instance import Instance, instance_files, load_instance
from pimsat.pipeline import SolveOptions, run
from solver.cmdlevel import restamp, solve
from solver.cmdlevel.commands import expand, fixed_edges, segments
from solver.cmdlevel.order import predecessors
from solver.cmdlevel.timing_rows import table_rows, units

ROOT = Path(__file__).resolve().parents[2]
FPGA = instance_files(ROOT / "instances" / "fpga")


def _hw():
    return load_hardware("fpga-proto")


def _streams(hw, *channels) -> StreamSet:
    return StreamSet(hw.name, hw.isa_version, [], list(channels), [])


def _log(hw, ss):
    r = sim.simulate(hw, ss, functional=False, record=True)
    return r, [r.log[r.log["channel"] == c] for c in range(len(ss.channels))]


def _extensions(n: int, pred: list[int]):
    """Every order of commands 0..n-1 that keeps the fixed relation (pred bitsets)."""

    def rec(done: int, order: list[int]):
        if len(order) == n:
            yield list(order)
            return
        for j in range(n):
            if not (done >> j) & 1 and pred[j] & ~done == 0:
                order.append(j)
                yield from rec(done | (1 << j), order)
                order.pop()

    yield from rec(0, [])


def _brute_force(hw, *channels):
    """(model optimum, brute-force optimum, orders tried, emitted cycles): every order of the
    single commands the model's fixed relation allows (each channel's SIG/WAIT kept between its
    segments), simulated unstamped (each command at its earliest legal cycle: for a fixed order
    that is the best timing)."""
    ss = _streams(hw, *channels)
    emitted, logs = _log(hw, ss)
    streams, cmds = expand(hw, ss.channels, logs)
    pred = predecessors(streams, len(cmds), fixed_edges(hw, streams))
    best, tried = None, 0
    per_channel = []  # each channel's allowed orders (no fixed relation crosses channels)
    for cs in streams:
        js = [x.j for kind, x in cs.items if kind == "cmd"]
        local = [sum(1 << js.index(a) for a in js if (pred[j] >> a) & 1) for j in js]
        per_channel.append([[js[i] for i in o] for o in _extensions(len(js), local)])
    for orders in itertools.product(*per_channel):
        tried += 1
        rank = {j: i for o in orders for i, j in enumerate(o)}
        progs = []
        for cs in streams:
            out = []
            for k, seg in enumerate(segments(cs)):
                out += [x.ins for x in sorted(seg, key=lambda x: rank[x.j])]
                syncs = [(kind, x) for kind, x in cs.items if kind != "cmd"]
                if k < len(syncs):
                    out.append(make(syncs[k][0], id=syncs[k][1]))
            progs.append(out)
        try:
            c = sim.simulate(hw, _streams(hw, *progs), functional=False, record=False).cycles
        except sim.SimulationError:
            continue
        best = c if best is None else min(best, c)
    sched = solve(hw, ss.channels, [], logs, {}, int(emitted.cycles), time_limit=20)
    assert sched.status == "OPTIMAL"
    again = sim.simulate(hw, restamp(ss, sched), functional=False, record=False)
    assert again.cycles == sched.objective
    return sched.objective, best, tried, int(emitted.cycles)


def test_two_bank_sets_against_brute_force():
    """Row commands of one bank set between the MACs of the other: the model's optimum equals
    the best of every allowed interleaving, simulated."""
    hw = _hw()
    ch = [
        make("WRGB", gb=0, count=1, src=0, offset=0),
        make("ACT", mask=5, row=0),
        make("ACT", mask=10, row=0),
        make("MAC", mask=5, col=0, count=1, gb=0, acc=0),
        make("MAC", mask=5, col=1, count=1, gb=0, acc=1),
        make("MAC", mask=5, col=2, count=1, gb=0, acc=2),
        make("PRE", mask=5),
        make("MAC", mask=10, col=0, count=1, gb=0, acc=3),
        make("MAC", mask=10, col=1, count=1, gb=0, acc=4),
        make("PRE", mask=10),
        make("RDACC", bank=0, acc=0, count=8, dst=0, offset=0, stride=1),
    ]
    model, brute, tried, emitted = _brute_force(hw, ch)
    assert tried > 20  # the space is not a single order
    assert model == brute <= emitted


def test_buffer_loads_against_brute_force():
    """A WRGB is free relative to the MACs that do not read its burst (read/write turnarounds
    both ways on the data bus); the model agrees with brute force, and beats the emitted order."""
    hw = _hw()
    ch = [
        make("WRGB", gb=0, count=1, src=0, offset=0),
        make("ACT", mask=5, row=0),
        make("MAC", mask=5, col=0, count=1, gb=0, acc=0),
        make("MAC", mask=5, col=1, count=1, gb=0, acc=1),
        make("WRGB", gb=1, count=1, src=0, offset=16),
        make("MAC", mask=5, col=2, count=1, gb=1, acc=2),
        make("MAC", mask=5, col=3, count=1, gb=0, acc=3),
        make("PRE", mask=5),
    ]
    model, brute, tried, emitted = _brute_force(hw, ch)
    assert tried > 3
    assert model == brute < emitted


def test_signals_between_channels_against_brute_force():
    """SIG/WAIT across channels: channel 1's second segment waits for channel 0's signal
    (set at channel 0's last completion), each segment's order free within it."""
    hw = _hw()
    ch0 = [
        make("WRGB", gb=0, count=1, src=0, offset=0),
        make("ACT", mask=5, row=0),
        make("MAC", mask=5, col=0, count=1, gb=0, acc=0),
        make("ACT", mask=10, row=0),
        make("MAC", mask=5, col=1, count=1, gb=0, acc=1),
        make("PRE", mask=5),
        make("PRE", mask=10),
        make("SIG", id=0),
    ]
    ch1 = [
        make("ACT", mask=5, row=1),
        make("WRGB", gb=0, count=1, src=0, offset=0),
        make("MAC", mask=5, col=0, count=1, gb=0, acc=0),
        make("WAIT", id=0),
        make("PRE", mask=5),
        make("ACT", mask=10, row=1),
        make("WRGB", gb=1, count=1, src=0, offset=16),
        make("MAC", mask=10, col=0, count=1, gb=1, acc=1),
        make("PRE", mask=10),
    ]
    model, brute, tried, emitted = _brute_force(hw, ch0, ch1)
    assert tried > 3
    assert model == brute <= emitted


def test_the_fixed_order_is_the_stated_one():
    hw = _hw()
    ch = [
        make("ACT", mask=5, row=0),
        make("ACT", mask=10, row=0),
        make("WRGB", gb=0, count=1, src=0, offset=0),
        make("MAC", mask=5, col=0, count=2, gb=0, acc=0),
        make("PRE", mask=5),
        make("MAC", mask=10, col=0, count=1, gb=1, acc=1),
        make("RDACC", bank=0, acc=0, count=8, dst=0, offset=0, stride=1),
        make("PRE", mask=10),
    ]
    ss = _streams(hw, ch)
    _, logs = _log(hw, ss)
    streams, cmds = expand(hw, ss.channels, logs)
    assert [c.op for c in cmds] == ["ACT", "ACT", "WRGB", "MAC", "MAC", "PRE", "MAC", "RDACC", "PRE"]
    pred = predecessors(streams, len(cmds), fixed_edges(hw, streams))

    def before(a, b):
        return bool((pred[b] >> a) & 1)

    assert before(0, 3) and before(3, 4) and before(4, 5)  # bank order (banks 0 and 2)
    assert before(4, 7) and before(6, 7)  # unit 0's accumulators: its MACs before the read-out
    assert before(2, 3) and before(2, 4)  # gb burst 0 written before it is read
    assert not before(2, 6) and not before(1, 3) and not before(3, 1)  # free: unread burst, other bank's ACT
    assert not before(5, 6) and not before(6, 5)  # a bank set's PRE against the other's MAC
    assert before(0, 1) and before(1, 5) and before(5, 8)  # row commands in emitted order


# ---- every fpga-tier program --------------------------------------------------------------------
_RUNS: dict[str, object] = {}


def _run(path):
    """The cpsat program of an fpga instance file (or Instance) and its command-level optimum."""
    key = path.stem if isinstance(path, Path) else path.name
    if key not in _RUNS:
        inst = load_instance(path) if isinstance(path, Path) else path
        r = run(inst, SolveOptions(functional=True, workers=1))
        _RUNS[key] = (r, command_level(r, time_limit=50, workers=1))
    return _RUNS[key]


# a GEMV whose k (512) reloads the prototype's global buffer between MACs: since the k-split
# (solver/ksplit.py) no fpga instance does
RELOADS = Instance(
    name="gemv-64x512-fpga", program={"kind": "gemv", "n": 64, "k": 512}, hardware={"preset": "fpga-proto"}
)


@pytest.mark.parametrize("path", FPGA, ids=lambda p: p.stem)
def test_fpga_programs_are_proven_and_simulate_as_predicted(path):
    r, cl = _run(path)
    s = cl.schedule
    assert s.status == "OPTIMAL" and s.bound == s.objective
    assert cl.simulated_cycles == s.objective <= int(r.sim.cycles)
    assert cl.bit_exact is True and cl.outputs_match is True


def _slack(hw, sched) -> dict[tuple, int]:
    """Per table row (prev, next, scope, window), the least slack t_b - t_a - latency over every
    command b and the most recent (N-th most recent) `prev` a in each unit b touches."""
    out: dict[tuple, int] = {}
    rows = table_rows(hw)
    by_ch: dict[int, list] = {}
    for x in sched.commands:
        by_ch.setdefault(x.ch, []).append(x)
    for cmds in by_ch.values():
        cmds = sorted(cmds, key=lambda x: sched.times[x.j])
        for r in rows:
            seen: dict = {}
            for x in cmds:
                if x.op == r.next:
                    for u in units(x, r.scope):
                        hist = seen.get(u, [])
                        k = r.win or 1
                        if len(hist) >= k:
                            s = sched.times[x.j] - hist[-k] - r.lat
                            key = (r.prev, r.next, r.scope, r.win)
                            out[key] = min(out.get(key, s), s)
                if x.op == r.prev:
                    for u in units(x, r.scope):
                        seen.setdefault(u, []).append(sched.times[x.j])
    return out


def test_every_row_is_met_and_the_binding_ones_exactly():
    """In the optima of the fpga programs no row is violated (slack >= 0), and the rows that bind
    are met to the cycle (slack 0): the model adds no cycle to any of them. The rows listed bind
    in these programs (row hiding, read-outs, buffer reloads, KV writes)."""
    slack: dict[tuple, int] = {}
    hw = None
    for path in [*FPGA, RELOADS]:
        r, cl = _run(path)
        hw = r.hardware
        for k, v in _slack(hw, cl.schedule).items():
            slack[k] = min(slack.get(k, v), v)
    assert min(slack.values()) >= 0
    binding = {(p, n, s) for (p, n, s, _w), v in slack.items() if v == 0}
    for row in [
        ("MAC", "MAC", "channel"),  # tMAC
        ("ACT", "MAC", "bank"),  # tRCDMAC
        ("MAC", "RDACC", "channel"),  # tMACL
        ("MAC", "WRGB", "rank"),  # read-to-write on the data bus
        ("WRGB", "MAC", "bank_group"),  # write-to-read on the data bus
        ("WRGB", "WRGB", "channel"),  # tCCD_S / tLINK
    ]:
        assert row in binding, row


BOUNDARY_ROWS = [
    ("MAC", "MAC", "channel"),
    ("ACT", "MAC", "bank"),
    ("MAC", "RDACC", "channel"),
    ("WRGB", "MAC", "bank_group"),
    ("MAC", "WRGB", "rank"),
]


def _binding_pair(hw, sched, row):
    """A command b at exactly the row's latency after the most recent `prev` in a unit it
    shares, with cycle t_b - 1 free on its channel (so one cycle earlier is only a timing error)."""
    prev, nxt, scope = row
    lat = {(r.prev, r.next, r.scope): r.lat for r in table_rows(hw)}[row]
    for ch in sorted({x.ch for x in sched.commands}):
        cmds = sorted((x for x in sched.commands if x.ch == ch), key=lambda x: sched.times[x.j])
        taken = {sched.times[x.j] for x in cmds}
        last: dict = {}
        for x in cmds:
            if x.op == nxt and sched.times[x.j] - 1 not in taken:
                for u in units(x, scope):
                    if u in last and sched.times[x.j] - last[u] == lat:
                        return x
            if x.op == prev:
                for u in units(x, scope):
                    last[u] = sched.times[x.j]
    return None


@pytest.mark.parametrize("row", BOUNDARY_ROWS, ids=lambda r: "->".join(r[:2]) + f" {r[2]}")
def test_one_cycle_short_of_a_binding_row_is_refused(row):
    """Boundary: in some fpga optimum the row binds to the cycle; stamping that command one
    cycle earlier (everything else kept) makes the simulator refuse the program (RELOADS: for
    the buffer reloads)."""
    for path in [*FPGA, RELOADS]:
        r, cl = _run(path)
        sched = cl.schedule
        b = _binding_pair(r.hardware, sched, row)
        if b is None:
            continue
        times = dict(sched.times)
        times[b.j] -= 1
        bad = restamp(r.compiled.streams, _with_times(sched, times))
        with pytest.raises(sim.SimulationError):
            sim.simulate(r.hardware, bad, r.program, functional=False, record=False)
        return
    pytest.fail(f"{row} binds in no fpga optimum")


def _with_times(sched, times):
    import dataclasses

    return dataclasses.replace(sched, times=times)


@pytest.mark.parametrize("name", ["attention-h2-d16-c31-fpga", "gemv-64x128-fpga", "gemv-256x64-fpga"])
def test_the_implied_constraints_cut_no_optimum(name):
    """The hint: the emitted cycles satisfy the model (solve raises otherwise). And a solve
    without the implied constraints (solver/cmdlevel/implied.py) proves the same optimum on the
    programs small enough to prove without them."""
    r, cl = _run(ROOT / "instances" / "fpga" / f"{name}.yaml")
    logs, dur = inputs_of(r)
    ss = r.compiled.streams
    plain = solve(r.hardware, ss.channels, ss.host, logs, dur, int(r.sim.cycles), time_limit=30, implied=False)
    assert plain.status == "OPTIMAL" and plain.objective == cl.schedule.objective
    assert plain.stats["mac_link_windows"] == 0 < cl.schedule.stats["mac_link_windows"]


def test_permutation_helper_counts_linear_extensions():
    # 3 commands, 0 before 2: 3 orders of 6
    assert len(list(_extensions(3, [0, 0, 1]))) == 3
    assert len(list(itertools.permutations(range(3)))) == 6


@pytest.mark.parametrize(
    "name,trefi", [("gemv-64x128-fpga", 200), ("attention-h2-d16-c31-fpga", 150)], ids=["gemv", "attention"]
)
def test_refresh_barriers_and_limits(name, trefi):
    """With a short tREFI the programs hold REFs: each stays a barrier in its stream, within the
    JEDEC limits the model states, and the re-emitted optimum simulates as predicted."""
    sets = ["timing.params.tRFC=30", "timing.params.tRFCSB=20", f"timing.params.tREFI={trefi}"]
    r = run(load_instance(ROOT / "instances" / "fpga" / f"{name}.yaml"), SolveOptions(functional=True, workers=1), sets)
    assert any(ins.op == "REF" for s in r.compiled.streams.channels for ins in s)
    cl = command_level(r, time_limit=30, workers=1)
    assert cl.schedule.status == "OPTIMAL"
    assert cl.simulated_cycles == cl.schedule.objective <= int(r.sim.cycles)
    assert cl.bit_exact is True


@pytest.mark.parametrize("name", ["gemv-64x128-fpga", "attention-h2-d16-c31-fpga"])
def test_shared_command_buses(name):
    """With the fpga board's two channels as a pseudo-channel pair on shared command buses
    (organization.command_bus = shared_pair), the re-timed commands keep the pair's row commands
    and column commands apart: the optimum simulates as predicted (the simulator refuses any
    overlap) and the standards checker's pair rules find nothing."""
    from sim import simulate
    from sim.stdcheck import check_log
    from solver.cmdlevel import restamp

    sets = ["organization.command_bus=shared_pair"]
    r = run(load_instance(ROOT / "instances" / "fpga" / f"{name}.yaml"), SolveOptions(functional=True, workers=1), sets)
    cl = command_level(r, time_limit=30, workers=1)
    assert cl.schedule.status == "OPTIMAL"
    assert cl.simulated_cycles == cl.schedule.objective <= int(r.sim.cycles)
    assert cl.bit_exact is True
    streams = restamp(r.compiled.streams, cl.schedule)
    log = simulate(r.hardware, streams, r.program, functional=False, record=True).log
    assert [v for v in check_log(log, r.hardware) if v.rule.startswith("pair")] == []


def test_cli_solve_command_level():
    """`pimsat solve --command-level --json`: the report gains the command-level block; the
    program's own figures and proof_scope stay the task level's."""
    import json

    from click.testing import CliRunner

    from pimsat.cli import main

    path = ROOT / "instances" / "fpga" / "attention-h2-d16-c31-fpga.yaml"
    res = CliRunner().invoke(main, ["solve", str(path), "--command-level", "--json", "--workers", "1"])
    assert res.exit_code == 0, res.output
    rep = json.loads(res.output)
    c = rep["command_level"]
    assert rep["proof_scope"] == "tasks"
    assert c["status"] == "OPTIMAL" and c["objective_cycles"] == c["simulated_cycles"] == c["bound_cycles"]
    assert c["objective_cycles"] < c["emitted_cycles"] == rep["objective_cycles"]
    assert c["bit_exact"] is True
