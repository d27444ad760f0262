"""Assembly text: formatting, golden output and precise parse errors."""

import os
from pathlib import Path

import pytest

from hwmodel.isa import make
from hwmodel.isa_asm import AsmError, format_instruction, format_stream, parse_line, parse_stream
from hwmodel.isa_codec import encode_stream

GOLDEN = Path(__file__).parent / "golden"


def small_stream():
    return [
        make("WRGB", gb=0, count=8, src=0, offset=0),
        make("ACT", cycle=10, mask=0xFFFF, row=3),
        make("WAIT", id=1),
        make("MAC", cycle=1234, mask=0x5555, col=0, count=8, gb=0, acc=3),
        make("MAC", mask=0xAAAA, col=8, count=8, gb=0, acc=4),
        make("RDACC", bank=1, acc=3, count=2, dst=1, offset=4096, stride=1),
        make("WR", bank=15, col=31, count=1, src=2, offset=123456789, emask=0x00FF),
        make("RD", bank=2, col=0, count=32, dst=3, offset=(1 << 40) - 1),
        make("PRE", mask=0xFFFF),
        make("REF", cycle=3900),
        make("SIG", id=2),
        make("HOP", op=7),
        make("EPI", op=8),
        make("HMV", op=9, row0=3584, rows=512),
        make("HMV", op=10, row0=0, rows=4096, chain=1),
        make("HOP", op=11, batch0=2, batches=2),
    ]


def _check_golden(name, text):
    path = GOLDEN / name
    if os.environ.get("PIMSAT_UPDATE_GOLDEN") == "1":
        path.write_text(text)
    assert path.exists(), f"{path} missing; regenerate with PIMSAT_UPDATE_GOLDEN=1"
    assert text == path.read_text(), f"{path} differs; if intended: PIMSAT_UPDATE_GOLDEN=1 pytest tests/hwmodel"


def test_golden_assembly():
    text = format_stream(small_stream(), header="golden: a small fixed stream")
    _check_golden("small_stream.s", text)
    assert parse_stream(text) == small_stream()


def test_golden_binary():
    """The words as 128-bit hex numbers (bit 127 left), one record per line, after the cycle."""
    blob = encode_stream(small_stream())
    lines = [f"header {blob[:16].hex()}"]
    for k in range(16, len(blob), 24):
        cycle = int.from_bytes(blob[k : k + 8], "little")
        word = int.from_bytes(blob[k + 8 : k + 24], "little")
        lines.append(f"{cycle:016x} {word:032x}")
    _check_golden("small_stream.hex", "\n".join(lines) + "\n")


def test_format_examples():
    assert format_instruction(make("MAC", cycle=1234, mask=0x5555, col=0, count=8, gb=0, acc=3)) == (
        "@1234 MAC mask=0x5555 col=0 count=8 gb=0 acc=3"
    )
    assert format_instruction(make("REF")) == "REF"
    assert format_stream([]) == ""


def test_parse_liberal_forms():
    text = """
        # a comment line

        @5   MAC acc=3 gb=0 count=8 col=0x0 mask=21845   # fields in any order, either base
        REF#comment right after
    """
    assert parse_stream(text) == [make("MAC", cycle=5, mask=0x5555, col=0, count=8, gb=0, acc=3), make("REF")]
    assert parse_line("   # nothing") is None


@pytest.mark.parametrize(
    "line, message",
    [
        ("FOO x=1", "f.s:3: unknown mnemonic 'FOO'"),
        ("mac mask=1", "f.s:3: unknown mnemonic 'mac' (mnemonics are upper case)"),
        ("MAC mask=0x1 col=0 count=1 gb=0", "f.s:3: MAC: missing field(s) acc"),
        ("MAC mask=0x1 col=0 count=1 gb=0 acc=0 lane=2", "f.s:3: MAC has no field 'lane'"),
        ("MAC mask=0x1 col=1024 count=1 gb=0 acc=0", "f.s:3: MAC.col = 1024 does not fit in 10 bits (max 1023)"),
        ("PRE mask=0x100000000", "f.s:3: PRE.mask = 0x100000000 does not fit in 32 bits (max 0xFFFFFFFF)"),
        ("PRE mask=-1", "f.s:3: PRE.mask: bad value '-1'"),
        ("PRE mask=0xZZ", "f.s:3: PRE.mask: bad value '0xZZ'"),
        ("PRE mask", "f.s:3: PRE: expected name=value, got 'mask'"),
        ("PRE mask=1 mask=2", "f.s:3: PRE: field mask given twice"),
        ("@12x REF", "f.s:3: bad cycle stamp '@12x'"),
        ("@18446744073709551615 REF", "f.s:3: cycle stamp 18446744073709551615 too large"),
        ("@7", "f.s:3: cycle stamp @7 without an instruction"),
    ],
)
def test_parse_errors(line, message):
    with pytest.raises(AsmError) as e:
        parse_stream(f"REF\n\n{line}\nREF\n", source="f.s")
    assert str(e.value).startswith(message), str(e.value)
    assert isinstance(e.value, ValueError)


def test_isa_1_0_streams_still_read():
    """1.1 only added EPI.chain (a bit that was zero in 1.0): a 1.0 binary decodes unchanged;
    a newer minor version is refused."""
    from hwmodel.isa_codec import decode_stream

    blob = bytearray(encode_stream(small_stream()))
    blob[6] = 0  # header minor version -> 1.0
    assert decode_stream(bytes(blob)) == small_stream()
    blob[6] = 99
    with pytest.raises(ValueError, match="ISA version 1.99"):
        decode_stream(bytes(blob))
