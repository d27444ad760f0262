"""Binary encoding: bit layout, single words, streams and precise errors."""

import struct

import pytest

from hwmodel.isa import ISA, Instruction, make
from hwmodel.isa_codec import (
    HEADER_BYTES,
    LAYOUTS,
    RECORD_BYTES,
    decode,
    decode_stream,
    encode,
    encode_stream,
    read_header,
)


def test_layout_fits_and_is_contiguous():
    for o in ISA.ops:
        lay = LAYOUTS[o.mnemonic]
        assert lay.used_bits == ISA.opcode_bits + sum(f.bits for f in o.fields) <= ISA.word_bits
    assert len({o.opcode for o in ISA.ops}) == len(ISA.ops)


def test_mac_bit_layout():
    ins = make("MAC", mask=0x5555, col=7, count=8, gb=9, acc=3)
    w = 0x05 | 0x5555 << 8 | 7 << 40 | 8 << 50 | 9 << 60 | 3 << 72
    assert encode(ins) == w.to_bytes(16, "little")
    assert encode(ins)[0] == 0x05
    assert decode(encode(ins)) == ins


def test_field_straddling_bit_64():
    # RD.offset occupies bits [91:52] and so spans both 64-bit halves.
    ins = make("RD", bank=255, col=1023, count=1023, dst=65535, offset=(1 << 40) - 1)
    assert int.from_bytes(encode(ins), "little") == (1 << 92) - 1 ^ 0xFF | 0x03
    assert decode_stream(encode_stream([ins])) == [ins]


def test_cycle_is_in_the_record_not_the_word():
    a, b = make("REF"), make("REF", cycle=12)
    assert encode(a) == encode(b)
    blob = encode_stream([a, b])
    assert len(blob) == HEADER_BYTES + 2 * RECORD_BYTES
    assert blob[HEADER_BYTES : HEADER_BYTES + 8] == b"\xff" * 8
    assert int.from_bytes(blob[HEADER_BYTES + RECORD_BYTES :][:8], "little") == 12
    assert decode_stream(blob) == [a, b]
    assert decode(encode(b), cycle=12) == b


def test_header():
    blob = encode_stream([make("SIG", id=1)] * 3)
    assert blob[:4] == b"PIMS"
    assert read_header(blob) == (1, 6, 3)
    assert decode_stream(encode_stream([])) == []


def test_unknown_opcode():
    with pytest.raises(ValueError, match=r"unknown opcode 0xff"):
        decode(b"\xff" + bytes(15))
    blob = bytearray(encode_stream([make("REF"), make("REF")]))
    blob[HEADER_BYTES + RECORD_BYTES + 8] = 0x7E
    with pytest.raises(ValueError, match=rf"record 1 \(byte {HEADER_BYTES + RECORD_BYTES}\): unknown opcode 0x7e"):
        decode_stream(bytes(blob))


def test_nonzero_padding():
    word = int.from_bytes(encode(make("MAC", mask=1, col=0, count=1, gb=0, acc=0)), "little")
    bad = (word | 1 << 127).to_bytes(16, "little")
    with pytest.raises(ValueError, match=r"MAC word 0x[0-9a-f]{32}: padding bits \[127:82\] must be zero"):
        decode(bad)
    bad2 = (word | 1 << 82).to_bytes(16, "little")
    with pytest.raises(ValueError, match=r"padding bits \[127:82\]"):
        decode(bad2)
    blob = encode_stream([make("REF")])[:HEADER_BYTES] + bytes(8) + bad
    with pytest.raises(ValueError, match=r"record 0 \(byte 16\): MAC word"):
        decode_stream(blob)


def test_bad_streams():
    good = encode_stream([make("REF")])
    with pytest.raises(ValueError, match="an instruction word is 16 bytes, got 3"):
        decode(b"abc")
    with pytest.raises(ValueError, match="not a pimsat stream"):
        decode_stream(b"XXXX" + good[4:])
    with pytest.raises(ValueError, match="too short"):
        decode_stream(good[:5])
    with pytest.raises(ValueError, match=r"header says 1 records \(40 bytes\) but the stream has 39"):
        decode_stream(good[:-1])
    with pytest.raises(ValueError, match="ISA version 2.0"):
        decode_stream(struct.pack("<4sHHQ", b"PIMS", 2, 0, 0))


def test_exhaustive_extremes():
    for o in ISA.ops:
        for pick in (lambda b: 0, lambda b: (1 << b) - 1, lambda b: 1 << (b - 1)):
            ins = Instruction(o.mnemonic, tuple(pick(f.bits) for f in o.fields), (1 << 64) - 2)
            assert decode(encode(ins), ins.cycle) == ins
            assert decode_stream(encode_stream([ins])) == [ins]
