"""HMV: rows of a gemv on the host, added into the staging tensor EPI reads (ISA 1.2)."""

from __future__ import annotations

import numpy as np
import pytest
from simgen import norm_gemv_program, streams

from hwmodel.isa import make
from hwmodel.streams import Placement
from ir import gemv_program, generate_inputs, generate_state, run
from sim import SimulationError, simulate, verify

N, K, B = 4, 32, 2


def _read_all_rows(sig: int = 0):
    """The whole 4x32 weight in row 3 of bank 1 (8 bursts), read into `gemv.weight#host`."""
    pl = [Placement("gemv.weight", 0, 1, 3, 0, 0, N * K)]
    ch = [
        make("ACT", mask=0b10, row=3),
        make("RD", bank=1, col=0, count=8, dst=1, offset=0),
        make("PRE", mask=0b10),
        make("SIG", id=sig),
    ]
    return pl, ch


def _run(hw, host, functional=True):
    prog = gemv_program(N, K, batch=B, dtype="fp16")
    pl, ch = _read_all_rows()
    ss = streams(hw, ch, [], host=host, symbols=["x", "gemv.weight#host", "gemv.out#acc"], placements=pl)
    st, inp = generate_state(prog), generate_inputs(prog)
    return prog, st, inp, simulate(hw, ss, prog, st, inp, functional=functional)


