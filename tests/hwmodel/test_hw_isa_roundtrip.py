"""Property tests: text -> objects -> binary -> objects -> text is the identity."""

from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st

from hwmodel.isa import ISA, Instruction
from hwmodel.isa_asm import format_instruction, format_stream, parse_stream
from hwmodel.isa_codec import decode, decode_stream, encode, encode_stream

cycles = st.none() | st.integers(0, (1 << 64) - 2) | st.integers(0, 10_000)


@st.composite
def instructions(draw, stamped=None):
    op = draw(st.sampled_from(ISA.ops))
    args = tuple(draw(st.integers(0, (1 << f.bits) - 1)) for f in op.fields)
    if stamped is None:
        cycle = draw(cycles)
    else:
        cycle = draw(st.integers(0, (1 << 64) - 2)) if stamped else None
    return Instruction(op.mnemonic, args, cycle)


streams = st.lists(instructions(), max_size=40)
fast = settings(max_examples=150, deadline=None, suppress_health_check=[HealthCheck.too_slow])


@fast
@given(streams)
def test_text_binary_text(instrs):
    text = format_stream(instrs)
    parsed = parse_stream(text)
    assert parsed == instrs
    blob = encode_stream(parsed)
    back = decode_stream(blob)
    assert back == instrs
    assert format_stream(back) == text
    assert encode_stream(back) == blob


@fast
@given(st.lists(instructions(stamped=True), max_size=20), st.lists(instructions(stamped=False), max_size=20))
def test_stamped_and_unstamped(stamped, unstamped):
    for instrs in (stamped, unstamped, stamped + unstamped):
        assert decode_stream(encode_stream(instrs)) == instrs
        assert parse_stream(format_stream(instrs)) == instrs
    assert all(i.cycle is None for i in decode_stream(encode_stream(unstamped)))


@fast
@given(instructions())
def test_single_word(ins):
    word = encode(ins)
    assert len(word) == 16
    assert decode(word, ins.cycle) == ins
    assert parse_stream(format_instruction(ins)) == [ins]


@fast
@given(st.binary(min_size=16, max_size=16))
def test_any_word_decodes_canonically_or_is_refused(word):
    try:
        ins = decode(word)
    except ValueError as e:
        assert "unknown opcode" in str(e) or "padding bits" in str(e)
    else:
        assert encode(ins) == word


@fast
@given(st.lists(instructions(), max_size=10), st.data())
def test_comments_and_blank_lines_ignored(instrs, data):
    lines = []
    for ins in instrs:
        lines.append(format_instruction(ins) + data.draw(st.sampled_from(["", "  # note", "\t#"])))
        lines.append(data.draw(st.sampled_from(["", "# c", "   "])))
    assert parse_stream("\n".join(lines)) == instrs
