"""RecordStream: a stream held as its binary records reads as the same instructions, the same
simulator table (numpy here, compiled in sim/records.py) and the same bytes as the list it
encodes, from an array or from a file read a window at a time."""

import hashlib

import numpy as np
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st

from hwmodel import load_hardware
from hwmodel.isa import ISA, Instruction
from hwmodel.isa_codec import HEADER_BYTES, encode_records, encode_stream
from hwmodel.record_stream import RecordStream
from hwmodel.table import encode_stream as encode_table
from sim.records import record_rows, record_rows_ops

HW = load_hardware("hbm2-pim", ["organization.channels=2"])
CHANNEL_OPS = [o for o in ISA.ops if o.stream != "host"]


@st.composite
def instructions(draw):
    op = draw(st.sampled_from(CHANNEL_OPS))
    args = tuple(draw(st.integers(0, (1 << f.bits) - 1)) for f in op.fields)
    return Instruction(op.mnemonic, args, draw(st.none() | st.integers(0, (1 << 62) - 1)))


fast = settings(max_examples=150, deadline=None, suppress_health_check=[HealthCheck.too_slow])


@fast
@given(st.lists(instructions(), max_size=60), st.integers(0, 70), st.integers(0, 70))
def test_rows_are_the_tables_encoding(instrs, a, b):
    rs = RecordStream(encode_records(instrs))
    want = encode_table(HW, instrs)
    assert np.array_equal(rs.rows(0, len(rs), hw=HW), want)
    assert np.array_equal(record_rows(HW, rs, 0, len(rs)), want)
    lo, hi = min(a, b), max(a, b)
    assert np.array_equal(record_rows(HW, rs, lo, hi), want[lo:hi])
    buf = np.full((80, want.shape[1]), 7, dtype=np.int64)
    assert np.array_equal(rs.rows(lo, hi, buf, hw=HW), want[lo:hi])
    table, present = record_rows_ops(HW, rs, lo, hi, buf)  # the opcodes present, as a bitmask
    assert np.array_equal(table, want[lo:hi])
    assert present == sum(1 << int(op) for op in np.unique(want[lo:hi, 0]))


@fast
@given(st.lists(instructions(), max_size=40))
def test_reads_as_the_instructions(instrs):
    rs = RecordStream(encode_records(instrs))
    assert len(rs) == len(instrs) and list(rs) == instrs and rs == instrs
    assert rs[1:5] == instrs[1:5] and rs[::2] == instrs[::2]
    if instrs:
        assert rs[-1] == instrs[-1] and rs[0] == instrs[0]
    blob = encode_stream(instrs)
    assert b"".join(bytes(c) for c in rs.encoded_chunks()) == blob
    assert rs.sha256() == hashlib.sha256(blob).hexdigest() and rs.encoded_bytes == len(blob)


def test_a_file_is_read_a_window_at_a_time(tmp_path):
    rng = np.random.default_rng(3)
    instrs = [
        Instruction("RD", (int(b), int(c), 1, 0, 0))
        if rng.random() < 0.5
        else Instruction("ACT", (1 << int(b), int(c)))
        for b, c in zip(rng.integers(0, 16, 3000), rng.integers(0, 32, 3000))
    ]
    path = tmp_path / "ch.bin"
    path.write_bytes(encode_stream(instrs))
    rs = RecordStream(path=path, offset=HEADER_BYTES, count=len(instrs))
    assert [(a, len(r)) for a, r in rs.windows(1024)] == [(0, 1024), (1024, 1024), (2048, 952)]
    assert rs == RecordStream(encode_records(instrs)) and list(rs) == instrs
    assert rs[2999] == instrs[2999] and rs[100:103] == instrs[100:103]
    assert np.array_equal(record_rows(HW, rs, 500, 2500), encode_table(HW, instrs)[500:2500])
    assert rs.sha256() == hashlib.sha256(path.read_bytes()).hexdigest()


@fast
@given(st.lists(instructions(), min_size=1, max_size=40), st.data())
def test_the_compiled_record_check_finds_what_numpy_finds(instrs, data):
    """first_problems (one compiled pass, what the readers use) against its numpy form (without
    numba): the first stamp beyond the limit, record with padding bits or an unknown opcode, and
    record of the other stream's kind, on records with random such faults."""
    import hwmodel.record_stream as RS
    from hwmodel.streams_io import _KIND_OK, MAX_STAMP

    rec = encode_records(instrs)
    for _ in range(data.draw(st.integers(0, 3))):
        i = data.draw(st.integers(0, len(rec) - 1))
        fault = data.draw(st.sampled_from(["late", "huge", "pad_lo", "pad_hi", "opcode"]))
        if fault == "late":
            rec["cycle"][i] = np.uint64(MAX_STAMP + 1)
        elif fault == "huge":
            rec["cycle"][i] = np.uint64((1 << 64) - 2)  # (>= 2**63: negative as the compiled pass reads it)
        elif fault == "pad_lo":
            rec["lo"][i] |= np.uint64(1 << 63)
        elif fault == "pad_hi":
            rec["hi"][i] |= np.uint64(1 << 63)
        else:
            rec["lo"][i] = (rec["lo"][i] & ~np.uint64(0xFF)) | np.uint64(data.draw(st.integers(0, 255)))
    for kind in ("channel", "host"):
        compiled = RS.first_problems(rec, _KIND_OK[kind], MAX_STAMP)
        jit, RS.JIT = RS.JIT, False
        try:
            plain = RS.first_problems(rec, _KIND_OK[kind], MAX_STAMP)
        finally:
            RS.JIT = jit
        assert compiled == plain, kind
