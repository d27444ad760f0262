"""The refresh rounds a channel with fewer of its own gets in a long group task
(solver/refresh_fill.py): after its own commands, at the other channels' rounds where the shared
command bus is free, a round apart, none past the task's end."""

from __future__ import annotations

import numpy as np

from hwmodel import bus, load_hardware
from hwmodel.model import COMMANDS
from solver.refresh_fill import fill_rounds
from solver.refresh_points import round_cycles
from solver.task_timing import TaskTiming

REF = COMMANDS.index("REF")


def _hw(shared: bool):
    return load_hardware("hbm2-pim", [f"organization.command_bus={'shared_pair' if shared else 'per_channel'}"])


def _refreshing(refs: tuple[int, ...], duration: int) -> TaskTiming:
    """A channel whose only commands are REFs at `refs` (its bus records say so)."""
    rec = np.array([[t, 0, 1, REF] for t in refs], dtype=np.int32)
    return TaskTiming(np.array(refs), duration, duration, refs, refs, rec)


def test_an_idle_channel_gets_every_round_beside_its_partners():
    hw = _hw(shared=True)
    fills = fill_rounds(hw, {0: _refreshing((700, 1400, 2100), 3000), 1: TaskTiming(np.zeros(0), 0, 0)}, 3000)
    assert fills == {1: (701, 1401, 2101)}  # the partner's REF holds the row bus at 700, 1400, 2100


def test_without_a_shared_bus_at_the_same_cycles():
    hw = _hw(shared=False)
    fills = fill_rounds(hw, {0: _refreshing((700, 1400, 2100), 3000), 1: TaskTiming(np.zeros(0), 0, 0)}, 3000)
    assert fills == {1: (700, 1400, 2100)}


def test_after_its_own_commands_a_round_apart_and_before_the_end():
    hw = _hw(shared=False)
    length = round_cycles(hw)
    own = TaskTiming(np.array([0, 1]), 1500, 1500)  # quiet from 1500
    end = 1500 + 2 * length  # room for two rounds after it, not three
    fills = fill_rounds(hw, {0: _refreshing((700, 1400, 1400 + length), end), 1: own}, end)
    assert fills == {1: (1500, 1500 + length)}
    assert fill_rounds(hw, {0: _refreshing((700,), 3000), 1: _refreshing((800,), 3000)}, 3000) == {}


def test_an_odd_channel_whose_partner_kept_no_bus_records_gets_none():
    """A pair's odd channel is timed yielding to the even one and keeps no records: the even one
    cannot be filled beside it without them."""
    hw = _hw(shared=True)
    odd = TaskTiming(np.array([0, 5]), 3000, 3000, (700, 1400), (700, 1400), None)
    assert fill_rounds(hw, {0: TaskTiming(np.array([0]), 10, 10), 1: odd}, 3000) == {}
    assert bus.partner(0) == 1
