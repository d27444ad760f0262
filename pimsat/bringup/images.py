"""The hex formats of a bring-up bundle: one value per line, lowercase hex, no prefix, as
Verilog's $readmemh reads and $writememh writes them (the RTL testbench writes its results in
exactly these formats, so that `diff` compares them).

Bank image (one file per channel and bank): line row * columns + col is burst (row, col), lane j
of the burst in bits [16j+15:16j] (lane 0 rightmost), each lane the PIM dtype's bit pattern.
Host image: one 16-bit word per line, host address = line; symbol s occupies base..base+size-1.
Instruction image: the 128-bit word per line; issue cycles: 64 bits per line (all ones: none).
"""

from __future__ import annotations

from collections.abc import Iterable
from dataclasses import dataclass
from enum import IntEnum

import numpy as np

from hwmodel.isa import Instruction
from hwmodel.isa_codec import UNSTAMPED, encode_word

LANE_BITS = 16
NONE8, NONE16 = 0xFF, 0xFFFF  # -1 in a log field


class LogField(IntEnum):
    """Hex digits of the command-log line's fields, in line order (most significant first)."""

    cycle = 16
    command = 2
    bank = 2
    mask = 2
    row = 4
    col = 4


def hex_lines(values: Iterable[int], digits: int) -> str:
    return "".join(f"{int(v):0{digits}x}\n" for v in values)


def burst_lines(bursts: np.ndarray) -> str:
    """[n, E] float16 bursts -> one line per burst (lane 0 in the low bits)."""
    words = np.ascontiguousarray(bursts, dtype=np.float16).view(np.uint16)
    return "".join("".join(f"{int(w):04x}" for w in row[::-1]) + "\n" for row in words)


def parse_burst_lines(text: str, lanes: int) -> np.ndarray:
    rows = [ln.strip() for ln in text.splitlines() if ln.strip() and not ln.startswith("//")]
    out = np.zeros((len(rows), lanes), dtype=np.uint16)
    for i, r in enumerate(rows):
        v = int(r, 16)
        out[i] = [(v >> (LANE_BITS * j)) & 0xFFFF for j in range(lanes)]
    return out.view(np.float16)


def f32_lines(values: np.ndarray) -> str:
    return hex_lines(np.ascontiguousarray(values, dtype=np.float32).view(np.uint32), 8)


def instruction_lines(stream: list[Instruction]) -> tuple[str, str]:
    """(words, issue cycles) of a stream."""
    words = hex_lines((encode_word(i) for i in stream), 32)
    cycles = hex_lines((UNSTAMPED if i.cycle is None else i.cycle for i in stream), 16)
    return words, cycles


@dataclass(frozen=True)
class LogLine:
    cycle: int
    command: int  # index into hwmodel.model.COMMANDS
    bank: int  # -1: several banks or none
    mask: int
    row: int
    col: int

    def text(self) -> str:
        f = LogField
        return (
            f"{self.cycle:0{f.cycle}x}{self.command:0{f.command}x}{self.bank & NONE8:0{f.bank}x}"
            f"{self.mask:0{f.mask}x}{self.row & NONE16:0{f.row}x}{self.col & NONE16:0{f.col}x}\n"
        )


def log_lines(log: np.ndarray, channel: int) -> str:
    """The simulator's command log (sim.LOG_DTYPE) of one channel, in issue order."""
    mine = log[log["channel"] == channel]
    return "".join(
        LogLine(int(r["cycle"]), int(r["command"]), int(r["bank"]), int(r["mask"]), int(r["row"]), int(r["col"])).text()
        for r in mine
    )
