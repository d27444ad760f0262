"""Programs the compiler emits for a shared-bus device (organization.command_bus = shared_pair):
channel groups hold whole pseudo-channel pairs; every method's program simulates with the
predicted cycles (the odd channel of a pair timed yielding its bus to the even one's:
solver/pair_bus.py), is bit-exact, and the standards checker's pair rules find nothing; the two
channels of a pair no longer issue in lockstep, and the field's override restores the old
behaviour (lockstep, the per-channel cycles)."""

from __future__ import annotations

import pytest

from hwmodel import load_hardware
from pimsat.instance import Instance
from pimsat.pipeline import SolveOptions, run
from sim.stdcheck import check_log
from solver.lower import make_groups

METHODS = ("naive", "greedy", "cpsat")
CASES = {
    "gemv-hbm2": ({"kind": "gemv", "n": 96, "k": 256, "batch": 2}, "hbm2-pim", ["organization.channels=4"]),
    "attention-hbm2": (
        {"kind": "attention", "heads": 4, "kv_heads": 2, "head_dim": 16, "context": 37},
        "hbm2-pim",
        ["organization.channels=4"],
    ),
    "gemv-hbm3-per-bank": (
        {"kind": "gemv", "n": 80, "k": 192, "batch": 1},
        "hbm3-pim",
        ["organization.channels=4", "timing.refresh_mode=per_bank", "timing.params.tREFI=900"],
    ),
    "gemv-gddr6-shared": (
        {"kind": "gemv", "n": 64, "k": 256, "batch": 1},
        "gddr6-aim",
        ["organization.channels=4", "organization.command_bus=shared_pair"],
    ),
}
LOCKSTEP = ("gemv-hbm2", "gemv-hbm3-per-bank")


@pytest.mark.parametrize("channels", [1, 2, 3, 4, 6, 8, 64])
@pytest.mark.parametrize("count", [1, 2, 3, 4, 8])
def test_groups_hold_whole_pairs(channels, count):
    hw = load_hardware("hbm2-pim", [f"organization.channels={channels}"])
    groups = make_groups(hw, count, 16)
    assert sorted(c for g in groups for c in g.channels) == list(range(channels))
    for g in groups:
        for c in g.channels:
            if c ^ 1 < channels:
                assert c ^ 1 in g.channels, (channels, count, [g.channels for g in groups])
    free = load_hardware("hbm2-pim", [f"organization.channels={channels}", "organization.command_bus=per_channel"])
    assert len(make_groups(free, count, 16)) >= len(groups)


def _first_stamps(streams, ch):
    return [i.cycle for i in streams.channels[ch] if i.cycle is not None][:20]


@pytest.mark.parametrize("case", list(CASES))
@pytest.mark.parametrize("method", METHODS)
def test_every_method_is_exact_bit_exact_and_stdcheck_clean(case, method):
    program, preset, sets = CASES[case]
    inst = Instance(name=f"pair-{case}", program=program, hardware={"preset": preset, "set": sets})
    r = run(inst, SolveOptions(method=method, time_limit=5.0, workers=1, functional=True, record=True))
    assert r.hardware.organization.shared_bus
    assert r.sim.cycles == r.compiled.predicted_cycles
    assert r.bit_exact and r.outputs_match
    assert r.bounds.hardware.cycles <= r.sim.cycles
    pair = [v for v in check_log(r.sim.log, r.hardware) if v.rule.startswith("pair")]
    assert pair == []
    # the pairs are not in lockstep; with per_channel buses they are, as before
    assert _first_stamps(r.compiled.streams, 0) != _first_stamps(r.compiled.streams, 1)
    free = run(
        inst,
        SolveOptions(method=method, time_limit=5.0, workers=1, functional=False, record=True),
        hw_overrides=["organization.command_bus=per_channel"],
    )
    assert not free.hardware.organization.shared_bus
    assert free.sim.cycles == free.compiled.predicted_cycles
    if case in LOCKSTEP:  # a GEMV's channels run one program: in lockstep, colliding on a shared bus
        assert _first_stamps(free.compiled.streams, 0) == _first_stamps(free.compiled.streams, 1)
        assert [v for v in check_log(free.sim.log, r.hardware) if v.rule.startswith("pair")]


@pytest.mark.parametrize("channels, groups", [(1, 1), (3, 2), (5, 3)])
@pytest.mark.parametrize("method", METHODS)
def test_a_channel_without_its_partner_refreshes_unshifted(channels, groups, method):
    """A shared-bus device with a channel that has no partner (one channel, or an odd count whose
    last channel is a group of its own): its refresh rounds go unshifted, and the decoder knows it
    (a regression: it added the odd channel's delay to every group's rounds, one channel
    predicted a cycle more than it ran)."""
    inst = Instance(
        name=f"lone-{channels}",
        program={"kind": "gemv", "n": 512, "k": 1024, "batch": 1},
        hardware={"preset": "hbm3-pim", "set": [f"organization.channels={channels}"]},
    )
    r = run(inst, SolveOptions(method=method, time_limit=5.0, workers=1, groups=groups, functional=True, record=True))
    assert r.hardware.organization.shared_bus
    assert channels > 1 or any(r.compiled.refreshes.values())  # (one channel: its rounds end the program)
    assert r.sim.cycles == r.compiled.predicted_cycles
    assert r.bit_exact
    assert [v for v in check_log(r.sim.log, r.hardware) if v.rule.startswith("pair")] == []
