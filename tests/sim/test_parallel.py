"""Parallel simulation (sim/parallel.py, `simulate(..., jobs=N)`): channel streams on several
threads give the serial run's result byte for byte, and the serial run's first error.

Every class of program: the fpga and micro tier and a small LLM compiled, run functional (with
the command log), timing-only with the log, and streamed (timing-only, no log; slices cut short so
that streams stop and resume at slice ends and signals first appear mid-run); programs with an
error (a timing violation, errors in two channels at once, a signal set by two channels, a
deadlock); and a seeded sweep of single mutations of compiled programs (bench/mutations.py), each
of which gives the same result or the same error message with every job count.
"""

from __future__ import annotations

import random
import sys
from functools import cache
from pathlib import Path

import numpy as np
import pytest

import sim
import sim.engine
from hwmodel.isa import make
from hwmodel.streams import StreamSet
from pimsat.instance import load_instance
from pimsat.pipeline import DEFAULT_CACHE, SolveOptions, solve
from solver.decode import decode

ROOT = Path(__file__).resolve().parents[2]
sys.path.insert(0, str(ROOT / "bench"))
from mutations import compile_instance, mutants  # noqa: E402
from simgen import LOCKSTEP  # noqa: E402

JOBS = (2, 3)  # 3 threads on 2 cores: more threads than cores changes nothing either
INSTANCES = [
    "fpga/gemv-64x128-fpga",
    "fpga/gemv-64x128-b2-fpga",
    "fpga/attention-gqa-h4-kv2-d16-c15-fpga",
    "fpga/attention-h2-d16-c31-fpga",
    "micro/gemv-4096-hbm2-64ch",
    "micro/gemv-4096-gddr6-32ch",
    "micro/attention-llama2-c2048-hbm2-64ch",
    "small/tiny-llama-2l-hbm2-8ch",
]


def canon(res) -> bytes:
    """Everything a SimResult holds but wall-clock times, as bytes (dict order included)."""
    parts = [repr((res.hardware, int(res.cycles), res.functional, res.mac_interval, res.total_pus))]
    for name in ("counts", "bank_bursts", "pu_macs", "row_hits", "row_misses", "refreshes", "host_events"):
        a = np.asarray(getattr(res, name))
        parts.append(f"{name} {a.dtype} {a.shape}")
        parts.append(a.tobytes())
    parts.append(repr(list(res.stalls.items())))
    parts.append(repr(list(res.signals.items())))
    for t in list(res.channel_times) + [res.host_times]:
        parts += [t.issue.tobytes(), t.last.tobytes(), t.done.tobytes()]
    parts.append(b"-" if res.log is None else res.log.tobytes())
    for k, v in res.outputs.items():
        parts += [k.encode(), np.asarray(v).tobytes()]
    for d in (res.host, res.resident):
        for k in d:
            parts += [k.encode(), np.asarray(d[k]).tobytes()]
    parts.append(repr((res.output_dtypes, res.violations)))
    return b"|".join(p if isinstance(p, bytes) else p.encode() for p in parts)


def outcome(hw, ss, program, jobs, **kw):
    """('ok', canon(result)) or ('error', the error's message and fields)."""
    try:
        return "ok", canon(sim.simulate(hw, ss, program, jobs=jobs, **kw))
    except sim.SimulationError as e:
        return "error", (str(e), e.kind, e.cycle, e.stream, e.instr, e.bank, e.needed, e.actual)


@cache
def _compiled(name: str, lazy: bool):
    inst = load_instance(ROOT / "instances" / f"{name}.yaml")
    prog, hw = inst.build_program(), inst.build_hardware([], None)
    problem, lowering = DEFAULT_CACHE.lowered(inst, hw, prog, 4).for_method("greedy")
    sol, _ = solve(problem, SolveOptions(method="greedy"))
    return hw, prog, decode(problem, lowering, sol, placements=False, lazy=lazy).streams