def _cycles(hw, rows, chained=False):
    return (0 if chained else hw.host.dispatch_cycles) + -(-B * rows * K // hw.host.matrix_macs_per_cycle)


def test_rows_on_the_host_then_epilogue_match_reference(fpga):
    host = [
        make("WAIT", id=0),
        make("HMV", op=0, row0=0, rows=1),
        make("HMV", op=0, row0=1, rows=3, chain=1),
        make("EPI", op=0),
    ]
    prog, st, inp, res = _run(fpga, host)
    ok, err = verify(res, run(prog, inp, st))
    assert ok, err
    ev = res.host_events
    assert ev["kind"].tolist() == [2, 2, 1]
    assert (ev["end"] - ev["start"]).tolist()[:2] == [_cycles(fpga, 1), _cycles(fpga, 3, chained=True)]


def test_rows_left_out_are_an_uninitialised_staging_read(fpga):
    """HMV adds only its rows: with row 3 left out, the epilogue reads staging elements that
    nothing added into, an error naming the staging tensor (the rows it did add are right)."""
    with pytest.raises(SimulationError) as e:
        _run(fpga, [make("WAIT", id=0), make("HMV", op=0, row0=0, rows=3), make("EPI", op=0)])
    assert e.value.kind == "uninitialised" and "gemv.out#acc" in str(e.value) and "element 3 " in str(e.value)
    prog, st, inp, res = _run(
        fpga,
        [make("WAIT", id=0), make("HMV", op=0, row0=0, rows=3), make("HMV", op=0, row0=3, rows=1), make("EPI", op=0)],
    )
    assert np.allclose(res.outputs["gemv.out"], run(prog, inp, st)["gemv.out"], rtol=2e-2, atol=2e-2)


def test_reads_the_host_copy_only_after_the_rd_delivers(fpga):
    with pytest.raises(SimulationError) as e:
        _run(fpga, [make("HMV", op=0, row0=0, rows=4), make("WAIT", id=0)])
    assert e.value.kind == "uninitialised" and "gemv.weight#host" in str(e.value)


def test_host_unit_busy_boundary(fpga):
    """A stamped HMV may start at the cycle the one before it ends, not one cycle earlier."""
    first = _cycles(fpga, 4)
    ok = [make("HMV", op=0, row0=0, rows=4, cycle=1000), make("HMV", op=0, row0=0, rows=4, cycle=1000 + first)]
    _run(fpga, [make("WAIT", id=0)] + ok, functional=False)
    early = [make("HMV", op=0, row0=0, rows=4, cycle=1000), make("HMV", op=0, row0=0, rows=4, cycle=999 + first)]
    with pytest.raises(SimulationError) as e:
        _run(fpga, [make("WAIT", id=0)] + early, functional=False)
    assert e.value.kind == "bus" and e.value.instr == 2 and e.value.cycle == 999 + first


@pytest.mark.parametrize(
    "host, kind, text",
    [
        ([make("HMV", op=0, row0=2, rows=3)], "symbol", "outside its 4 rows"),
        ([make("HMV", op=0, row0=0, rows=0)], "symbol", "outside its 4 rows"),
        # an epilogue chained to nothing would skip the launch cost (the audit found it 20 cycles faster)
        ([make("WAIT", id=0), make("EPI", op=0, chain=1)], "stream", "EPI chain=1 is the host stream's first"),
        # SIG / WAIT act when reached: a stamp on one would be silently ignored
        ([make("WAIT", id=0, cycle=5)], "stream", "WAIT carries an issue stamp @5"),
        ([make("WAIT", id=0), make("SIG", id=1, cycle=0)], "stream", "SIG carries an issue stamp @0"),
    ],
)
def test_malformed(fpga, host, kind, text):
    with pytest.raises(SimulationError) as e:
        _run(fpga, host, functional=False)
    assert e.value.kind == kind and text in str(e.value)


@pytest.mark.parametrize(
    "host",
    [
        [make("WAIT", id=0), make("HMV", op=0, row0=0, rows=4), make("EPI", op=0, chain=1)],
        [make("WAIT", id=0), make("HMV", op=0, row0=0, rows=2), make("SIG", id=1), make("WAIT", id=1)]
        + [make("HMV", op=0, row0=2, rows=2, chain=1), make("EPI", op=0, chain=1)],
    ],
)
def test_a_launch_is_continued_across_kinds_from_isa_1_6(fpga, host):
    """ISA 1.6: an EPI chained to an HMV continues its launch (a WAIT may come between); the same
    stream on a device that declares ISA 1.5 is refused in one line naming both instructions."""
    res = _run(fpga, host)[3]
    ev = res.host_events
    assert (ev["end"] - ev["start"]).tolist()[-1] == -(-B * N // fpga.host.vector_elements_per_cycle)
    old = fpga.model_copy(update={"isa_version": "1.5"})
    with pytest.raises(SimulationError) as e:
        _run(old, host, functional=False)
    assert e.value.kind == "stream" and e.value.instr == len(host) - 1
    assert "EPI chain=1 must follow a EPI (ISA 1.5; from 1.6 any of LAUNCH, HOP, EPI, HMV)" in str(e.value)
    assert str(e.value).endswith("not HMV")


def test_a_launch_without_work_is_continued_after_a_wait(fpga):
    """ISA 1.6 LAUNCH: the host busy for dispatch_cycles from cycle 0 (an event of kind LAUNCH, op
    -1); the HMV and EPI after the WAIT continue it and pay no launch. On ISA 1.5 the LAUNCH is
    refused; in a channel stream too."""
    host = [make("LAUNCH"), make("WAIT", id=0), make("HMV", op=0, row0=0, rows=4, chain=1), make("EPI", op=0, chain=1)]
    prog, st, inp, res = _run(fpga, host)
    ok, err = verify(res, run(prog, inp, st))
    assert ok, err
    ev = res.host_events
    assert ev["kind"].tolist() == [3, 2, 1] and ev["op"].tolist()[0] == -1
    assert (ev["start"][0], ev["end"][0]) == (0, fpga.host.dispatch_cycles)
    assert (ev["end"] - ev["start"]).tolist()[1:] == [
        _cycles(fpga, 4, chained=True),
        -(-B * N // fpga.host.vector_elements_per_cycle),
    ]
    with pytest.raises(SimulationError) as e:
        _run(fpga.model_copy(update={"isa_version": "1.5"}), host, functional=False)
    assert e.value.kind == "stream" and e.value.instr == 0
    assert "LAUNCH needs ISA 1.6; the device declares isa_version 1.5" in str(e.value)
    with pytest.raises(SimulationError) as e:
        simulate(fpga, streams(fpga, [make("LAUNCH")], []), gemv_program(N, K), functional=False)
    assert e.value.kind == "stream" and "LAUNCH is a host instruction" in str(e.value)


def test_a_host_without_persistent_kernels_launches_after_every_wait(fpga):
    """host.persistent_kernel = false: a chained instruction right after another (no WAIT between)
    continues its launch; one after a WAIT is refused in one line, the unchained one accepted."""
    hw = fpga.model_copy(update={"host": fpga.host.model_copy(update={"persistent_kernel": False})})
    _run(hw, [make("WAIT", id=0), make("HMV", op=0, row0=0, rows=4), make("EPI", op=0, chain=1)])
    waited = [make("LAUNCH"), make("WAIT", id=0), make("HMV", op=0, row0=0, rows=4, chain=1), make("EPI", op=0)]
    with pytest.raises(SimulationError) as e:
        _run(hw, waited, functional=False)
    assert e.value.kind == "stream" and e.value.instr == 2
    assert "HMV chain=1 follows a WAIT" in str(e.value) and "host.persistent_kernel = false" in str(e.value)
    waited[2] = make("HMV", op=0, row0=0, rows=4)
    _run(hw, waited)


def test_only_a_gemv_has_rows(fpga):
    prog = norm_gemv_program("fp16", 16)
    ss = streams(fpga, [], [], host=[make("HMV", op=0, row0=0, rows=1)])
    with pytest.raises(SimulationError) as e:
        simulate(fpga, ss, prog, functional=False)
    assert e.value.kind == "symbol" and "only a gemv has rows" in str(e.value)


def test_host_cannot_be_a_channel_instruction(fpga):
    with pytest.raises(SimulationError) as e:
        simulate(fpga, streams(fpga, [make("HMV", op=0, row0=0, rows=1)], []), gemv_program(N, K), functional=False)
    assert e.value.kind == "stream"


def test_a_stamped_sig_in_a_channel_stream_is_refused(fpga):
    prog = norm_gemv_program("fp16", 16)
    ok = streams(fpga, [make("SIG", id=0)], [], host=[make("WAIT", id=0)])
    simulate(fpga, ok, prog, functional=False)
    bad = streams(fpga, [make("SIG", id=0, cycle=3)], [], host=[make("WAIT", id=0)])
    with pytest.raises(SimulationError) as e:
        simulate(fpga, bad, prog, functional=False)
    assert e.value.kind == "stream" and e.value.stream == 0 and "SIG carries an issue stamp @3" in str(e.value)


def test_rdacc_names_its_unit_by_the_first_bank():
    """The other bank of a two-bank PIM unit would be an alias of the same unit: refused."""
    from hwmodel import load_hardware

    hbm2 = load_hardware("hbm2-pim", ["organization.channels=1"])
    prog = norm_gemv_program("fp16", 16)
    rd = dict(acc=0, count=1, dst=0, offset=0, stride=1)
    simulate(hbm2, streams(hbm2, [make("RDACC", bank=2, **rd)], host=[]), prog, functional=False)
    with pytest.raises(SimulationError) as e:
        simulate(hbm2, streams(hbm2, [make("RDACC", bank=3, **rd)], host=[]), prog, functional=False)
    assert e.value.kind == "range" and e.value.bank == 3 and "named by its first bank (2, unit 1" in str(e.value)
