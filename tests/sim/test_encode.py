"""encode_stream decodes fields once per distinct command object: the table equals the one built
instruction by instruction, whatever objects the stream shares."""

from __future__ import annotations

import numpy as np
from hypothesis import given, settings
from hypothesis import strategies as st
from simgen import LOCKSTEP  # noqa: E402

from hwmodel import load_hardware
from hwmodel.isa import Instruction, make
from sim.channel import C_STAMP
from sim.encode import OPCODES, encode_fields, encode_stream

HW = load_hardware("hbm2-pim", ["organization.channels=2", LOCKSTEP])
SHARED = [
    make("MAC", mask=0x5, col=3, count=4, gb=8, acc=1),
    make("ACT", mask=0x5, row=7),
    make("PRE", mask=0x5),
    make("REF"),
    make("WRGB", gb=1, count=1, src=2, offset=64),
]


def _reference(stream):
    opc = np.array([OPCODES[i.op] for i in stream], dtype=np.int64)
    out = encode_fields(HW, stream, opc)
    out[:, C_STAMP] = [-1 if i.cycle is None else i.cycle for i in stream]
    return out


@settings(max_examples=30, deadline=None)
@given(st.lists(st.tuples(st.integers(0, 9), st.integers(0, 10_000), st.booleans()), min_size=0, max_size=300))
def test_encoding_equals_the_instruction_by_instruction_table(picks):
    stream = []
    for k, cycle, stamped in picks:
        if k < len(SHARED):  # a shared object, stamped or not
            ins = SHARED[k]
        elif k < 8:  # a fresh object every time
            ins = make("RD", bank=k, col=cycle % 1024, count=1, dst=1, offset=cycle)
        else:  # unstamped sync
            ins = make("SIG" if k == 8 else "WAIT", id=cycle)
            stamped = False
        stream.append(ins.at(cycle) if stamped else ins)
    assert np.array_equal(encode_stream(HW, stream), _reference(stream))


def test_distinct_ops_sharing_one_field_tuple_stay_apart():
    """Identity of the field tuple alone would merge SIG 5 and WAIT 5 built on one tuple."""
    fields = (5,)
    sig, wait = Instruction("SIG", fields), Instruction("WAIT", fields)
    stream = [sig, wait] * 50 + [make("REF").at(i) for i in range(100)]
    table = encode_stream(HW, stream)
    assert np.array_equal(table, _reference(stream))
    assert table[0, 0] == OPCODES["SIG"] and table[1, 0] == OPCODES["WAIT"]
