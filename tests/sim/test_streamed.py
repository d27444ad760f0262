"""Streamed runs (timing-only, no command log): the kernel reads each channel a slice at a time.

Whatever the slice length, a streamed run must measure exactly what a whole-stream run measures,
and report a violation or a deadlock with the same cycle, stream and stream-wide instruction index.
"""

from __future__ import annotations

import numpy as np
import pytest
from simgen import LOCKSTEP, compile_attention, compile_gemv, norm_gemv_program, streams

import sim.engine
from hwmodel import load_hardware
from hwmodel.isa import make
from ir import attention_program, gemv_program, generate_inputs, generate_state
from sim import SimulationError, simulate

SLICES = (1, 2, 7)


def _programs():
    fpga = load_hardware("fpga-proto")
    hbm2 = load_hardware("hbm2-pim", ["organization.channels=2", LOCKSTEP])
    hbm1 = load_hardware("hbm2-pim", ["organization.channels=1"])
    p = gemv_program(20, 128, batch=2, bias=True, dtype="fp16")
    out = [pytest.param(fpga, p, compile_gemv(fpga, p, channels=2, ref_every=6), id="gemv-fpga")]
    norm = norm_gemv_program("fp16", rows=20)
    ss = compile_gemv(hbm2, norm, channels=2, host_first=[0])
    ss.symbols.append("norm.weight")
    out.append(pytest.param(hbm2, norm, ss, id="norm-gemv-hbm2"))
    att = attention_program(2, 1, 16, 15, dtype="fp16")
    out.append(pytest.param(hbm1, att, compile_attention(hbm1, att), id="attention-hbm2"))
    return out


def _figures(res):
    return (
        res.cycles,
        res.counts.tolist(),
        res.bank_bursts.tolist(),
        res.pu_macs.tolist(),
        res.row_hits.tolist(),
        res.row_misses.tolist(),
        res.refreshes.tolist(),
        res.stalls,
        res.signals,
        res.host_times.issue.tolist(),
    )


@pytest.mark.parametrize("hw,program,ss", _programs())
@pytest.mark.parametrize("length", SLICES)
def test_streamed_run_measures_what_a_whole_run_measures(hw, program, ss, length, monkeypatch):
    whole = simulate(hw, ss, program, functional=False, record=True)
    monkeypatch.setattr(sim.engine, "SLICE", length)
    part = simulate(hw, ss, program, functional=False, record=False)
    assert _figures(part) == _figures(whole)
    assert part.channel_times == [] and part.log is None
    with pytest.raises(ValueError, match="streamed"):
        part.times(0)
    for res in (whole, part):  # the kernel's time is part of the issue phase
        assert 0 < res.phase_seconds["kernel"] <= res.phase_seconds["issue"]


def _one_early_stamp():
    """A stamped GEMV program whose last MAC of channel 1 is stamped one cycle early:
    (hardware, program, streams, index of that MAC)."""
    fpga = load_hardware("fpga-proto")
    p = gemv_program(20, 128, batch=2, bias=True, dtype="fp16")
    ss = compile_gemv(fpga, p, channels=2, ref_every=6)
    stamped = simulate(fpga, ss, p, generate_state(p, 0), generate_inputs(p, 0)).stamped(ss)
    ch = stamped.channels[1]
    i = max(k for k, ins in enumerate(ch) if ins.op == "MAC")
    ch[i] = ch[i].at(ch[i].cycle - 1)
    return fpga, p, stamped, i


@pytest.mark.parametrize("length", SLICES)
def test_streamed_violation_names_the_stream_index(length, monkeypatch):
    """A stamp one cycle early deep in channel 1: same error, whole or streamed."""
    fpga, p, stamped, i = _one_early_stamp()
    errors = []
    for stream_it in (False, True):
        if stream_it:
            monkeypatch.setattr(sim.engine, "SLICE", length)
        with pytest.raises(SimulationError) as e:
            simulate(fpga, stamped, p, functional=False, record=not stream_it)
        errors.append(e.value)
    whole, part = errors
    assert (part.kind, part.cycle, part.stream, part.instr, part.constraint) == (
        whole.kind,
        whole.cycle,
        whole.stream,
        whole.instr,
        whole.constraint,
    )
    assert part.instr == i and str(part) == str(whole)


