"""Stream assembly (solver/assemble.py): lazily built streams hold the bytes of the listed
streams (decode's default), and a streamed simulation of them measures what the listed program
measures."""

from __future__ import annotations

import numpy as np
import pytest

import sim
from hwmodel.isa_codec import encode_records
from hwmodel.streams import LazyStream
from pimsat.instance import Instance, load_instance
from pimsat.pipeline import DEFAULT_CACHE, SolveOptions, run, solve
from sim.encode import encode_stream
from solver.decode import decode

ROOT = __import__("pathlib").Path(__file__).resolve().parents[2]
CASES = [
    pytest.param(lambda: load_instance(ROOT / "instances/small/tiny-llama-2l-hbm2-8ch.yaml"), id="tiny-llama"),
    pytest.param(lambda: load_instance(ROOT / "instances/fpga/attention-gqa-h4-kv2-d16-c15-fpga.yaml"), id="gqa-fpga"),
    pytest.param(
        lambda: Instance(
            name="split",
            program={"kind": "gemv", "n": 1024, "k": 512, "batch": 16},
            hardware={"preset": "hbm2-pim", "set": ["organization.channels=8"]},
        ),
        id="split-b16",
    ),
]


@pytest.mark.parametrize("make_instance", CASES)
@pytest.mark.parametrize("method", ["greedy", "naive"])
def test_lazy_streams_are_the_eager_bytes(make_instance, method):
    inst = make_instance()
    prog, hw = inst.build_program(), inst.build_hardware([], None)
    problem, lowering = DEFAULT_CACHE.lowered(inst, hw, prog, 4).for_method(method)
    sol, _ = solve(problem, SolveOptions(method=method))
    eager = decode(problem, lowering, sol, placements=False)
    lazy = decode(problem, lowering, sol, placements=False, lazy=True)
    assert lazy.predicted_cycles == eager.predicted_cycles
    assert all(isinstance(s, LazyStream) for s in lazy.streams.channels)
    assert lazy.streams.instruction_count() == eager.streams.instruction_count()
    for a, b in zip(eager.streams.channels + [eager.streams.host], lazy.streams.channels + [lazy.streams.host]):
        assert np.array_equal(encode_records(list(a)), encode_records(list(b)))
    # the encoded parts (what a streamed simulation reads) are the encoding of the listed streams
    for c, (a, b) in enumerate(zip(eager.streams.channels, lazy.streams.channels)):
        assert b.has_rows
        if len(a):
            assert np.array_equal(b.rows(0, len(b)), encode_stream(hw, a)), f"channel {c}"
            cut = len(b) // 3  # slices across part boundaries
            assert np.array_equal(np.concatenate([b.rows(0, cut), b.rows(cut, len(b))]), encode_stream(hw, a))
            assert b.rows(len(b) // 2, len(b) // 2).shape == (0, encode_stream(hw, a).shape[1])  # an empty range
    whole = sim.simulate(hw, eager.streams, program=prog, functional=False, record=True)
    streamed = sim.simulate(hw, lazy.streams, program=prog, functional=False, record=False)
    assert streamed.cycles == whole.cycles == eager.predicted_cycles
    assert streamed.counts.tolist() == whole.counts.tolist() and streamed.stalls == whole.stalls


def test_timing_only_runs_without_log_read_encoded_lazy_streams():
    """The pipeline's streamed runs (timing-only, no command log) never list the program: they
    read lazy streams whose parts come encoded. Functional runs list theirs. Same cycles."""
    inst = CASES[0].values[0]()
    r = run(inst, SolveOptions(method="greedy", functional=False, record=False))
    assert all(isinstance(s, LazyStream) and s.has_rows for s in r.compiled.streams.channels)
    assert r.sim.cycles == r.compiled.predicted_cycles
    full = run(inst, SolveOptions(method="greedy", functional=True))
    assert all(isinstance(s, list) for s in full.compiled.streams.channels)
    assert full.sim.cycles == r.sim.cycles
