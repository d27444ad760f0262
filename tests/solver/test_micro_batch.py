"""A batch run as micro-batches (solver/micro_batch.py, ISA 1.5 batch ranges): the micro-batch's
shape, the host costs and checks of a batch range, how results made ready by rows are waited
for, the modes lowering offers, every mix of micro-batched and plain jobs exact and bit-exact
(with the spill of a row's last buffer write into the next row), where micro-batching wins, and
the hardware bound's pipelined chain below such programs."""

from __future__ import annotations

import random
from dataclasses import replace

import pytest

import ir
from hwmodel import load_hardware
from hwmodel.host_costs import batch_range_error, epilogue_cycles, host_op_cycles
from pimsat.instance import Instance
from pimsat.pipeline import SolveOptions, lower_program, run, simulate_program, verify_program
from solver.decode import decode
from solver.hardware_bound import critical_path_bound, hardware_bound, op_work, pipelined_path_bound
from solver.heuristics import micro_batch_count, schedule_with_modes
from solver.lower import LowerOptions, lower
from solver.micro_batch import batch_ranges
from solver.mvshape import batch_range, mv_shape
from solver.payload import Role
from solver.problem import HOST, Axis, Mode, Range, Task

ISA_1_4 = 'isa_version="1.4"'  # a device without batch ranges: no micro-batches

# GPT-2 small, one layer, batch 4 on 16 hbm2-pim channels: measured below
GPT2_B4 = {"kind": "model", "preset": "gpt2", "batch": 4, "context": 128, "layers": 1, "lm_head": False}
TINY_B4 = {"kind": "model", "preset": "tiny-llama", "batch": 4, "context": 15}


def _instance(program, preset="hbm2-pim", sets=()):
    return Instance(name="micro-batch", program=program, hardware={"preset": preset, "set": list(sets)})


