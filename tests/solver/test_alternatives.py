"""Alternatives a run may withhold (solver/alternatives.py, `--without`): each one's modes are
gone from the lowered problem, and the others are still offered."""

from __future__ import annotations

import pytest

import ir
from hwmodel import load_hardware
from solver.alternatives import Alternative, offered
from solver.lower import LowerOptions, lower


def _problem(without=()):
    p = ir.build_decode_step(ir.PRESETS["tiny-llama"], batch=4, context=7, layers=1)  # (micro-batches from 4)
    return lower(load_hardware("hbm3-pim", ["organization.channels=8"]), p, LowerOptions.without(without))[0]


def test_every_alternative_is_offered_by_default():
    assert all(offered(_problem()).values()), offered(_problem())


@pytest.mark.parametrize("alt", list(Alternative), ids=str)
def test_withholding_one_alternative_removes_its_modes_and_keeps_the_others(alt):
    """(A mode of two alternatives, a fused group's k-split or split, goes with either; without
    fusion each gemv of a group has k-split and host modes of its own, so there are more.)"""
    less = offered(_problem([alt]))
    assert less[alt] == 0
    assert all(less[a] > 0 for a in Alternative if a is not alt), less


def test_an_unknown_alternative_is_refused():
    with pytest.raises(ValueError):
        LowerOptions.without(["ksplit"])