@pytest.mark.parametrize("length", SLICES)
def test_streamed_deadlock_and_late_signal(length, hbm2, monkeypatch):
    monkeypatch.setattr(sim.engine, "SLICE", length)
    work = [make("ACT", mask=1, row=0), make("PRE", mask=1)] * 3
    # a WAIT in channel 0's fourth slice on a SIG at the end of channel 1: legal
    ok = simulate(
        hbm2,
        streams(hbm2, work + [make("WAIT", id=5)] + work, work + [make("SIG", id=5)]),
        functional=False,
        record=False,
    )
    monkeypatch.setattr(sim.engine, "SLICE", 1 << 16)
    assert (
        ok.cycles
        == simulate(
            hbm2,
            streams(hbm2, work + [make("WAIT", id=5)] + work, work + [make("SIG", id=5)]),
            functional=False,
            record=True,
        ).cycles
    )
    monkeypatch.setattr(sim.engine, "SLICE", length)
    with pytest.raises(SimulationError) as e:
        simulate(hbm2, streams(hbm2, work + [make("WAIT", id=3)] + work), functional=False, record=False)
    assert e.value.kind == "deadlock" and e.value.stream == 0 and e.value.instr == len(work)
    assert "never set" in str(e.value)


def test_streamed_run_memory_does_not_grow_with_the_stream(hbm2, monkeypatch):
    """The kernel's per-instruction arrays are one slice long, not one stream long."""
    monkeypatch.setattr(sim.engine, "SLICE", 4)
    work = [make("ACT", mask=1, row=0), make("PRE", mask=1)] * 50
    timed = sim.engine.run_timing(hbm2, [work], [], None, record=False, streamed=True)
    assert len(timed.channels[0]["issue"]) == 4
    assert timed.makespan == simulate(hbm2, streams(hbm2, work), functional=False).cycles
    assert np.all(timed.channels[0]["openrow"] == -1)


@pytest.mark.parametrize("length", SLICES)
def test_lazy_channels_fail_like_lists(length, monkeypatch):
    """The same early stamp in channels read as LazyStreams (parts of 3): the same error."""
    from hwmodel.streams import LazyStream, StreamSet

    fpga, p, stamped, i = _one_early_stamp()
    lazy = StreamSet(
        stamped.hardware,
        stamped.isa_version,
        stamped.symbols,
        [
            LazyStream([(len(s[k : k + 3]), lambda s=s, k=k: s[k : k + 3]) for k in range(0, len(s), 3)])
            for s in stamped.channels
        ],
        stamped.host,
    )
    with pytest.raises(SimulationError) as whole:
        simulate(fpga, stamped, p, functional=False, record=True)
    monkeypatch.setattr(sim.engine, "SLICE", length)
    with pytest.raises(SimulationError) as part:
        simulate(fpga, lazy, p, functional=False, record=False)
    assert str(part.value) == str(whole.value) and part.value.instr == i


def _encoded_lazy(hw, ss, sizes):
    """`ss` with each channel a LazyStream of parts of the given sizes (cycled), every part also
    handed out encoded (what decode gives a streamed run)."""
    from itertools import cycle

    from hwmodel.streams import LazyStream, StreamSet
    from sim.channel import WIDTH
    from sim.encode import encode_stream

    def encoded(seq):
        def rows(lo, hi, out):
            out[:] = encode_stream(hw, seq[lo:hi])

        return rows

    def lazy(s):
        parts, k = [], 0
        for n in cycle(sizes):
            if k >= len(s):
                break
            seq = s[k : k + n]
            parts.append((len(seq), lambda seq=seq: seq, encoded(seq)))
            k += n
        return LazyStream(parts, width=WIDTH)

    return StreamSet(ss.hardware, ss.isa_version, ss.symbols, [lazy(s) for s in ss.channels], ss.host)


