"""The solver-free bandwidth bound: hand figures, and the host-offload relaxation."""

from __future__ import annotations

import pytest

import ir
from hwmodel import load_hardware
from solver.hardware_bound import channel_work_after_offload, op_work, streaming_cycles, with_refresh


def _gemv(batch: int):
    return ir.gemv_program(4096, 4096, batch=batch)


def test_gemv_b1_hbm2_is_the_published_bandwidth_bound():
    hw = load_hardware("hbm2-pim", ["organization.channels=64"])
    # 32 MiB / 64 channels / 8 units / 32 B per 4 cycles; refresh 350 of every 3,900 cycles
    assert streaming_cycles(hw, _gemv(1)) == (8192, 8892)


def test_host_offload_counts_the_host_matrix_unit():
    hw = load_hardware("hbm2-pim", ["organization.channels=64"])
    (w,) = op_work(hw, _gemv(16))
    assert w.pim == 131072  # 16 vectors x 8,192
    assert w.link == 32768  # the matrix once over the link: 16,384 bursts x tLINK 2
    assert w.host == 4096 * 4096 * 16 // 512  # the GEMM on the host (its launch: the program's one, counted once)
    assert channel_work_after_offload([w], 0) == w.pim
    assert channel_work_after_offload([w], 10**9) == w.link
    work, bound = streaming_cycles(hw, _gemv(16))
    # the smallest T at which the host's share (T host cycles) leaves channel work that fits in T
    assert with_refresh(hw, work) <= bound
    assert with_refresh(hw, round(channel_work_after_offload([w], bound - 1))) > bound - 1
    assert 32768 < work < 131072 and bound < with_refresh(hw, 131072)


def test_attention_has_no_host_alternative():
    hw = load_hardware("hbm2-pim", ["organization.channels=8"])
    prog = ir.attention_program(heads=2, kv_heads=2, head_dim=16, context=31)
    assert all(w.host is None and w.link == w.pim for w in op_work(hw, prog))


def _both_styles(preset: str, hw_name: str):
    from solver.lower import LowerOptions, lower

    hw = load_hardware(hw_name, ["organization.channels=8"])
    p = ir.build_decode_step(ir.PRESETS[preset], batch=4, context=64, layers=1)
    return lower(hw, p, LowerOptions())[0], lower(hw, p, LowerOptions(style="naive"))[0]


@pytest.mark.parametrize("preset, hw_name", [("tiny-llama", "gddr6-aim"), ("tiny-gpt2", "hbm2-pim")])
def test_critical_path_follows_every_dependency_with_both_styles(preset, hw_name):
    """A consumer op's result is never ready before its producer op's, whichever emission
    style each job takes (a regression: with the naive style's modes an op's start was taken
    for its finish, and the Llama layer's path collapsed to a third)."""
    from solver.bounds import _finish_times, critical_path

    overlap, naive = _both_styles(preset, hw_name)
    finish = _finish_times(overlap, naive)
    for d in overlap.dependencies:
        for pop, cop in d.ops or [(None, None)]:
            assert finish[(d.after, cop)] > finish[(d.before, pop)], (d.before, pop, d.after, cop)
    both = critical_path(overlap, naive)
    assert both <= min(critical_path(overlap), critical_path(naive))
    assert both >= 0.9 * critical_path(overlap)  # the naive modes are seldom faster


def test_bound_uses_each_groups_own_channels_where_channels_differ():
    """Found by test_random_attention: a 3-row attention matrix on 2 channels leaves channel 1
    with less work than channel 0, whose timing lowering gives both groups. The critical path
    bound with lowering's durations (1,903) exceeded the optimal program (1,901)."""
    from pimsat.instance import Instance
    from pimsat.pipeline import SolveOptions, run

    inst = Instance(
        name="padded-attention",
        program={
            "kind": "attention",
            "heads": 1,
            "kv_heads": 1,
            "head_dim": 16,
            "context": 2,
            "batch": 1,
            "dtype": "fp16",
        },
        hardware={"preset": "gddr6-aim", "set": ["organization.channels=2", "organization.rows=64"]},
    )
    r = run(inst, SolveOptions(method="cpsat", time_limit=5, workers=1))
    assert r.solution.status == "OPTIMAL"
    assert r.bounds.mode_bound_cycles <= r.sim.cycles == r.compiled.predicted_cycles
