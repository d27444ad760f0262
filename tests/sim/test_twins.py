"""Twin channels (sim/twins.py): a streamed timing run runs one channel per class of identical
streams and hands the others its state. The result is the plain run's, byte for byte; the
decoder's claim that two streams are twins holds row for row; and a program with an error gives
the plain run's error (the run with twins stops and runs again without them).
"""

from __future__ import annotations

import sys
from functools import cache
from pathlib import Path

import numpy as np
import pytest

import sim
import sim.engine
import sim.twins
from hwmodel.isa import make
from hwmodel.streams import LazyStream, PartTwin, StreamSet
from pimsat.instance import load_instance
from pimsat.pipeline import DEFAULT_CACHE, SolveOptions, solve
from sim.encode import C_OP, C_ROW, OP_SIG
from solver.decode import decode

ROOT = Path(__file__).resolve().parents[2]
sys.path.insert(0, str(Path(__file__).parent))
from test_parallel import outcome  # noqa: E402

CASES = [
    ("micro/gemv-4096-hbm2-64ch", "naive"),  # shared command bus: twins by pairs
    ("micro/gemv-4096-gddr6-32ch", "greedy"),
    ("micro/attention-llama2-c2048-hbm2-64ch", "greedy"),  # KV appends, host waits per head group
    ("small/gpt2-1l-c128-hbm2-16ch", "naive"),  # a whole layer: attention, host ops
]


@cache
def _compiled(name: str, method: str):
    inst = load_instance(ROOT / "instances" / f"{name}.yaml")
    prog, hw = inst.build_program(), inst.build_hardware([], None)
    problem, lowering = DEFAULT_CACHE.lowered(inst, hw, prog, 4).for_method(method)
    sol, _ = solve(problem, SolveOptions(method=method, time_limit=5))
    return hw, prog, decode(problem, lowering, sol, placements=False, lazy=True).streams


def _streamed(hw, ss, prog, jobs, twins: bool, monkeypatch):
    monkeypatch.setenv("PIMSAT_TWINS", "1" if twins else "0")
    return outcome(hw, ss, prog, jobs, functional=False, record=False)


