"""The decoder's shortcuts give what the long way gives.

- An MV emitter builds every channel after the first of a row distribution from a template
  (only the data commands replaced): the same commands as emitting that channel alone.
- Appends are timed once per sequence without host addresses: the simulator's timing of a
  sequence does not depend on the host addresses (src/dst/offset) it names.
"""

from __future__ import annotations

from dataclasses import replace
from functools import partial

import numpy as np
import pytest

import ir
from hwmodel import load_hardware
from sim.encode import encode_stream
from solver.emit_mv import MVEmitter
from solver.host_emit import emit_weight_read, encoded_weight_read
from solver.kv_emit import emit_kv_append
from solver.layout import Layout
from solver.mvshape import fused_shape, mv_shape
from solver.relocate import Relocations
from solver.symbols import Symbols, host_copy
from solver.task_timing import TIMED_FIELDS, time_task
from solver.tiling import channel_signature, make_tiling, structure_key


def _qkv(n: int = 24, k: int = 64):
    """Three GEMVs that share their input, fused: part boundaries fall inside some units' rows."""
    x = ir.Tensor(name="x", shape=(1, k), dtype="fp16", role="activation")
    ts, ops = [x], []
    for name in ("q", "k", "v"):
        ts += [
            ir.Tensor(name=f"{name}.weight", shape=(n, k), dtype="fp16", role="weight"),
            ir.Tensor(name=f"{name}.out", shape=(1, n), dtype="fp16", role="activation"),
        ]
        ops.append(ir.Op(name=name, kind="gemv", inputs=["x", f"{name}.weight"], outputs=[f"{name}.out"]))
    return ir.Program(name="qkv", tensors=ts, ops=ops, inputs=["x"], outputs=["q.out", "k.out", "v.out"])


CASES = [
    ("gemv", ir.gemv_program(100, 80), "gemv", (0, 1, 2)),  # padding: channels hold fewer rows
    ("fused-qkv", _qkv(), ("q", "k", "v"), (0, 1)),
    ("fused-qkv-3", _qkv(), ("q", "k", "v"), (0, 1, 2)),  # one part per channel: readouts differ
    ("gemv-b3", ir.gemv_program(64, 256, batch=3), "gemv", (0, 1)),
    ("scores", ir.attention_program(4, 2, 16, 15), "scores", (0, 1, 2)),
    ("context", ir.attention_program(4, 2, 16, 15), "context", (0, 1)),
]


@pytest.mark.parametrize("style", ["overlap", "naive"])
@pytest.mark.parametrize("name,program,op,channels", CASES, ids=[c[0] for c in CASES])
def test_template_channels_equal_channels_emitted_alone(name, program, op, channels, style):
    hw = load_hardware("fpga-proto")
    shape = fused_shape(program, list(op), "qkv") if isinstance(op, tuple) else mv_shape(program, op)
    t = make_tiling(hw, shape, channels, interleave=style == "overlap")
    lay = Layout(hw, t, {c: 5 for c in channels})
    shared = MVEmitter(hw, lay, Symbols(), style)
    for ci in range(len(channels)):
        shared.emit(ci)  # builds the templates
    for ci in range(len(channels)):
        alone = MVEmitter(hw, lay, Symbols(), style).emit(ci)
        assert shared.emit(ci) == alone, f"channel {ci}"


@pytest.mark.parametrize("style", ["overlap", "naive"])
@pytest.mark.parametrize("name,program,op,channels", CASES, ids=[c[0] for c in CASES])
def test_encoded_channels_equal_the_encoding_of_channels_emitted_alone(name, program, op, channels, style):
    """What a streamed simulation reads (MVEmitter.encoded, a table per channel from one
    template per row distribution) is the encoding of each channel's commands, in any order."""
    hw = load_hardware("fpga-proto")
    shape = fused_shape(program, list(op), "qkv") if isinstance(op, tuple) else mv_shape(program, op)
    t = make_tiling(hw, shape, channels, interleave=style == "overlap")
    lay = Layout(hw, t, {c: 5 for c in channels})
    encode = partial(encode_stream, hw)
    for order in (range(len(channels)), reversed(range(len(channels)))):
        shared, cache = MVEmitter(hw, lay, Symbols(), style), {}
        for ci in order:
            alone = encode(MVEmitter(hw, lay, Symbols(), style).emit(ci))
            assert np.array_equal(shared.encoded(ci, cache, encode), alone), f"channel {ci}"