@pytest.mark.parametrize("name", INSTANCES)
@pytest.mark.parametrize("mode", ["log", "streamed"])
def test_parallel_runs_give_the_serial_bytes(name, mode, monkeypatch):
    hw, prog, ss = _compiled(name, mode == "streamed")
    kw = dict(functional=False, record=mode == "log")
    if mode == "streamed":
        n = max(len(s) for s in ss.channels)
        monkeypatch.setattr(sim.engine, "SLICE", max(3, n // 7))  # several slices per channel
    kind, serial = outcome(hw, ss, prog, 1, **kw)
    assert kind == "ok", serial
    for jobs in JOBS:
        assert outcome(hw, ss, prog, jobs, **kw) == (kind, serial), jobs


@pytest.mark.parametrize("name", ["fpga/gemv-64x128-b2-fpga", "fpga/attention-gqa-h4-kv2-d16-c15-fpga"])
def test_functional_parallel_runs_give_the_serial_bytes(name):
    c = compile_instance(ROOT / "instances" / f"{name}.yaml")
    serial = outcome(c.hw, c.streams, c.program, 1, state=c.state, inputs=c.inputs)
    assert serial[0] == "ok"
    assert outcome(c.hw, c.streams, c.program, 2, state=c.state, inputs=c.inputs) == serial


def _ring(channels: int = 4, rounds: int = 30):
    """Channels that only meet each other: round k of channel c opens and closes a row, sets its
    signal k and waits for channel c+1's (signals the host never names: a streamed run meets
    them slice by slice)."""
    from hwmodel import load_hardware

    hw = load_hardware("hbm2-pim", [f"organization.channels={channels}", LOCKSTEP])
    chans = []
    for c in range(channels):
        s = []
        for k in range(rounds):
            s += [make("ACT", mask=1 << (k % 4), row=k), make("PRE", mask=1 << (k % 4))]
            s += [make("SIG", id=1000 + c * rounds + k), make("WAIT", id=1000 + (c + 1) % channels * rounds + k)]
        chans.append(s)
    return hw, StreamSet(hw.name, "1", [], chans, [], [])


def test_channels_meeting_each_other_streamed(monkeypatch):
    """Signals first seen mid-run grow the signal array while other channels run (sim/parallel's
    gate): the same bytes as the serial run."""
    import sim.parallel

    grown = []
    real = sim.parallel._Gate.grow
    monkeypatch.setattr(sim.parallel._Gate, "grow", lambda self, fn: (grown.append(1), real(self, fn)))
    monkeypatch.setattr(sim.engine, "SLICE", 3)
    hw, ss = _ring()
    serial = outcome(hw, ss, None, 1, functional=False, record=False)
    assert serial[0] == "ok"
    for jobs in JOBS:
        assert outcome(hw, ss, None, jobs, functional=False, record=False) == serial
    assert grown
    logged = outcome(hw, ss, None, 1, functional=False, record=True)
    assert logged[0] == "ok" and outcome(hw, ss, None, 2, functional=False, record=True) == logged


def _with(ss: StreamSet, changes: dict) -> StreamSet:
    """ss with instructions replaced: {(channel or 'host', index): Instruction or None (deleted)}."""
    chans = [list(s) for s in ss.channels]
    host = list(ss.host)
    for (k, i), new in sorted(changes.items(), key=lambda kv: (str(kv[0][0]), -kv[0][1])):
        target = host if k == "host" else chans[k]
        if new is None:
            del target[i]
        else:
            target[i] = new
    return StreamSet(ss.hardware, ss.isa_version, list(ss.symbols), chans, host, list(ss.placements))


def _first(stream, op):
    return next(i for i, ins in enumerate(stream) if ins.op == op)


def _errors():
    """(id, hw, program, mutated streams) of programs with an error the serial run reports."""
    hw, prog, ss = _compiled("fpga/gemv-64x128-fpga", False)
    stamped = sim.simulate(hw, ss, prog, functional=False).stamped(ss)
    out = []
    # a MAC stamped one cycle early in one channel; in both (two errors: the serial run's first)
    for label, chans in (("timing-one", [1]), ("timing-two", [0, 1])):
        changes = {}
        for c in chans:
            ch = stamped.channels[c]
            i = max(k for k, ins in enumerate(ch) if ins.op == "MAC")
            changes[(c, i)] = ch[i].at(ch[i].cycle - 1)
        out.append((label, hw, prog, _with(stamped, changes)))
    # an ACT to an open bank in every channel
    changes = {}
    for c, ch in enumerate(ss.channels):
        i = _first(ch, "ACT")
        changes[(c, i + 1)] = ch[i]
    out.append(("bank-state-every-channel", hw, prog, _with(ss, changes)))
    # both channels set the signal channel 0 sets first (which one is second depends on order)
    sid = ss.channels[0][_first(ss.channels[0], "SIG")].args[0]
    i1 = _first(ss.channels[1], "SIG")
    out.append(("signal-twice", hw, prog, _with(ss, {(1, i1): make("SIG", id=sid)})))
    # a WAIT on a signal nobody sets at the start of each channel: a deadlock
    chans = [[make("WAIT", id=4000 + c)] + list(ch) for c, ch in enumerate(ss.channels)]
    out.append(("deadlock", hw, prog, StreamSet(ss.hardware, ss.isa_version, ss.symbols, chans, ss.host, [])))
    return {label: (hw, prog, ss) for label, hw, prog, ss in out}


ERRORS = ["timing-one", "timing-two", "bank-state-every-channel", "signal-twice", "deadlock"]


@cache
def _error_cases():
    return _errors()


@pytest.mark.parametrize("label", ERRORS)
@pytest.mark.parametrize("mode", ["log", "streamed"])
def test_parallel_runs_report_the_serial_first_error(label, mode, monkeypatch):
    hw, prog, ss = _error_cases()[label]
    if mode == "streamed":
        monkeypatch.setattr(sim.engine, "SLICE", 5)
    kind, serial = outcome(hw, ss, prog, 1, functional=False, record=mode == "log")
    assert kind == "error"
    for jobs in JOBS:
        assert outcome(hw, ss, prog, jobs, functional=False, record=mode == "log") == (kind, serial)


@pytest.mark.parametrize("name", ["fpga/gemv-64x128-b2-fpga", "fpga/attention-h2-d16-c31-fpga"])
@pytest.mark.parametrize("seed", range(3))
def test_mutants_give_the_same_result_or_error_with_any_jobs(name, seed, monkeypatch):
    """A seeded sample of single mutations (bench/mutations.py: a field +-1, a stamp moved or
    removed, an instruction deleted), timing-only with the log and streamed."""
    c = compile_instance(ROOT / "instances" / f"{name}.yaml")
    sample = random.Random(seed).sample(list(mutants(c)), 25)
    monkeypatch.setattr(sim.engine, "SLICE", 4 + seed)
    kinds = set()
    for cls, where, ss in sample:
        for record in (True, False):
            serial = outcome(c.hw, ss, c.program, 1, functional=False, record=record)
            kinds.add(serial[0])
            assert outcome(c.hw, ss, c.program, 2, functional=False, record=record) == serial, (cls, where)
    assert "error" in kinds


def test_one_job_is_the_serial_path(monkeypatch):
    """jobs=1 never starts a thread (sim/parallel is not used)."""
    import sim.parallel

    def boom(*a, **k):
        raise AssertionError("parallel path used")

    monkeypatch.setattr(sim.parallel, "run_parallel", boom)
    hw, prog, ss = _compiled("fpga/gemv-64x128-fpga", False)
    sim.simulate(hw, ss, prog, functional=False, jobs=1)
    with pytest.raises(AssertionError, match="parallel path"):
        sim.simulate(hw, ss, prog, functional=False, jobs=2)


def test_an_error_falls_back_to_the_serial_run(monkeypatch):
    """A parallel run that meets an error runs the program again serially (which raises)."""
    hw, prog, ss = _error_cases()["timing-one"]
    good = _compiled("fpga/gemv-64x128-fpga", False)
    calls = []
    real = sim.engine.run_serial

    def counting(*a, **k):
        calls.append(1)
        return real(*a, **k)

    monkeypatch.setattr(sim.engine, "run_serial", counting)
    with pytest.raises(sim.SimulationError, match="timing"):
        sim.simulate(hw, ss, prog, functional=False, jobs=2)
    assert calls == [1]
    hw, prog, ss = good
    sim.simulate(hw, ss, prog, functional=False, jobs=2)
    assert calls == [1]  # a correct program never falls back


def test_parallel_streamed_runs_report_progress(monkeypatch):
    hw, prog, ss = _compiled("micro/gemv-4096-hbm2-64ch", True)
    monkeypatch.setattr(sim.engine, "SLICE", 50)
    monkeypatch.setattr(sim.engine, "PROGRESS_EVERY", 0.0)
    seen = []
    sim.simulate(hw, ss, prog, functional=False, record=False, jobs=2, progress=lambda a, b: seen.append((a, b)))
    total = sum(len(s) for s in ss.channels)
    assert seen and all(0 < a <= b == total for a, b in seen)


def test_first_slices_from_files_are_read_on_the_threads(tmp_path, monkeypatch):
    """A streamed parallel run of streams read from files reads each channel's first slice on a
    worker thread (sim/engine defers it), with the serial run's result; a first slice refused as
    it is read (a stamped SIG) gives the serial run's error."""
    import threading

    from hwmodel.streams_io import read_streams, write_streams

    hw, prog, ss = _compiled("fpga/gemv-64x128-fpga", False)
    monkeypatch.setattr(sim.engine, "SLICE", 7)
    on_main = []
    real = sim.engine._Feed.load_first

    def spy(feed):
        on_main.append(threading.current_thread() is threading.main_thread())
        return real(feed)

    monkeypatch.setattr(sim.engine._Feed, "load_first", spy)
    back, _ = read_streams(write_streams(ss, tmp_path / "ok"))
    kw = dict(functional=False, record=False)
    assert outcome(hw, back, prog, 2, **kw) == outcome(hw, back, prog, 1, **kw)
    assert on_main == [False] * sum(1 for s in ss.channels if len(s))
    bad, _ = read_streams(write_streams(_with(ss, {(1, 2): make("SIG", id=999).at(40)}), tmp_path / "bad"))
    kind, serial = outcome(hw, bad, prog, 1, **kw)
    assert kind == "error" and "issue stamp" in serial[0]
    assert outcome(hw, bad, prog, 2, **kw) == (kind, serial)


def test_jobs_zero_runs_large_programs_on_every_core(monkeypatch):
    """jobs=0: serial below sim.PARALLEL_INSTRUCTIONS channel instructions, one thread per core
    from there on; the serial bytes either way."""
    import sim.engine

    hw, prog, ss = _compiled("micro/gemv-4096-hbm2-64ch", True)
    kw = dict(functional=False, record=False)
    used = []
    real = sim.engine.run_timing
    monkeypatch.setattr(sim, "run_timing", lambda *a, **k: (used.append(k["jobs"]), real(*a, **k))[1])
    monkeypatch.setattr(sim, "available_cores", lambda: 2)
    serial = outcome(hw, ss, prog, 1, **kw)
    n = sum(len(c) for c in ss.channels)
    monkeypatch.setattr(sim, "PARALLEL_INSTRUCTIONS", n + 1)
    used.clear()
    assert outcome(hw, ss, prog, 0, **kw) == serial
    assert used and set(used) == {1}  # (a lazy stream's decode times tasks through the simulator too)
    monkeypatch.setattr(sim, "PARALLEL_INSTRUCTIONS", n)
    used.clear()
    assert outcome(hw, ss, prog, 0, **kw) == serial
    assert used[0] == 2
