"""manifest.json of a bring-up bundle: its data model (and so its JSON Schema, `pimsat schema
bundle`) and the address maps it documents."""

from __future__ import annotations

from typing import Any, Literal

from pydantic import BaseModel, ConfigDict, Field

FORMAT = "pimsat-fpga-bundle"
FORMAT_VERSION = 1
MANIFEST = "manifest.json"
SHA256 = r"^[0-9a-f]{64}$"

ADDRESS_MAP = {
    "bank_image": (
        "memory/<channel>_b<bank>.hex: one line per burst, line = row * columns + col; lane j of the "
        "burst in bits [16j+15:16j] (lane 0 rightmost), each lane the PIM dtype's bit pattern; a "
        "placed element (tensor, flat index i) of placement p is lane (i' % E) of the burst "
        "(p.row, p.col) + i' // E, wrapping to the next row, i' its position in the placement's runs"
    ),
    "host_image": (
        "host/memory.hex: one 16-bit word per line (host address = line), each element of a source "
        "tensor as the PIM dtype's bit pattern (WR/WRGB convert to it); host_symbols gives each "
        "symbol's base address and size; host/symbols.hex the same per symbol index, {base[31:0], size[31:0]}"
    ),
    "instruction_image": (
        "program/<stream>.words.hex: the 128-bit ISA word per line (opcode in bits [7:0]); "
        "program/<stream>.cycles.hex: its issue cycle, 64 bits (all ones: no stamp: SIG/WAIT)"
    ),
    "command_log": (
        "golden/<channel>.cmdlog.hex: one line per DRAM/PIM command in issue order: cycle[63:0], "
        "command[7:0] (index into ACT PRE RD WR REF MAC WRGB RDACC), bank[7:0] (ff: several or none), "
        "mask[7:0], row[15:0] (ffff: none), col[15:0] (column; WRGB: global-buffer burst; RDACC: "
        "first accumulator of the burst; ffff: none)"
    ),
    "read_outs": (
        "golden/<channel>.rdacc.hex: every accumulator an RDACC read, fp32 bits, in issue order "
        "(acc, acc+1, ... of each RDACC); golden/<channel>.rd.hex: every burst an RD read, as a bank line"
    ),
    "summary": "golden/<channel>.summary.hex: commands issued, last completion cycle, violations (64 bits each)",
}


class _Strict(BaseModel):
    model_config = ConfigDict(extra="forbid")


class FileEntry(_Strict):
    sha256: str = Field(pattern=SHA256)
    bytes: int = Field(ge=0)


class ChannelEntry(_Strict):
    index: int = Field(ge=0)
    stem: str
    instructions: int = Field(ge=0)
    commands: int = Field(ge=0)
    rdacc_values: int = Field(ge=0)
    rd_bursts: int = Field(ge=0)
    done_cycle: int = Field(ge=0, description="last completion of a command of this channel")


class HostSymbol(_Strict):
    index: int = Field(ge=0)
    name: str
    dtype: str = Field(description="the host tensor's dtype (the image holds it in the PIM dtype)")
    elements: int = Field(ge=0)
    base: int | None = Field(ge=0, description="host address of element 0; null: not in the host image")


class OutputEntry(_Strict):
    name: str
    dtype: str
    shape: list[int]
    hex: str
    npy: str


class Golden(_Strict):
    cycles: int = Field(ge=0, description="makespan of the whole program (channels and host)")
    final_bank_sha256: str = Field(pattern=SHA256, description="sha256 of the golden final bank images, in order")
    outputs: list[OutputEntry]


class BundleManifest(_Strict):
    format: Literal["pimsat-fpga-bundle"]
    format_version: Literal[1]
    isa_version: str
    pimsat_version: str
    instance: dict[str, Any]
    seed: int = Field(ge=0)
    method: str | None
    hardware: dict[str, Any] = Field(description="the resolved hardware description (hwmodel.Hardware.spec())")
    rtl_parameters: dict[str, int] = Field(description="Verilog parameters of rtl/pim_channel.v (iverilog -P)")
    channels: list[ChannelEntry]
    host_symbols: list[HostSymbol]
    golden: Golden
    address_map: dict[str, str]
    test: dict[str, Any] | None = Field(
        default=None, description="a generated test (pimsat testgen): its kind, seed and what it exercises"
    )
    files: dict[str, FileEntry] = Field(description="every file of the bundle but manifest.json")
