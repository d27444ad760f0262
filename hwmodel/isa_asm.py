"""Text assembly of the pimsat ISA: one instruction per line.

    @1234 MAC mask=0x5555 col=0 count=8 gb=0 acc=3   # optional @cycle stamp, then fields
    REF                                              # an unstamped instruction

Fields print in table order as name=value: `mask` and `emask` in hex (0x, upper-case digits),
the others in decimal. The parser takes the fields in any order and either base for any field.
`#` starts a comment; blank lines are ignored.
"""

from __future__ import annotations

from .isa import ISA, Instruction, OpSpec

HEX_FIELDS: frozenset[str] = frozenset({"mask", "emask"})
_MAX_CYCLE = (1 << 64) - 2  # all ones marks "unstamped" in the binary encoding


class AsmError(ValueError):
    """A line that does not assemble: `source:line: what is wrong`."""


def _value_text(name: str, v: int) -> str:
    return f"0x{v:X}" if name in HEX_FIELDS else str(v)


def _template(op: OpSpec) -> str:
    """`str.format` template of an instruction's text: mnemonic, then name=value per field."""
    fields = (f"{f.name}=0x{{:X}}" if f.name in HEX_FIELDS else f"{f.name}={{}}" for f in op.fields)
    return " ".join([op.mnemonic, *fields])


#: mnemonic -> (template, field count): one `format` call per line (a stream file has millions)
_TEMPLATES: dict[str, tuple[str, int]] = {o.mnemonic: (_template(o), len(o.fields)) for o in ISA.ops}


def format_instruction(instr: Instruction) -> str:
    template, n = _TEMPLATES[instr.op]
    if len(instr.args) == n:
        text = template.format(*instr.args)
    else:  # (not a whole instruction: its fields as far as they go)
        text = " ".join(
            [instr.op, *(f"{f.name}={_value_text(f.name, v)}" for f, v in zip(instr.spec.fields, instr.args))]
        )
    return text if instr.cycle is None else f"@{instr.cycle} {text}"


def format_stream(instrs: list[Instruction], header: str | None = None) -> str:
    """One line per instruction, newline-terminated; `header` lines are written as comments."""
    lines = [f"# {h}".rstrip() for h in header.splitlines()] if header else []
    lines.extend(map(format_instruction, instrs))
    return "\n".join(lines) + "\n" if lines else ""


def _parse_int(text: str) -> int | None:
    """Decimal or 0x-prefixed hex, ASCII digits only; None if it is neither."""
    digits, base = (text[2:], 16) if text[:2].lower() == "0x" else (text, 10)
    allowed = _HEX if base == 16 else _DEC
    if not digits or not all(c in allowed for c in digits):
        return None
    return int(digits, base)


_HEX = frozenset("0123456789abcdefABCDEF")
_DEC = frozenset("0123456789")


_SPECS: dict[str, OpSpec] = {o.mnemonic: o for o in ISA.ops}


def parse_line(text: str, source: str = "<string>", lineno: int = 1) -> Instruction | None:
    """One line -> Instruction, or None for a blank or comment-only line."""
    where = f"{source}:{lineno}"
    tokens = text.split("#", 1)[0].split()
    if not tokens:
        return None
    cycle = None
    if tokens[0].startswith("@"):
        stamp = tokens.pop(0)
        cycle = _parse_int(stamp[1:])
        if cycle is None:
            raise AsmError(f"{where}: bad cycle stamp {stamp!r} (expected @<decimal cycle>)")
        if cycle > _MAX_CYCLE:
            raise AsmError(f"{where}: cycle stamp {cycle} too large (max {_MAX_CYCLE})")
        if not tokens:
            raise AsmError(f"{where}: cycle stamp {stamp} without an instruction")
    mnemonic = tokens[0]
    spec = _SPECS.get(mnemonic)
    if spec is None:
        hint = " (mnemonics are upper case)" if mnemonic.upper() in _SPECS else ""
        raise AsmError(f"{where}: unknown mnemonic {mnemonic!r}{hint}; known: {', '.join(_SPECS)}")
    values: dict[str, int] = {}
    widths = {f.name: f.bits for f in spec.fields}
    for tok in tokens[1:]:
        name, eq, val = tok.partition("=")
        if not eq or not name:
            raise AsmError(f"{where}: {mnemonic}: expected name=value, got {tok!r}")
        if name not in widths:
            known = ", ".join(spec.field_names) or "none"
            raise AsmError(f"{where}: {mnemonic} has no field {name!r} (fields: {known})")
        if name in values:
            raise AsmError(f"{where}: {mnemonic}: field {name} given twice")
        v = _parse_int(val)
        if v is None:
            raise AsmError(f"{where}: {mnemonic}.{name}: bad value {val!r} (decimal or 0x hex)")
        if v >= 1 << widths[name]:
            raise AsmError(
                f"{where}: {mnemonic}.{name} = {val} does not fit in {widths[name]} bits "
                f"(max {_value_text(name, (1 << widths[name]) - 1)})"
            )
        values[name] = v
    for f in spec.fields:
        if f.default is not None and f.name not in values:
            values[f.name] = f.default
    missing = [n for n in spec.field_names if n not in values]
    if missing:
        raise AsmError(f"{where}: {mnemonic}: missing field(s) {', '.join(missing)}")
    return Instruction(mnemonic, tuple(values[n] for n in spec.field_names), cycle)


def parse_stream(text: str, source: str = "<file>") -> list[Instruction]:
    """Assembly text -> instructions; AsmError (a ValueError) naming source and line."""
    out: list[Instruction] = []
    for lineno, line in enumerate(text.splitlines(), 1):
        instr = parse_line(line, source, lineno)
        if instr is not None:
            out.append(instr)
    return out
