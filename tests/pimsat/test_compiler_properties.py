"""Property tests of the compiler: for random kernels and presets, every emitted program runs in
the simulator without a violation, computes what the ir reference computes, and takes exactly
the predicted number of cycles."""

from __future__ import annotations

from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st

from pimsat.instance import Instance
from pimsat.pipeline import SolveOptions, run

PRESETS = st.sampled_from(
    [
        ("fpga-proto", []),
        ("hbm2-pim", ["organization.channels=2", "organization.rows=256"]),
        ("gddr6-aim", ["organization.channels=2", "organization.rows=64"]),
        ("hbm3-pim", ["organization.channels=2", "organization.rows=64"]),
    ]
)


def _check(inst: Instance, method: str) -> None:
    r = run(inst, SolveOptions(method=method, time_limit=3.0, groups=2))
    assert r.outputs_match, (inst.program, method, r.max_abs_error)
    assert r.sim.cycles == r.compiled.predicted_cycles
    assert r.bounds.cycles <= r.sim.cycles


@settings(max_examples=12, deadline=None, suppress_health_check=[HealthCheck.too_slow])
@given(
    n=st.integers(1, 96),
    k=st.integers(1, 200),
    batch=st.integers(1, 3),
    preset=PRESETS,
    method=st.sampled_from(["naive", "greedy", "cpsat"]),
    bias=st.booleans(),
)
def test_random_gemv(n, k, batch, preset, method, bias):
    hw, sets = preset
    inst = Instance(
        name="prop-gemv",
        program={"kind": "gemv", "n": n, "k": k, "batch": batch, "bias": bias},
        hardware={"preset": hw, "set": sets},
    )
    _check(inst, method)


@settings(max_examples=8, deadline=None, suppress_health_check=[HealthCheck.too_slow])
@given(
    kv=st.sampled_from([1, 2]),
    group=st.sampled_from([1, 2]),
    head_dim=st.sampled_from([16, 32]),
    context=st.integers(0, 40),
    batch=st.integers(1, 2),
    preset=PRESETS,
    method=st.sampled_from(["naive", "greedy", "cpsat"]),
)
def test_random_attention(kv, group, head_dim, context, batch, preset, method):
    hw, sets = preset
    inst = Instance(
        name="prop-attn",
        program={
            "kind": "attention",
            "heads": kv * group,
            "kv_heads": kv,
            "head_dim": head_dim,
            "context": context,
            "batch": batch,
        },
        hardware={"preset": hw, "set": sets},
    )
    _check(inst, method)