@pytest.mark.parametrize("op", ["gemv", "scores", "context"])
def test_a_micro_batch_addresses_what_the_whole_op_does(op):
    """Rows [2, 4) of a 4-row batch: vector v (gemv) or matrix m (attention) is row 2 + v (2 + m //
    kv heads) of the whole op: same input element, weight or cache element and output element."""
    if op == "gemv":
        whole = mv_shape(ir.gemv_program(48, 32, batch=4), "gemv")
    else:
        whole = mv_shape(ir.attention_program(heads=4, kv_heads=2, head_dim=16, context=9, batch=4), op)
    part = batch_range(whole, 2, 2)
    if op == "gemv":
        assert (part.vectors, part.matrices) == (2, 1)
        pairs = [(0, v, 0, 2 + v) for v in range(2)]  # (matrix, vector) of the part and the whole
    else:
        assert part.matrices == 2 * 2
        pairs = [(m, v, m + 2 * 2, v) for m in range(part.matrices) for v in range(part.vectors)]
        for m in range(part.matrices):
            assert part.matrix_coords(m) == whole.matrix_coords(m + 4) == (2 + m // 2, m % 2)
    for m, v, mw, vw in pairs:
        for row in (0, part.rows - 1):
            assert part.output_index(m, v, row) == whole.output_index(mw, vw, row)
            assert part.output_at(m, v, row) == whole.output_at(mw, vw, row)
            for k in (0, part.k - 1):
                assert part.element_index(m, row, k) == whole.element_index(mw, row, k)
        assert part.vector_index(m, v, part.k - 1) == whole.vector_index(mw, vw, whole.k - 1)
    with pytest.raises(ValueError):
        batch_range(whole, 3, 2)
    with pytest.raises(ValueError):
        batch_range(part, 0, 1)  # a micro-batch is not cut again


def test_a_reader_of_rows_waits_for_the_last_range_it_reaches():
    t = [Task(n, HOST, 1) for n in ("e0", "e1")]
    mode = Mode("mb2", tuple(t), (), (), "e1", batch_outputs={"x": ((0, 2, "e0"), (2, 4, "e1"))})
    rows = lambda a, b: Range(Axis.BATCH, a, b)  # noqa: E731
    assert mode.output_for("x", rows(0, 2)) == "e0" and mode.output_for("x", rows(0, 3)) == "e1"
    assert mode.output_for("x", rows(2, 4)) == "e1" and mode.output_for("x", None) == "e1"
    assert mode.output_for("x", Range(Axis.HEADS, 0, 1)) == "e1"  # a reader by heads: all of it
    assert batch_ranges(4, 2) == [(0, 2), (2, 4)] and batch_ranges(16, 4)[-1] == (12, 16)


def test_host_costs_and_checks_of_a_batch_range():
    hw = load_hardware("fpga-proto")
    p = ir.attention_program(heads=4, kv_heads=2, head_dim=16, context=9, batch=4)
    index = {o.name: i for i, o in enumerate(p.ops)}
    rate, launch = hw.host.vector_elements_per_cycle, hw.host.dispatch_cycles
    sm, sc = index["softmax"], index["scores"]
    # softmax of 1 batch row: its scores read and probabilities written, 1 x 4 x 10 each
    assert host_op_cycles(hw, p, sm, 0, 1) == launch + -(-2 * 4 * 10 // rate)
    assert host_op_cycles(hw, p, sm, 0, 4) == host_op_cycles(hw, p, sm)
    assert epilogue_cycles(hw, p, sc, 0, 2) == launch + -(-2 * 4 * 10 // rate)
    assert batch_range_error(p, sm, "HOP", 2, 2) is None and batch_range_error(p, sc, "EPI", 0, 1) is None
    assert "outside" in batch_range_error(p, sm, "HOP", 3, 2)
    assert "do not combine" in batch_range_error(p, sm, "HOP", 0, 2, heads=2)
    assert "matrix unit" in batch_range_error(p, sc, "HOP", 0, 2)
    assert "without batches" in batch_range_error(p, sm, "HOP", 1, 0)


def test_lowering_offers_micro_batches_at_batch_4_with_batch_ranges_and_not_to_naive():
    program = _instance(TINY_B4).build_program()
    hw = _instance(TINY_B4, sets=["organization.channels=8"]).build_hardware()
    problem, _ = lower(hw, program, LowerOptions(groups=2))
    counts = {j.name: sorted({micro_batch_count(m) for m in j.modes} - {0}) for j in problem.jobs}
    assert all(c == [2] for c in counts.values()), counts  # every job: gemvs, attention, host ops, chains
    mode = next(m for m in problem.job("layers.0.self_attn.o_proj").modes if micro_batch_count(m))
    assert [pl.shares for pl in mode.payload.tilings] == [None, 0]  # one matrix, laid out once
    assert {r.role for r in mode.payload.roles.values()} == {Role.MV, Role.EPI_BATCH}
    assert sorted(set(mode.batch_rows.values())) == [(0, 2), (2, 4)]
    # down_proj reads rows of 172 elements, 16 per burst: each row's last load reads into the next
    down = next(m for m in problem.job("layers.0.mlp.down_proj").modes if micro_batch_count(m))
    assert sorted(set(down.batch_rows.values())) == [(0, 3), (2, 4)]
    host = next(m for m in problem.job("layers.0.input_layernorm").modes if micro_batch_count(m))
    assert [host.payload.roles[t.name].arg for t in host.tasks] == [(("layers.0.input_layernorm",), 0, 2)] + [
        (("layers.0.input_layernorm",), 2, 2)
    ]
    b2 = _instance({**TINY_B4, "batch": 2}).build_program()
    for prob in (
        lower(hw, b2, LowerOptions(groups=2))[0],  # batch 2: not cut
        lower(hw, program, LowerOptions(groups=2, style="naive"))[0],
        lower(load_hardware("hbm2-pim", ["organization.channels=8", ISA_1_4]), program, LowerOptions(groups=2))[0],
        lower(hw, program, LowerOptions.without(["micro-batch"], groups=2))[0],
    ):
        assert all(micro_batch_count(m) == 0 for j in prob.jobs for m in j.modes)


def _forced(inst: Instance, pick) -> tuple:
    """Every job in its first micro-batch mode where `pick(job)` (else its first plain mode),
    list-scheduled, decoded, simulated and verified."""
    hw, program = inst.build_hardware(), inst.build_program()
    lowered = lower_program(hw, program, 2)
    problem, lowering = lowered.by_style["overlap"]
    modes, cut = {}, 0
    for j in problem.jobs:
        mb = [m.name for m in j.modes if micro_batch_count(m)]
        plain = [m.name for m in j.modes if not micro_batch_count(m) and not m.head_outputs]
        modes[j.name] = mb[0] if mb and pick(j) else plain[0]
        cut += modes[j.name] in mb
    compiled = decode(problem, lowering, schedule_with_modes(problem, modes))
    result, inputs, state = simulate_program(hw, program, compiled, functional=True, record=False, values=inst.values)
    verdict = verify_program(hw, program, compiled, result, inputs, state)
    return cut, int(result.cycles), compiled, verdict, lowered.bounds.hardware.cycles


@pytest.mark.parametrize("share", [1.0, 0.5])
def test_every_mix_of_micro_batched_and_plain_jobs_is_exact_and_bit_exact(share):
    """A tiny Llama at batch 4 with every job (1.0) or a random half of them (0.5) run as two
    micro-batches: simulated as predicted, outputs within tolerance and bit-exact, above the
    hardware bound; the host's HOP/EPI carry the batch ranges."""
    rng = random.Random(7)
    inst = _instance(TINY_B4, sets=["organization.channels=8"])
    cut, cycles, compiled, verdict, bound = _forced(inst, lambda j: rng.random() < share)
    assert cut >= (30 if share == 1.0 else 5)
    assert verdict.outputs_match and verdict.bit_exact
    assert bound <= cycles == compiled.predicted_cycles
    ranges = {(i.get("batch0"), i.get("batches")) for i in compiled.streams.host if i.op in ("HOP", "EPI")}
    assert {(0, 2), (2, 2)} <= ranges


def test_a_row_that_ends_mid_burst_waits_for_the_next_rows():
    """Context over 21 probabilities per head on hbm2-pim (16 elements per burst): each row's last
    buffer write reads 11 elements of the next row, so the context of rows [0, 2) also waits for
    the softmax of row 2 (without that wait the functional simulator refuses the read: checked by
    disabling it)."""
    inst = _instance(
        {"kind": "attention", "heads": 4, "kv_heads": 2, "head_dim": 16, "context": 20, "batch": 4},
        sets=["organization.channels=4"],
    )
    hw, program = inst.build_hardware(), inst.build_program()
    problem, _ = lower(hw, program, LowerOptions(groups=2))
    ctx = next(m for m in problem.job("context").modes if micro_batch_count(m))
    mv = {ctx.batch_rows[t] for t, r in ctx.payload.roles.items() if r.role is Role.MV}
    appends = {ctx.batch_rows[t] for t, r in ctx.payload.roles.items() if r.role is Role.APPEND}
    assert sorted(mv) == [(0, 3), (2, 4)] and sorted(appends) == [(0, 2), (2, 4)]  # V heads of 16: whole bursts
    cut, cycles, compiled, verdict, bound = _forced(inst, lambda j: True)
    assert cut == 3 and verdict.outputs_match and verdict.bit_exact and bound <= cycles


def test_micro_batches_win_where_the_host_works_between_the_gemvs():
    """GPT-2 small, one layer, batch 4, 16 hbm2-pim channels, with a host of 4 elements per cycle
    (a what-if: the preset's is 16): one micro-batch's norms, GELU and residuals run while the
    units do the other's GEMVs. CP-SAT with micro-batches against without (`--without
    micro-batch`): 80,761 against 94,146 cycles (-14.2 %; 81,154 before idle gaps took the REFs
    the end would pay), simulated as predicted."""
    sets = ["organization.channels=16", "host.vector_elements_per_cycle=4"]
    inst = _instance(GPT2_B4, sets=sets)
    opts = SolveOptions(method="cpsat", functional=False, record=False, workers=1)
    r = run(inst, opts)
    plain = run(inst, replace(opts, without=frozenset({"micro-batch"})))
    chosen = [m for j, name in r.solution.modes.items() for m in r.problem.job(j).modes if m.name == name]
    assert sum(micro_batch_count(m) > 0 for m in chosen) >= 5
    assert r.sim.cycles == r.compiled.predicted_cycles and plain.sim.cycles == plain.compiled.predicted_cycles
    assert (r.sim.cycles, plain.sim.cycles) == (80761, 94146)
    assert r.bounds.hardware.cycles <= r.sim.cycles


def test_the_simulator_refuses_a_batch_range_past_the_op():
    from hwmodel.isa import make
    from sim import simulate
    from sim.errors import SimulationError

    inst = _instance(TINY_B4, sets=["organization.channels=8"])
    _cut, _cycles, compiled, _v, _b = _forced(inst, lambda j: True)
    hw, program = inst.build_hardware(), inst.build_program()
    host = list(compiled.streams.host)
    k = next(i for i, x in enumerate(host) if x.op == "HOP" and x.get("batches"))
    host[k] = make("HOP", cycle=host[k].cycle, **{**host[k].fields(), "batch0": 3})  # rows 3..4 of 4
    with pytest.raises(SimulationError, match="batch rows 3..4 outside"):
        simulate(hw, replace(compiled.streams, host=host), program=program, functional=False)


def test_micro_batches_win_on_the_prototype_where_attention_has_one_head():
    """One head of 16 over 128 cached tokens at batch 4 on fpga-proto (the preset's host): no head
    groups to cut, but two micro-batches: the host's softmax of rows [0, 2) runs while the units
    compute the scores of rows [2, 4). CP-SAT 2,067 against 2,223 cycles without micro-batches
    (-7.0 %), exact and bit-exact (the same matrices as the head-group win of
    test_head_groups.py, cut along the batch instead of the heads)."""
    program = {"kind": "attention", "heads": 1, "kv_heads": 1, "head_dim": 16, "context": 127, "batch": 4}
    inst = Instance(name="micro-batch", program=program, hardware={"preset": "fpga-proto"})
    opts = SolveOptions(method="cpsat", functional=True, record=False, workers=1)
    r = run(inst, opts)
    plain = run(inst, replace(opts, functional=False, without=frozenset({"micro-batch"})))
    assert r.solution.modes["softmax"] == "mb2" and r.solution.modes["context"] == "mb2[all]"
    assert (r.sim.cycles, plain.sim.cycles) == (2067, 2223)
    assert r.sim.cycles == r.compiled.predicted_cycles and r.outputs_match and r.bit_exact
    assert r.bounds.hardware.cycles <= r.sim.cycles


def test_the_pipelined_chain_counts_the_last_pieces_epilogue_only():
    """A single gemv at batch B: its chain of whole ops ends after its MACs (or the host's share
    of them), the sync and the whole epilogue; run as micro-batches down to one row, only the
    last row's epilogue follows (the others' overlap later MACs): B - 1 of B epilogue shares
    less (fpga-proto: 16 and 64 cycles of epilogue at batch 4 and 16). The pipelined chain is
    never above the chain of whole ops (here and on a GPT-2 layer)."""
    from solver.hardware_bound import _epilogue_compute

    hw = load_hardware("fpga-proto")
    for batch in (4, 16):
        program = ir.gemv_program(64, 128, batch=batch)
        work = op_work(hw, program)
        epi = _epilogue_compute(hw, program, 0)
        assert epi == 4 * batch
        chain, pipelined = critical_path_bound(hw, program, work), pipelined_path_bound(hw, program, work)
        assert chain - pipelined == epi - epi // batch
    gpt2 = _instance(GPT2_B4, sets=["organization.channels=16", "host.vector_elements_per_cycle=4"])
    hw, program = gpt2.build_hardware(), gpt2.build_program()
    work = op_work(hw, program)
    assert pipelined_path_bound(hw, program, work) <= critical_path_bound(hw, program, work)
    assert hardware_bound(hw, program).cycles <= 82914  # the micro-batched program above
