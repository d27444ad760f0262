"""Differential tests: streams from the hand-written generators (simgen) against ir.reference."""

from __future__ import annotations

import numpy as np
import pytest
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st
from simgen import LOCKSTEP, compile_attention, compile_gemv

from hwmodel import load_hardware
from ir import attention_program, gemv_program, generate_inputs, generate_state, run
from sim import simulate, verify

HW = {
    p: load_hardware(p, ["organization.channels=2", LOCKSTEP])
    for p in ("fpga-proto", "hbm2-pim", "gddr6-aim", "hbm3-pim")
}


@st.composite
def gemv_case(draw):
    preset = draw(st.sampled_from(sorted(HW)))
    hw = HW[preset]
    E = hw.elements_per_burst
    batch = draw(st.integers(1, 2))
    k = E * draw(st.integers(1, 3 * min(hw.gb_bursts, hw.organization.columns)))
    n = draw(st.integers(1, 48))
    return preset, n, k, batch, draw(st.booleans()), draw(st.integers(1, 2)), draw(st.integers(0, 2**16))


@settings(max_examples=30, deadline=None, suppress_health_check=[HealthCheck.too_slow])
@given(gemv_case())
def test_random_gemv_matches_reference(case):
    preset, n, k, batch, bias, channels, seed = case
    hw = HW[preset]
    prog = gemv_program(n, k, batch=batch, bias=bias, dtype=hw.pim.dtype)
    ss = compile_gemv(hw, prog, channels=channels, ref_every=8)
    state, inputs = generate_state(prog, seed), generate_inputs(prog, seed)
    res = simulate(hw, ss, prog, state, inputs)
    ok, err = verify(res, run(prog, inputs, state), {"fp16": 1e-2, "bf16": 3e-2})
    assert ok, (case, err)
    assert res.command_counts["MAC"] == sum(1 for _ in res.log if _["command"] == 5)


@pytest.mark.parametrize("preset", ["hbm2-pim", "gddr6-aim", "hbm3-pim"])
def test_attention_with_kv_append_in_banks(preset):
    """k / v of the new token written into the bank-resident caches by WR (v element-wise by
    emask into the transposed layout); scores and context by PIM MACs over the caches."""
    hw = load_hardware(preset, ["organization.channels=1"])
    E = hw.elements_per_burst
    prog = attention_program(2, 1, E, E - 1, dtype=hw.pim.dtype)
    ss = compile_attention(hw, prog)
    state, inputs = generate_state(prog, 1), generate_inputs(prog, 1)
    res = simulate(hw, ss, prog, state, inputs)
    ref = run(prog, inputs, state)
    ok, err = verify(res, ref)
    assert ok, err
    for cache in ("k_cache", "v_cache"):
        new = ref[f"{cache}@{E - 1}"].astype(np.float32)
        assert np.array_equal(res.resident[cache], new)
        assert not np.array_equal(res.resident[cache], state[cache].astype(np.float32))
    assert res.command_counts["WR"] == 1 + E
