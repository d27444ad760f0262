"""What the RTL model of one prototype channel (rtl/pim_channel.v) can hold, and its parameters
for a given hardware description. A bundle is exported only for hardware that fits: every field
the RTL fixes must have its value, every field it sizes must stay within its limit."""

from __future__ import annotations

from hwmodel import HardwareError
from hwmodel.model import Hardware

# fixed by the RTL's datapath: fp16 lanes, one burst per MAC pass, 32-byte bursts
FIXED = {"pim.dtype": "fp16", "pim.lanes": 16, "organization.burst_bytes": 32, "organization.ranks": 1}
# sized by Verilog parameters, bounded so that the memories stay small in a simulator
LIMITS = {
    "organization.channels": 8,
    "banks per channel": 8,
    "bursts per bank (rows x columns)": 4096,
    "pim.acc_registers": 64,
    "global-buffer bursts": 64,
}


def _values(hw: Hardware) -> dict[str, object]:
    org, pim = hw.organization, hw.pim
    return {
        "pim.dtype": pim.dtype,
        "pim.lanes": pim.lanes,
        "organization.burst_bytes": org.burst_bytes,
        "organization.ranks": org.ranks,
        "organization.channels": org.channels,
        "banks per channel": org.banks_per_channel,
        "bursts per bank (rows x columns)": org.rows * org.columns,
        "pim.acc_registers": pim.acc_registers,
        "global-buffer bursts": hw.gb_bursts,
    }


def check_fits(hw: Hardware, source: str) -> None:
    """HardwareError naming the first field that does not fit the prototype's RTL model."""
    got = _values(hw)
    for key, want in FIXED.items():
        if got[key] != want:
            raise HardwareError(
                f"{source}: hardware {hw.name}: {key} = {got[key]}, the FPGA prototype's RTL model needs {want}"
            )
    for key, limit in LIMITS.items():
        if int(got[key]) > limit:
            raise HardwareError(
                f"{source}: hardware {hw.name}: {key} = {got[key]:,} does not fit the FPGA prototype "
                f"(the RTL model holds at most {limit:,})"
            )


# sizes of the RTL's memories (rtl/pim_channel.v: IMAX, HOSTW, NSYM, LOGMAX)
PROGRAM_LIMITS = {
    "instructions per channel": 1 << 16,
    "host image words": 1 << 16,
    "host symbols": 256,
    "commands per channel": 1 << 16,
    "RDACC values per channel": 1 << 16,
    "RD bursts per channel": 1 << 16,
}


def check_program_fits(sizes: dict[str, int], source: str) -> None:
    """HardwareError naming the first program size beyond the RTL model's memories."""
    for key, limit in PROGRAM_LIMITS.items():
        if sizes.get(key, 0) > limit:
            raise HardwareError(
                f"{source}: {key} = {sizes[key]:,} does not fit the FPGA prototype's RTL model (at most {limit:,})"
            )


def rtl_parameters(hw: Hardware) -> dict[str, int]:
    """The Verilog parameters of rtl/pim_channel.v for this hardware (iverilog -P)."""
    org = hw.organization
    return {
        "NB": org.banks_per_channel,
        "ROWS": org.rows,
        "COLS": org.columns,
        "NACC": hw.pim.acc_registers,
        "NGB": hw.gb_bursts,
        "BPP": hw.pim.banks_per_pu,
        "NG": org.ranks * org.bank_groups,
    }
