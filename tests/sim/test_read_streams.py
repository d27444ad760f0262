"""Streams read back from a stream directory (binary or assembly: RecordStream, no object per
instruction) simulate exactly as the lists they were written from: cycles, counters, the
command log, and the same first error."""

from __future__ import annotations

import shutil
import sys
from pathlib import Path

import numpy as np
import pytest

from hwmodel.isa import Instruction
from hwmodel.record_stream import RecordStream
from hwmodel.streams import StreamSet, program_digest
from hwmodel.streams_io import read_streams, write_streams
from sim import SimulationError, simulate

sys.path.insert(0, str(Path(__file__).resolve().parents[2] / "bench"))
from dram_traffic import traffic_streams  # noqa: E402
from sim_bench import make_streams  # noqa: E402


def _asm_only(d: Path, tmp: Path) -> Path:
    out = tmp / "asm"
    shutil.copytree(d, out)
    for p in out.glob("*.bin"):
        p.unlink()
    return out


def _same(a, b):
    assert a.cycles == b.cycles
    assert np.array_equal(a.counts, b.counts) and np.array_equal(a.bank_bursts, b.bank_bursts)
    assert np.array_equal(a.row_hits, b.row_hits) and a.stalls == b.stalls
    if a.log is not None and b.log is not None:
        assert np.array_equal(a.log, b.log)


@pytest.mark.parametrize("kind", ["dram", "pim"])
def test_read_streams_simulate_as_written(hbm2, tmp_path, kind):
    ss = traffic_streams(hbm2, "random", 3000, 1 / 3, 0.25, 2, 1) if kind == "dram" else make_streams(hbm2, 2, 2, 4)
    d = write_streams(ss, tmp_path / "s")
    want = simulate(hbm2, ss, functional=False)
    for where in (d, _asm_only(d, tmp_path)):
        back, _ = read_streams(where)
        assert all(isinstance(s, RecordStream) for s in back.channels)
        assert program_digest(back) == program_digest(ss)
        _same(simulate(hbm2, back, functional=False), want)  # with the command log
        _same(simulate(hbm2, back, functional=False, record=False), want)  # streamed


def test_read_streams_fail_as_written(hbm2, tmp_path):
    ss = traffic_streams(hbm2, "random", 2000, 1 / 3, 0.25, 1, 2)
    chan = list(ss.channels[0])
    k = next(i for i, ins in enumerate(chan) if ins.op == "RD" and i > 500)
    chan[k] = Instruction("RD", chan[k].args, 5)  # stamped far too early
    bad = StreamSet(ss.hardware, ss.isa_version, ss.symbols, [chan], [])
    with pytest.raises(SimulationError) as want:
        simulate(hbm2, bad, functional=False)
    back, _ = read_streams(write_streams(bad, tmp_path / "s"))
    for record in (True, False):
        with pytest.raises(SimulationError) as got:
            simulate(hbm2, back, functional=False, record=record)
        assert str(got.value) == str(want.value)
