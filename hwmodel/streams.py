"""A compiled program as the hardware sees it: per-channel streams, a host stream, the symbol
table of host tensors and the placement of resident tensors in banks."""
from __future__ import annotations

from dataclasses import dataclass, field

from .isa import Instruction


@dataclass(frozen=True, slots=True)
class Placement:
    """`count` runs of `run` elements of resident tensor `tensor` (flattened), run k starting at
    element elem_start + k*stride, laid into consecutive bursts of one bank from (row, col)
    onwards (wrapping to the next row after the last column)."""

    tensor: str
    channel: int
    bank: int
    row: int
    col: int
    elem_start: int
    run: int
    count: int = 1
    stride: int = 0

    @property
    def elements(self) -> int:
        return self.run * self.count


@dataclass
class StreamSet:
    hardware: str
    isa_version: str
    symbols: list[str]
    channels: list[list[Instruction]]
    host: list[Instruction]
    placements: list[Placement] = field(default_factory=list)

    def symbol(self, name: str) -> int:
        return self.symbols.index(name)

    def instruction_count(self) -> int:
        return len(self.host) + sum(len(s) for s in self.channels)