@pytest.mark.parametrize("name,method", CASES)
def test_twins_give_the_plain_runs_bytes(name, method, monkeypatch):
    hw, prog, ss = _compiled(name, method)
    tw = sim.twins.Twins.of(hw, ss.channels)
    assert tw is not None and tw.twins(), "no twins: the test would compare a run with itself"
    n = max(len(s) for s in ss.channels)
    monkeypatch.setattr(sim.engine, "SLICE", max(3, n // 5))  # SIGs relayed slice after slice
    # (a run with twins that stopped would give the plain run's bytes from its second run)
    _against_plain(hw, ss, prog, "ok", [True], monkeypatch)


def _against_plain(hw, ss, prog, kind: str, runs: list[bool], monkeypatch) -> None:
    """The plain run's outcome is `kind`; with twins, on one thread and two, the same outcome,
    from sim.engine._timing runs with (True) and without (False) twins as `runs` says."""
    plain = _streamed(hw, ss, prog, 1, False, monkeypatch)
    assert plain[0] == kind, plain
    calls: list[bool] = []
    real = sim.engine._timing
    monkeypatch.setattr(sim.engine, "_timing", lambda *a: (calls.append(a[-1] is not None), real(*a))[1])
    for jobs in (1, 2):
        calls.clear()
        assert _streamed(hw, ss, prog, jobs, True, monkeypatch) == plain, jobs
        assert calls == runs, jobs


ROW_CASES = CASES + [
    ("micro/gemv-4096-hbm3-32pch", "greedy"),
    ("micro/attention-gqa-llama3-c2048-hbm2-64ch", "greedy"),
    ("micro/gemv-4096-b4-hbm2-64ch", "cpsat"),
]


@pytest.mark.parametrize("name,method", ROW_CASES)
def test_a_twin_encodes_its_leaders_rows_but_for_its_sig_ids(name, method):
    """The decoder's PartTwin keys against the rows themselves."""
    hw, _prog, ss = _compiled(name, method)
    tw = sim.twins.Twins.of(hw, ss.channels)
    checked = 0
    for c in tw.twins():
        lead = ss.channels[tw.leader[c]]
        mine, theirs = ss.channels[c].rows(0, len(ss.channels[c])), lead.rows(0, len(lead))
        assert mine.shape == theirs.shape
        sig = mine[:, C_OP] == OP_SIG
        assert np.array_equal(sig, theirs[:, C_OP] == OP_SIG)
        same = mine.copy()
        same[sig, C_ROW] = theirs[sig, C_ROW]
        assert np.array_equal(same, theirs), c
        assert list(mine[sig, C_ROW]) == ss.channels[c].twin_signals()
        if sig.any():
            assert not np.array_equal(mine[sig, C_ROW], theirs[sig, C_ROW])  # (distinct signals)
        checked += 1
    assert checked


def test_on_a_shared_bus_twins_are_whole_pairs():
    hw, _prog, ss = _compiled("micro/gemv-4096-hbm2-64ch", "naive")
    assert hw.organization.shared_bus
    tw = sim.twins.Twins.of(hw, ss.channels)
    for c in tw.twins():
        assert tw.leader[c] % 2 == c % 2 and tw.leader[c ^ 1] == tw.leader[c] ^ 1


# ---- programs with an error: the plain run's error ------------------------------------------


def _remade(ss: StreamSet, edits: dict) -> StreamSet:
    """ss with parts of channel streams changed: {(channel, part): (instructions -> instructions,
    PartTwin -> PartTwin)}; the part's rows are encoded from its new instructions (the PartTwin
    must say what changed)."""
    from sim.encode import encode_stream

    hw_name = ss.hardware
    chans = list(ss.channels)
    for c in sorted({c for c, _k in edits}):
        parts = list(chans[c]._parts)
        for (cc, k), (change, twin) in edits.items():
            if cc != c:
                continue
            _n, build, _rows, old = parts[k]
            seq = change(list(build()))
            table = encode_stream(_HW[hw_name], seq)

            def rows(lo, hi, out, table=table):
                out[:] = table[lo:hi]

            parts[k] = (len(seq), lambda seq=seq: seq, rows, twin(old))
        chans[c] = LazyStream(parts, width=chans[c].width)
    return StreamSet(ss.hardware, ss.isa_version, list(ss.symbols), chans, list(ss.host), [])


_HW: dict = {}


def _sig_part(stream: LazyStream) -> int:
    return next(k for k, p in enumerate(stream._parts) if p[3].signal is not None)


def _error_case(label: str):
    hw, prog, ss = _compiled("micro/gemv-4096-gddr6-32ch", "greedy")
    _HW[ss.hardware] = hw
    tw = sim.twins.Twins.of(hw, ss.channels)
    lead = tw.leader[tw.twins()[0]]
    klass = [c for c in range(len(ss.channels)) if tw.leader[c] == lead]
    k = _sig_part(ss.channels[lead])
    if label == "signal-twice":
        # the last twin of the class sets the leader's first signal (its key unchanged: SIG ids
        # are not part of it)
        sid = ss.channels[lead]._parts[k][3].signal
        edit = (
            lambda seq: seq[:-1] + [make("SIG", id=sid)],
            lambda t: PartTwin(t.key, t.waits, sid, t.unread),
        )
        return hw, prog, _remade(ss, {(klass[-1], k): edit})
    if label == "deadlock":
        # every channel of the class first waits for a signal nobody sets (one new key for all)
        edit = (
            lambda seq: [make("WAIT", id=4000)] + seq,
            lambda t: PartTwin(("edited", t.key), (4000,) + t.waits, t.signal, t.unread),
        )
        return hw, prog, _remade(ss, {(c, 0): edit for c in klass})
    if label == "timing":
        # the class's last MAC of part k one cycle early, on every channel of the class (the same
        # new key: the leader meets it, but the plain serial run meets another channel's first)
        n = ss.channels[lead]._parts[k][0]
        seq = ss.channels[lead]._parts[k][1]()
        i = max(j for j in range(n) if seq[j].op == "MAC")
        edit = (
            lambda seq: seq[:i] + [seq[i].at(seq[i].cycle - 1)] + seq[i + 1 :],
            lambda t: PartTwin(("edited", t.key), t.waits, t.signal, t.unread),
        )
        return hw, prog, _remade(ss, {(c, k): edit for c in klass})
    raise ValueError(label)


@pytest.mark.parametrize("label", ["signal-twice", "deadlock", "timing"])
def test_an_erroneous_program_gives_the_plain_runs_error(label, monkeypatch):
    hw, prog, ss = _error_case(label)
    tw = sim.twins.Twins.of(hw, ss.channels)
    assert tw is not None and tw.twins()
    monkeypatch.setattr(sim.engine, "SLICE", 64)
    _against_plain(hw, ss, prog, "error", [True, False], monkeypatch)  # stopped at the error; again without


def test_the_result_counts_the_channels_run(monkeypatch):
    hw, prog, ss = _compiled("micro/gemv-4096-hbm2-64ch", "naive")
    busy = [c for c, s in enumerate(ss.channels) if len(s)]
    leaders = {sim.twins.Twins.of(hw, ss.channels).leader[c] for c in busy}
    for on, expected in ((True, len(leaders)), (False, len(busy))):
        monkeypatch.setenv("PIMSAT_TWINS", "1" if on else "0")
        res = sim.simulate(hw, ss, prog, functional=False, record=False)
        assert res.channels_run == expected
    assert len(leaders) < len(busy)


def test_classes_come_from_part_keys_by_pairs_on_a_shared_bus():
    """Channels 0-7: streams of one part, A or B by key, with distinct SIG ids; 5 and 7 empty."""
    from hwmodel import load_hardware

    def stream(key: str, sid: int) -> LazyStream:
        part = (1, lambda: [make("SIG", id=sid)], lambda lo, hi, out: None, PartTwin((key,), (), sid))
        return LazyStream([part], width=11)

    chans = [stream("A", 1), stream("B", 2), stream("A", 3), stream("B", 4), stream("A", 5), [], stream("A", 7), []]
    shared = sim.twins.Twins.of(load_hardware("hbm2-pim", ["organization.channels=8"]), chans)
    assert shared.leader == [0, 1, 0, 1, 4, 5, 4, 7]  # (4, 5) is not (0, 1): its partner is empty
    assert shared.twins() == [2, 3, 6]
    assert shared.relay == {0: ([1], [[3]]), 1: ([2], [[4]]), 4: ([5], [[7]])}
    own = sim.twins.Twins.of(load_hardware("gddr6-aim", ["organization.channels=8"]), chans)
    assert own.leader == [0, 1, 0, 1, 0, 5, 0, 7]
    assert own.relay == {0: ([1], [[3, 5, 7]]), 1: ([2], [[4]])}  # (per SIG: every twin's id)
