"""The timing oracle (sim/oracle.py) times channel 0 on a device cut down to the channels it
involves (itself, and its partner on a shared command bus): the same times as on the whole
device, alone and yielding to a partner."""

from __future__ import annotations

import numpy as np
import pytest

from hwmodel import bus, load_hardware
from hwmodel.isa import ISA_VERSION, make
from hwmodel.streams import StreamSet
from sim import simulate
from sim.oracle import _alone, time_commands

SEQ = [
    make("ACT", mask=0x5, row=1),
    make("WRGB", gb=0, count=8, src=0, offset=0),
    make("MAC", mask=0x5, col=0, count=8, gb=0, acc=0),
    make("PRE", mask=0x5),
    make("ACT", mask=0x5, row=2),
    make("MAC", mask=0x5, col=8, count=8, gb=0, acc=1),
    make("PRE", mask=0x5),
    make("REF"),
]


def _whole(hw, seq, yield_to=None):
    streams = StreamSet(hw.name, ISA_VERSION, [], [list(seq)] + [[] for _ in range(hw.organization.channels - 1)], [])
    res = simulate(hw, streams, functional=False, record=True, yield_to=None if yield_to is None else {0: yield_to})
    return res.channel_times[0].issue, int(res.cycles), res.log["cycle"]


@pytest.mark.parametrize("preset", ["hbm2-pim", "gddr6-aim", "hbm3-pim"])
def test_the_oracle_times_as_the_whole_device_does(preset):
    hw = load_hardware(preset)
    small = _alone(hw)
    assert small.organization.channels == (2 if hw.organization.shared_bus else 1) < hw.organization.channels
    alone = time_commands(hw, SEQ)
    issue, cycles, log = _whole(hw, SEQ)
    assert list(alone.issue) == list(issue) and alone.cycles == cycles
    assert np.array_equal(alone.command_cycles, log)
    if hw.organization.shared_bus:
        rec = bus.records_from_commands(alone.command_cycles, alone.commands, alone.command_instrs)
        paired = time_commands(hw, SEQ, yield_to=rec)
        issue, cycles, _ = _whole(hw, SEQ, rec)
        assert list(paired.issue) == list(issue) and paired.cycles == cycles
        assert list(paired.issue) != list(alone.issue)  # (it did yield)
