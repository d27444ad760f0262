"""Refresh in decoded programs follows the JEDEC rules (issue 13): at most 8 REFs owed, at most 8
pulled in, at most 9 x tREFI between two REFs, also through tasks many tREFI long (they carry REFs
of their own, solver/refresh_points.py). Checked on the command log, independently of the
simulator's own check, and against the standard's rule list (sim.stdcheck)."""

from __future__ import annotations

import sys
from pathlib import Path

import numpy as np
import pytest

from pimsat.instance import Instance
from pimsat.pipeline import SolveOptions, run
from sim.stdcheck import check_log

sys.path.insert(0, str(Path(__file__).resolve().parents[2] / "bench"))
from refresh_figures import REF  # noqa: E402
from refresh_figures import refresh_figures as _refresh_figures

TREFI, TRFC = 300, 60


@pytest.mark.parametrize("method", ["naive", "greedy", "cpsat"])
def test_long_tasks_refresh_inside(method):
    # a GEMV whose one task runs about 14 tREFI: before issue 13 the decoder issued every REF it
    # needed back to back in front of it and none during it
    inst = Instance(
        name="long",
        program={"kind": "gemv", "n": 128, "k": 256},
        hardware={"preset": "fpga-proto", "set": [f"timing.params.tREFI={TREFI}", f"timing.params.tRFC={TRFC}"]},
    )
    r = run(inst, SolveOptions(method=method, time_limit=5.0, functional=True, record=True))
    assert r.outputs_match and r.sim.cycles == r.compiled.predicted_cycles
    assert r.sim.cycles > 10 * TREFI
    gap, pulled, owed = _refresh_figures(r.sim.log, int(r.sim.cycles), TREFI)
    assert gap <= 9 and pulled <= 8 and owed <= 8, (gap, pulled, owed)
    assert gap < 3  # spread through the task, not bunched before it
    assert check_log(r.sim.log, r.hardware) == []
    if r.solution.bound is not None:  # the proven bound counts each task's own REFs once
        assert r.solution.bound - r.lowering.max_tail <= r.sim.cycles


def test_every_long_pim_task_declares_its_refresh_credit():
    """Every group task that carries REFs of its own (PIM, split PIM part, weight read) has
    refresh_credit = tRFC x its REFs: without it the lumped refresh relaxation counts them twice
    and the proven bound can exceed the program (GEMV 4096 b16 split modes: 347,878 > 318,002)."""
    inst = Instance(
        name="long-b16",
        program={"kind": "gemv", "n": 128, "k": 256, "batch": 16},
        hardware={"preset": "fpga-proto", "set": [f"timing.params.tREFI={TREFI}", f"timing.params.tRFC={TRFC}"]},
    )
    r = run(inst, SolveOptions(method="cpsat", time_limit=5.0, functional=False, record=True))
    tasks = [t for j in r.problem.jobs for m in j.modes for t in m.tasks if t.resource != "host"]
    long_ = [t for t in tasks if t.duration > 4 * TREFI]
    assert long_ and all(t.refresh_credit > 0 and t.refresh_credit % TRFC == 0 for t in long_)
    assert r.solution.bound - r.lowering.max_tail <= r.sim.cycles


def test_refresh_figures_see_a_bunched_program():
    """The helper above is not blind: REFs bunched at the start of a long program break it."""
    log = np.zeros(10, dtype=[("cycle", np.int64), ("channel", np.int32), ("command", np.uint8)])
    log["command"] = REF
    log["cycle"] = np.arange(10) * TRFC
    gap, pulled, owed = _refresh_figures(log, 30 * TREFI, TREFI)
    assert pulled == 9 and gap > 9  # REF #10 at cycle 540 is 9 ahead of the one due by then


