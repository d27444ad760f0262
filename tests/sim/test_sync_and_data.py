"""Synchronisation (deadlock, signals) and host-data rules (uninitialised reads, races)."""

from __future__ import annotations

import numpy as np
import pytest
from simgen import compile_gemv, norm_gemv_program, streams

from hwmodel.isa import make
from ir import gemv_program, generate_inputs, generate_state, run
from sim import SimulationError, simulate, verify


def test_deadlock_wait_never_set(hbm2):
    ch0 = [make("WAIT", id=3), make("ACT", mask=1, row=0), make("PRE", mask=1)]
    with pytest.raises(SimulationError) as e:
        simulate(hbm2, streams(hbm2, ch0), functional=False)
    err = e.value
    assert err.kind == "deadlock" and err.stream == 0 and err.instr == 0 and "id=3" in str(err)
    assert "never set" in str(err)


def test_deadlock_cycle_between_streams(hbm2):
    ch0 = [make("WAIT", id=1), make("SIG", id=0)]
    ch1 = [make("WAIT", id=0), make("SIG", id=1)]
    host = [make("SIG", id=9)]
    with pytest.raises(SimulationError) as e:
        simulate(hbm2, streams(hbm2, ch0, ch1, host=host), functional=False)
    assert e.value.kind == "deadlock"
    assert "channel 0 instr 0" in str(e.value) and "channel 1 instr 0" in str(e.value)


def test_signal_set_twice(hbm2):
    with pytest.raises(SimulationError) as e:
        simulate(hbm2, streams(hbm2, [make("SIG", id=4)], [make("SIG", id=4)]), functional=False)
    assert e.value.kind == "signal" and "set twice" in str(e.value)
    with pytest.raises(SimulationError) as e:
        simulate(hbm2, streams(hbm2, [make("SIG", id=4)], host=[make("SIG", id=4)]), functional=False)
    assert e.value.kind == "signal"


def _gemv(hw, n=16, k=64, batch=1, bias=False, channels=2, **kw):
    prog = gemv_program(n, k, batch=batch, bias=bias, dtype=hw.pim.dtype)
    return prog, compile_gemv(hw, prog, channels=channels, **kw)


def test_gemv_matches_reference_and_stamped_rerun(hbm2):
    prog, ss = _gemv(hbm2, n=40, k=128, batch=2, bias=True)
    st, inp = generate_state(prog, 3), generate_inputs(prog, 3)
    res = simulate(hbm2, ss, prog, st, inp)
    ok, err = verify(res, run(prog, inp, st))
    assert ok and err < 1e-2
    again = simulate(hbm2, res.stamped(ss), prog, st, inp)
    assert again.cycles == res.cycles
    for c in range(2):
        assert np.array_equal(again.times(c).issue, res.times(c).issue)
    assert np.array_equal(again.outputs["gemv.out"], res.outputs["gemv.out"])
    assert np.array_equal(again.log, res.log)
    assert res.host_events["kind"].tolist() == [1]


def test_uninitialised_host_read(hbm2):
    """WRGB from an activation nobody wrote."""
    prog, ss = _gemv(hbm2, n=64, k=64)
    ss.symbols[0] = "gemv.out"  # WRGB now reads the (never written) output
    with pytest.raises(SimulationError) as e:
        simulate(hbm2, ss, prog)
    assert e.value.kind == "uninitialised" and "gemv.out" in str(e.value) and e.value.stream in (0, 1)


def test_bank_memory_outside_placements_reads_zero(hbm2):
    """Banks hold zeros wherever no placement put data (the memory image is zero-filled): a missing
    placement makes its weight row contribute nothing."""
    prog, ss = _gemv(hbm2)
    missing = ss.placements[0]
    ss.placements = ss.placements[1:]
    st, inp = generate_state(prog), generate_inputs(prog)
    res = simulate(hbm2, ss, prog, st, inp)
    row = missing.elem_start // prog.tensors["gemv.weight"].shape[1]
    assert res.outputs["gemv.out"][0, row] == 0
    assert np.isnan(res.resident["gemv.weight"][row]).all()
    ok, _ = verify(res, run(prog, inp, st))
    assert not ok


def test_unknown_symbol(hbm2):
    prog, ss = _gemv(hbm2)
    ss.symbols.append("no.such.tensor")
    with pytest.raises(SimulationError) as e:
        simulate(hbm2, ss, prog)
    assert e.value.kind == "symbol"
    prog, ss = _gemv(hbm2)
    ss.symbols.pop()  # the staging symbol index 1 is now out of range
    with pytest.raises(SimulationError) as e:
        simulate(hbm2, ss, prog)
    assert e.value.kind == "symbol"


def test_missing_wait_is_a_race_even_when_stamped(hbm2):
    """Stamped streams keep their cycles when a WAIT is removed; the missing ordering is still
    caught: the epilogue reads staging that channel 0 wrote with no SIG/WAIT chain."""
    prog, ss = _gemv(hbm2)
    res = simulate(hbm2, ss, prog)
    stamped = res.stamped(ss)
    host = stamped.host
    assert host[0].op == "WAIT" and host[0].get("id") == 0
    stamped.host = host[1:]
    with pytest.raises(SimulationError) as e:
        simulate(hbm2, stamped, prog)
    assert e.value.kind == "race" and e.value.stream == "host" and "channel 0" in str(e.value)