@pytest.mark.parametrize("name,program,op,channels", CASES, ids=[c[0] for c in CASES])
def test_encoded_weight_reads_equal_the_encoding_of_channels_emitted_alone(name, program, op, channels):
    """A host GEMV's weight reads as a streamed simulation reads them (one table per row
    distribution and base row for a one-tensor matrix): the encoding of each channel's reads."""
    hw = load_hardware("fpga-proto")
    shape = fused_shape(program, list(op), "qkv") if isinstance(op, tuple) else mv_shape(program, op)
    t = make_tiling(hw, shape, channels)
    lay = Layout(hw, t, {c: 5 + c % 2 for c in channels})
    sym = Symbols()  # one symbol table (as in decode): host copies have the same ids in every channel
    for part in shape.parts:
        sym.id(host_copy(part.resident))
    encode, cache = partial(encode_stream, hw), {}
    for ci in reversed(range(len(channels))):
        alone = encode(emit_weight_read(hw, lay, sym, ci))
        assert np.array_equal(encoded_weight_read(hw, lay, sym, ci, cache, encode), alone), f"channel {ci}"


def test_append_timing_ignores_host_addresses():
    hw = load_hardware("fpga-proto")
    program = ir.attention_program(4, 2, 16, 15)
    for op in ("scores", "context"):
        t = make_tiling(hw, mv_shape(program, op), (0, 1))
        lay = Layout(hw, t, 2)
        seq = emit_kv_append(hw, lay, Symbols(), 0, "k", 15)
        assert seq
        moved = [
            replace(ins, args=tuple(v + 7 if k not in TIMED_FIELDS[ins.op] else v for k, v in enumerate(ins.args)))
            for ins in seq
        ]
        assert moved != seq
        assert time_task(hw, moved) == time_task(hw, seq)


@pytest.mark.parametrize("op", ["scores", "context"])
def test_encoded_appends_are_shared_by_channels_with_the_same_slot_rows(op):
    """decode emits and times a KV append once per distinct slot rows of a task, and a streamed
    run reads one encoded table for those channels: it must be each channel's own encoding."""
    from solver.decode import _encoded_append
    from solver.tiling import slot_rows

    hw = load_hardware("fpga-proto")
    program = ir.attention_program(6, 3, 16, 15, batch=2)
    channels = (0, 1, 2, 3)
    t = make_tiling(hw, mv_shape(program, op), channels)
    lay = Layout(hw, t, 2)
    rows = [slot_rows(t, ci) for ci in range(len(channels))]
    assert len(set(rows)) < len(rows), "some channels must share slot rows"
    encode, cache = partial(encode_stream, hw), {}
    alone = [encode_stream(hw, emit_kv_append(hw, lay, Symbols(), ci, "k", 15)) for ci in range(len(channels))]
    assert any(not np.array_equal(a, b) for a in alone for b in alone), "some channels must differ"
    sym = Symbols()
    for ci in range(len(channels)):
        got = _encoded_append(hw, lay, sym, ci, ("k", 15), rows[ci], encode, cache)
        assert np.array_equal(got, alone[ci]), f"channel {ci}"


def _renamed(program: ir.Program, suffix: str) -> ir.Program:
    """The same program with every tensor and op renamed (another layer of the same model)."""

    def rename(n: str) -> str:  # a KV-cache version keeps its position last: k_cache.l7@15
        base, at, pos = n.partition("@")
        return f"{base}{suffix}{at}{pos}"

    ren = {t: rename(t) for t in program.tensors}
    ts = [t.model_copy(update={"name": ren[t.name]}) for t in program.tensors.values()]
    ops = [
        o.model_copy(
            update={
                "name": f"{o.name}{suffix}",
                "inputs": [ren[i] for i in o.inputs],
                "outputs": [ren[i] for i in o.outputs],
            }
        )
        for o in program.ops
    ]
    return ir.Program(
        name=program.name + suffix,
        tensors=ts,
        ops=ops,
        inputs=[ren[i] for i in program.inputs],
        outputs=[ren[i] for i in program.outputs],
    )