@pytest.mark.parametrize("method", ["naive", "greedy", "cpsat"])
def test_per_bank_refresh_programs(method):
    """timing.refresh_mode = per_bank: the decoder's rounds between tasks are REFSBs (one per bank,
    tRREFD apart, when that frees the channel sooner than a REF), a long task refreshes its open
    banks in place and its closed ones by REFSBs spread over later instruction boundaries. Every
    program is legal in the simulator (per-bank JEDEC counts) and in sim.stdcheck, bit-exact, as
    predicted, and the proven bound stays below it."""
    sets = [f"timing.params.tREFI={TREFI}", f"timing.params.tRFC={TRFC}", "timing.params.tRFCSB=30"]
    inst = Instance(
        name="long-per-bank",
        program={"kind": "gemv", "n": 128, "k": 256},
        hardware={"preset": "fpga-proto", "set": [*sets, "timing.refresh_mode=per_bank"]},
    )
    r = run(inst, SolveOptions(method=method, time_limit=5.0, functional=True, record=True))
    assert r.outputs_match and r.sim.cycles == r.compiled.predicted_cycles
    cmds = r.sim.log["command"]
    assert (cmds == 8).sum() > 0 and (cmds == REF).sum() == 0  # REFSBs only (a round beats a REF here)
    assert check_log(r.sim.log, r.hardware) == []
    if r.solution.bound is not None:
        assert r.solution.bound - r.lowering.max_tail <= r.sim.cycles
    assert r.bounds.hardware.cycles <= r.sim.cycles


@pytest.mark.parametrize("preset", ["hbm2-pim", "hbm3-pim", "gddr6-aim", "fpga-proto"])
def test_a_refresh_round_is_legal_and_as_long_as_the_decoder_counts(preset):
    """The decoder's between-task round on a per-bank device, alone then followed by an ACT of
    every bank at round_cycles: legal in the simulator, its REFSBs (ranks side by side) span
    round_span, and a round of REFSBs is chosen only where it frees the channel sooner than a REF."""
    from hwmodel import load_hardware
    from hwmodel.isa import make
    from sim import simulate
    from solver.refresh_points import refresh_round, round_cycles, round_span

    sys.path.insert(0, str(Path(__file__).resolve().parents[1] / "sim"))
    from simgen import streams

    hw = load_hardware(preset, ["organization.channels=1", "timing.refresh_mode=per_bank"])
    t, nb = hw.timing, hw.organization.banks_per_channel
    at = 100
    rnd = refresh_round(hw, at)
    every = (1 << nb) - 1
    follow = [make("ACT", cycle=at + round_cycles(hw), mask=every, row=0), make("PRE", mask=every)]
    r = simulate(hw, streams(hw, rnd + follow), functional=False)
    if len(rnd) == 1:  # a REF
        assert round_span(hw) == 0 and round_cycles(hw) >= t.p("tRFC")
    else:
        assert len(rnd) == nb and sorted(i.args[0] for i in rnd) == list(range(nb))
        assert int(r.times(0).issue[nb - 1]) - at == round_span(hw)
        assert round_span(hw) + t.p("tRFCSB") < t.p("tRFC")


