"""The hardware bound's streaming term in parts (solver/bound_parts.py), as the report's
`distance` sets them against a program: every part is a count of cycles (>= 0), and the parts,
the relaxation and the other term make up the bound exactly."""

from __future__ import annotations

from hypothesis import HealthCheck, assume, given, settings
from hypothesis import strategies as st

from hwmodel.loader import HardwareError
from pimsat.instance import Instance
from solver.bound_parts import streaming_parts
from solver.hardware_bound import Term, hardware_bound


def _parts(program, preset, sets):
    inst = Instance(name="parts", program=program, hardware={"preset": preset, "set": sets})
    hw, p = inst.build_hardware(), inst.build_program()
    hb = hardware_bound(hw, p)
    return hb, streaming_parts(hw, p, hb)


def test_a_bound_set_by_another_term_says_so():
    """Where the critical path binds (three syncs of 60 on an attention chain), the parts of the
    streaming count fall short of the bound by `other_term`."""
    program = {"kind": "attention", "heads": 2, "kv_heads": 2, "head_dim": 16, "context": 31}
    hb, parts = _parts(program, "fpga-proto", ["host.sync_cycles=60"])
    assert hb.binding is Term.CRITICAL_PATH and parts.other_term == hb.cycles - hb.as_dict()["streaming"] > 0
    assert parts.total + parts.relaxation + parts.other_term == hb.cycles


def test_fewer_macs_than_a_phase_fold_into_the_first_load():
    """GEMV 96 x 160 on two hbm2-pim channels: each unit's MACs fill less than one phase
    (accumulators x buffer bursts), so the channel view's count of boundaries would be negative;
    it is folded into the first load's share."""
    hb, parts = _parts(
        {"kind": "gemv", "n": 96, "k": 160}, "hbm2-pim", ["organization.channels=2", "organization.rows=256"]
    )
    assert parts.view == "channel" and parts.boundaries == 0 and 0 <= parts.first < 19
    assert parts.total + parts.relaxation + parts.other_term == hb.cycles


@settings(max_examples=60, deadline=None, suppress_health_check=[HealthCheck.too_slow])
@given(
    kind=st.sampled_from(["gemv", "attention"]),
    n=st.integers(1, 200),
    k=st.integers(1, 300),
    batch=st.sampled_from([1, 2, 4, 16]),
    context=st.integers(0, 60),
    preset=st.sampled_from(
        [
            ("fpga-proto", []),
            ("hbm2-pim", ["organization.channels=2", "organization.rows=256"]),
            ("gddr6-aim", ["organization.channels=2", "organization.rows=64"]),
            ("hbm3-pim", ["organization.channels=4", "organization.rows=64"]),
        ]
    ),
    extra=st.lists(
        st.sampled_from(
            [
                "pim.global_buffer_bytes=64",
                "pim.acc_registers=2",
                "pim.gb_write_path=dedicated",
                "timing.refresh_mode=per_bank",
                "timing.params.tREFI=1200",
                "host.dispatch_cycles=900",
            ]
        ),
        max_size=2,
        unique=True,
    ),
)
def test_every_part_is_a_count_and_they_make_up_the_bound(kind, n, k, batch, context, preset, extra):
    if kind == "gemv":
        program = {"kind": "gemv", "n": n, "k": k, "batch": batch}
    else:
        program = {"kind": "attention", "heads": 2, "kv_heads": 2, "head_dim": 16, "context": context}
    name, sets = preset
    try:
        hb, parts = _parts(program, name, sets + extra)
    except HardwareError:
        assume(False)
    assert min(parts.mac, parts.row_changes, parts.boundaries, parts.first, parts.refresh_and_end) >= 0, parts
    assert parts.total + parts.relaxation + parts.other_term == hb.cycles
    assert parts.other_term >= 0
