"""Tiling and layout: every resident element is placed exactly once, where `locate` says."""

from __future__ import annotations

import numpy as np
import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

import ir
from hwmodel import load_hardware
from solver.layout import Layout
from solver.mvshape import mv_shape
from solver.tiling import make_tiling


def _coverage(hw, program, op, channels, double_buffer=True):
    sh = mv_shape(program, op)
    t = make_tiling(hw, sh, channels, double_buffer)
    lay = Layout(hw, t, {c: 3 for c in channels})
    total = int(np.prod(program.tensors[sh.resident].shape))
    hits = np.zeros(total, dtype=np.int64)
    epb = hw.elements_per_burst
    cells = set()
    for p in lay.placements():
        idx = [p.elem_start + k * p.stride + j for k in range(p.count) for j in range(p.run)]
        hits[idx] += 1
        first = p.col * epb
        for n in range(p.elements):
            cell = (
                p.channel,
                p.bank,
                p.row + (first + n) // (hw.organization.columns * epb),
                (first + n) % (hw.organization.columns * epb),
            )
            assert cell not in cells, f"two elements placed at {cell}"
            cells.add(cell)
            assert p.row - 3 < lay.rows_per_bank
    return sh, t, lay, hits


@pytest.mark.parametrize("n,k,batch", [(64, 128, 1), (256, 64, 2), (100, 80, 1), (8, 1024, 3)])
def test_gemv_every_weight_placed_once(n, k, batch):
    hw = load_hardware("fpga-proto")
    sh, t, lay, hits = _coverage(hw, ir.gemv_program(n, k, batch), "gemv", (0, 1))
    assert (hits == 1).all()
    # capacity: rows per bank cover all segments
    assert lay.rows_per_bank * hw.pim.banks_per_pu * hw.organization.columns >= lay.runs * t.chunk_bursts


@pytest.mark.parametrize("op", ["scores", "context"])
def test_attention_cache_placed_once_per_real_position(op):
    hw = load_hardware("fpga-proto")
    prog = ir.attention_program(4, 2, 16, 15)
    sh, t, lay, hits = _coverage(hw, prog, op, (0, 1))
    # cache shape [B, kv, ctx+1, hd]: every element of positions 0..context is placed once
    assert (hits == 1).all()


@settings(max_examples=25, deadline=None)
@given(n=st.integers(1, 70), k=st.integers(16, 300), channels=st.sampled_from([(0,), (0, 1)]))
def test_locate_agrees_with_placements(n, k, channels):
    hw = load_hardware("fpga-proto")
    prog = ir.gemv_program(n, k)
    sh = mv_shape(prog, "gemv")
    t = make_tiling(hw, sh, channels)
    lay = Layout(hw, t, 0)
    epb = hw.elements_per_burst
    where = {}
    for p in lay.placements():
        for e in range(p.elements):
            kk, j = divmod(e, p.run)
            flat = p.elem_start + kk * p.stride + j
            pos = p.col * epb + e
            where[flat] = (
                p.channel,
                p.bank,
                p.row + pos // (hw.organization.columns * epb),
                (pos % (hw.organization.columns * epb)) // epb,
                pos % epb,
            )
    for row in {0, n // 2, n - 1}:
        for kk in {0, k // 3, k - 1}:
            ci = next(i for i, c in enumerate(channels) if lay.locate(i, 0, row, kk) is not None)
            _pu, bank, r, col, lane = lay.locate(ci, 0, row, kk)
            assert where[row * k + kk] == (channels[ci], bank, r, col, lane)


def test_tiling_respects_accumulators_and_global_buffer():
    hw = load_hardware("hbm2-pim")
    sh = mv_shape(ir.gemv_program(4096, 4096, batch=4), "gemv")
    t = make_tiling(hw, sh, tuple(range(64)))
    assert t.vg * t.rows_per_pass <= hw.pim.acc_registers
    assert 2 * t.vg * t.chunk_bursts <= hw.gb_bursts  # double-buffered
    assert hw.organization.columns % t.chunk_bursts == 0
