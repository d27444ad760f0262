"""The compiled assembler (hwmodel/asm_records.py) against the line-by-line parser: the same
records for every text it takes, and it takes the text pimsat writes; anything else goes to
the line parser, which gives the precise error."""

import numpy as np
import pytest
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st

from hwmodel.asm_records import assemble, parse_records
from hwmodel.isa import ISA, Instruction
from hwmodel.isa_asm import AsmError, format_stream, parse_stream
from hwmodel.isa_codec import encode_records
from hwmodel.jit import JIT

pytestmark = pytest.mark.skipif(not JIT, reason="the compiled assembler needs numba")

cycles = st.none() | st.integers(0, (1 << 64) - 2) | st.integers(0, 10_000)


@st.composite
def instructions(draw):
    op = draw(st.sampled_from(ISA.ops))
    args = tuple(draw(st.integers(0, (1 << f.bits) - 1)) for f in op.fields)
    return Instruction(op.mnemonic, args, draw(cycles))


fast = settings(max_examples=200, deadline=None, suppress_health_check=[HealthCheck.too_slow])


def slow(text: str):
    try:
        return encode_records(parse_stream(text))
    except AsmError as e:
        return e


@fast
@given(st.lists(instructions(), max_size=30), st.booleans())
def test_takes_what_pimsat_writes(instrs, crlf):
    text = format_stream(instrs, header="a header\nof two lines")
    if crlf:
        text = text.replace("\n", "\r\n")
    rec = assemble(text.encode())
    assert rec is not None, "the compiled path declined text pimsat wrote"
    assert np.array_equal(rec, encode_records(instrs))


# pieces of lines, valid and not: the compiled path must agree with parse_stream or decline
_TOKENS = [
    "ACT",
    "PRE",
    "RD",
    "WR",
    "MAC",
    "REF",
    "HOP",
    "SIG",
    "act",
    "NOP",
    "RDACC",
    "WRGB",
    "mask=0x5",
    "mask=5",
    "row=3",
    "row=0x",
    "row=1048576",
    "bank=2",
    "col=1",
    "count=4",
    "dst=0",
    "src=1",
    "offset=0",
    "emask=0xFFFF",
    "gb=0",
    "acc=1",
    "stride=1",
    "op=7",
    "chain=1",
    "id=3",
    "@12",
    "@0x1F",
    "@",
    "@x",
    "@18446744073709551614",
    "@18446744073709551615",
    "@18446744073709551616",
    "@99999999999999999999",
    "@0xFFFFFFFFFFFFFFFF",
    "#c",
    "# c",
    "=1",
    "mask=",
    "mask==1",
    "mask=1#c",
    "row=00000000000000000001",
    "row=0x00000000000000001",
    "\t",
    "  ",
    "mask=0xfff",
    "op=16777216",
    "row=1 row=2",
    "\u00a0",
    "\x0b",
    "é",
]


@fast
@given(st.lists(st.lists(st.sampled_from(_TOKENS), max_size=7).map(" ".join), max_size=6))
def test_agrees_or_declines(lines):
    text = "\n".join(lines) + "\n"
    rec = assemble(text.encode())
    want = slow(text)
    if rec is not None:
        assert not isinstance(want, AsmError), f"compiled path took text the parser refuses: {want}"
        assert np.array_equal(rec, want)


@pytest.mark.parametrize(
    "text",
    [
        "@5 MAC count=4 mask=0x3 acc=1 gb=0 col=0\n",  # fields in any order
        "HOP op=3\n",  # a default (chain=0)
        "HOP op=3 chain=1   # comment\n",
        "REF#comment right after\n",
        "  \t\n# only a comment\n\nREF",  # no final newline
        "@0x10 PRE mask=0XaB\r\n",
    ],
)
def test_directed_valid(text):
    rec = assemble(text.encode())
    assert rec is not None
    assert np.array_equal(rec, encode_records(parse_stream(text)))


@pytest.mark.parametrize(
    "text",
    [
        "PRE mask=1 mask=2\n",  # a field twice
        "ACT mask=1\n",  # a field missing
        "PRE mask=0x100000000\n",  # too wide
        "@12\n",  # a stamp alone
        "PRE\rmask=1\n",  # a lone CR breaks the line for splitlines
        "PRE mask=1\u2028\n",  # a Unicode line separator
        "pre mask=1\n",
    ],
)
def test_directed_declined(text):
    assert assemble(text.encode()) is None


def test_file_errors_come_from_the_line_parser(tmp_path):
    p = tmp_path / "ch.s"
    p.write_text("REF\nPRE mask=0x1 mask=0x2\n")
    with pytest.raises(AsmError, match=r"ch.s:2: PRE: field mask given twice"):
        parse_records(p, lambda path: path.read_text())
    p.write_text("PRE mask=0x1\u00a0\n")  # NBSP: whitespace to str.split, so valid; the parser decides
    assert np.array_equal(parse_records(p, lambda path: path.read_text()), encode_records(parse_stream("PRE mask=0x1")))


@fast
@given(st.lists(instructions(), max_size=40), st.integers(1, 64), st.booleans())
def test_a_file_assembles_piece_by_piece(tmp_path_factory, instrs, chunk, crlf):
    """assemble_file reads the text a few bytes at a time (pieces cut after a newline, a line
    longer than a piece carried over): the same records as the whole text, or the same refusal."""
    from hwmodel.asm_records import assemble_file

    text = format_stream(instrs, header="a header\nof two lines")
    if crlf:
        text = text.replace("\n", "\r\n")
    p = tmp_path_factory.mktemp("asm") / "ch.s"
    for body in (text, text.rstrip("\r\n"), text + "PRE mask=1 mask=2\n", "REF\r" + text):
        p.write_bytes(body.encode())
        whole = assemble(body.encode())
        got = assemble_file(p, chunk)
        assert (got is None) == (whole is None)
        if whole is not None:
            assert np.array_equal(got, whole)