def test_early_epilogue_unstamped_is_caught(hbm2):
    """Without the WAITs the epilogue runs before the RDACCs deliver: it reads staging that no
    RDACC has added into yet (the RDACCs come later, so the message points at the WAIT)."""
    prog, ss = _gemv(hbm2)
    ss.host = [i for i in ss.host if i.op != "WAIT"]
    with pytest.raises(SimulationError) as e:
        simulate(hbm2, ss, prog)
    assert e.value.kind == "uninitialised" and "#acc" in str(e.value) and "missing WAIT?" in str(e.value)


def test_host_op_then_pim(hbm2):
    """rmsnorm on the host (HOP), its output broadcast by WRGB after a SIG/WAIT, gemv in memory."""
    prog = norm_gemv_program(hbm2.pim.dtype, rows=24, name="t")
    ss = compile_gemv(hbm2, prog, channels=2, host_first=[0])
    ss.symbols.append("norm.weight")
    st, inp = generate_state(prog), generate_inputs(prog)
    res = simulate(hbm2, ss, prog, st, inp)
    ok, err = verify(res, run(prog, inp, st))
    assert ok, err
    hop = res.host_events[0]
    assert hop["kind"] == 0 and hop["end"] - hop["start"] == __import__("sim").host_op_cycles(hbm2, prog, 0)
    # the channels' WRGB waits for the host's SIG
    assert res.times(0).issue[1] >= hop["end"] + hbm2.host.sync_cycles
    # the host copy of the norm weight must be in the symbol table
    ss.symbols.pop()
    with pytest.raises(SimulationError) as e:
        simulate(hbm2, ss, prog, st, inp)
    assert e.value.kind == "uninitialised" and "norm.weight" in str(e.value)


def test_burst_tails_past_the_tensor_end(fpga):
    """K = 20 is not a whole number of 16-element bursts: the second WRGB burst runs past the end
    of x (padded with zeros) and the weight rows' second bursts are half filled (zeros)."""
    from hwmodel.streams import Placement

    prog = gemv_program(2, 20, dtype="fp16")
    pl = [Placement("gemv.weight", 0, 0, 0, 0, 0, 20), Placement("gemv.weight", 0, 2, 0, 0, 20, 20)]
    ch = [
        make("WRGB", gb=0, count=2, src=0, offset=0),
        make("ACT", mask=0b101, row=0),
        make("MAC", mask=0b101, col=0, count=2, gb=0, acc=0),
        make("PRE", mask=0b101),
        make("RDACC", bank=0, acc=0, count=1, dst=1, offset=0, stride=1),
        make("RDACC", bank=2, acc=0, count=1, dst=1, offset=1, stride=1),
        make("SIG", id=0),
    ]
    host = [make("WAIT", id=0), make("EPI", op=0)]
    ss = streams(fpga, ch, [], host=host, symbols=["x", "gemv.out#acc"], placements=pl)
    st, inp = generate_state(prog), generate_inputs(prog)
    res = simulate(fpga, ss, prog, st, inp)
    ok, err = verify(res, run(prog, inp, st))
    assert ok, err
    # an offset past the end is an error
    ch[0] = make("WRGB", gb=0, count=2, src=0, offset=20)
    with pytest.raises(SimulationError) as e:
        simulate(fpga, streams(fpga, ch, [], host=host, symbols=["x", "gemv.out#acc"], placements=pl), prog, st, inp)
    assert e.value.kind == "range" and "past the end" in str(e.value)


def test_host_gemv_reads_weights_into_host_copy(fpga):
    """A host-dispatched gemv whose weight lives in banks: RD sweeps fill `W#host`, the HOP reads it."""
    from hwmodel.streams import Placement

    prog = gemv_program(4, 32, dtype="fp16")
    pl = [Placement("gemv.weight", 0, 1, 3, 0, 0, 4 * 32)]  # 8 bursts: row 3 of bank 1
    ch = [
        make("ACT", mask=0b10, row=3),
        make("RD", bank=1, col=0, count=8, dst=1, offset=0),
        make("PRE", mask=0b10),
        make("SIG", id=0),
    ]
    host = [make("WAIT", id=0), make("HOP", op=0)]
    ss = streams(fpga, ch, [], host=host, symbols=["x", "gemv.weight#host"], placements=pl)
    st, inp = generate_state(prog), generate_inputs(prog)
    res = simulate(fpga, ss, prog, st, inp)
    ok, err = verify(res, run(prog, inp, st))
    assert ok, err
    assert np.array_equal(res.host["gemv.weight#host"], st["gemv.weight"])
    # without the WAIT the host reads the copy before the RD delivers it
    ss.host = [make("HOP", op=0)]
    with pytest.raises(SimulationError) as e:
        simulate(fpga, ss, prog, st, inp)
    assert e.value.kind == "uninitialised" and "gemv.weight#host" in str(e.value)