def _two_layers(hw, program, op, channels, style):
    """The tilings of op in `program` and of the same op in another layer (renamed)."""
    other = _renamed(program, ".l7")

    def shape_of(p, suffix=""):
        if isinstance(op, tuple):
            return fused_shape(p, [o + suffix for o in op], "qkv" + suffix)
        return mv_shape(p, op + suffix)

    return (
        make_tiling(hw, shape_of(program), channels, interleave=style == "overlap"),
        make_tiling(hw, shape_of(other, ".l7"), channels, interleave=style == "overlap"),
    )


@pytest.mark.parametrize("style", ["overlap", "naive"])
@pytest.mark.parametrize("name,program,op,channels", CASES, ids=[c[0] for c in CASES])
def test_tasks_of_one_structure_time_alike(name, program, op, channels, style):
    """The decoder times MV tasks once per (structure_key, channel signature): the same op of
    another layer (other names, other DRAM rows, other host symbols) must run the same stamps."""
    hw = load_hardware("fpga-proto")
    t, u = _two_layers(hw, program, op, channels, style)
    assert structure_key(t) == structure_key(u)
    sym = Symbols()
    sym.id("unrelated")  # other host symbol ids
    here = MVEmitter(hw, Layout(hw, t, {c: 5 for c in channels}), Symbols(), style)
    there = MVEmitter(hw, Layout(hw, u, {c: 40 + c for c in channels}), sym, style)
    for ci in range(len(channels)):
        assert channel_signature(t, ci) == channel_signature(u, ci)
        a, b = here.emit(ci), there.emit(ci)
        assert a != b  # other rows and addresses ...
        assert time_task(hw, a) == time_task(hw, b)  # ... the same stamps


@pytest.mark.parametrize("style", ["overlap", "naive"])
@pytest.mark.parametrize("name,program,op,channels", CASES, ids=[c[0] for c in CASES])
def test_another_layers_encoded_tasks_are_relocated_exactly(name, program, op, channels, style):
    """A streamed decode emits a task structure once and relocates its table for the same op of
    every other layer (solver/relocate.py: ACT rows by the base row, symbols by role). The
    relocated tables are the encoding of that layer's own commands, for MV tasks and weight
    reads, in one symbol table as in decode."""
    hw = load_hardware("fpga-proto")
    t, u = _two_layers(hw, program, op, channels, style)
    sym = Symbols()
    for tiling in (t, u):
        for res in [p.resident for p in tiling.shape.parts] or [tiling.shape.resident]:
            sym.id(host_copy(res))
    here, there = Layout(hw, t, {c: 5 for c in channels}), Layout(hw, u, {c: 40 + c for c in channels})
    encode, layers, relocated = partial(encode_stream, hw), Relocations(), []
    first = MVEmitter(hw, here, sym, style)
    later = MVEmitter(hw, there, sym, style)
    for ci in range(len(channels)):
        first.encoded(ci, {}, encode, layers)
        encoded_weight_read(hw, here, sym, ci, {}, encode, layers)
    for ci in range(len(channels)):
        alone = encode(MVEmitter(hw, there, sym, style).emit(ci))
        got = later.encoded(ci, {}, encode, layers)
        assert np.array_equal(got, alone), f"MV channel {ci}"
        assert np.array_equal(
            encoded_weight_read(hw, there, sym, ci, {}, encode, layers), encode(emit_weight_read(hw, there, sym, ci))
        ), f"weight read channel {ci}"
        relocated.append(not np.array_equal(got, first.encoded(ci, {}, encode)))
    assert any(relocated)  # the tables did move (other rows and symbols)
