"""The simulator's one error type.

Every violation the simulator finds (timing, bus, bank state, PIM unit, ranges, refresh,
synchronisation, host data) raises :class:`SimulationError`. Its attributes say where and why;
``str(err)`` is one line, e.g.::

    timing: cycle 27, channel 0, bank 3, instr 1 `MAC mask=0x8 col=0 count=4 gb=0 acc=0`:
    ACT->MAC bank tRCDRD needs a gap of 14 cycles, got 13
"""

from __future__ import annotations

from hwmodel.isa import Instruction

#: The kinds of violation (attribute ``kind``).
KINDS = (
    "timing",  # a timing-table row (constraint names it)
    "bus",  # two commands on one channel bus in one cycle / out of stream order
    "sync",  # a stamped instruction issued before a WAIT released it
    "bank_state",  # ACT on an open bank, column command or PRE on a closed bank, REF with open banks
    "pim_unit",  # MAC mask with two banks of one PIM unit
    "range",  # bank, row, column, global-buffer, accumulator or element index out of range
    "refresh",  # too many refreshes owed
    "symbol",  # unknown host symbol, op or tensor
    "signal",  # a signal set twice
    "deadlock",  # a WAIT whose signal is never set
    "uninitialised",  # read of data never written (host tensor, bank burst, global buffer)
    "race",  # a cross-stream data dependency not ordered by SIG/WAIT
    "stream",  # an instruction in the wrong kind of stream, or missing program
)


def instruction_text(instr: Instruction | None) -> str:
    if instr is None:
        return ""
    parts = [] if instr.cycle is None else [f"@{instr.cycle}"]
    parts.append(instr.op)
    for f, v in zip(instr.spec.fields, instr.args):
        parts.append(f"{f.name}=0x{v:X}" if f.name in ("mask", "emask") else f"{f.name}={v}")
    return " ".join(parts)


def stream_name(stream: int | str | None) -> str:
    if stream is None:
        return ""
    return "host" if stream == "host" else f"channel {stream}"


class SimulationError(Exception):
    """A violation found while executing the streams. Attributes:

    kind        one of KINDS
    cycle       the cycle of the violation (None if not tied to one)
    stream      channel index (int) or "host"
    bank        bank index within the channel, or None
    instr       index of the instruction in its stream, or None
    text        the instruction in assembly text
    constraint  for timing errors the table row, e.g. "ACT->MAC bank tRCDRD"
    needed      needed gap in cycles (timing / bus / sync), else None
    actual      actual gap in cycles, else None
    detail      the rest of the explanation
    """

    def __init__(
        self,
        kind: str,
        detail: str,
        *,
        cycle: int | None = None,
        stream: int | str | None = None,
        bank: int | None = None,
        instr: int | None = None,
        instruction: Instruction | None = None,
        constraint: str | None = None,
        needed: int | None = None,
        actual: int | None = None,
    ):
        assert kind in KINDS, kind
        self.kind = kind
        self.detail = detail
        self.cycle = None if cycle is None else int(cycle)
        self.stream = stream
        self.bank = None if bank is None or bank < 0 else int(bank)
        self.instr = None if instr is None else int(instr)
        self.text = instruction_text(instruction)
        self.constraint = constraint
        self.needed = None if needed is None else int(needed)
        self.actual = None if actual is None else int(actual)
        super().__init__(self._message())

    def _message(self) -> str:
        where = []
        if self.cycle is not None:
            where.append(f"cycle {self.cycle}")
        if self.stream is not None:
            where.append(stream_name(self.stream))
        if self.bank is not None:
            where.append(f"bank {self.bank}")
        if self.instr is not None:
            where.append(f"instr {self.instr}" + (f" `{self.text}`" if self.text else ""))
        what = self.detail
        if self.constraint is not None:
            what = f"{self.constraint} needs a gap of {self.needed} cycles, got {self.actual}" + (
                f" ({self.detail})" if self.detail else ""
            )
        return f"{self.kind}: {', '.join(where)}: {what}" if where else f"{self.kind}: {what}"

    @property
    def violations(self) -> int:
        return 1