@pytest.mark.parametrize("hw,program,ss", _programs())
@pytest.mark.parametrize("length", SLICES)
def test_encoded_lazy_channels_measure_what_lists_measure(hw, program, ss, length, monkeypatch):
    """Slices of an encoded LazyStream cut parts and span several (parts of 1, 9 and 4
    instructions, slices of 1, 2 and 7)."""
    whole = simulate(hw, ss, program, functional=False, record=True)
    monkeypatch.setattr(sim.engine, "SLICE", length)
    lazy = _encoded_lazy(hw, ss, (1, 9, 4))
    assert all(s.has_rows for s in lazy.channels)
    assert _figures(simulate(hw, lazy, program, functional=False, record=False)) == _figures(whole)


@pytest.mark.parametrize("length", SLICES)
def test_encoded_lazy_channels_fail_like_lists(length, monkeypatch):
    fpga, p, stamped, i = _one_early_stamp()
    with pytest.raises(SimulationError) as whole:
        simulate(fpga, stamped, p, functional=False, record=True)
    monkeypatch.setattr(sim.engine, "SLICE", length)
    with pytest.raises(SimulationError) as part:
        simulate(fpga, _encoded_lazy(fpga, stamped, (2, 5)), p, functional=False, record=False)
    assert str(part.value) == str(whole.value) and part.value.instr == i


def test_a_streamed_run_reports_its_progress(hbm2, monkeypatch):
    """progress(instructions read, instructions): non-decreasing, within the program."""
    monkeypatch.setattr(sim.engine, "SLICE", 8)
    monkeypatch.setattr(sim.engine, "PROGRESS_EVERY", 0.0)
    work = [make("ACT", mask=1, row=0), make("PRE", mask=1)] * 50
    seen = []
    res = simulate(hbm2, streams(hbm2, work), functional=False, record=False, progress=lambda d, t: seen.append((d, t)))
    assert res.cycles == simulate(hbm2, streams(hbm2, work), functional=False).cycles
    assert len(seen) >= 10 and all(t == 100 for _, t in seen)
    done = [d for d, _ in seen]
    assert done == sorted(done) and 0 < done[0] and done[-1] <= 100


def _from_file(hw, d, *channels):
    """The streams as `pimsat simulate` reads them: written, then read back from the .bin files."""
    from hwmodel.streams_io import read_streams, write_streams

    back, _ = read_streams(write_streams(streams(hw, *channels), d))
    return back


@pytest.mark.parametrize("length", (2, 7))
def test_one_channel_from_a_file_reads_ahead(hbm2, tmp_path, length, monkeypatch):
    """One channel stream read from a file: its next slice is read on a second thread while the
    kernel runs (sim/engine._Feed.prefetch). The same figures as a whole run, and the same error
    for a slice refused deep in the stream (a stamped SIG) and for a violation."""
    import threading

    work = [make("ACT", mask=1, row=0), make("PRE", mask=1)] * 10
    ss = _from_file(hbm2, tmp_path / "ok", work)
    whole = simulate(hbm2, ss, functional=False, record=True)
    monkeypatch.setattr(sim.engine, "SLICE", length)
    on_main = []
    real = sim.engine.record_rows_ops

    def spy(*args, **kwargs):
        on_main.append(threading.current_thread() is threading.main_thread())
        return real(*args, **kwargs)

    monkeypatch.setattr(sim.engine, "record_rows_ops", spy)
    assert _figures(simulate(hbm2, ss, functional=False, record=False)) == _figures(whole)
    assert on_main == [True] + [False] * (-(-len(work) // length) - 1)  # the first slice, then ahead
    refused = work[:13] + [make("SIG", id=1).at(500)] + work[13:]
    closed = work[:16] + [make("PRE", mask=1)] + work[16:]
    for i, bad in ((13, refused), (16, closed)):
        bad = _from_file(hbm2, tmp_path / str(i), bad)
        with pytest.raises(SimulationError) as w:
            simulate(hbm2, bad, functional=False, record=True)
        with pytest.raises(SimulationError) as p:
            simulate(hbm2, bad, functional=False, record=False)
        assert str(p.value) == str(w.value) and p.value.instr == i