@pytest.mark.parametrize("mode", ["all_bank", "per_bank"])
def test_the_round_after_a_task_lands_before_the_next_refresh_falls_due(mode):
    """A group's round after a task goes at the task's end at the earliest, and lands on every
    channel only ref_lands later: the pair's odd channel refreshes round_shift after the even one
    (shared command bus), a per-bank round's last REFSB round_span after its first. A task that
    ended owing the most allowed less than that before the next REF fell due left the odd
    channel owing one more (regression: the b16 full Llama-2-7B's cpsat program on hbm2-pim x64,
    a task ending at 24,928,799 = 6,392 x tREFI - 1 owing 8, channel 31's REF at 24,928,800
    owing 9). Here one GEMV task on a pair of hbm2-pim pseudo-channels ends `lands` - 1 cycles
    before the tick at which it would owe max_postponed + 1 (tREFI and max_postponed chosen from
    its duration; shorter than 4 x tREFI, so it carries no REFs and times alike at any tREFI)."""
    from solver.pair_bus import round_shift
    from solver.refresh_points import round_span

    def instance(trefi: int | None = None) -> Instance:
        sets = ["organization.channels=2", f"timing.refresh_mode={mode}"]
        return Instance(
            name=f"tick-{mode}",
            program={"kind": "gemv", "n": 256, "k": 512},
            hardware={"preset": "hbm2-pim", "set": sets + ([f"timing.params.tREFI={trefi}"] if trefi else [])},
        )

    opts = SolveOptions(method="greedy", time_limit=5.0, workers=1, functional=True, record=True)

    def group_tasks(r) -> list[int]:
        """The durations of the chosen modes' tasks on channel groups."""
        modes = [m for j in r.problem.jobs for m in j.modes if m.name == r.solution.modes[j.name]]
        return [t.duration for m in modes for t in m.tasks if t.resource != "host"]

    first = run(instance(), opts)
    (d,) = group_tasks(first)
    hw = first.hardware
    lands = round_span(hw) + round_shift(hw)
    assert lands == (121 if mode == "per_bank" else 1)  # hbm2-pim: shift 1, 15 x tRREFD 8
    # the tick (max_postponed + 1) x tREFI at d + 1 + off, off < lands: as late as it can go
    tick, maxp = next(
        ((d + 1 + off, m) for off in range(lands - 1, -1, -1) for m in (3, 2, 1) if (d + 1 + off) % (m + 1) == 0),
        (d + lands, 0),
    )
    inst = instance(tick // (maxp + 1))
    hw = inst.build_hardware([])
    hw = hw.model_copy(update={"timing": hw.timing.model_copy(update={"max_postponed_refresh": maxp})})
    trefi = hw.timing.p("tREFI")
    assert maxp * trefi <= d < 4 * trefi and 0 < tick - d <= lands
    r = run(inst, opts, hardware=hw)  # the simulator refused it: "more than max_postponed_refresh ... owed"
    assert group_tasks(r) == [d]
    assert r.sim.cycles == r.compiled.predicted_cycles and r.bit_exact
    assert r.compiled.refreshes["g0"][0] == 0  # the decoder refreshed before the task instead
    assert check_log(r.sim.log, r.hardware) == []


def test_idle_gaps_take_the_refs_the_end_would_pay(monkeypatch):
    """Llama-2 attention c2048 on hbm2-pim: by the first timeline, REFs owed after the last task
    set the end; decode then lets an idle gap take a REF that outlasts it (the next task waits)
    and keeps the fastest timeline: 11,622 -> 11,594 cycles, exact, every refresh rule checked on
    the command log."""
    import solver.decode as decode

    seen = []
    timeline = decode._timeline

    def spy(*args):
        t = timeline(*args)
        seen.append((args[-1], t.makespan, t.end_refreshes))
        return t

    monkeypatch.setattr(decode, "_timeline", spy)
    root = Path(__file__).resolve().parents[2]
    from pimsat.instance import load_instance

    inst = load_instance(root / "instances/micro/attention-llama2-c2048-hbm2-64ch.yaml")
    r = run(inst, SolveOptions(method="greedy", functional=False, record=True))
    first = [m for m in seen if m[0] == 0]
    assert first and first[-1][1] == 11_622 and first[-1][2]
    tried = [m for m in seen if m[0] > 0]
    assert tried and min(m[1] for m in tried) == 11_594
    assert r.sim.cycles == r.compiled.predicted_cycles == 11_594
    tREFI = r.hardware.timing.p("tREFI")
    gap, pulled, owed = _refresh_figures(r.sim.log, int(r.sim.cycles), tREFI)
    assert gap <= 9 and pulled <= 8 and owed <= 8
    assert check_log(r.sim.log, r.hardware) == []


# one accumulator and a link of 2 B a cycle: a read-out (RDACC) after every MAC sweep, each burst 16
# cycles over the link, so the read-outs take most of the scores task's 42,531 cycles (13 tREFI)
SLOW_READ_OUTS = Instance(
    name="slow-read-outs",
    program={"kind": "attention", "heads": 8, "kv_heads": 8, "head_dim": 64, "context": 612, "batch": 4},
    hardware={
        "preset": "gddr6-aim",
        "set": ["organization.channels=8", "pim.acc_registers=1", "host.link_bytes_per_cycle=2"],
    },
)


def test_a_task_of_read_outs_over_a_slow_link_carries_its_refs():
    """The long-task estimate (solver/refresh_points._estimate) counted an RDACC as one cycle, so
    this scores task got no REFs of its own and decode issued REFs in front of it without end
    (memory to the OOM killer; found by bench/whatif_fuzz.py). It now counts a read-out's bursts
    over the link."""
    r = run(SLOW_READ_OUTS, SolveOptions(method="naive", groups=2, functional=False, record=True))
    assert r.sim.cycles == r.compiled.predicted_cycles
    gap, pulled, owed = _refresh_figures(r.sim.log, int(r.sim.cycles), r.hardware.timing.p("tREFI"))
    assert gap <= 9 and pulled <= 8 and owed <= 8, (gap, pulled, owed)
    assert check_log(r.sim.log, r.hardware) == []


def test_a_task_no_start_can_refresh_around_is_a_decode_error(monkeypatch):
    """A task that runs longer than the refresh rules allow without a REF of its own (a lowering
    that left its REFs out) cannot start anywhere: decode says so instead of issuing REFs before
    it forever."""
    import solver.emit_mv as emit_mv
    from pimsat.pipeline import LoweringCache
    from solver.assemble import DecodeError

    monkeypatch.setattr(emit_mv, "with_refresh", lambda hw, seq: seq)
    with pytest.raises(DecodeError, match=r"scores.*cannot start under the refresh rules \(tREFI 3,333"):
        # (a cache of its own: not a lowering with REFs another test made)
        run(SLOW_READ_OUTS, SolveOptions(method="naive", groups=2, functional=False), cache=LoweringCache())


def test_a_task_that_needs_many_refs_before_it_still_starts():
    """At tREFI 700 (refresh half the time) a context task of 14,482 cycles carries 19 REFs and
    needs more in front of it than are owed or may be pulled in at once: legal, and not the
    DecodeError above (whose first bound on the REFs in front of a task was too tight; found by
    bench/whatif_fuzz.py --size large, case 385)."""
    inst = Instance(
        name="many-refs-before",
        program={"kind": "attention", "heads": 8, "kv_heads": 2, "head_dim": 64, "context": 764, "batch": 4},
        hardware={
            "preset": "hbm2-pim",
            "set": [
                "organization.channels=8",
                "host.vector_elements_per_cycle=2",
                "host.sync_cycles=5",
                "timing.params.tREFI=700",
            ],
        },
    )
    r = run(inst, SolveOptions(method="greedy", groups=2, functional=False, record=True))
    assert r.sim.cycles == r.compiled.predicted_cycles == 63_699
    assert check_log(r.sim.log, r.hardware) == []


@pytest.mark.parametrize("method", ["naive", "greedy", "cpsat"])
def test_a_long_wait_for_the_host_is_refreshed_through(method):
    """A group that waits many tREFI for the host (here a 5,000-cycle sync, about 17 tREFI, between
    the scores and the context) needs a REF about every tREFI of the wait, issued as their credit
    comes. The decoder's cap on the REFs in front of one task left that time out and stopped
    with a DecodeError on every method (found on a naive Llama-3-8B layer on 64 gddr6-aim
    channels with a slow host, bench/whatif_fuzz.py --size llm case 65: 51 tREFI of waiting).
    Now each program is legal, functional and as predicted."""
    inst = Instance(
        name="long-wait",
        program={"kind": "attention", "heads": 2, "kv_heads": 2, "head_dim": 16, "context": 31},
        hardware={
            "preset": "fpga-proto",
            "set": [f"timing.params.tREFI={TREFI}", f"timing.params.tRFC={TRFC}", "host.sync_cycles=5000"],
        },
    )
    r = run(inst, SolveOptions(method=method, time_limit=5.0, functional=True, record=True))
    assert r.outputs_match and r.bit_exact and r.sim.cycles == r.compiled.predicted_cycles
    assert r.sim.cycles > 30 * TREFI
    gap, pulled, owed = _refresh_figures(r.sim.log, int(r.sim.cycles), TREFI)
    assert gap <= 9 and pulled <= 8 and owed <= 8, (gap, pulled, owed)
    assert check_log(r.sim.log, r.hardware) == []


def test_a_long_tasks_credit_is_the_models_charge_per_round_on_a_shared_bus():
    """On a shared command bus a round between tasks keeps a pair's group a cycle longer (the
    odd channel refreshes after the even one), so the model charges Refresh.tRFC = round_busy +
    round_shift per round. A long task's own rounds must be credited at that charge too: credited
    at round_busy alone, the model charged the shift once more for each of them and its proven
    bound exceeded the program (GEMV 4096 b2 on 16 hbm2-pim channels, shared pairs: 85,404
    against 85,384; bench/whatif_fuzz.py --size large case 528). Here a GEMV on one pair."""
    from solver.pair_bus import round_shift
    from solver.refresh_points import round_busy

    inst = Instance(
        name="pair-credit",
        program={"kind": "gemv", "n": 256, "k": 1024, "batch": 4},
        hardware={
            "preset": "hbm2-pim",
            "set": [
                "organization.channels=2",
                "organization.rows=512",
                "organization.command_bus=shared_pair",
                "timing.params.tREFI=700",
            ],
        },
    )
    r = run(inst, SolveOptions(method="cpsat", time_limit=10.0, functional=False, record=True))
    assert round_shift(r.hardware) > 0 and r.problem.refresh.tRFC == round_busy(r.hardware) + round_shift(r.hardware)
    long_ = [t for j in r.problem.jobs for m in j.modes for t in m.tasks if t.refresh_credit]
    assert long_ and all(t.refresh_credit % r.problem.refresh.tRFC == 0 for t in long_)
    assert r.sim.cycles == r.compiled.predicted_cycles
    assert r.solution.bound - r.lowering.max_tail <= r.sim.cycles


def test_a_vendor_style_twins_kv_append_is_timed_on_its_own_tiling():
    """Lowering cached a KV append's timing by the op's shape: the context op's vendor-style twin
    ("pim-closed[all]") took the overlap tiling's append, which writes other banks, 4 cycles
    longer on the odd channel of an hbm2-pim pair; the model then ran 4 cycles above the program
    and so did CP-SAT's proven bound (bench/whatif_fuzz.py --size small case 379). Now every
    task lasts in the model what it lasts in the program, and the proven bound holds."""
    inst = Instance(
        name="twin-append",
        program={"kind": "attention", "heads": 4, "kv_heads": 2, "head_dim": 64, "context": 87, "batch": 4},
        hardware={
            "preset": "hbm2-pim",
            "set": [
                "organization.channels=2",
                "organization.rows=512",
                "pim.global_buffer_bytes=4096",
                "host.link_bytes_per_cycle=2",
            ],
        },
    )
    r = run(inst, SolveOptions(method="cpsat", time_limit=10.0, groups=2, functional=True, record=True))
    assert r.outputs_match and r.bit_exact and r.sim.cycles == r.compiled.predicted_cycles
    assert "pim-closed" in r.solution.modes["context"]
    assert r.solution.bound - r.lowering.max_tail <= r.sim.cycles
    assert r.solution.objective == r.sim.cycles  # no refresh falls in this program's tasks


# one matrix row: the host GEMV mode reads it over the link from one channel of each pair group,
# the other channel of the pair has nothing to read through a task of 10.7 tREFI
IDLE_CHANNEL = Instance(
    name="idle-channel",
    program={"kind": "gemv", "n": 1, "k": 4096, "batch": 4, "bias": False},
    hardware={
        "preset": "hbm2-pim",
        "set": [
            "organization.channels=4",
            "organization.command_bus=shared_pair",
            "host.link_bytes_per_cycle=2",
            "timing.params.tREFI=700",
        ],
    },
)


@pytest.mark.parametrize("method", ["greedy", "cpsat"])
def test_a_channel_without_work_in_a_long_task_gets_its_refresh_rounds(method):
    """A channel of a group that has no commands in a long task (or fewer refresh rounds than
    another) is given the missing rounds while it idles (solver/refresh_fill.py): the decoder
    counts a group's round only when every channel has issued it, and stopped with a DecodeError
    ("0 REFs of its own") on this host-read task (bench/whatif_fuzz.py --size large case 629).
    Every channel keeps the JEDEC counts, eager and streamed programs run as predicted."""
    r = run(IDLE_CHANNEL, SolveOptions(method=method, time_limit=10.0, groups=2, functional=True, record=True))
    assert r.outputs_match and r.sim.cycles == r.compiled.predicted_cycles
    trefi = r.hardware.timing.p("tREFI")
    gap, pulled, owed = _refresh_figures(r.sim.log, int(r.sim.cycles), trefi)
    assert gap <= 9 and pulled <= 8 and owed <= 8, (gap, pulled, owed)
    assert check_log(r.sim.log, r.hardware) == []
    streamed = run(IDLE_CHANNEL, SolveOptions(method=method, time_limit=10.0, groups=2, functional=False))
    assert streamed.sim.cycles == streamed.compiled.predicted_cycles == r.sim.cycles
