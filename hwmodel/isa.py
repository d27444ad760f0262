"""The pimsat ISA: the instruction table (isa.yaml) and the instruction objects.

The table is data; this module only loads it and gives instructions a typed, hashable form.
Encoding, assembly and the reference page live in `isa_codec.py`, `isa_asm.py`, `isa_doc.py`.
"""

from __future__ import annotations

from dataclasses import dataclass
from functools import cache
from importlib import resources
from typing import Any

import yaml


@dataclass(frozen=True)
class FieldSpec:
    name: str
    bits: int
    default: int | None = None  # a field with a default may be omitted in make() and assembly


@dataclass(frozen=True)
class OpSpec:
    mnemonic: str
    opcode: int
    stream: str  # "channel" | "host" | "any"
    command: str | None  # the DRAM/PIM command it issues on the bus, if any
    fields: tuple[FieldSpec, ...]
    semantics: str

    @property
    def field_names(self) -> tuple[str, ...]:
        return tuple(f.name for f in self.fields)


@dataclass(frozen=True)
class IsaTable:
    version: str
    word_bits: int
    opcode_bits: int
    ops: tuple[OpSpec, ...]

    def by_mnemonic(self, m: str) -> OpSpec:
        return _BY_MNEMONIC[m]

    def by_opcode(self, code: int) -> OpSpec:
        return _BY_OPCODE[code]


def _load() -> IsaTable:
    # the package's own file: libyaml's parser when PyYAML has it (same data, several times faster)
    loader = getattr(yaml, "CSafeLoader", yaml.SafeLoader)
    raw: dict[str, Any] = yaml.load((resources.files("hwmodel") / "isa.yaml").read_text(), Loader=loader)  # noqa: S506
    ops = tuple(
        OpSpec(
            mnemonic=o["mnemonic"],
            opcode=int(o["opcode"]),
            stream=o["stream"],
            command=o.get("command"),
            fields=tuple(FieldSpec(f["name"], int(f["bits"]), f.get("default")) for f in o["fields"]),
            semantics=" ".join(str(o["semantics"]).split()),
        )
        for o in raw["instructions"]
    )
    return IsaTable(str(raw["version"]), int(raw["word_bits"]), int(raw["opcode_bits"]), ops)


ISA: IsaTable = _load()
_BY_MNEMONIC = {o.mnemonic: o for o in ISA.ops}
_BY_OPCODE = {o.opcode: o for o in ISA.ops}
ISA_VERSION = ISA.version


@dataclass(frozen=True, slots=True)
class Instruction:
    """One instruction of a stream: mnemonic, field values in table order, optional issue cycle."""

    op: str
    args: tuple[int, ...] = ()
    cycle: int | None = None

    def __post_init__(self) -> None:
        limits = _LIMITS.get(self.op)
        if limits is None:
            raise ValueError(f"unknown instruction {self.op!r}")
        args = self.args
        if len(args) != len(limits):
            spec = _BY_MNEMONIC[self.op]
            raise ValueError(
                f"{self.op} takes {len(spec.fields)} fields ({', '.join(spec.field_names)}), got {len(args)}"
            )
        for v, limit in zip(args, limits):
            if not 0 <= v < limit:
                self._field_overflow()
        if self.cycle is not None and not 0 <= self.cycle < _MAX_CYCLE:
            raise ValueError(f"{self.op}: issue cycle {self.cycle} out of range")

    def _field_overflow(self) -> None:
        for f, v in zip(_BY_MNEMONIC[self.op].fields, self.args):
            if not 0 <= v < 1 << f.bits:
                raise ValueError(f"{self.op}.{f.name} = {v} does not fit in {f.bits} bits")

    @property
    def spec(self) -> OpSpec:
        return _BY_MNEMONIC[self.op]

    def get(self, name: str) -> int:
        return self.args[_field_index(self.op, name)]

    def fields(self) -> dict[str, int]:
        return dict(zip(self.spec.field_names, self.args))

    def at(self, cycle: int | None) -> Instruction:
        """The same instruction stamped at `cycle` (fields were checked when it was built)."""
        if cycle is not None and not 0 <= cycle < _MAX_CYCLE:
            raise ValueError(f"{self.op}: issue cycle {cycle} out of range")
        return _trusted(self.op, self.args, cycle)


_new = object.__new__
_set_op, _set_args, _set_cycle = (
    Instruction.op.__set__,
    Instruction.args.__set__,
    Instruction.cycle.__set__,  # type: ignore[attr-defined]
)


def _trusted(op: str, args: tuple[int, ...], cycle: int | None) -> Instruction:
    """An Instruction without re-validation, for callers that checked the fields and cycle (or
    decoded them from masked bit fields): `Instruction.__post_init__` could not fail (3x faster)."""
    ins = _new(Instruction)
    _set_op(ins, op)
    _set_args(ins, args)
    _set_cycle(ins, cycle)
    return ins


_LIMITS = {o.mnemonic: tuple(1 << f.bits for f in o.fields) for o in ISA.ops}
_NAMES = {o.mnemonic: o.field_names for o in ISA.ops}
_DEFAULTS = {o.mnemonic: {f.name: f.default for f in o.fields if f.default is not None} for o in ISA.ops}
_MAX_CYCLE = (1 << 64) - 1


@cache
def _field_index(op: str, name: str) -> int:
    return _BY_MNEMONIC[op].field_names.index(name)


def make(op: str, /, cycle: int | None = None, **fields: int) -> Instruction:
    """Build an instruction by field name: make("MAC", mask=0xFFFF, col=0, count=8, gb=0, acc=0)."""
    names = _NAMES.get(op)
    if names is None:
        raise ValueError(f"unknown instruction {op!r}")
    defaults = _DEFAULTS[op]
    if defaults:
        fields = {**defaults, **fields}
    try:
        args = tuple([int(fields[n]) for n in names])
    except KeyError:
        missing = [n for n in names if n not in fields]
        raise ValueError(f"{op} needs field(s) {', '.join(missing)}") from None
    if len(fields) != len(names):
        unknown = set(fields) - set(names)
        raise ValueError(f"{op} has no field(s) {', '.join(sorted(unknown))}")
    return _built(op, args, cycle)


def make_args(op: str, args: tuple[int, ...], cycle: int | None = None) -> Instruction:
    """Build an instruction from its field values in table order (the emitters' hot path:
    the same checks as `Instruction(...)`, without keyword handling)."""
    limits = _LIMITS.get(op)
    if limits is None or len(args) != len(limits):
        return Instruction(op, tuple(args), cycle)  # raises the precise error
    return _built(op, args, cycle)


def _built(op: str, args: tuple[int, ...], cycle: int | None) -> Instruction:
    """`Instruction(op, args, cycle)` for a known op and the right number of fields: range checks
    inline, the dataclass constructor only to raise the precise error."""
    for v, limit in zip(args, _LIMITS[op]):
        if not 0 <= v < limit:
            return Instruction(op, args, cycle)
    if cycle is not None and not 0 <= cycle < _MAX_CYCLE:
        return Instruction(op, args, cycle)
    return _trusted(op, args, cycle)
