"""hwmodel/bus.py: the collision of two channels' bus-occupancy records (arithmetic progressions)
equals a cycle-by-cycle reading of the same commands, for random command lists and shifts; the
smallest shift is the first one without a collision."""

from __future__ import annotations

import random

import numpy as np
import pytest

from hwmodel.bus import (
    ROW_BUS,
    collision,
    ending_from,
    first_collision,
    joined,
    records_from_commands,
    smallest_shift,
)
from hwmodel.model import COMMANDS

ACT = COMMANDS.index("ACT")
CHOICES = [COMMANDS.index(c) for c in ("ACT", "PRE", "RD", "MAC", "MAC", "WRGB")]


def _commands(rng: random.Random, act_w: int):
    """A channel's commands (cycle, command, instruction) in issue order: sweeps of column
    commands at a constant spacing, single row commands; one command per cycle, and the next
    row command at least act_w after an ACT (the channel's own row bus)."""
    out, t, last_act = [], 0, -100
    for i in range(30):
        c = rng.choice(CHOICES)
        t += rng.randint(1, 4)
        if ROW_BUS[c]:
            t = max(t, last_act + act_w)
            out.append((t, c, i))
            if c == ACT:
                last_act = t
            continue
        step = rng.choice([1, 2, 3, 4])
        for k in range(rng.randint(1, 5)):
            out.append((t + k * step, c, i))
        t = out[-1][0]
    return out


def _by_cycle(a, b, shift, act_w):
    held = set()
    for t, c, _ in a:
        for k in range(act_w if c == ACT else 1):
            held.add((t + k, ROW_BUS[c]))
    hits = [
        t + shift + k for t, c, _ in b for k in range(act_w if c == ACT else 1) if (t + shift + k, ROW_BUS[c]) in held
    ]
    return min(hits, default=-1)


def _records(cmds):
    cyc, cmd, ins = (np.array(x, dtype=np.int64) for x in zip(*cmds))
    return records_from_commands(cyc, cmd, ins)


@pytest.mark.parametrize("seed", range(5))
@pytest.mark.parametrize("act_w", [1, 2])
def test_collision_equals_the_cycle_by_cycle_reading(seed, act_w):
    rng = random.Random(seed)
    out = np.zeros(6, dtype=np.int64)
    for _ in range(300):
        a, b = _commands(rng, act_w), _commands(rng, act_w)
        ra, rb = _records(a), _records(b)
        shift = rng.randint(-6, 6)
        want = _by_cycle(a, b, shift, act_w)
        got = first_collision(ra, rb, np.int64(shift), ROW_BUS, np.int64(act_w), out)
        assert got == want
        if got >= 0:  # the named commands are the colliding ones
            assert out[3] in {t for t, _, _ in a} and out[4] - shift in {t for t, _, _ in b}
            assert collision(ra, rb, shift, act_w)[0] == got


def test_smallest_shift_is_the_first_without_collision():
    rng = random.Random(7)
    for _ in range(50):
        a = _commands(rng, 2)
        ra = _records(a)
        s = smallest_shift(ra, ra, 2)
        assert _by_cycle(a, a, s, 2) == -1
        assert all(_by_cycle(a, a, d, 2) >= 0 for d in range(s))


def test_records_are_progressions():
    cmds = [(10, 5, 0), (14, 5, 0), (18, 5, 0), (23, 5, 0), (30, 0, 1), (31, 2, 2)]
    assert _records(cmds).tolist() == [[10, 4, 3, 0, 5], [23, 0, 1, 0, 5], [30, 0, 1, 1, 0], [31, 0, 1, 2, 2]]


@pytest.mark.parametrize("act_w", [1, 2])
def test_records_ending_from_a_cycle_are_those_holding_a_bus_then_or_later(act_w):
    rng = random.Random(11)
    for _ in range(100):
        cmds = _commands(rng, act_w)
        r = _records(cmds)
        t = rng.randint(0, cmds[-1][0] + 3)
        last = {}  # record -> the last cycle it holds its bus
        for k, (t0, step, n, _i, c) in enumerate(r.tolist()):
            last[k] = t0 + (n - 1) * step + (act_w if c == ACT else 1) - 1
        want = r[[k for k in range(len(r)) if last[k] >= t]]
        assert np.array_equal(ending_from(r, np.int64(t), np.int64(act_w)), want.reshape(-1, r.shape[1]))


@pytest.mark.parametrize("act_w", [1, 2])
def test_joined_records_hold_the_same_cycles_and_collide_alike(act_w):
    rng = random.Random(13)
    out = np.zeros(6, dtype=np.int64)
    for _ in range(200):
        a, b = _commands(rng, act_w), _commands(rng, act_w)
        if rng.random() < 0.5:  # one-command instructions at a constant spacing (the naive MAC streams)
            t0, step = a[-1][0] + 1, rng.choice([1, 2, 4])
            a = a + [(t0 + k * step, COMMANDS.index("MAC"), len(a) + k) for k in range(rng.randint(2, 9))]
        ra, rb = _records(a), _records(b)
        ja = joined(ra)
        assert len(ja) <= len(ra)
        cycles = lambda r: sorted(  # noqa: E731
            (t0 + k * step, c) for t0, step, n, _i, c in r.tolist() for k in range(n)
        )
        assert cycles(ja) == cycles(ra)
        for shift in (-3, 0, 2):
            want = first_collision(ra, rb, np.int64(shift), ROW_BUS, np.int64(act_w), out)
            assert first_collision(ja, rb, np.int64(shift), ROW_BUS, np.int64(act_w), out) == want
            assert first_collision(rb, ja, np.int64(-shift), ROW_BUS, np.int64(act_w), out) == (
                first_collision(rb, ra, np.int64(-shift), ROW_BUS, np.int64(act_w), out)
            )
        assert smallest_shift(ja, ja, act_w) == smallest_shift(ra, ra, act_w)
    assert len(joined(_records([(0, 5, 0), (4, 5, 1), (8, 5, 2), (12, 5, 3), (13, 2, 4)]))) == 2
